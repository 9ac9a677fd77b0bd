"""charts/regokite through Helm's own library: lint, render, schema, and the same objects as `regokite manifests`
for the same settings (the chart takes what only the policies tell from `--helm-values`)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from regokite import __version__, yamldoc
from regokite.bundles.config import parse_config
from regokite.errors import RegokiteError
from regokite.manifests import bundles, chart, generate
from tests.charts.rendering import CHART, comparable, generated, helm, merged, render, without_crds

ROLES = ("admission", "gatekeeper", "audit", "controller")
ADMISSION = {"policies": chart.ADMISSION_POLICIES}
OPTIONS: dict[str, dict[str, Any]] = {
    "admission": ADMISSION,
    "gatekeeper": {},
    "audit": ADMISSION,
    "controller": {"policies": ["policies/controllers/hello_world"]},
}
KNOBS = {
    "logLevel": "DEBUG",
    "validatingWebhookFailurePolicy": "Ignore",
    "validatingWebhookTimeoutSeconds": 2,
    "validatingWebhookObjectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    "validatingWebhookMatchConditions": [
        {"name": "not-nodes", "expression": "!('system:nodes' in request.userInfo.groups)"}
    ],
    "validatingWebhookNamespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
    "mutatingWebhookFailurePolicy": "Fail",
    "mutatingWebhookTimeoutSeconds": 1,
    "exemptNamespaces": ["monitoring"],
    "exemptNamespacePrefixes": ["kube-"],
    "enableDeleteOperations": True,
    "webhookPolicies": {
        "admission.max_replicas": {"failurePolicy": "Fail", "operations": ["CREATE"], "timeoutSeconds": 9},
        "admission.default_labels": {"objectSelector": {"matchLabels": {"mutate": "yes"}}},
    },
    "auditInterval": 30,
    "constraintViolationsLimit": 5,
    "auditChunkSize": 1000000,  # Helm reads numbers as doubles: "1e+06" unless the chart makes it an integer
    "admission": {
        "bundles": {  # OPA's configuration (a Secret, --config-file), --bundle, persistence on a volume
            "config": {
                "services": [
                    {"name": "acme", "url": "https://bundles.example.com/v1", "credentials": {"bearer": {"token": "t"}}}
                ],
                "bundles": {"authz": {"persist": True, "polling": {"min_delay_seconds": 10, "max_delay_seconds": 20}}},
            },
            "persistenceDirectory": "/var/cache/opa",  # the config gets it as its persistence_directory
            "urls": ["https://bundles.example.com/extra.tar.gz", "/bundles/base.tar.gz"],
            "persistenceVolume": {"persistentVolumeClaim": {"claimName": "opa-bundles"}},
        }
    },
}


def ci_values(role: str) -> dict[str, Any]:
    [values] = yamldoc.load_all((CHART / "ci" / f"{role}-values.yaml").read_text(encoding="utf-8"))
    return values


def assert_lint_clean(values: dict[str, Any] | None) -> None:
    report = helm.lint(str(CHART), values, strict=True, namespace="regokite-system")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert (report["errors"], problems) == ([], [])


@pytest.mark.parametrize("role", [None, *ROLES, "admission-bundles"])
def test_helm_lint_is_clean_for_the_defaults_and_each_roles_values(role: str | None) -> None:
    assert_lint_clean(ci_values(role) if role else None)


def test_helm_lint_reports_a_broken_template(tmp_path: Path) -> None:
    """The lint above can fail: the same call on a chart with a template error reports it."""
    copy = Path(helm.Chart.load(str(CHART)).save_dir(tmp_path))
    (copy / "templates" / "broken.yaml").write_text('{{ include "regokite.nothing" . }}\n')
    report = helm.lint(str(copy), None, strict=True)
    assert report["errors"] or any(m["severity"] >= 2 for m in report["messages"])


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("knobs", [False, True], ids=["defaults", "knobs"])
def test_the_chart_renders_what_regokite_manifests_prints(role: str, knobs: bool) -> None:
    values = merged({"gatekeeper": {"enabled": False}}, KNOBS if knobs else {})
    options = dict(OPTIONS[role])
    if knobs and role != "gatekeeper":
        options["engine"] = "opa"
    objects, helm_values = generated(role, values, **options)
    chart_values = merged(values, helm_values, {"engine": options.get("engine", "embedded")})
    expected, got = comparable(without_crds(objects)), comparable(render(chart_values))
    assert sorted(got) == sorted(expected)
    for key, obj in expected.items():
        assert got[key] == obj, key


def test_cert_manager_and_a_generated_ca_both_reach_the_webhooks() -> None:
    values = merged(ci_values("admission"), {"certManager": {"enabled": True}})
    objects, _ = generated("admission", values, **ADMISSION, baked_policies=True, cert_manager=True)
    expected, got = comparable(without_crds(objects)), comparable(render(values))
    assert sorted(got) == sorted(expected) and all(got[k] == v for k, v in expected.items())
    generated_ca = render(ci_values("admission"))
    [secret] = [o for o in generated_ca if o["kind"] == "Secret"]
    hooks = [h for o in generated_ca if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    assert hooks and {h["clientConfig"]["caBundle"] for h in hooks} == {secret["data"]["ca.crt"]}


def test_the_default_values_gatekeeper_grants_are_what_the_generator_computes() -> None:
    [values] = yamldoc.load_all((CHART / "values.yaml").read_text(encoding="utf-8"))
    computed = chart.gatekeeper_values(generate.GatekeeperOptions())["gatekeeper"]["rbac"]
    assert values["gatekeeper"]["rbac"] == computed, "run `regokite manifests gatekeeper --helm-values`"


def test_generated_files_are_current() -> None:
    for rel, text in chart.files().items():
        assert (CHART / rel).read_text(encoding="utf-8") == text, f"{rel}: run `python -m regokite.manifests.chart`"
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(chart.crd_files())


def test_the_charts_app_version_is_regokites() -> None:
    [meta] = yamldoc.load_all((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert meta["appVersion"] == __version__


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"validatingWebhookFailurePolicy": "fail"}, "/validatingWebhookFailurePolicy"),
        ({"validatingWebhookTimeoutSeconds": 31}, "/validatingWebhookTimeoutSeconds"),
        ({"replicas": "2"}, "/replicas"),
        ({"admision": {"enabled": True}}, "'admision' not allowed"),
        ({"webhookPolicies": {"p": {"timeout": 3}}}, "'timeout' not allowed"),
        ({"validatingWebhookMatchConditions": [{"name": "x"}]}, "expression"),
        ({"engine": "wasm"}, "/engine"),
        ({"gatekeeper": {"tolerations": {}}}, "/gatekeeper/tolerations"),
        ({"admission": {"bundles": {"config": "services: {}"}}}, "/admission/bundles/config"),
        ({"admission": {"bundles": {"urls": "https://bundles.example.com/b.tar.gz"}}}, "/admission/bundles/urls"),
        ({"admission": {"bundles": {"persistenceDirectory": ".opa"}}}, "/admission/bundles/persistenceDirectory"),
    ],
)
def test_a_wrong_value_fails_before_anything_renders(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=message):
        render(values)


def test_the_layers_of_knobs_apply_in_the_same_order_in_both(tmp_path: Path) -> None:
    """A policy declaring its own knobs, global ones under it and a webhookPolicies entry over it."""
    from tests.manifests.test_webhook_knobs import PLAIN, POLICY

    (tmp_path / "knobbed.rego").write_text(POLICY + '\nfailure_policy := "Ignore"\n')
    (tmp_path / "plain.rego").write_text(PLAIN)
    values = {
        "gatekeeper": {"enabled": False},
        "validatingWebhookTimeoutSeconds": 7,
        "validatingWebhookFailurePolicy": "Fail",
        "validatingWebhookObjectSelector": {"matchLabels": {"app": "global", "tier": "x"}},
        "validatingWebhookMatchConditions": [{"name": "global", "expression": "true"}],
        "webhookPolicies": {
            "knobbed": {"timeoutSeconds": 9, "matchConditions": [{"name": "values", "expression": "1 == 1"}]}
        },
    }
    objects, helm_values = generated("admission", values, policies=[str(tmp_path)])
    expected, got = comparable(objects), comparable(render(merged(values, helm_values)))
    assert got == expected
    [config] = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    knobbed = next(h for h in config["webhooks"] if h["name"].startswith("knobbed."))
    assert (knobbed["timeoutSeconds"], knobbed["failurePolicy"]) == (9, "Ignore")
    assert knobbed["objectSelector"]["matchLabels"] == {"app": "global", "tier": "x"}  # a later layer wins a key
    assert [c["name"] for c in knobbed["matchConditions"]] == ["global", "own", "values"]


def test_the_docs_values_table_is_current() -> None:
    doc = (CHART.parents[1] / "docs" / "helm.md").read_text(encoding="utf-8")
    assert chart.values_table(CHART) in doc, "run `python -m regokite.manifests.chart`"


def test_the_alert_rules_ship_as_a_prometheus_rule_when_asked() -> None:
    [rules] = yamldoc.load_all((CHART.parents[1] / "deploy" / "monitoring" / "prometheus-rules.yaml").read_text())
    asked = [o for o in render({"metrics": {"prometheusRule": {"enabled": True}}}) if o["kind"] == "PrometheusRule"]
    assert [rule["spec"]["groups"] for rule in asked] == [rules["groups"]]
    assert not [o for o in render({}) if o["kind"] == "PrometheusRule"]


def test_the_webhook_servers_keep_serving_until_their_endpoint_is_gone() -> None:
    """A rolling update loses no review: each server waits --shutdown-delay after SIGTERM (its endpoint leaves
    the Service meanwhile), inside the grace period, and never runs alone into an eviction (a PDB)."""
    objects = render(merged(ci_values("admission"), {"gatekeeper": {"enabled": True}}))
    servers = [o for o in objects if o["kind"] == "Deployment"]
    assert len(servers) == 2
    for deployment in servers:
        pod = deployment["spec"]["template"]["spec"]
        [server] = [c for c in pod["containers"] if c["name"] == "regokite"]
        [delay] = [float(a.split("=")[1]) for a in server["args"] if a.startswith("--shutdown-delay=")]
        assert 0 < delay < pod["terminationGracePeriodSeconds"] - 5
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    budgets = {
        o["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"]
        for o in objects
        if o["kind"] == "PodDisruptionBudget"
    }
    assert budgets == {d["metadata"]["name"] for d in servers}


@pytest.mark.parametrize("namespaces", [["team-a", "team-b"], ["*"]])
def test_policy_configmaps_and_definitions_are_checked_at_apply_in_both(namespaces: list[str]) -> None:
    values = {"gatekeeper": {"enabled": False}, "validatingWebhookFailurePolicy": "Ignore"}  # no knob applies there
    options = {**ADMISSION, "policy_namespaces": namespaces, "check_definitions": True}
    objects, helm_values = generated("admission", values, **options)
    expected, got = comparable(objects), comparable(render(merged(values, helm_values)))
    assert ("ValidatingWebhookConfiguration", "regokite-policy-sources") in got
    assert got == expected


def test_the_command_prints_the_values_the_chart_takes(capsys: pytest.CaptureFixture) -> None:
    from regokite.cli import main

    argv = ["manifests", "admission", *(a for p in chart.ADMISSION_POLICIES for a in ("--policies", p))]
    assert main([*argv, "--baked-policies", "--helm-values"]) == 0
    [printed] = yamldoc.load_all(capsys.readouterr().out)
    assert printed["admission"] == ci_values("admission")["admission"]
    assert_lint_clean(printed)


def test_a_bundle_config_is_served_from_a_secret_with_its_persistence_volume() -> None:
    values = ci_values("admission-bundles")
    objects = render(values)
    [secret] = [o for o in objects if (o["kind"], o["metadata"]["name"]) == ("Secret", "regokite-admission-bundles")]
    config = yamldoc.load(base64.b64decode(secret["data"]["config.yaml"]).decode())
    assert config == {**values["admission"]["bundles"]["config"], "persistence_directory": "/var/lib/regokite/opa"}
    assert parse_config(config).bundles["admission"].persist  # what the server reads
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [server] = [c for c in pod["containers"] if c["name"] == "regokite"]
    mounts = {m["name"]: m for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert server["args"][:3] == ["admission", "--config-file", "/etc/regokite/bundles/config.yaml"]
    assert "--policies" not in server["args"]  # the bundles serve the policies; they only computed the webhooks
    assert mounts["bundles-config"]["mountPath"] == "/etc/regokite/bundles" and mounts["bundles-config"]["readOnly"]
    assert volumes["bundles-config"] == {"name": "bundles-config", "secret": {"secretName": secret["metadata"]["name"]}}
    assert mounts["bundles-persistence"]["mountPath"] == config["persistence_directory"]
    assert volumes["bundles-persistence"] == {"name": "bundles-persistence", "emptyDir": {}}
    assert [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]


def test_bundles_from_an_existing_secret_render_the_same_in_both() -> None:
    values = {"gatekeeper": {"enabled": False}, "admission": {"bundles": {"existingSecret": "opa-config"}}}
    objects, helm_values = generated("admission", values, **ADMISSION, policies_from_bundles=True)
    expected, got = comparable(objects), comparable(render(merged(values, helm_values)))
    assert got == expected
    assert not [key for key in got if key[0] in ("Secret", "ConfigMap") and key[1] != "regokite-admission-tls"]
    pod = got[("Deployment", "regokite-admission")]["spec"]["template"]["spec"]
    assert {"name": "bundles-config", "secret": {"secretName": "opa-config"}} in pod["volumes"]
    [server] = [c for c in pod["containers"] if c["name"] == "regokite"]
    assert {"name": "bundles-persistence", "mountPath": "/var/lib/regokite/opa"} in server["volumeMounts"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"discovery": {"name": "d"}, "services": {"s": {"url": "https://x"}}}, "discovery: regokite does not serve"),
        ({"services": {"s": {"url": "https://x"}}, "bundles": {"b": {"service": "t"}}}, "no service named 't'"),
        ({"services": {"s": {"url": "https://x"}}, "bundles": {"b": {"polling": {"min_delay_seconds": 5}}}}, "both"),
    ],
)
def test_regokite_manifests_refuses_a_bundle_config_the_server_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture, config: dict[str, Any], message: str
) -> None:
    from regokite.cli import main

    (tmp_path / "opa.yaml").write_text(yaml.safe_dump(config))
    argv = ["manifests", "admission", *(a for p in chart.ADMISSION_POLICIES for a in ("--policies", p))]
    assert main([*argv, "--bundle-config", str(tmp_path / "opa.yaml")]) == 2
    assert message in capsys.readouterr().err
    (tmp_path / "values.yaml").write_text(yaml.safe_dump({"admission": {"bundles": {"config": config}}}))
    assert main([*argv, "--values", str(tmp_path / "values.yaml"), "--helm-values"]) == 2
    assert "admission.bundles.config: " in capsys.readouterr().err


def test_a_bundle_config_and_an_existing_secret_are_refused_together_in_both() -> None:
    both = {"config": {"services": {"s": {"url": "https://x"}}}, "existingSecret": "opa-config"}
    with pytest.raises(RegokiteError, match="not both"):
        bundles.from_values({"admission": {"bundles": both}})
    with pytest.raises(Exception, match="not both"):
        render({"gatekeeper": {"enabled": False}, "admission": {"enabled": True, "bundles": both}})
