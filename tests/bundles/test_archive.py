"""Bundle archives as `opa build` writes them: read, verified and checked against their roots as OPA does."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from regokite.bundles.archive import BundleError, combine, package_path, read_archive, read_bundle_path
from regokite.bundles.config import Key, Signing
from regokite.bundles.signing import SignatureError, file_digest
from regokite.engine import UNDEFINED
from regokite.engine.embedded import EmbeddedEngine
from tests.bundles.opa_build import build, bundle_files, make_key, signatures, tarball

POLICY = "package authz\n\nallow if input.user == data.authz.admin\n"


def test_a_built_bundle_decides_with_its_data_and_manifest() -> None:
    blob = build(
        {"authz/policy.rego": POLICY},
        {"authz": {"admin": "alice"}},
        {"revision": "r1", "roots": ["authz"], "metadata": {"team": "x"}},
    )
    loaded = read_archive("main", blob)
    assert (loaded.manifest.revision, loaded.manifest.roots, dict(loaded.manifest.metadata)) == (
        "r1",
        ("authz",),
        {"team": "x"},
    )
    assert [m.path for m in loaded.bundle.modules] == ["main/authz/policy.rego"]
    engine = EmbeddedEngine(loaded.bundle)
    assert engine.evaluate("data.authz.allow", {"user": "alice"}) is True
    assert engine.evaluate("data.authz.allow", {"user": "bob"}) in (False, UNDEFINED)


def test_data_files_land_at_their_directories_and_yaml_is_data() -> None:
    files = bundle_files({}, {"top": 1})
    files["a/b/data.json"] = b'{"x": 1}'
    files["a/c/data.yaml"] = b"y: [1, 2]\n"
    files["a/notes.txt"] = b"carried, not loaded"
    assert read_archive("b", tarball(files)).bundle.data == {"top": 1, "a": {"b": {"x": 1}, "c": {"y": [1, 2]}}}


def test_rego_version_of_the_manifest_selects_the_parser() -> None:
    v0 = 'package p\n\ndeny[msg] { msg := "no" }\n'
    loaded = read_archive("b", build({"p.rego": v0}, manifest={"rego_version": 0}))
    assert loaded.bundle.modules[0].v0
    assert EmbeddedEngine(loaded.bundle).evaluate("data.p.deny") == ["no"]


@pytest.mark.parametrize(
    ("modules", "data", "manifest", "said"),
    [
        ({"x.rego": "package other\n"}, None, {"roots": ["authz"]}, "do not permit 'package other'"),
        ({}, {"other": 1}, {"roots": ["authz"]}, "do not permit data at path '/other'"),
        ({}, {"authz": {"a": 1}, "x": 2}, {"roots": ["authz/a"]}, "do not permit data at path '/x'"),
        ({}, None, {"roots": ["a", "a/b"]}, "manifest has overlapped roots: 'a' and 'a/b'"),
        ({}, None, {"rego_version": 2}, "rego_version must be 0 or 1"),
    ],
)
def test_what_a_bundle_writes_outside_its_roots_is_refused(
    modules: dict, data: dict, manifest: dict, said: str
) -> None:
    with pytest.raises(BundleError) as err:
        read_archive("b", build(modules, data, manifest))
    assert said in str(err.value)


def test_bundles_with_overlapping_roots_are_not_served_together() -> None:
    a = read_archive("a", build({}, manifest={"roots": ["x"]}))
    b = read_archive("b", build({}, manifest={"roots": ["x/y"]}))
    c = read_archive("c", build({}, manifest={"roots": ["z"]}))
    combine([a, c])
    with pytest.raises(BundleError, match="overlapping roots in bundle manifests of 'a' and 'b'"):
        combine([a, b])
    no_manifest = read_archive("d", build({}))  # root "": every path
    with pytest.raises(BundleError, match="overlapping roots"):
        combine([c, no_manifest])


@pytest.mark.parametrize(("path", "said"), [("patch.json", "delta bundles"), ("x/policy.wasm", "Wasm modules")])
def test_what_regokite_cannot_serve_in_a_bundle_is_refused(path: str, said: str) -> None:
    with pytest.raises(BundleError, match=said):
        read_archive("b", tarball({**bundle_files({}), path: b"{}"}))


def test_package_paths_as_roots_see_them() -> None:
    assert package_path('a.b["c-d"].e') == ("a", "b", "c-d", "e")


def test_a_path_leaving_the_bundle_or_a_link_is_refused() -> None:
    with pytest.raises(BundleError, match="not a path inside the bundle"):
        read_archive("b", tarball({"../evil.rego": b"package x\n"}))
    with pytest.raises(BundleError, match="not a gzipped tarball"):
        read_archive("b", b"not a tarball")


def test_a_bundle_directory_reads_as_its_archive(tmp_path: Path) -> None:
    for name, blob in bundle_files({"authz/p.rego": POLICY}, {"authz": {"admin": "a"}}, {"roots": ["authz"]}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(blob)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.rego").write_text("garbage")
    loaded = read_bundle_path("dir", tmp_path)
    assert loaded.manifest.roots == ("authz",) and loaded.bundle.data == {"authz": {"admin": "a"}}


# Signatures (OPA's docs, "Bundle Signature"; bundle/verify.go)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "HS256"])
def test_a_signed_bundle_verifies_and_a_tampered_one_is_refused(algorithm: str) -> None:
    key = make_key(algorithm)
    keys = {"global": Key("global", algorithm, key.public_pem)}
    signing = Signing(keyid="global")
    files = bundle_files({"authz/p.rego": POLICY}, {"authz": {"admin": "alice"}}, {"revision": "1", "roots": ["authz"]})
    files[".signatures.json"] = signatures(files, key, "global")
    assert read_archive("b", tarball(files), signing=signing, keys=keys).manifest.revision == "1"
    tampered = {**files, "data.json": b'{"authz": {"admin": "mallory"}}'}
    with pytest.raises(SignatureError, match=r"data\.json: digest mismatch"):
        read_archive("b", tarball(tampered), signing=signing, keys=keys)
    added = {**files, "authz/extra.rego": b"package authz\n"}
    with pytest.raises(SignatureError, match=r"authz/extra\.rego not included in bundle signature"):
        read_archive("b", tarball(added), signing=signing, keys=keys)
    removed = {k: v for k, v in files.items() if k != "authz/p.rego"}
    with pytest.raises(SignatureError, match=r"\['authz/p.rego'\] specified in bundle signatures but not found"):
        read_archive("b", tarball(removed), signing=signing, keys=keys)


def test_unsigned_wrong_key_and_wrong_scope_are_refused() -> None:
    key, other = make_key("ES256"), make_key("ES256")
    keys = {"global": Key("global", "ES256", key.public_pem), "other": Key("other", "ES256", other.public_pem)}
    files = bundle_files({"p.rego": "package p\n"})
    with pytest.raises(SignatureError, match=r"bundle missing \.signatures\.json"):
        read_archive("b", tarball(files), signing=Signing(keyid="global"), keys=keys)
    signed = {**files, ".signatures.json": signatures(files, other, "global")}
    with pytest.raises(SignatureError, match="failed to verify the signature with key global"):
        read_archive("b", tarball(signed), signing=Signing(keyid="global"), keys=keys)
    # without a keyid configured, the JWT's kid names the key
    by_kid = {**files, ".signatures.json": signatures(files, other, "other")}
    read_archive("b", tarball(by_kid), signing=Signing(), keys=keys)
    with pytest.raises(SignatureError, match="scope mismatch"):
        read_archive("b", tarball(by_kid), signing=Signing(scope="write"), keys=keys)
    with pytest.raises(SignatureError, match="verification key not provided"):
        read_archive("b", tarball(by_kid))
    excluded = {**files, ".signatures.json": signatures(files, key, "global"), "notes.txt": b"x"}
    read_archive("b", tarball(excluded), signing=Signing(keyid="global", exclude_files=("*.txt",)), keys=keys)


def test_structured_files_are_hashed_in_opa_normal_form() -> None:
    """bundle/hash.go: keys sorted, no whitespace, numbers as written, HTML characters and non-ASCII as
    they are, U+2028 escaped; any other file by its bytes."""
    text = '{ "b": [1, 2.50, 1e3, true, null],\n  "a": "x<y>&\u00e9\u2028\\n" }'
    normal = '{"a":"x<y>&\u00e9\\u2028\\n","b":[1,2.50,1e3,true,null]}'
    assert file_digest("data.json", text.encode()) == hashlib.sha256(normal.encode()).hexdigest()
    assert file_digest("a/b/data.json", text.encode()) == file_digest("data.json", normal.encode())
    assert file_digest("a/p.rego", b"package p\n") == hashlib.sha256(b"package p\n").hexdigest()


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "HS256"])
def test_the_tests_signatures_verify_in_opa(algorithm: str) -> None:
    """The signer of these tests makes tokens OPA's io.jwt.verify_* accepts (OPA 1.20.2, tests/opa_oracle.py)."""
    import opa_oracle

    from regokite.bundle import Bundle, Module

    key = make_key(algorithm)
    token = json.loads(signatures(bundle_files({}), key, "global"))["signatures"][0]
    verify = f"io.jwt.verify_{algorithm.lower()}"
    module = Module("p.rego", f"package p\n\nx := {verify}(input.token, input.key)\n")
    engine = opa_oracle.OracleEngine(Bundle((module,)))
    assert engine.evaluate("data.p.x", {"token": token, "key": key.public_pem}) is True
    assert engine.evaluate("data.p.x", {"token": token[:-4] + "AAAA", "key": key.public_pem}) is False


def test_eval_takes_a_built_bundle_as_opa_eval_b(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from regokite.cli import main

    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(build({"authz/p.rego": POLICY}, {"authz": {"admin": "alice"}}, {"roots": ["authz"]}))
    (tmp_path / "in.json").write_text('{"user": "alice"}')
    assert main(["eval", "-b", str(archive), "-i", str(tmp_path / "in.json"), "data.authz.allow"]) == 0
    assert json.loads(capsys.readouterr().out)["result"][0]["expressions"][0]["value"] is True
