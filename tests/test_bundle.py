"""The bundle loader follows OPA's bundle conventions and names what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.bundle import load_bundle
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import PolicyLoadError


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_rego_files_are_modules_and_test_files_are_tests(tmp_path: Path) -> None:
    write(tmp_path, {"a/p.rego": "package p\n", "a/p_test.rego": "package p_test\n"})
    bundle = load_bundle([tmp_path])
    assert [Path(m.path).name for m in bundle.policies] == ["p.rego"]
    assert [Path(m.path).name for m in bundle.tests] == ["p_test.rego"]
    assert bundle.without_tests().tests == ()


def test_data_files_land_at_their_directory_path(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "data.json": '{"top": 1}',
            "a/b/data.json": '{"x": true, "n": 3}',
            "c/data.yaml": "list: [1, 2]\nname: web\n",
            "c/d/data.yml": "deep: yes\n",
        },
    )
    assert load_bundle([tmp_path]).data == {
        "top": 1,
        "a": {"b": {"x": True, "n": 3}},
        "c": {"list": [1, 2], "name": "web", "d": {"deep": True}},
    }


def test_hidden_files_and_directories_are_ignored(tmp_path: Path) -> None:
    write(
        tmp_path,
        {".git/x.rego": "garbage", ".hidden.rego": "garbage", "a/.d/data.json": "{", "p.rego": ""},
    )
    bundle = load_bundle([tmp_path])
    assert [Path(m.path).name for m in bundle.modules] == ["p.rego"]
    assert bundle.data == {}


def test_other_files_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, {"README.md": "#", "a/config.json": "{", "a/p.rego": "package p\n"})
    assert load_bundle([tmp_path]).data == {}


@pytest.mark.parametrize(
    ("name", "text", "line", "col", "said"),
    [
        ("a/data.json", '{\n  "x": 1,\n  "y": ]\n}\n', 3, 8, '"y": ]'),  # the line itself, quoted
        ("a/data.yaml", "ok: 1\nbad: [1, 2\nnext: 3\n", 3, None, "invalid YAML"),
    ],
)
def test_invalid_data_names_file_line_and_column(
    tmp_path: Path, name: str, text: str, line: int, col: int | None, said: str
) -> None:
    write(tmp_path, {name: text})
    with pytest.raises(PolicyLoadError) as err:
        load_bundle([tmp_path])
    location = err.value.location
    assert location is not None and location.file.endswith(name) and location.line == line
    assert col is None or location.col == col
    assert said in str(err.value)


def test_two_files_writing_one_data_path_is_an_error_naming_both(tmp_path: Path) -> None:
    write(tmp_path, {"a/data.json": '{"b": {"c": 1}}', "a/b/data.yaml": "c: 2\n"})
    with pytest.raises(PolicyLoadError) as err:
        load_bundle([tmp_path])
    message = str(err.value)
    assert "data.a.b.c" in message
    assert "a/data.json" in message and "a/b/data.yaml" in message


def test_disjoint_keys_from_two_files_merge(tmp_path: Path) -> None:
    write(tmp_path, {"a/data.json": '{"b": {"c": 1}}', "a/b/data.yaml": "d: 2\n"})
    assert load_bundle([tmp_path]).data == {"a": {"b": {"c": 1, "d": 2}}}


def test_several_roots_load_into_one_bundle(tmp_path: Path) -> None:
    write(tmp_path, {"one/p.rego": "package p\n", "two/q.rego": "package q\n"})
    bundle = load_bundle([tmp_path / "one", tmp_path / "two"])
    assert len(bundle.modules) == 2


def test_a_missing_root_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyLoadError, match="no such file or directory"):
        load_bundle([tmp_path / "nope"])


def test_v0_compatible_marks_every_module_v0(tmp_path: Path) -> None:
    write(tmp_path, {"p.rego": "package p\n"})
    assert all(m.v0 for m in load_bundle([tmp_path], v0_compatible=True).modules)


def test_a_manifest_sets_the_rego_version_of_the_bundle_and_of_single_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".manifest": '{"revision": "1", "rego_version": 0, "file_rego_versions": {"modern/*.rego": 1}}',
            "legacy/old.rego": "package old\n",
            "modern/new.rego": "package new\n",
        },
    )
    versions = {Path(m.path).name: m.v0 for m in load_bundle([tmp_path]).modules}
    assert versions == {"old.rego": True, "new.rego": False}


def test_a_bad_manifest_version_is_a_load_error(tmp_path: Path) -> None:
    write(tmp_path, {".manifest": '{"rego_version": 2}', "p.rego": "package p\n"})
    with pytest.raises(PolicyLoadError, match="rego_version must be 0 or 1"):
        load_bundle([tmp_path])


@pytest.mark.parametrize(
    ("name", "text", "complaint"),
    [
        ("data.json", '{"a": {"b": "\\ud800"}}', r"x/data\.json: data\.a\.b: string holds a lone surrogate U\+D800"),
        ("data.json", '{"a": [18446744073709551621]}', r"x/data\.json: data\.a\[0\]: integer .* is outside"),
        ("data.json", '{"a": NaN}', r"x/data\.json: data\.a: nan is not a JSON number"),
        ("data.yaml", "a: .inf\n", r"x/data\.yaml: data\.a: inf is not a JSON number"),
        ("data.yaml", "a: {b: [-9223372036854775809]}\n", r"x/data\.yaml: data\.a\.b\[0\]: integer .* is outside"),
    ],
)
def test_data_no_engine_may_take_is_a_load_error_naming_file_and_path(
    tmp_path: Path, name: str, text: str, complaint: str
) -> None:
    # regorus segfaults on a lone surrogate in data as in input; both engines get the same refusal
    write(tmp_path, {f"x/{name}": text})
    with pytest.raises(PolicyLoadError, match=complaint):
        load_bundle([tmp_path])


def configmap_volume(mount: Path, files: dict[str, str]) -> Path:
    """The layout the kubelet writes for a ConfigMap volume with items[].path:
    `..<timestamp>/<files>`, `..data -> ..<timestamp>`, and each top-level entry
    `x -> ..data/x` (a file or a directory)."""
    stamp = mount / "..2024_01_01_00_00_00.123456789"
    write(stamp, files)
    (mount / "..data").symlink_to(stamp.name)
    for top in sorted({name.split("/")[0] for name in files}):
        (mount / top).symlink_to(f"..data/{top}")
    return mount


def test_a_configmap_volume_loads_through_its_data_links(tmp_path: Path) -> None:
    mount = configmap_volume(
        tmp_path / "policies",
        {
            "0/admission/replicas.rego": "package admission.replicas\n\nmax := data.limits.max\n",
            "0/limits/data.yaml": "max: 3\n",
            "1/kubernetes.rego": "package lib.kubernetes\n",
            "top.rego": "package top\n",
        },
    )
    whole = load_bundle([mount])  # the mount itself: `0` and `1` are links to directories
    assert sorted(m.package for m in whole.modules) == ["admission.replicas", "lib.kubernetes", "top"]
    assert whole.data == {"0": {"limits": {"max": 3}}}
    roots = load_bundle([mount / "0", mount / "1"])  # as the generated Deployment passes them
    assert sorted(m.package for m in roots.modules) == ["admission.replicas", "lib.kubernetes"]
    assert roots.data == {"limits": {"max": 3}}


@pytest.mark.parametrize("name", ["evil.rego", "sub/data.yaml", "sub/data.json", "linked", ".manifest"])
def test_a_link_leading_outside_the_policy_root_is_refused(tmp_path: Path, name: str) -> None:
    outside = write(tmp_path / "elsewhere", {"secret.rego": "package stolen\n", "data.yaml": "host: x\n"})
    root = write(tmp_path / "policies", {"ok.rego": "package ok\n", "sub/keep.rego": "package sub\n"})
    target = outside if name == "linked" else outside / ("secret.rego" if name.endswith(".rego") else "data.yaml")
    (root / name).symlink_to(target)
    with pytest.raises(PolicyLoadError, match=rf"{name}: links to .*elsewhere.*, outside the policy root .*: refused"):
        load_bundle([root])


def test_a_directory_reached_twice_through_links_is_refused(tmp_path: Path) -> None:
    root = write(tmp_path / "policies", {"a/x.rego": "package x\n"})
    (root / "a" / "loop").symlink_to("..")
    with pytest.raises(PolicyLoadError, match="a link to a directory already loaded"):
        load_bundle([root])


def test_a_carriage_return_in_a_module_stays_as_opa_reads_it(tmp_path: Path) -> None:
    """OPA reads a module's bytes: a raw string written across CRLF line ends holds the CR (the OPA
    conformance cases jwtencodesignraw sign such strings). Python's text mode made it "\\n" only."""
    (tmp_path / "p.rego").write_bytes(b"package p\r\n\r\nx := `a\r\nb`\r\n")
    bundle = load_bundle([tmp_path])
    assert bundle.modules[0].text == "package p\r\n\r\nx := `a\r\nb`\r\n"
    assert EmbeddedEngine(bundle).evaluate("data.p.x") == "a\r\nb"
