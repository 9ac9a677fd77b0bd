"""Constraint parameters as Gatekeeper and the API server read them: the template's schema defaults
applied, invalid parameters and unknown fields refused, with their words, in every loader (check,
verify, the policy set the admission server and audit build, the cluster syncer's check)."""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.compile import compile_template
from regokite.gatekeeper.constraint_schema import ConstraintInvalid, ConstraintSchema
from regokite.gatekeeper.constraints import prepare
from regokite.gatekeeper.crds import constraint_crd, template_crd
from regokite.gatekeeper.lastgood import constraint_error
from regokite.gatekeeper.resources import parse_constraint, parse_template
from regokite.gatekeeper.verify import format_results, run_suite
from tests.admission.reviews import review
from tests.gatekeeper.upstream import upstream_dir

FIXTURES = Path(__file__).parent / "fixtures"
REQUIRED_LABELS = FIXTURES / "library/requiredlabels/template.yaml"
TYPE_ERROR = (
    'schema validation failed: spec.parameters.labels: Invalid value: "string": '
    'spec.parameters.labels in body must be of type array: "string"'
)


def constraint(kind: str, parameters: Any = None, name: str = "c") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"match": {"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}]}},
    }
    if parameters is not None:
        doc["spec"]["parameters"] = parameters
    return doc


def template(api_version: str = "templates.gatekeeper.sh/v1", validation: Any = "as written") -> dict:
    """gatekeeper-library's requiredlabels template, of `api_version`, with `validation` (None: none)."""
    doc = yaml.safe_load(REQUIRED_LABELS.read_text())
    doc["apiVersion"] = api_version
    if validation is None:
        doc["spec"]["crd"]["spec"].pop("validation", None)
    elif validation != "as written":
        doc["spec"]["crd"]["spec"]["validation"] = validation
    return doc


def with_schema(schema: dict, api_version: str = "templates.gatekeeper.sh/v1") -> dict:
    return template(api_version, {"openAPIV3Schema": schema})


def schema_of(doc: dict) -> ConstraintSchema:
    return ConstraintSchema.of(parse_template(doc, None, "t.yaml"))


def test_gators_defaults_fixture_decides_with_the_schemas_defaults(tmp_path: Path) -> None:
    """gator's bats case "observe open api v3 defaults being applied": the constraint names only
    `placeholder`; the template's `labels` and `message` defaults decide."""
    found = upstream_dir()
    fixture = (found or Path("/nonexistent")) / "gatekeeper/test/gator/test/fixtures/manifests/with-policies"
    if not fixture.is_dir():
        pytest.skip("no copy of Gatekeeper's test material (set REGOKITE_UPSTREAM)")
    docs = [d for d in yaml.safe_load_all((fixture / "with-violations-and-defaults.yaml").read_text()) if d]
    (tmp_path / "policies.yaml").write_text(yaml.safe_dump_all(docs[:2]))
    policy_set = load_policy_set([str(tmp_path)])
    try:
        decision = decide(policy_set, parse_review(json.dumps(review(docs[2])).encode()), mode="validate")
    finally:
        policy_set.close()
    assert decision.verdict.messages == ["[all-must-have-owner] aRequiredMessage"]


def test_invalid_parameters_are_refused_with_the_api_servers_words_and_the_constraint_fails_closed() -> None:
    """gator's "want invalid Constraint" case (labels: "abc" where the schema says an array)."""
    tpl = parse_template(yaml.safe_load(REQUIRED_LABELS.read_text()), None, "t.yaml")
    bad = parse_constraint(constraint("K8sRequiredLabels", {"labels": "abc"}, "required-labels"), "c.yaml")
    ready = prepare([tpl], [bad])
    assert ready.constraints[0].broken == TYPE_ERROR
    assert ready.problems == (f"c.yaml: K8sRequiredLabels required-labels: {TYPE_ERROR}",)


def test_check_refuses_what_a_constraint_with_invalid_parameters_matches(tmp_path: Path) -> None:
    (tmp_path / "template.yaml").write_text(REQUIRED_LABELS.read_text())
    (tmp_path / "constraint.yaml").write_text(yaml.safe_dump(constraint("K8sRequiredLabels", {"labels": "abc"})))
    policy_set = load_policy_set([str(tmp_path)])
    try:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
        decision = decide(policy_set, parse_review(json.dumps(review(ns)).encode()), mode="validate")
    finally:
        policy_set.close()
    assert not decision.verdict.allowed and TYPE_ERROR in " ".join(decision.verdict.messages)


@pytest.mark.parametrize(
    ("doc", "parameters", "expected"),
    [
        # v1: legacySchema defaults to false, so a field the schema does not describe is refused
        (template(), {"labels": [{"key": "a", "colour": "red"}]}, "unknown fields: [spec.parameters.labels[0].colour]"),
        # v1beta1 (and an explicit legacySchema: true): every object keeps unknown fields
        (template("templates.gatekeeper.sh/v1beta1"), {"labels": [{"key": "a", "colour": "red"}]}, None),
        # v1 with no schema: the constraint CRD has no parameters field at all
        (template(validation=None), {"labels": []}, "unknown fields: [spec.parameters]"),
        (template(validation=None), None, None),
        # v1beta1 with no schema: any parameters
        (template("templates.gatekeeper.sh/v1beta1", None), {"anything": [1, {"x": 2}]}, None),
        (template(validation={"legacySchema": True, "openAPIV3Schema": {"type": "object"}}), {"free": 1}, None),
    ],
)
def test_unknown_fields_are_refused_unless_the_template_keeps_them(
    doc: dict, parameters: Any, expected: str | None
) -> None:
    checked = schema_of(doc)
    given = constraint("K8sRequiredLabels", parameters)
    if expected is None:
        assert checked.check(given)["spec"].get("parameters") == parameters
    else:
        with pytest.raises(ConstraintInvalid) as refused:
            checked.check(given)
        assert str(refused.value) == f"invalid Constraint: {expected}"


def test_a_template_whose_schema_makes_no_crd_is_refused_as_gatekeeper_refuses_it() -> None:
    untyped = {"type": "object", "properties": {"labels": {"items": {"type": "string"}}}}
    with pytest.raises(PolicyLoadError) as refused:
        compile_template(parse_template(with_schema(untyped), None, "t.yaml"))
    assert str(refused.value) == (
        "t.yaml: ConstraintTemplate k8srequiredlabels: invalid ConstraintTemplate: "
        "spec.validation.openAPIV3Schema.properties[spec].properties[parameters].properties[labels].type: "
        "Required value: must not be empty for specified object fields"
    )
    schema_of(with_schema(untyped, "templates.gatekeeper.sh/v1beta1"))  # a legacy schema is opened up: fine
    bad_default = {"type": "object", "properties": {"n": {"type": "integer", "default": "three"}}}
    with pytest.raises(PolicyLoadError, match=r"properties\[n\]\.default: Invalid value: \"three\""):
        compile_template(parse_template(with_schema(bad_default), None, "t.yaml"))


def test_names_kinds_and_versions_as_gatekeeper_checks_them() -> None:
    checked = schema_of(template())
    for change, expected in [
        ({"metadata": {"name": "Upper"}}, 'invalid Constraint: invalid name: "a lowercase RFC 1123 subdomain'),
        ({"metadata": {}}, "invalid Constraint: missing metadata.name"),
        ({"kind": "Other"}, 'invalid Constraint: wrong kind "Other" for constraint "c"; want "K8sRequiredLabels"'),
        ({"apiVersion": "constraints.gatekeeper.sh/v1"}, 'invalid Constraint: unsupported version "v1"'),
        ({"metadata": {"name": "n" * 64}}, "schema validation failed: metadata.name: Too long: may not be more"),
        ({"spec": {"match": {"namespaces": "should_be_list"}}}, "schema validation failed: spec.match.namespaces"),
        ({"spec": {"enforcementAction": 1}}, "schema validation failed: spec.enforcementAction"),
        ({"spec": {"matches": {}}}, "invalid Constraint: unknown fields: [spec.matches]"),
    ]:
        doc = {**constraint("K8sRequiredLabels"), **copy.deepcopy(change)}
        with pytest.raises(ConstraintInvalid) as refused:
            checked.check(doc)
        assert str(refused.value).startswith(expected), (change, str(refused.value))


def test_verify_sees_defaults_and_fails_a_test_whose_constraint_is_invalid(tmp_path: Path) -> None:
    tpl = with_schema(
        {
            "type": "object",
            "properties": {
                "labels": {
                    "type": "array",
                    "default": [{"key": "owner"}],
                    "items": {"type": "object", "properties": {"key": {"type": "string"}}},
                },
                "placeholder": {"type": "string"},
            },
        }
    )
    (tmp_path / "template.yaml").write_text(yaml.safe_dump(tpl))
    (tmp_path / "defaults.yaml").write_text(yaml.safe_dump(constraint("K8sRequiredLabels", {"placeholder": "x"})))
    (tmp_path / "invalid.yaml").write_text(yaml.safe_dump(constraint("K8sRequiredLabels", {"labels": "abc"})))
    (tmp_path / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n")
    (tmp_path / "suite.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: test.gatekeeper.sh/v1alpha1
            kind: Suite
            tests:
            - name: defaults
              template: template.yaml
              constraint: defaults.yaml
              cases:
              - name: unlabelled
                object: ns.yaml
                assertions:
                - violations: 1
                  message: owner
            - name: invalid
              template: template.yaml
              constraint: invalid.yaml
              cases:
              - name: unlabelled
                object: ns.yaml
                assertions:
                - violations: 1
            """
        )
    )
    result = run_suite(tmp_path / "suite.yaml")
    defaults, invalid = result.children
    assert not defaults.failed, format_results([result], verbose=True)
    assert invalid.failed and TYPE_ERROR in (invalid.error or "")


def test_the_cluster_syncer_refuses_an_edit_whose_parameters_fail_the_served_schema() -> None:
    schemas = {"K8sRequiredLabels": schema_of(template())}
    assert constraint_error(constraint("K8sRequiredLabels", {"labels": [{"key": "a"}]}), schemas) is None
    assert constraint_error(constraint("K8sRequiredLabels", {"labels": "abc"}), schemas) == TYPE_ERROR


def test_the_crds_carry_the_same_schema_and_gatekeepers_legacy_schema_defaults() -> None:
    crd = constraint_crd(parse_template(template(), None, "t"))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    assert spec["enforcementAction"] == {"type": "string", "default": "deny"}
    assert spec["parameters"]["properties"]["labels"]["type"] == "array"
    assert "x-kubernetes-preserve-unknown-fields" not in spec["parameters"]
    assert schema["properties"]["metadata"]["properties"]["name"]["maxLength"] == 63
    legacy = constraint_crd(parse_template(template("templates.gatekeeper.sh/v1beta1"), None, "t"))
    parameters = legacy["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "parameters"
    ]
    assert parameters["x-kubernetes-preserve-unknown-fields"] is True
    assert (
        "parameters"
        not in constraint_crd(parse_template(template(validation=None), None, "t"))["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]["properties"]["spec"]["properties"]
    )
    defaults = {}
    for version in template_crd()["spec"]["versions"]:
        validation = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["crd"]["properties"][
            "spec"
        ]["properties"]["validation"]
        defaults[version["name"]] = (validation["default"], validation["properties"]["legacySchema"]["default"])
    assert defaults == {
        "v1": ({"legacySchema": False}, False),
        "v1beta1": ({"legacySchema": True}, True),
        "v1alpha1": ({"legacySchema": True}, True),
    }
