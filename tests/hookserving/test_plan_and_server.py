"""`regokite plan` offline, and `regokite hooks` answering like Metacontroller's webhook and OPA's data API."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from regokite.cli import main
from regokite.controllers.plan import plan_from_files
from regokite.engine import EngineSettings
from regokite.errors import RegokiteError
from regokite.hookserving.server import Served, create_app, loader

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
PARENT = {
    "apiVersion": "example.com/v1",
    "kind": "HelloWorld",
    "metadata": {"name": "your-name", "namespace": "hello", "uid": "u-1", "generation": 1},
    "spec": {"who": "Your Name"},
}


def test_plan_creates_the_pod_for_a_new_parent(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump(PARENT))
    report = plan_from_files([str(HELLO / "controller.yaml")], [str(HELLO)], str(tmp_path / "parent.yaml"))
    assert [a.describe() for a in report.actions] == ["create Pod hello/your-name"]
    assert report.status == {"pods": 0}
    assert "create Pod hello/your-name" in report.render()


def test_plan_recreates_a_changed_pod_and_deletes_strays(tmp_path: Path, capsys) -> None:
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump(PARENT))
    observed = tmp_path / "observed"
    observed.mkdir()
    ref = {"apiVersion": "example.com/v1", "kind": "HelloWorld", "name": "your-name", "uid": "u-1", "controller": True}
    for name in ("your-name", "stray"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"controller-uid": "u-1"}, "ownerReferences": [ref], "uid": name},
            "spec": {"containers": [{"name": "hello", "image": "busybox", "command": ["echo", "Hello, old!"]}]},
        }
        (observed / f"{name}.yaml").write_text(yaml.safe_dump(pod))
    argv = ["plan", "--controllers", str(HELLO / "controller.yaml"), "--policies", str(HELLO)]
    argv += ["--parent", str(tmp_path / "parent.yaml"), "--observed", str(observed)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "recreate Pod hello/your-name (changed)" in out
    assert "delete Pod hello/stray" in out
    assert 'status: {"pods": 2}' in out


def client_for(path: Path, v0: bool = False) -> TestClient:
    return TestClient(create_app(Served(loader([str(path)], EngineSettings(v0_compatible=v0)))))


REQUEST = {"controller": {}, "parent": PARENT, "children": {"Pod.v1": {}}, "related": {}, "finalizing": False}


def test_hooks_answer_metacontroller_requests_with_the_response_fields() -> None:
    reply = client_for(HELLO).post("/controllers/hello_world", json=REQUEST)
    assert reply.status_code == 200
    body = reply.json()
    assert set(body) == {"children", "status"}
    assert body["children"][0]["spec"]["containers"][0]["command"] == ["echo", "Hello, Your Name!"]


def test_hooks_speak_opa_v0_and_v1_data_apis() -> None:
    c = client_for(HELLO)
    v0 = c.post("/v0/data/controllers/hello_world/status", json=REQUEST)
    assert (v0.status_code, v0.json()) == (200, {"pods": 0})
    v1 = c.post("/v1/data/controllers/hello_world/who", json={"input": REQUEST})
    assert v1.json() == {"result": "Your Name"}
    assert c.post("/v0/data/controllers/hello_world/nothing", json=REQUEST).status_code == 404
    assert c.post("/no/such/package", json=REQUEST).status_code == 404


def test_hooks_serve_the_v0_temporary_access_policy() -> None:
    c = client_for(ROOT / "policies" / "controllers" / "temporary_access", v0=True)
    parent = {
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {"user": "alice", "validFrom": "2000-01-01T00:00:00Z", "validUntil": "2000-01-02T00:00:00Z"},
    }
    body = c.post("/v0/data/controllers/temporary_access", json={"parent": parent, "children": {}}).json()
    assert body["children"] == [] and body["status"] == {"phase": "Expired", "bindings": 0}


def test_plan_takes_a_directory_of_mixed_definitions_and_names_what_matches(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    parent = tmp_path / "hello.yaml"
    parent.write_text("apiVersion: example.com/v1\nkind: HelloWorld\nmetadata: {name: h, namespace: default}\n")
    report = plan_from_files([str(root / "policies" / "controllers")], [str(root / "policies")], str(parent))
    assert "create Pod default/h" in report.render()
    other = tmp_path / "cm.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(
        RegokiteError,
        match=r"no CompositeController, DecoratorController or Watch acts on ConfigMap\.v1; have: .*hello-controller",
    ):
        plan_from_files([str(root / "policies" / "controllers")], [str(root / "policies")], str(other))


WIDGETS = """\
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: things}
spec:
  generateSelector: true
  parentResource: {apiVersion: example.com/v1, resource: things}
  childResources: [{apiVersion: example.com/v1, resource: widgets}]
  hooks:
    sync: {rego: {package: things}}
    finalize: {rego: {package: things}}
"""
WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
"""
THINGS = """\
package things

children := [w] if not input.finalizing

w := {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": input.parent.metadata.name}}

finalized := input.finalizing
"""


def test_plan_reads_kinds_from_the_crds_beside_the_definitions_and_walks_the_finalizer(tmp_path: Path) -> None:
    (tmp_path / "controller.yaml").write_text(WIDGETS)
    (tmp_path / "things.rego").write_text(THINGS)
    thing = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "n"}}
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump(thing))
    args = [str(tmp_path / "controller.yaml")], [str(tmp_path / "things.rego")], str(tmp_path / "parent.yaml")
    with pytest.raises(RegokiteError, match=r"kind of widgets\.example\.com/v1 offline: keep its CustomResourceDef"):
        plan_from_files(*args)
    (tmp_path / "crd.yaml").write_text(WIDGET_CRD)
    args = ([str(tmp_path / "controller.yaml"), str(tmp_path / "crd.yaml")], *args[1:])
    report = plan_from_files(*args)
    assert report.steps() == ["set finalizers ['metacontroller.io/compositecontroller-things']", "create Widget n/t"]
    thing["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump(thing))
    report = plan_from_files(*args)
    assert report.finalizing and report.steps() == ["remove finalizer (finalized)"]


@pytest.mark.parametrize("path", ["/controllers/hello_world", "/v0/data/controllers/hello_world"])
def test_hooks_refuse_a_request_no_engine_may_take_with_a_400_and_keep_serving(path: str) -> None:
    c = client_for(HELLO)
    hostile = b'{"parent": {"metadata": {"name": "\\ud800"}}, "children": {}}'
    reply = c.post(path, content=hostile)
    assert reply.status_code == 400
    assert "body.parent.metadata.name: string holds a lone surrogate" in reply.json()["message"]
    assert c.post(path, json=REQUEST).status_code == 200


DECORATED = """\
package deco

labels := {"decorated": input.object.metadata.name}

annotations := {"old": null}

relatedResources := [{"apiVersion": "v1", "resource": "configmaps", "labelSelector": {}}]

children := ["never served to a decorator or a customize call"]
"""


def test_hooks_answer_decorator_and_customize_calls_with_their_own_contracts(tmp_path: Path, caplog) -> None:
    (tmp_path / "deco.rego").write_text(DECORATED)
    c = client_for(tmp_path)
    target = {"metadata": {"name": "web", "namespace": "n"}}
    with caplog.at_level("INFO", logger="regokite.hooks"):
        sync = c.post("/deco", json={"controller": {}, "object": target, "attachments": {}, "finalizing": False})
        custom = c.post("/deco", json={"controller": {}, "parent": target})
        composite = c.post("/deco", json={"controller": {}, "parent": target, "children": {}})
        missing = c.post("/nothing", json={"controller": {}, "parent": target, "children": {}})
    assert sync.json() == {"labels": {"decorated": "web"}, "annotations": {"old": None}}
    assert custom.json() == {"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "labelSelector": {}}]}
    assert composite.json() == {"children": ["never served to a decorator or a customize call"]}
    calls = [r for r in caplog.records if r.getMessage() == "hook call"]
    assert [(r.path, r.status) for r in calls] == [("/deco", 200)] * 3 + [("/nothing", 404)]
    assert missing.status_code == 404


def test_hooks_reload_changed_policies_and_keep_the_last_good_set(tmp_path: Path) -> None:
    import asyncio

    policy = tmp_path / "greet.rego"
    policy.write_text('package greet\n\nstatus := {"word": "hello"}\n')
    served = Served(loader([str(tmp_path)]), [str(tmp_path)])
    c = TestClient(create_app(served))
    request = {"parent": {}, "children": {}}
    assert c.post("/greet", json=request).json() == {"status": {"word": "hello"}}
    policy.write_text('package greet\n\nstatus := {"word": "howdy"}\n')
    asyncio.run(served.reload())
    assert c.post("/greet", json=request).json() == {"status": {"word": "howdy"}}
    policy.write_text("package greet\n\nstatus := {\n")
    asyncio.run(served.reload())
    assert "greet.rego" in (served.reload_error or "")
    assert c.post("/greet", json=request).json() == {"status": {"word": "howdy"}}
    assert c.get("/readyz").json()["reload"]["error"] == served.reload_error


def test_plan_covers_a_decorator_target_attachments_then_labels(tmp_path: Path) -> None:
    spp = ROOT / "policies" / "controllers" / "service_per_pod"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "shop", "annotations": {"pod-name-label": "pod-name"}},
    }
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    report = plan_from_files([str(spp / "controller.yaml")], [str(spp)], str(tmp_path / "pod.yaml"))
    assert report.kind == "DecoratorController" and report.controller == "pod-name-label"
    [step] = report.steps()
    assert step.startswith('apply labels and annotations {"annotations": {}, "labels": {"pod-name": "web-0"}}')
    assert "DecoratorController pod-name-label, Pod shop/web-0" in report.render()

    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"service-per-pod-label": "pod-name", "service-per-pod-ports": "80:8080"},
        },
        "spec": {"replicas": 2},
    }
    (tmp_path / "sts.yaml").write_text(yaml.safe_dump(sts))
    report = plan_from_files([str(spp / "controller.yaml")], [str(spp)], str(tmp_path / "sts.yaml"))
    assert report.steps() == [
        "set finalizers ['metacontroller.io/decoratorcontroller-service-per-pod']",
        "create Service shop/web-0",
        "create Service shop/web-1",
        'apply labels and annotations {"annotations": {"service-per-pod/services": "0"}, "labels": {}}'
        " as regokite-decorator-service-per-pod",
    ]


def test_plan_covers_a_watch_for_one_event(tmp_path: Path, capsys) -> None:
    scaler = ROOT / "policies" / "watches" / "deployment_scaler"
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "big", "namespace": "shop", "labels": {"enforce-max-replicas": "true"}},
        "spec": {"replicas": 10},
    }
    (tmp_path / "deploy.yaml").write_text(yaml.safe_dump(deploy))
    argv = ["plan", "--controllers", str(scaler / "watch.yaml"), "--policies", str(scaler)]
    assert main([*argv, "--parent", str(tmp_path / "deploy.yaml"), "--event", "MODIFIED"]) == 0
    out = capsys.readouterr().out
    assert "Watch deployment-scaler, Deployment shop/big, event MODIFIED" in out
    assert "patch Deployment shop/big" in out


SIZED = """package controllers.sized

children := [pod |
	some i in numbers.range(1, to_number(input.parent.spec.replicas))
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": sprintf("%s-%d", [input.parent.metadata.name, i])}}
]

status := {"wanted": input.parent.spec.replicas}
"""


def test_a_hooks_builtin_error_is_undefined_as_in_opa(tmp_path: Path) -> None:
    """OPA's default: `to_number("many")` is undefined, so no child (OPA's oracle); the hook answers.
    --strict-builtin-errors: the hook fails (500), the sync with it. Failed on the code before (500)."""
    from opa_oracle import OracleEngine

    from regokite.bundle import Bundle, Module

    (tmp_path / "sized.rego").write_text(SIZED)
    parent = {**PARENT, "spec": {"replicas": "many"}}
    request = {**REQUEST, "parent": parent}
    oracle = OracleEngine(Bundle((Module("sized.rego", SIZED),)), strict_builtin_errors=False)
    wanted = oracle.evaluate("data.controllers.sized.children", request)
    assert wanted == []
    reply = client_for(tmp_path).post("/controllers/sized", json=request)
    assert (reply.status_code, reply.json()) == (200, {"children": wanted, "status": {"wanted": "many"}})
    strict = TestClient(create_app(Served(loader([str(tmp_path)], EngineSettings(strict_builtin_errors=True)))))
    failed = strict.post("/controllers/sized", json=request)
    assert failed.status_code == 500 and "sized.rego:4" in failed.json()["message"]
