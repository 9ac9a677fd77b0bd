"""kube-mgmt's ConfigMaps as a policy directory: modules and data laid out as kube-mgmt loads them,
its status annotation, and a ConfigMap that breaks keeping its last good content (the others go on)."""

from __future__ import annotations

import json
from pathlib import Path

from regokite.bundle import load_bundle
from regokite.engine import EngineSettings
from regokite.engine.embedded import EmbeddedEngine
from regokite.engine.extensions import ExtensionOptions
from regokite.sources.configmap_policies import STATUS_ANNOTATION, ConfigMapSync, status_annotation

GOOD = 'package kubernetes\n\nexample := "Hello, Kubernetes!"\n'
OTHER = 'package other\n\nanswer := data.opa["hello-data"]["x.json"].a[0]\n'


class Patches:
    """A client that records annotation patches (the sync reads through its informers, not here)."""

    def __init__(self) -> None:
        self.patched: dict[str, str] = {}

    def patch(self, path: str, body: dict) -> dict:
        self.patched[path.rsplit("/", 1)[1]] = body["metadata"]["annotations"][STATUS_ANNOTATION]
        return {}


def cm(name: str, data: dict, *, policy: bool = True, ns: str = "opa") -> dict:
    label = {"openpolicyagent.org/policy": "rego"} if policy else {"openpolicyagent.org/data": "opa"}
    return {"metadata": {"name": name, "namespace": ns, "labels": label}, "data": data}


def evaluate(out: Path, ref: str):
    engine = EmbeddedEngine(load_bundle([out]))
    try:
        return engine.evaluate(ref)
    finally:
        engine.close()


def test_policies_and_data_load_where_kube_mgmt_puts_them(tmp_path: Path) -> None:
    client = Patches()
    sync = ConfigMapSync(client, tmp_path / "out", ["opa"])  # type: ignore[arg-type]
    outcome = sync.sync(
        [
            cm("hello-world", {"example.rego": GOOD}),
            cm("other", {"o": OTHER}),
            cm("hello-data", {"x.json": '{"a": [1, 2, 3]}'}, policy=False),
        ]
    )
    assert outcome == {"opa/hello-world": None, "opa/other": None, "opa/hello-data": None}
    assert evaluate(tmp_path / "out", "data.kubernetes.example") == "Hello, Kubernetes!"
    assert evaluate(tmp_path / "out", "data.other.answer") == 1  # data.<namespace>.<name>.<key>
    assert client.patched == {n: '{"status":"ok"}' for n in ("hello-world", "other", "hello-data")}


def test_a_broken_edit_is_reported_and_its_last_good_content_keeps_serving(tmp_path: Path) -> None:
    client = Patches()
    sync = ConfigMapSync(client, tmp_path / "out", ["opa"])  # type: ignore[arg-type]
    sync.sync([cm("hello-world", {"example.rego": GOOD}), cm("two", {"t.rego": "package two\n\nx := 1\n"})])
    outcome = sync.sync(
        [
            cm("hello-world", {"example.rego": "package kubernetes\n\nexample := \n"}),
            cm("two", {"t.rego": "package two\n\nx := 2\n"}),
        ]
    )
    error = outcome["opa/hello-world"]
    assert error is not None and "configmap/opa/hello-world/example.rego:4:1: expecting expression" in error
    assert outcome["opa/two"] is None
    assert evaluate(tmp_path / "out", "data.kubernetes.example") == "Hello, Kubernetes!"  # the last good one
    assert evaluate(tmp_path / "out", "data.two.x") == 2  # the other ConfigMap's change went through
    assert json.loads(client.patched["hello-world"]) == {"status": "error", "error": error}
    # fixed: served again, and the annotation says so
    sync.sync(
        [
            cm("hello-world", {"example.rego": GOOD.replace("Hello", "Hi")}),
            cm("two", {"t.rego": "package two\n\nx := 2\n"}),
        ]
    )
    assert evaluate(tmp_path / "out", "data.kubernetes.example") == "Hi, Kubernetes!"
    assert client.patched["hello-world"] == status_annotation(None)


def test_a_configmap_that_does_not_compile_is_the_one_refused(tmp_path: Path) -> None:
    sync = ConfigMapSync(Patches(), tmp_path / "out", ["*"])  # type: ignore[arg-type]
    first = cm("a", {"a.rego": "package p\n\nx := 1\n"})
    assert sync.sync([first])["opa/a"] is None
    outcome = sync.sync([first, cm("b", {"b.rego": "package q\n\ny := no_such_function(1)\n"}, ns="team")])
    assert outcome["opa/a"] is None and "configmap/team/b/b.rego" in (outcome["team/b"] or "")
    assert evaluate(tmp_path / "out", "data.p.x") == 1


def test_a_configmap_is_checked_with_the_builtins_the_process_serves_it_with(tmp_path: Path) -> None:
    """A policy calling http.send loads where the process allows its host (admission --allow-http-send
    --policy-namespaces), and is refused where nothing is allowed."""
    lookup = {"l.rego": 'package l\n\nx := http.send({"method": "GET", "url": "http://127.0.0.1:9/"})\n'}
    refused = ConfigMapSync(Patches(), tmp_path / "refused", ["opa"])  # type: ignore[arg-type]
    assert "--allow-http-send" in (refused.sync([cm("l", lookup)])["opa/l"] or "")
    allowed = EngineSettings(extensions=ExtensionOptions(("127.0.0.1:9",)))
    sync = ConfigMapSync(Patches(), tmp_path / "out", ["opa"], allowed)  # type: ignore[arg-type]
    assert sync.sync([cm("l", lookup)])["opa/l"] is None


def test_bad_json_data_is_an_error_and_a_deleted_configmap_leaves_nothing(tmp_path: Path) -> None:
    sync = ConfigMapSync(Patches(), tmp_path / "out", ["opa"])  # type: ignore[arg-type]
    outcome = sync.sync([cm("d", {"x.json": "{not json"}, policy=False), cm("p", {"p.rego": GOOD})])
    assert "configmap/opa/d/x.json: invalid JSON" in (outcome["opa/d"] or "")
    sync.sync([])
    assert not any(p.is_file() for p in (tmp_path / "out").rglob("*"))


def test_a_restart_keeps_the_last_good_content_of_a_configmap_found_broken(tmp_path: Path) -> None:
    ConfigMapSync(Patches(), tmp_path / "out", ["opa"]).sync([cm("hello-world", {"example.rego": GOOD})])  # type: ignore[arg-type]
    restarted = ConfigMapSync(Patches(), tmp_path / "out", ["opa"])  # type: ignore[arg-type]
    outcome = restarted.sync([cm("hello-world", {"example.rego": "package kubernetes\n\nexample := \n"})])
    assert outcome["opa/hello-world"] is not None
    assert evaluate(tmp_path / "out", "data.kubernetes.example") == "Hello, Kubernetes!"
    assert restarted.sync([]) == {} and not list((tmp_path / "out").rglob("*.rego"))  # deleted: gone
