"""A pass of `regokite gatekeeper`: a template compiled again only when it changed (with thirty templates,
every pass compiled all thirty: seconds of CPU for a constraint edit), statuses written after the files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import regokite.sources.gatekeeper_objects as objects
from regokite.sources.gatekeeper_objects import TEMPLATES, GatekeeperSync
from tests.kube_api.fake import FakeKube

TEMPLATE = Path(__file__).parents[1] / "gatekeeper/fixtures/library/requiredlabels/template.yaml"


def test_a_template_is_compiled_again_only_when_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kube = FakeKube()
    kube.serve("templates.gatekeeper.sh/v1", "constrainttemplates", "ConstraintTemplate", namespaced=False)
    kube.serve("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)
    doc = yaml.safe_load(TEMPLATE.read_text())
    kube.put(f"{TEMPLATES}/k8srequiredlabels", doc)
    compiled: list[str] = []
    real = objects.compile_template
    monkeypatch.setattr(objects, "compile_template", lambda t, *a: compiled.append(t.name) or real(t, *a))
    syncer = GatekeeperSync(kube, tmp_path)  # type: ignore[arg-type]
    assert syncer.sync_once() == {"K8sRequiredLabels": None}
    assert syncer.sync_once() == {"K8sRequiredLabels": None}
    assert compiled == ["k8srequiredlabels"]
    doc["spec"]["targets"][0]["rego"] += "\n# changed\n"
    kube.put(f"{TEMPLATES}/k8srequiredlabels", doc)
    syncer.sync_once()
    assert compiled == ["k8srequiredlabels", "k8srequiredlabels"]


def test_a_status_is_written_once_the_file_holds_what_it_reports(tmp_path: Path) -> None:
    """A template's `created` (and a constraint's `enforced`) was written before the file the admission server
    reads: for that moment the status said served what no server could have."""
    seen: list[bool] = []

    class Watching(FakeKube):
        def patch(self, path: str, body: object, **kw: object) -> object:
            if path.endswith("/status"):
                texts = [f.read_text() for f in (tmp_path / "out").rglob("*.yaml")]  # one file per object
                seen.append(any("k8srequiredlabels" in text for text in texts))
            return super().patch(path, body, **kw)

    kube = Watching()
    kube.serve("templates.gatekeeper.sh/v1", "constrainttemplates", "ConstraintTemplate", namespaced=False)
    kube.serve("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)
    kube.put(f"{TEMPLATES}/k8srequiredlabels", yaml.safe_load(TEMPLATE.read_text()))
    GatekeeperSync(kube, tmp_path / "out").sync_once()  # type: ignore[arg-type]
    assert seen == [True]
