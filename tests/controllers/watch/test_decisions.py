"""Watch definitions and the watch policy contract: pure, no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.controllers.definitions import DefinitionError, load
from regokite.controllers.watch import decisions as w
from regokite.errors import HookError

ROOT = Path(__file__).resolve().parents[3]


def parse(doc: dict) -> tuple[w.Watch | None, list[str]]:
    problems: list[str] = []
    return w.parse_watch(doc, "watch.yaml", problems), problems


def doc(**spec: object) -> dict:
    base = {
        "resource": {"apiVersion": "apps/v1", "resource": "deployments"},
        "policy": {"package": "watches.x"},
    }
    return {"apiVersion": w.API_VERSION, "kind": "Watch", "metadata": {"name": "x"}, "spec": {**base, **spec}}


def test_the_shipped_watches_load() -> None:
    watches = {x.name: x for x in load([ROOT / "policies" / "watches"]).watches}
    scaler = watches["deployment-scaler"]
    assert scaler.resource == w.WatchResource("apps/v1", "deployments")
    assert scaler.label_selector == "enforce-max-replicas=true"
    assert (scaler.package, scaler.params, scaler.workers) == ("watches.deployment_scaler", {"max_replicas": 3}, 2)
    assert "namespace-defaults" in watches


def test_one_loader_reads_every_kind_beside_each_other(tmp_path: Path) -> None:
    import yaml

    assert load([ROOT / "policies" / "controllers"]).watches == ()
    composite = (ROOT / "policies" / "controllers" / "hello_world" / "controller.yaml").read_text()
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}
    (tmp_path / "all.yaml").write_text("---\n".join([composite, yaml.safe_dump(doc()), yaml.safe_dump(crd)]))
    loaded = load([tmp_path])
    assert [d.name for d in loaded.composites] == ["hello-controller"]
    assert [x.name for x in loaded.watches] == ["x"] and loaded.watches[0].raw == doc()
    assert loaded.crds == (crd,) and loaded.decorators == []


def test_a_directory_with_nothing_to_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(DefinitionError, match="no CompositeController, DecoratorController or Watch found"):
        load([tmp_path])


def test_a_full_definition() -> None:
    got, problems = parse(
        doc(
            resource={"apiVersion": "v1", "kind": "ConfigMap"},
            namespace="shop",
            labelSelector={"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]},
            fieldSelector="metadata.name!=x",
            resyncPeriodSeconds=30,
            workers=4,
            params={"max": 2},
        )
    )
    assert problems == []
    assert got == w.Watch(
        name="x",
        resource=w.WatchResource("v1", None, "ConfigMap"),
        package="watches.x",
        namespace="shop",
        label_selector="a=b,c",
        field_selector="metadata.name!=x",
        resync_period_seconds=30.0,
        workers=4,
        params={"max": 2},
        source="watch.yaml",
    )


def test_a_string_label_selector_is_passed_as_is() -> None:
    got, _ = parse(doc(labelSelector="tier in (web,api)"))
    assert got is not None and got.label_selector == "tier in (web,api)"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"resource": {"apiVersion": "apps/v1"}}, "spec.resource: set resource (e.g. deployments) or kind"),
        ({"resource": {"apiVersion": "apps/v1", "resource": "Deployments"}}, "spec.resource.resource: must be"),
        ({"workers": 0}, "spec.workers: must be an integer from 1 to 64, got 0"),
        ({"resyncPeriodSeconds": "1m"}, "spec.resyncPeriodSeconds: must be a number"),
        ({"policy": {"package": "not a package"}}, "spec.policy.package: must be a Rego package path"),
        ({"policy": {"pkg": "a"}}, "spec.policy.pkg: unknown field"),
        ({"handlers": {}}, "spec.handlers: unknown field"),
        ({"params": {"max-replicas": 3}}, "spec.params.max-replicas: must be a Rego identifier"),
        ({"labelSelector": {"matchLabels": {"a": 1}}}, "spec.labelSelector.matchLabels.a: must be a string"),
    ],
)
def test_problems_are_named_by_path(spec: dict, expected: str) -> None:
    got, problems = parse(doc(**spec))
    assert got is None
    assert any(p.startswith("watch.yaml: Watch x: ") and expected in p for p in problems), problems


def test_wrong_kind_and_version() -> None:
    _, problems = parse({**doc(), "apiVersion": "regokite.dev/v2", "kind": "Watcher"})
    assert "watch.yaml: Watcher x: apiVersion: must be regokite.dev/v1alpha1" in problems[0]
    assert "kind: must be Watch" in problems[1]


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([doc(), doc()]))
    with pytest.raises(DefinitionError, match=r"Watch x: metadata.name: also defined in"):
        load([tmp_path])


def test_vars_override_params_for_all_or_one_watch() -> None:
    a, _ = parse(doc(params={"max_replicas": 3, "keep": True}))
    b, _ = parse({**doc(), "metadata": {"name": "y"}})
    assert a and b
    got = w.override_params([a, b], ["max_replicas=5", "y/mode=strict", "y/list=[a, b]"])
    assert got[0].params == {"max_replicas": 5, "keep": True}
    assert got[1].params == {"max_replicas": 5, "mode": "strict", "list": ["a", "b"]}
    with pytest.raises(DefinitionError, match="no watch named 'z'"):
        w.override_params([a], ["z/k=1"])
    with pytest.raises(DefinitionError, match="expected KEY=VALUE"):
        w.override_params([a], ["novalue"])


# ----------------------------------------------------------------------- contract


def test_input_shape() -> None:
    assert w.watch_input("DELETED", {"a": 1}, None, {"p": 1}) == {
        "event": "DELETED",
        "object": {"a": 1},
        "oldObject": None,
        "params": {"p": 1},
    }


def test_translate_every_output() -> None:
    d = w.translate(
        "watches.x",
        {
            "patch": [{"op": "replace", "path": "/spec/replicas", "value": 3}],
            "apply": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}],
            "delete": [
                {"apiVersion": "v1", "kind": "Secret", "name": "s", "namespace": "n"},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old", "uid": "u1"}},
            ],
            "events": [{"type": "Warning", "reason": "Capped", "message": "m"}],
            "log": ["plain", {"msg": "loud", "level": "warning"}],
        },
        event="MODIFIED",
    )
    assert d.json_patch and d.writes
    assert d.delete == (w.Ref("v1", "Secret", "s", "n"), w.Ref("v1", "ConfigMap", "old", None, "u1"))
    assert [e.reason for e in d.events] == ["Capped"]
    assert d.log == (w.LogLine("info", "plain"), w.LogLine("warning", "loud"))


def test_a_merge_patch_and_a_single_log_string() -> None:
    d = w.translate("watches.x", {"patch": {"spec": {"replicas": 3}}, "log": "one"}, event="ADDED")
    assert d.patch == {"spec": {"replicas": 3}} and not d.json_patch
    assert d.log == (w.LogLine("info", "one"),)


def test_empty_outputs_do_nothing() -> None:
    d = w.translate("watches.x", {"patch": [], "apply": [], "events": []}, event="RESYNC")
    assert not d.writes and d.patch is None


@pytest.mark.parametrize(
    ("raw", "rule", "message"),
    [
        ({"children": []}, "children", "is not a watch output"),
        ({"patch": "replicas=3"}, "patch", "must be an array of RFC 6902 operations or a merge patch"),
        ({"patch": {"op": "replace", "path": "/a", "value": 1}}, "patch", "must be in an array"),
        ({"patch": [{"op": "set", "path": "/a"}]}, "patch", "patch[0].op must be one of"),
        ({"patch": [{"op": "add", "path": "a", "value": 1}]}, "patch", "must be a JSON pointer"),
        ({"patch": [{"op": "replace", "path": "/a"}]}, "patch", "needs a value"),
        ({"patch": [{"op": "move", "path": "/a"}]}, "patch", "needs from"),
        ({"apply": {"kind": "ConfigMap"}}, "apply", "must be an array or set of objects"),
        ({"apply": [{"kind": "ConfigMap", "metadata": {"name": "a"}}]}, "apply", "apply[0] has no apiVersion"),
        ({"apply": [{"apiVersion": "v1", "kind": "ConfigMap"}]}, "apply", "has no metadata.name"),
        ({"delete": [{"apiVersion": "v1", "kind": "Pod"}]}, "delete", "delete[0] has no name"),
        ({"delete": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "force": True}]}, "delete", "unknown fields"),
        ({"events": [{"type": "Info", "reason": "r", "message": "m"}]}, "events", "Normal or Warning"),
        ({"log": [3]}, "log", "log[0] must be a string or {msg, level}"),
        ({"log": [{"msg": "m", "level": "fatal"}]}, "log", "log[0].level must be one of"),
    ],
)
def test_invalid_output_names_package_rule_and_value(raw: dict, rule: str, message: str) -> None:
    with pytest.raises(HookError) as info:
        w.translate("watches.x", raw, event="ADDED")
    assert info.value.package == "watches.x" and info.value.rule == rule
    assert str(info.value).startswith(f"policy watches.x, rule {rule}: ") and message in str(info.value)


def test_a_deleted_object_cannot_be_patched() -> None:
    with pytest.raises(HookError, match="rule patch: the object is gone"):
        w.translate("watches.x", {"patch": {"spec": {"replicas": 1}}}, event="DELETED")


def test_resolve_outputs() -> None:
    packages = {"watches.x": {"patch", "helper"}, "watches.y": {"response"}, "watches.z": {"helper"}}
    assert (w.resolve_outputs("watches.x", packages).rules, w.resolve_outputs("watches.x", packages).whole_rule) == (
        ("patch",),
        False,
    )
    assert w.resolve_outputs("watches.y.response", packages).whole_rule
    with pytest.raises(HookError, match="defines none of the watch outputs"):
        w.resolve_outputs("watches.z", packages)
    with pytest.raises(HookError, match="no such package or rule"):
        w.resolve_outputs("watches.nope", packages)
