"""Names, label keys, values and selectors refused as the API server refuses them, in its words."""

from __future__ import annotations

from regokite.names import dns1123_subdomain_errors, label_key_errors, label_value_errors
from regokite.selectors import selector_errors


def test_names_and_labels_as_apimachinery_checks_them() -> None:
    assert dns1123_subdomain_errors("ok.example-1") == []
    assert dns1123_subdomain_errors("Upper") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert label_key_errors("example.com/owner") == [] and label_key_errors("owner") == []
    assert label_key_errors("/owner") == ["prefix part must be non-empty"]
    assert label_key_errors("a" * 64) == ["name part must be no more than 63 bytes"]
    assert label_key_errors("a/b/c")[0].startswith("a valid label key must consist of alphanumeric characters")
    assert label_value_errors("") == [] and label_value_errors("-x")[0].startswith("a valid label must be an empty")


def test_a_selector_s_operators_values_and_keys() -> None:
    selector = {
        "matchLabels": {"ok": "fine", "bad key!": "v"},
        "matchExpressions": [
            {"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Near", "values": ["x"]},
        ],
    }
    assert [str(e).split(": ")[0] + ": " + str(e).split(": ")[1] for e in selector_errors(selector, "s")] == [
        "s.matchLabels: Invalid value",
        "s.matchExpressions[0].values: Required value",
        "s.matchExpressions[1].values: Forbidden",
        "s.matchExpressions[2].operator: Invalid value",
    ]
    assert str(selector_errors({"matchExpressions": [{"key": "c", "operator": "Near"}]}, "s")[0]) == (
        's.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator'
    )
