"""Translate what an admission policy returned into typed pieces of a verdict.

All validation of policy output happens here: a message that is not a
string, a patch that is not RFC 6902, an `allow` that is not a boolean. Each
error names the policy, the rule and the offending value.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from regokite.errors import show

PATCH_OPS = {"add", "remove", "replace", "move", "copy", "test"}


class PolicyOutputError(ValueError):
    def __init__(self, policy: str, rule: str, problem: str, value: Any) -> None:
        self.policy, self.rule = policy, rule
        super().__init__(f"data.{policy}.{rule}: {problem}, got {show(value)}")


@dataclass
class PolicyResult:
    """One policy's contribution to a verdict."""

    denials: list[str] = field(default_factory=list)
    details: list[Any] = field(default_factory=list)  # a constraint's violation `details`, one per denial
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] | None = None
    mutated: dict[str, Any] | None = None
    audit_annotations: dict[str, str] = field(default_factory=dict)


def messages(value: Any, policy: str, rule: str) -> list[str]:
    """`deny`/`warn`: a set or array of strings, or of objects carrying a string `msg`."""
    if not isinstance(value, list):
        raise PolicyOutputError(policy, rule, "must be a set or array of messages", value)
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("msg"), str):
            out.append(item["msg"])
        else:
            raise PolicyOutputError(
                policy, rule, 'each message must be a string or an object with a string "msg"', item
            )
    return out


def violations(value: Any, constraint: str) -> list[tuple[str, Any]]:
    """A template's `violation`: a set of objects with a string `msg`, as Gatekeeper requires; each
    message with its `details` (None when it has none), which Gatekeeper's violation logs carry."""
    if not isinstance(value, list):
        raise PolicyOutputError(constraint, "violation", "must be a set of violations", value)
    out = []
    for item in value:
        if not (isinstance(item, dict) and isinstance(item.get("msg"), str)):
            raise PolicyOutputError(
                constraint, "violation", 'each violation must be an object with a string "msg"', item
            )
        out.append((item["msg"], item.get("details")))
    return out


def boolean(value: Any, policy: str, rule: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyOutputError(policy, rule, "must be a boolean", value)
    return value


def patch_ops(value: Any, policy: str, rule: str) -> list[dict[str, Any]]:
    """`patch`: RFC 6902 operations, checked field by field."""
    if not isinstance(value, list):
        raise PolicyOutputError(policy, rule, "must be a set or array of RFC 6902 operations", value)
    for op in value:
        if not isinstance(op, dict) or op.get("op") not in PATCH_OPS:
            raise PolicyOutputError(policy, rule, f"each operation needs op in {sorted(PATCH_OPS)}", op)
        if not _is_pointer(op.get("path")):
            raise PolicyOutputError(policy, rule, "path must be a JSON pointer", op)
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise PolicyOutputError(policy, rule, f"{op['op']} needs a value", op)
        if op["op"] in ("move", "copy") and not _is_pointer(op.get("from")):
            raise PolicyOutputError(policy, rule, f"{op['op']} needs from as a JSON pointer", op)
        extra = set(op) - {"op", "path", "value", "from"}
        if extra:
            raise PolicyOutputError(policy, rule, f"unknown field(s) {sorted(extra)}", op)
    return value


def _is_pointer(value: Any) -> bool:
    return isinstance(value, str) and (value == "" or value.startswith("/"))


def mutated(value: Any, policy: str, rule: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PolicyOutputError(policy, rule, "must be the whole desired object", value)
    return value


def annotations(value: Any, policy: str, rule: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise PolicyOutputError(policy, rule, "must be an object of string values", value)
    return value


def review_response(value: Any, policy: str, rule: str, uid: str) -> PolicyResult:
    """`main` (a whole AdmissionReview) or `response`, as OPA's Kubernetes tutorial writes them."""
    if rule == "main":
        if not isinstance(value, dict) or not isinstance(value.get("response"), dict):
            raise PolicyOutputError(policy, rule, "must be an AdmissionReview with a response", value)
        value = value["response"]
    if not isinstance(value, dict):
        raise PolicyOutputError(policy, rule, "must be an AdmissionReview response object", value)
    if "uid" in value and value["uid"] != uid:
        raise PolicyOutputError(policy, rule, f"uid must echo the request's uid {uid!r}", value["uid"])
    allowed = boolean(value.get("allowed"), policy, f"{rule}.allowed")
    result = PolicyResult()
    if not allowed:
        status = value.get("status") or {}
        message = status.get("message") if isinstance(status, dict) else None
        if message is not None and not isinstance(message, str):
            raise PolicyOutputError(policy, f"{rule}.status.message", "must be a string", message)
        result.denials.append(message or "request denied")
    if "warnings" in value:
        result.warnings = messages(value["warnings"], policy, f"{rule}.warnings")
    if "auditAnnotations" in value:
        result.audit_annotations = annotations(value["auditAnnotations"], policy, f"{rule}.auditAnnotations")
    if "patch" in value:
        if value.get("patchType", "JSONPatch") != "JSONPatch":
            raise PolicyOutputError(policy, f"{rule}.patchType", "must be JSONPatch", value.get("patchType"))
        try:
            ops = json.loads(base64.b64decode(value["patch"], validate=True))
        except (binascii.Error, ValueError, TypeError):
            raise PolicyOutputError(policy, f"{rule}.patch", "must be base64 of a JSON patch", value["patch"]) from None
        result.patch = patch_ops(ops, policy, f"{rule}.patch")
    return result
