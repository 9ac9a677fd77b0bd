"""Webhook knobs: global per mode, a policy's own `webhook` declaration, the values' entry per policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.admission.policies import load_policy_set
from regokite.admission.webhook_knobs import KnobError, settings_from_values
from regokite.errors import PolicyLoadError
from regokite.manifests.webhooks import WebhookTarget, webhook_configurations

POLICY = """package knobbed

match := {"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
    "resources": ["pods"]}], "objectSelector": {"matchLabels": {"app": "web"}}}

webhook := {"timeoutSeconds": 2, "matchConditions": [{"name": "own", "expression": "true"}]}

deny contains "no" if input.request.object.metadata.name == "bad"
"""
PLAIN = """package plain

deny contains "no" if input.request.object.metadata.name == "bad"
"""


def hooks(tmp_path: Path, values: dict, *, policy: str = POLICY) -> dict[str, dict]:
    (tmp_path / "knobbed.rego").write_text(policy)
    (tmp_path / "plain.rego").write_text(PLAIN)
    policy_set = load_policy_set([str(tmp_path)])
    target = WebhookTarget("r", "regokite-system", service="s", settings=settings_from_values(values))
    [config] = webhook_configurations(list(policy_set.policies), target)
    return {h["name"].split(".")[0]: h for h in config["webhooks"]}


def test_without_knobs_the_webhook_is_what_the_policy_computes(tmp_path: Path) -> None:
    plain = hooks(tmp_path, {})["plain"]
    assert plain["failurePolicy"] == "Fail" and plain["timeoutSeconds"] == 5
    assert "objectSelector" not in plain and "matchConditions" not in plain
    assert plain["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["regokite-system"]}
    ]


def test_global_knobs_apply_under_the_policy_declaration_and_over_the_computed(tmp_path: Path) -> None:
    values = {
        "validatingWebhookFailurePolicy": "Ignore",
        "validatingWebhookTimeoutSeconds": 7,
        "validatingWebhookObjectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        "validatingWebhookMatchConditions": [{"name": "global", "expression": "true"}],
        "validatingWebhookNamespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
        "exemptNamespaces": ["monitoring"],
    }
    out = hooks(tmp_path, values)
    plain, knobbed = out["plain"], out["knobbed"]
    assert plain["failurePolicy"] == knobbed["failurePolicy"] == "Ignore"
    assert plain["timeoutSeconds"] == 7 and knobbed["timeoutSeconds"] == 2  # the policy's own wins
    assert knobbed["objectSelector"] == {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}],
    }
    assert [c["name"] for c in knobbed["matchConditions"]] == ["global", "own"]
    assert plain["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["monitoring", "regokite-system"]},
        {"key": "team", "operator": "Exists"},
    ]


def test_a_values_entry_for_one_policy_wins_over_its_declaration(tmp_path: Path) -> None:
    values = {
        "validatingWebhookTimeoutSeconds": 7,
        "webhookPolicies": {"knobbed": {"timeoutSeconds": 9, "failurePolicy": "Ignore", "operations": ["CREATE"]}},
    }
    out = hooks(tmp_path, values)
    assert out["knobbed"]["timeoutSeconds"] == 9 and out["knobbed"]["failurePolicy"] == "Ignore"
    assert [r["operations"] for r in out["knobbed"]["rules"]] == [["CREATE"]]
    assert out["plain"]["failurePolicy"] == "Fail" and out["plain"]["rules"][0]["operations"] == ["*"]


def test_a_declared_failure_policy_wins_over_the_global_one(tmp_path: Path) -> None:
    declared = POLICY + '\nfailure_policy := "Fail"\n'
    out = hooks(tmp_path, {"validatingWebhookFailurePolicy": "Ignore"}, policy=declared)
    assert out["knobbed"]["failurePolicy"] == "Fail" and out["plain"]["failurePolicy"] == "Ignore"


def test_a_bad_webhook_declaration_refuses_the_load_naming_the_policy(tmp_path: Path) -> None:
    with pytest.raises(PolicyLoadError, match=r"data\.knobbed\.webhook\.timeoutSeconds"):
        hooks(tmp_path, {}, policy=POLICY.replace('"timeoutSeconds": 2', '"timeoutSeconds": 99'))
    with pytest.raises(PolicyLoadError, match=r"unknown key\(s\) timeout"):
        hooks(tmp_path, {}, policy=POLICY.replace('"timeoutSeconds": 2', '"timeout": 2'))


def test_bad_values_are_refused_naming_the_key() -> None:
    with pytest.raises(KnobError, match="failurePolicy must be one of Fail, Ignore"):
        settings_from_values({"mutatingWebhookFailurePolicy": "fail"})
    with pytest.raises(KnobError, match=r"webhookPolicies\.p\.matchConditions\[0\]"):
        settings_from_values({"webhookPolicies": {"p": {"matchConditions": [{"name": "x"}]}}})


def test_the_manifests_command_reads_the_charts_values_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import yaml

    from regokite.cli import main

    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "plain.rego").write_text(PLAIN)
    values = tmp_path / "values.yaml"
    values.write_text("validatingWebhookTimeoutSeconds: 3\nexemptNamespaces: [monitoring]\n")
    argv = ["manifests", "admission", "--policies", str(tmp_path / "p"), "--values", str(values)]
    assert main([*argv, "--failure-policy", "Ignore"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    [hook] = next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")["webhooks"]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 3)
    assert "monitoring" in hook["namespaceSelector"]["matchExpressions"][0]["values"]


def test_a_values_file_that_is_no_mapping_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from regokite.cli import main

    values = tmp_path / "values.yaml"
    values.write_text("- validatingWebhookTimeoutSeconds: 3\n")
    assert main(["manifests", "gatekeeper", "--values", str(values)]) == 2
    assert "a values file is one YAML mapping" in capsys.readouterr().err
