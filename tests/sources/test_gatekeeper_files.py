"""`regokite gatekeeper`'s directory: one file per object, each replaced only when it changes."""

from __future__ import annotations

from pathlib import Path

import yaml

from regokite.bundle import load_bundle
from regokite.sources.gatekeeper_objects import DIRECTORY, object_file, served_documents
from regokite.sources.written_files import write_files

CONSTRAINT = {"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "K8sRequiredLabels", "metadata": {"name": "x"}}
CONFIG = {"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config",
          "metadata": {"name": "config", "namespace": "gatekeeper-system"}}  # fmt: skip


def test_each_object_has_a_file_of_its_own_and_none_is_a_data_document(tmp_path: Path) -> None:
    data = {**CONSTRAINT, "metadata": {"name": "data"}}
    assert object_file(CONSTRAINT) == "constraints.gatekeeper.sh/K8sRequiredLabels/x.yaml"
    assert object_file(CONFIG) == "config.gatekeeper.sh/Config/gatekeeper-system/config.yaml"
    assert object_file(data) == "constraints.gatekeeper.sh/K8sRequiredLabels/data.object.yaml"
    out = tmp_path / "policies"
    write_files(out / DIRECTORY, {object_file(d): yaml.safe_dump(d) for d in (CONSTRAINT, data)})
    assert load_bundle([out]).data == {}  # no object became data.gatekeeper...
    assert sorted(d["metadata"]["name"] for d in served_documents(out)) == ["data", "x"]


def test_the_first_pass_appears_whole_and_later_passes_touch_only_what_changed(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "policies"
    write_files(out, {"a/one.yaml": "1", "t/two.yaml": "2"})
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml")) == ["a/one.yaml", "t/two.yaml"]
    assert not [p for p in tmp_path.rglob(".*")]  # no staging directory left behind
    before = (out / "a/one.yaml").stat().st_mtime_ns
    write_files(out, {"a/one.yaml": "1"}, removed_last="t")
    assert (out / "a/one.yaml").stat().st_mtime_ns == before
    assert not (out / "t").exists()
