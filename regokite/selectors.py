"""Kubernetes label selectors (metav1.LabelSelector): parse, match, and the query form.

Shared by the admission server (a policy's objectSelector) and the
controllers (parent selectors, claiming, decorators, related resources); and
Gatekeeper's namespace glob, shared by its match and by replication's
excluded namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from regokite.names import label_key_errors, label_value_errors
from regokite.structural.field_errors import FORBIDDEN, INVALID, REQUIRED, FieldError


class SelectorError(ValueError):
    """The parent has no usable label selector."""


@dataclass(frozen=True)
class Selector:
    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.expressions:
            present = key in labels
            if op == "In" and (not present or labels[key] not in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def query(self) -> str:
        """The `labelSelector` query parameter form."""
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for key, op, values in self.expressions:
            if op == "In":
                parts.append(f"{key} in ({','.join(values)})")
            elif op == "NotIn":
                parts.append(f"{key} notin ({','.join(values)})")
            elif op == "Exists":
                parts.append(key)
            else:
                parts.append(f"!{key}")
        return ",".join(parts)


def parse_selector(raw: Any) -> Selector:
    """A metav1.LabelSelector dict -> Selector; raises SelectorError when malformed."""
    if not isinstance(raw, dict):
        raise SelectorError(f"spec.selector must be a label selector object, got {raw!r}")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise SelectorError(f"spec.selector.matchLabels must map strings to strings, got {labels!r}")
    exprs = []
    for e in raw.get("matchExpressions") or []:
        if not isinstance(e, dict) or e.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError(f"spec.selector.matchExpressions: invalid requirement {e!r}")
        exprs.append((str(e.get("key")), e["operator"], tuple(str(v) for v in e.get("values") or ())))
    return Selector(tuple(sorted(labels.items())), tuple(exprs))


def glob_matches(pattern: str, value: str) -> bool:
    """Gatekeeper's namespace glob: exact, `prefix*` or `*suffix`."""
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return value.endswith(pattern[1:])
    return value == pattern


def selector_errors(raw: Mapping[str, Any], path: str) -> list[FieldError]:
    """What the API server's ValidateLabelSelector finds wrong in a selector of the right shape: keys and
    values that are no label keys and values, operators, and values an operator needs or forbids."""
    errors = []
    labels = raw.get("matchLabels") or {}
    for key in sorted(labels) if isinstance(labels, dict) else ():
        errors += [FieldError(f"{path}.matchLabels", INVALID, key, m) for m in label_key_errors(str(key))]
        value = labels[key]
        errors += [FieldError(f"{path}.matchLabels", INVALID, value, m) for m in label_value_errors(str(value))]
    expressions = raw.get("matchExpressions") or []
    for i, expression in enumerate(expressions if isinstance(expressions, list) else ()):
        if not isinstance(expression, dict):
            continue
        where, operator = f"{path}.matchExpressions[{i}]", expression.get("operator")
        values = expression.get("values") or []
        if operator in ("In", "NotIn") and not values:
            detail = "must be specified when `operator` is 'In' or 'NotIn'"
            errors.append(FieldError(f"{where}.values", REQUIRED, detail=detail))
        elif operator in ("Exists", "DoesNotExist") and values:
            detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            errors.append(FieldError(f"{where}.values", FORBIDDEN, detail=detail))
        elif operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errors.append(FieldError(f"{where}.operator", INVALID, operator, "not a valid selector operator"))
        key = str(expression.get("key", ""))
        errors += [FieldError(f"{where}.key", INVALID, key, m) for m in label_key_errors(key)]
        for j, value in enumerate(values if isinstance(values, list) else ()):
            errors += [FieldError(f"{where}.values[{j}]", INVALID, value, m) for m in label_value_errors(str(value))]
    return errors
