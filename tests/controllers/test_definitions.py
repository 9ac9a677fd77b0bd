"""Parsing and validating Metacontroller CompositeController definitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.controllers.definitions import DefinitionError, HookTarget, load_definitions
from tests.controllers.definitions_text import composite_controller

ROOT = Path(__file__).resolve().parents[2]


def hello(method: str, hook: str) -> str:
    return composite_controller("hello-controller", "helloworlds", "pods", hook, method)


def write(tmp_path: Path, text: str, name: str = "hello.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        load_definitions([path])
    return info.value.problems


def test_the_hello_world_definition_in_the_repo_loads() -> None:
    [d] = load_definitions([ROOT / "policies" / "controllers" / "hello_world"])
    assert d.name == "hello-controller"
    assert (d.parent.api_version, d.parent.resource) == ("example.com/v1", "helloworlds")
    assert d.children[0].update_method == "Recreate"
    assert d.hooks.sync == HookTarget("controllers.hello_world")
    assert d.generate_selector
    assert d.finalizer == "metacontroller.io/compositecontroller-hello-controller"


def test_an_unknown_update_method_is_reported_with_file_controller_and_path(tmp_path: Path) -> None:
    path = write(tmp_path, hello("Sideways", "rego: {package: a.b}"))
    assert problems(path) == [
        f"{path}: CompositeController hello-controller: spec.childResources[0].updateStrategy.method: "
        "must be one of OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace"
    ]


def test_rolling_methods_load_with_their_status_checks(tmp_path: Path) -> None:
    text = hello("RollingInPlace", "rego: {package: a.b}").replace(
        "method: RollingInPlace",
        "method: RollingInPlace\n        statusChecks: {conditions: [{type: Ready, status: 'True'}]}",
    )
    [d] = load_definitions([write(tmp_path, text)])
    assert d.children[0].update_method == "RollingInPlace"
    assert d.children[0].status_checks == {"conditions": [{"type": "Ready", "status": "True"}]}


def test_unknown_fields_are_reported_not_ignored(tmp_path: Path) -> None:
    text = hello("InPlace", "rego: {package: a.b}").replace(
        "generateSelector: true", "generateSelector: true\n  resyncPeriod: 5"
    )
    [problem] = problems(write(tmp_path, text))
    assert "spec.resyncPeriod: unknown field" in problem


def test_opa_v0_and_v1_webhook_urls_name_packages(tmp_path: Path) -> None:
    v0 = write(tmp_path, hello("InPlace", "webhook: {url: 'http://opa:8181/v0/data/rbac/sync'}"))
    assert load_definitions([v0])[0].hooks.sync == HookTarget(
        "rbac.sync", source="webhook", url="http://opa:8181/v0/data/rbac/sync", api="v0"
    )
    v1 = write(tmp_path, hello("InPlace", "webhook: {url: 'http://opa:8181/v1/data/ctl'}"), "b.yaml")
    assert load_definitions([v1])[0].hooks.sync.package == "ctl"


def test_a_webhook_that_is_neither_opa_nor_a_service_is_refused(tmp_path: Path) -> None:
    for url in ("http://localhost:8080/sync", "https://hooks.example.org/sync", "http://hello.default/"):
        path = write(tmp_path, hello("InPlace", f"webhook: {{url: '{url}'}}"))
        [problem] = problems(path)
        assert "spec.hooks.sync.webhook.url" in problem and "OPA's data API" in problem, url


def test_a_hook_servers_url_is_served_by_the_policy_file_named_after_it(tmp_path: Path) -> None:
    """Metacontroller's examples point at a Service whose ConfigMap holds the hook: here that
    ConfigMap holds Rego, and `<namespace>/<service>/<path>.rego` is where its key lands."""
    cases = {
        "webhook: {url: 'http://crd-role-controller.metacontroller/sync-crd-role', timeout: 10s}": (
            "metacontroller/crd-role-controller/sync-crd-role.rego"
        ),
        "webhook: {url: 'http://hooks.ops.svc.cluster.local:8080/v2/sync/'}": "ops/hooks/v2/sync.rego",
        "webhook: {service: {name: hooks, namespace: ops}, path: /sync}": "ops/hooks/sync.rego",
    }
    for hook, served_by in cases.items():
        [loaded] = load_definitions([write(tmp_path, hello("InPlace", hook))])
        assert (loaded.hooks.sync.package, loaded.hooks.sync.served_by) == ("", served_by)


def test_service_and_path_webhooks_work_too(tmp_path: Path) -> None:
    hook = "webhook: {service: {name: opa, namespace: opa, port: 8181}, path: /v0/data/controllers/x, timeout: 10s}"
    path = write(tmp_path, hello("InPlace", hook))
    assert load_definitions([path])[0].hooks.sync.package == "controllers.x"


def test_multi_document_files_skip_other_manifests(tmp_path: Path) -> None:
    crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\n"
    one = hello("InPlace", "rego: {package: a.b}")
    two = one.replace("hello-controller", "second")
    [a, b] = load_definitions([write(tmp_path, "\n---\n".join([crd, one, two]))])
    assert (a.name, b.name) == ("hello-controller", "second")


def test_duplicate_names_and_an_empty_decorator_are_errors(tmp_path: Path) -> None:
    one = hello("InPlace", "rego: {package: a.b}")
    deco = "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: DecoratorController\nmetadata: {name: d}\nspec: {}\n"
    found = problems(write(tmp_path, "\n---\n".join([one, one, deco])))
    assert any("also defined in" in p for p in found)
    assert any("DecoratorController d: spec.resources: required" in p for p in found)


def test_missing_required_fields_and_wrong_types(tmp_path: Path) -> None:
    text = """
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: bad}
spec:
  parentResource: {apiVersion: example.com/v1}
  childResources: [{apiVersion: v1, resource: Pods}]
  resyncPeriodSeconds: soon
  hooks: {}
"""
    found = problems(write(tmp_path, text))
    joined = "\n".join(found)
    assert "spec.parentResource.resource: required" in joined
    assert "spec.childResources[0].resource: must be the lowercase plural" in joined
    assert "spec.resyncPeriodSeconds: must be a number" in joined
    assert "spec.hooks.sync: required" in joined


def test_a_hook_timeout_is_read_from_rego_and_webhook_hooks_and_defaults_to_ten_seconds(tmp_path: Path) -> None:
    def timeout(hook: str) -> float:
        [d] = load_definitions([write(tmp_path, hello("OnDelete", hook))])
        return d.hooks.sync.timeout

    assert timeout("rego: {package: a.b}") == 10.0
    assert timeout("rego: {package: a.b, timeout: 1m30s}") == 90.0
    assert timeout("webhook: {url: 'http://opa:8181/v1/data/a/b', timeout: 500ms}") == 0.5
    path = write(tmp_path, hello("OnDelete", "rego: {package: a.b, timeout: soon}"))
    assert problems(path) == [
        f"{path}: CompositeController hello-controller: spec.hooks.sync.rego.timeout: "
        "must be a Go duration like 10s or 500ms, got 'soon'"
    ]


def test_the_rolling_update_hooks_are_refused_by_name(tmp_path: Path) -> None:
    text = hello("RollingRecreate", "rego: {package: a.b}")
    text += "    preUpdateChild: {webhook: {url: 'http://x/v1/data/a'}}\n"
    [problem] = problems(write(tmp_path, text))
    assert problem.endswith(
        "spec.hooks.preUpdateChild: preUpdateChild (Metacontroller's rolling-update hook) is not supported: "
        "regokite gates rolling updates with childResources[].updateStrategy.statusChecks instead; remove the hook"
    )


@pytest.mark.parametrize("kind", ["rego: {package: a.b}", "webhook: {url: http://opa/v1/data/a/b}"])
def test_hook_version_v2_loads_and_v1_is_the_default(tmp_path: Path, kind: str) -> None:
    [d] = load_definitions([write(tmp_path, hello("InPlace", kind))])
    assert d.hooks.sync.version == "v1" and not d.hooks.sync.uniform
    v2 = hello("InPlace", kind).replace("    sync:\n", "    sync:\n      version: v2\n")
    [d] = load_definitions([write(tmp_path, v2)])
    assert d.hooks.sync.version == "v2" and d.hooks.sync.uniform and d.hooks.sync.package == "a.b"


def test_an_unknown_hook_version_is_refused_at_its_path(tmp_path: Path) -> None:
    text = hello("InPlace", "rego: {package: a.b}").replace("    sync:\n", "    sync:\n      version: v3\n")
    path = write(tmp_path, text)
    assert problems(path) == [
        f"{path}: CompositeController hello-controller: spec.hooks.sync.version: "
        'must be v1 or v2 (Metacontroller\'s hook versions), got "v3"'
    ]
