"""Start-up: every definitions file read once, every hook checked against the policies before anything runs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from regokite.controllers.process import load_hooks
from regokite.errors import HookError

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"


def test_definitions_and_watches_load_together_with_their_hooks_resolved() -> None:
    loaded, engine, hooks = load_hooks([str(ROOT / "policies")], [str(HELLO), str(ROOT / "policies" / "watches")])
    try:
        assert [d.name for d in loaded.composites] == ["hello-controller"]
        assert {w.name for w in loaded.watches} >= {"deployment-scaler", "namespace-defaults"}
        sync, finalize, customize = hooks["hello-controller"]
        assert sync.package == "controllers.hello_world" and finalize is None and customize is None
    finally:
        engine.close()


def test_a_hook_naming_no_loaded_package_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "empty.rego").write_text("package other\n\nx := 1\n")
    with pytest.raises(HookError, match="no such package or rule"):
        load_hooks([str(tmp_path)], [str(HELLO)])


def test_definitions_from_the_server_that_cannot_run_are_refused_not_fatal() -> None:
    from regokite import yamldoc
    from regokite.controllers import definitions

    doc = next(yamldoc.load_all((HELLO / "controller.yaml").read_text()))
    problems: list[str] = []
    same_name = definitions.parse_definition(doc, "compositecontroller/hello-controller", problems)
    missing = copy.deepcopy(doc)
    missing["metadata"]["name"] = "missing"
    missing["spec"]["hooks"]["sync"]["rego"]["package"] = "controllers.no_such_package"
    no_package = definitions.parse_definition(missing, "compositecontroller/missing", problems)
    fine = copy.deepcopy(doc)
    fine["metadata"]["name"] = "fine"
    ok = definitions.parse_definition(fine, "compositecontroller/fine", problems)
    assert problems == []
    refused: dict[str, Exception] = {}
    loaded, engine, hooks = load_hooks(
        [str(ROOT / "policies")],
        [str(HELLO)],
        cluster=[same_name, no_package, ok],
        refused=refused,
    )
    try:
        assert [d.name for d in loaded.controllers] == ["hello-controller", "fine"]
        assert set(refused) == {"hello-controller", "missing"}
        assert "already defines hello-controller" in str(refused["hello-controller"])
        assert "controllers.no_such_package" in str(refused["missing"])
        assert hooks["fine"][0].package == "controllers.hello_world"
    finally:
        engine.close()


def test_a_definition_refused_for_a_type_not_served_starts_once_it_is() -> None:
    from regokite.controllers.cluster_definitions import ClusterDefinitions
    from regokite.controllers.process import Unserved, _now_served
    from regokite.controllers.schema import ChildResource
    from regokite.kube.discovery import Discovery, DiscoveryError
    from tests.kube_api.fake import FakeKube

    fake = FakeKube().serve("v1", "configmaps", "ConfigMap")
    rules = [ChildResource("v1", "configmaps"), ChildResource("example.com/v1", "things")]
    refused: dict[str, Exception] = {"from-a-file": Unserved(DiscoveryError("example.com/v1 not served"), rules)}
    assert not _now_served(refused, ClusterDefinitions(), Discovery(fake))  # type: ignore[arg-type]
    fake.serve("example.com/v1", "things", "Thing")
    assert _now_served(refused, ClusterDefinitions(), Discovery(fake))  # type: ignore[arg-type]
