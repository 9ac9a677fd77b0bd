"""`regokite gatekeeper` compiles a template again only when it changed: with thirty templates, every
pass compiled all thirty (a pass on each change: seconds of CPU for a constraint edit)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import regokite.sources.gatekeeper_objects as objects
from regokite.sources.gatekeeper_objects import TEMPLATES, GatekeeperSync
from tests.kube_runtime.fake import FakeKube

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
