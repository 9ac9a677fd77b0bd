"""Policy sources checked at apply (/v1/admitsource): the ConfigMap sync's and the controller's own loaders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from regokite.engine import EngineSettings
from regokite.manifests.webhooks import CONFIGMAP_LABELS, SOURCES_PATH
from regokite.sources.applied import WEBHOOK_PATH, SourceChecks
from regokite.sources.configmap_policies import DATA_LABEL, POLICY_LABEL, ConfigMapSync
from tests.sources.test_configmap_policies import Patches, cm

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
LIB = 'package lib.greet\n\ngreet(x) := concat(" ", ["hello", x])\n'
USES_LIB = 'package uses\n\nimport data.lib.greet\n\nmessage := greet.greet("you")\n'
BROKEN = "package broken\n\nallow if {\n\tinput.x ==\n}\n"


def request(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    kind = obj.get("kind", "ConfigMap")
    group = obj.get("apiVersion", "v1").rpartition("/")[0]
    namespace = (obj.get("metadata") or {}).get("namespace", "")
    return {"uid": "u", "kind": {"group": group, "version": "v1", "kind": kind}, "operation": operation,
            "namespace": namespace, "object": obj}  # fmt: skip


def checks_following(tmp_path: Path, *served: dict[str, Any]) -> SourceChecks:
    """Checks of a server whose ConfigMap sync serves `served` (in namespace opa)."""
    sync = ConfigMapSync(Patches(), tmp_path / "configmap", ["opa"])  # type: ignore[arg-type]
    assert set(sync.sync(served).values()) <= {None}
    return SourceChecks(EngineSettings(), tmp_path / "configmap", ("opa",))


def served() -> Any:
    return EngineSettings().load([str(HELLO)])


def test_a_configmap_that_would_not_compile_is_refused_with_the_syncs_error(tmp_path: Path) -> None:
    checks = checks_following(tmp_path, cm("lib", {"greet.rego": LIB}))
    refused = checks.refusal(request(cm("bad", {"main.rego": BROKEN})), served())
    assert refused is not None and refused.startswith("configmap/opa/bad/main.rego:5:1: expecting expression"), refused
    # compiled beside what serves: a module calling another ConfigMap's function loads
    assert checks.refusal(request(cm("uses", {"main.rego": USES_LIB})), served()) is None


def test_data_that_is_not_a_json_object_is_refused(tmp_path: Path) -> None:
    checks = checks_following(tmp_path)
    refused = checks.refusal(request(cm("data", {"x.json": "{not json"}, policy=False)), served())
    assert refused is not None and refused.startswith("configmap/opa/data/x.json: invalid JSON:"), refused
    assert checks.refusal(request(cm("data", {"x.json": '{"a": 1}'}, policy=False)), served()) is None


def test_configmaps_the_server_does_not_follow_are_not_its_to_refuse(tmp_path: Path) -> None:
    broken = cm("bad", {"main.rego": BROKEN})
    assert checks_following(tmp_path).refusal(request(cm("bad", {"m.rego": BROKEN}, ns="elsewhere")), served()) is None
    assert SourceChecks(EngineSettings()).refusal(request(broken), served()) is None  # no --policy-namespaces
    unlabelled = {"metadata": {"name": "plain", "namespace": "opa"}, "data": {"main.rego": BROKEN}}
    assert checks_following(tmp_path).refusal(request(unlabelled), served()) is None


def test_a_definition_whose_hook_package_is_missing_is_refused(tmp_path: Path) -> None:
    checks = SourceChecks(EngineSettings())
    definition = yaml.safe_load((HELLO / "controller.yaml").read_text())
    assert checks.refusal(request(definition), served()) is None
    definition["spec"]["hooks"]["sync"]["rego"]["package"] = "controllers.missing"
    refused = checks.refusal(request(definition), served())
    assert refused is not None, "a missing package must be refused"
    assert refused.startswith("compositecontroller/hello-controller: policy controllers.missing: no such package")
    definition["spec"]["parentResource"] = {"apiVersion": "example.com/v1"}  # the controller's own parse errors
    assert "parentResource" in (checks.refusal(request(definition), served()) or "")


def test_a_watch_whose_package_is_missing_is_refused() -> None:
    watch = {
        "apiVersion": "regokite.dev/v1alpha1",
        "kind": "Watch",
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {"resource": {"apiVersion": "v1", "resource": "namespaces"}, "policy": {"package": "nowhere"}},
    }
    refused = SourceChecks(EngineSettings()).refusal(request(watch), served())
    assert refused is not None and refused.startswith("watch/team/w: "), refused
    assert "nowhere" in refused


def test_the_webhook_selects_the_labels_the_sync_follows_at_the_path_served() -> None:
    assert dict(CONFIGMAP_LABELS) == {"policy": POLICY_LABEL, "data": DATA_LABEL}
    assert SOURCES_PATH == WEBHOOK_PATH
