"""deploy/monitoring: the Grafana dashboard and the Prometheus rules are well formed, and cover what
operators watch. (tests/integration/test_monitoring_metrics.py checks their metric names against the
/metrics of running servers.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "deploy/monitoring"
METRIC = re.compile(r"\bregokite_[a-z_]+\b")


def dashboard() -> dict:
    return json.loads((KIT / "grafana-dashboard.json").read_text())


def rules() -> list[dict]:
    return [
        rule
        for group in yaml.safe_load((KIT / "prometheus-rules.yaml").read_text())["groups"]
        for rule in group["rules"]
    ]


def used_metrics() -> set[str]:
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]
    exprs += [r["expr"] for r in rules()]
    return {m for e in exprs for m in METRIC.findall(e)}


def test_the_dashboard_has_grafanas_schema_keys() -> None:
    board = dashboard()
    assert {"title", "uid", "schemaVersion", "panels", "templating", "time", "refresh"} <= board.keys()
    assert isinstance(board["schemaVersion"], int)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert {"type", "title", "gridPos", "id"} <= panel.keys(), panel.get("title")
        assert {"h", "w", "x", "y"} <= panel["gridPos"].keys()
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert {"refId", "expr"} <= target.keys() and METRIC.search(target["expr"]), panel["title"]


def test_the_dashboard_covers_what_operators_watch() -> None:
    wanted = {
        "admission latency": "regokite_admission_request_duration_seconds_bucket",
        "decisions by policy": "regokite_admission_policy_decisions_total",
        "worker restarts": "regokite_admission_worker_restarts_total",
        "hook worker restarts": "regokite_controller_hook_worker_restarts_total",
        "reload health": "regokite_policy_reload_healthy",
        "controller queue depth": "regokite_controller_queue_depth",
        "controller sync latency": "regokite_controller_reconcile_duration_seconds_bucket",
        "shard ownership": "regokite_shard_owned_objects",
        "audit violations": "regokite_audit_violations",
    }
    exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p.get("targets", []))
    assert [what for what, metric in wanted.items() if metric not in exprs] == []


def test_the_alert_rules_are_prometheus_rules_for_the_four_failures() -> None:
    found = rules()
    for rule in found:
        assert {"alert", "expr", "labels", "annotations"} <= rule.keys(), rule
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]
        assert "for" not in rule or re.fullmatch(r"\d+[smh]", rule["for"])
    exprs = {r["alert"]: r["expr"] for r in found}
    assert "regokite_policy_reload_healthy" in exprs["RegokitePolicyReloadFailing"]
    assert "regokite_admission_worker_restarts_total" in exprs["RegokiteAdmissionWorkerRestarts"]
    assert "histogram_quantile(0.99" in exprs["RegokiteWebhookLatencyHigh"]
    assert "regokite_controller_queue_depth" in exprs["RegokiteControllerQueueBacklog"]


def test_every_metric_the_kit_names_is_defined_in_the_code() -> None:
    """Quick and offline; the integration test asks running servers."""
    source = "\n".join(p.read_text() for p in (ROOT / "regokite").rglob("*.py"))
    defined = set(re.findall(r'"(regokite_[a-z_]+)"', source))
    suffixes = ("_bucket", "_sum", "_count")
    missing = {
        m for m in used_metrics() if m not in defined and not any(m.removesuffix(s) in defined for s in suffixes)
    }
    assert missing == set()
