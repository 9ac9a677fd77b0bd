"""A policy's `match` declaration decides which requests it sees."""

from __future__ import annotations

import json

import pytest

from regokite.admission.match import MatchError, parse_match, selector_matches
from regokite.admission.review import parse_review
from tests.admission.reviews import deployment, review


def applies(match: dict, doc: dict) -> bool:
    return parse_match(match, "match").applies_to(parse_review(json.dumps(doc).encode()))


def test_no_match_means_everything() -> None:
    assert applies({}, review(deployment()))


def test_rules_filter_by_operation_group_version_and_resource() -> None:
    rule = {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}
    assert applies({"rules": [rule]}, review(deployment()))
    assert not applies({"rules": [{**rule, "operations": ["UPDATE"]}]}, review(deployment()))
    assert not applies({"rules": [{**rule, "apiGroups": [""]}]}, review(deployment()))
    assert not applies({"rules": [{**rule, "resources": ["pods"]}]}, review(deployment()))


def test_subresources_must_be_named_to_match() -> None:
    scale = review(deployment(), operation="UPDATE", old=deployment(), sub_resource="scale")
    assert not applies({"rules": [{"resources": ["deployments"]}]}, scale)
    assert applies({"rules": [{"resources": ["deployments/scale"]}]}, scale)
    assert applies({"rules": [{"resources": ["*/*"]}]}, scale)


def test_namespaces_and_excluded_namespaces() -> None:
    assert not applies({"excludedNamespaces": ["default"]}, review(deployment()))
    assert applies({"namespaces": ["default"]}, review(deployment()))
    assert not applies({"namespaces": ["prod"]}, review(deployment()))


def test_object_selector_reads_old_object_on_delete() -> None:
    sel = {"objectSelector": {"matchLabels": {"tier": "db"}}}
    assert applies(sel, review(None, operation="DELETE", old=deployment(labels={"tier": "db"})))
    assert not applies(sel, review(deployment(labels={"tier": "web"})))


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {"a": "1"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchLabels": {"a": "1"}}, None, False),
    ],
)
def test_label_selector_semantics(selector: dict, labels: dict | None, expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_errors_name_the_field() -> None:
    with pytest.raises(MatchError, match=r"match.rules\[0\].scope"):
        parse_match({"rules": [{"scope": "Galaxy"}]}, "match")
    with pytest.raises(MatchError, match=r"match.objectSelector.matchExpressions\[0\]"):
        parse_match({"objectSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "match")
