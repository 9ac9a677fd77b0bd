"""Unknown fields and defaults, as the API server's structural pruning and defaulting treat them."""

from __future__ import annotations

from typing import Any

from regokite.structural.objects import apply_defaults, prune
from regokite.structural.schema import parse

SCHEMA = parse(
    {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "known": {"type": "string"},
                    "open": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"typed": {"type": "object", "properties": {"a": {"type": "string"}}}},
                    },
                    "map": {
                        "type": "object",
                        "additionalProperties": {"type": "object", "properties": {"b": {"type": "string"}}},
                    },
                    "list": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string"}}}},
                },
            }
        },
    },
    "s",
)


def test_prune_removes_and_names_what_the_schema_does_not_describe() -> None:
    doc: dict[str, Any] = {
        "apiVersion": "x/v1",
        "kind": "K",
        "metadata": {"name": "n", "anything": 1},
        "top": 1,
        "spec": {
            "known": "k",
            "extra": {"deep": 1},
            "open": {"kept": 1, "typed": {"a": "x", "gone": 2}},
            "map": {"key": {"b": "y", "gone": 3}},
            "list": [{"c": "z"}, {"c": "w", "gone": 4}],
        },
    }
    assert prune(doc, SCHEMA, root=True) == [
        "spec.extra",
        "spec.list[1].gone",
        "spec.map.key.gone",
        "spec.open.typed.gone",
        "top",
    ]
    assert doc == {
        "apiVersion": "x/v1",
        "kind": "K",
        "metadata": {"name": "n", "anything": 1},  # the root's metadata is the API server's to check
        "spec": {
            "known": "k",
            "open": {"kept": 1, "typed": {"a": "x"}},
            "map": {"key": {"b": "y"}},
            "list": [{"c": "z"}, {"c": "w"}],
        },
    }


DEFAULTS = parse(
    {
        "type": "object",
        "properties": {
            "labels": {
                "type": "array",
                "default": [{"key": "owner"}],
                "items": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "regex": {"type": "string", "default": ".*"}},
                },
            },
            "message": {"type": "string", "default": "hi"},
            "nullable": {"type": "string", "nullable": True, "default": "d"},
            "nested": {"type": "object", "default": {}, "properties": {"inner": {"type": "integer", "default": 3}}},
            "absent": {"type": "object", "properties": {"inner": {"type": "integer", "default": 4}}},
        },
    },
    "s",
)


def test_defaults_fill_missing_and_null_fields_top_down() -> None:
    doc: dict[str, Any] = {"message": None, "nullable": None}
    apply_defaults(doc, DEFAULTS)
    assert doc == {
        "labels": [{"key": "owner", "regex": ".*"}],  # the default's own items get theirs
        "message": "hi",  # null where the field is not nullable
        "nullable": None,  # a nullable null stays
        "nested": {"inner": 3},
        # `absent` is not created: only a field whose parent exists is defaulted
    }


def test_defaults_never_replace_a_given_value_and_are_copies() -> None:
    doc: dict[str, Any] = {"labels": [{"key": "team"}], "message": ""}
    apply_defaults(doc, DEFAULTS)
    assert doc["labels"] == [{"key": "team", "regex": ".*"}] and doc["message"] == ""
    other: dict[str, Any] = {}
    apply_defaults(other, DEFAULTS)
    other["labels"][0]["key"] = "changed"
    again: dict[str, Any] = {}
    apply_defaults(again, DEFAULTS)
    assert again["labels"][0]["key"] == "owner"
