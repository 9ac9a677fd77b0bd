"""Gatekeeper's violation log lines and Events, field for field: pure, no I/O.

Log pipelines and alerts built on Gatekeeper read these names: admission's
`--log-denies` line (`event_type: violation`, `process: admission`, "denied
admission: <msg>"), audit's per-violation line (`event_type:
violation_audited`, `audit_id`), the `constraint_*` and `resource_*` fields,
the Events of `--emit-admission-events` (reasons `FailedAdmission`,
`WarningAdmission`, `DryrunViolation`) and `--emit-audit-events`
(`AuditViolation`), whose annotations carry the same fields, and the lines of
`--enable-violation-export` (its ExportMsg, as Go's encoding/json writes it).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from regokite.errors import EvaluationError

CONSTRAINT_GROUP = "constraints.gatekeeper.sh"
CONSTRAINT_VERSION = "v1beta1"
MESSAGE_SIZE = 256  # Gatekeeper's audit cuts longer messages (status and log lines)
# log fields that Gatekeeper's Events do not carry as annotations
_NOT_ANNOTATED = ("details", "semantic", "constraint_annotations", "resource_labels")
WEBHOOK = 'Admission webhook "validation.gatekeeper.sh"'
_ADMISSION_EVENTS = {
    "dryrun": ("DryrunViolation", "Dryrun violation"),
    "warn": ("WarningAdmission", f"{WEBHOOK} raised a warning for this request"),
    "deny": ("FailedAdmission", f"{WEBHOOK} denied request"),
}


def evaluation_violation(error: Exception, strict_builtin_errors: bool) -> str | None:
    """What Gatekeeper's Rego driver answers when a constraint kind's evaluation fails: a violation whose msg
    is the error (`<file:line:col>: <message>`), for every constraint of the kind the review matched
    (frameworks' drivers/rego Driver.Query; builtin errors are undefined there, never errors). None for
    a failure of regokite's own (a refusal to answer otherwise than OPA, no data, an unreachable engine,
    a deadline), and under `strict_builtin_errors` (Gatekeeper has no such mode; its errors fail closed)."""
    if strict_builtin_errors or type(error) is not EvaluationError:
        return None
    return f"{error.location}: {error.message}" if error.location else error.message


@dataclass(frozen=True)
class AuditedConstraint:
    """What audit's log lines say of a constraint besides its name."""

    kind: str
    action: str
    annotations: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Violation:
    """One constraint's violation on one resource."""

    constraint_kind: str
    constraint_name: str
    action: str  # deny | warn | dryrun
    message: str
    resource_group: str
    resource_version: str
    resource_kind: str
    resource_namespace: str
    resource_name: str
    resource_uid: str = ""
    resource_version_id: str = ""  # resourceVersion
    username: str = ""
    details: Any = None  # the violation's `details`, as the template gave them
    constraint_annotations: tuple[tuple[str, str], ...] | None = None
    resource_labels: tuple[tuple[str, str], ...] | None = None
    scoped_actions: tuple[str, ...] = ()  # a scoped constraint's actions at this enforcement point

    def fields(self, process: str) -> dict[str, Any]:
        """The structured log fields Gatekeeper writes for it: audit's `violation_audited` line (with
        the constraint's annotations and the resource's labels) or admission's `--log-denies` line
        (with the requesting user); `semantic` marks both as its stable, machine-read lines."""
        constraint = {
            "constraint_group": CONSTRAINT_GROUP,
            "constraint_api_version": CONSTRAINT_VERSION,
            "constraint_kind": self.constraint_kind,
            "constraint_name": self.constraint_name,
        }
        resource = {
            "resource_group": self.resource_group,
            "resource_api_version": self.resource_version,
            "resource_kind": self.resource_kind,
            "resource_namespace": self.resource_namespace,
            "resource_name": self.resource_name,
        }
        if process == "admission":
            return {
                "process": process,
                "details": self.details,
                "event_type": "violation",
                "semantic": True,
                **constraint,
                "constraint_action": self.action,
                "constraint_enforcement_actions": list(self.scoped_actions),
                **resource,
                "request_username": self.username,
            }
        return {
            "process": process,
            "details": self.details,
            "event_type": "violation_audited",
            "semantic": True,
            **constraint,
            "constraint_namespace": "",
            "constraint_action": self.action,
            "constraint_enforcement_actions": list(self.scoped_actions),
            "constraint_annotations": _as_map(self.constraint_annotations),
            **resource,
            "resource_labels": _as_map(self.resource_labels),
        }


def _as_map(pairs: tuple[tuple[str, str], ...] | None) -> dict[str, str] | None:
    """A Go map as it logs: null when there is none."""
    return None if pairs is None else dict(pairs)


def admission_violations(request: dict[str, Any], constraints: dict[str, str], outcomes: Any) -> list[Violation]:
    """The violations of one review: `constraints` maps a constraint's name to its kind; `outcomes` are
    the decision's (policy, decision, messages, the action judged under and the actions taken)."""
    kind = request.get("kind") or {}
    obj = request.get("object") or request.get("oldObject") or {}
    meta = obj.get("metadata") if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) else {}
    found = []
    for outcome in outcomes:
        if outcome.policy not in constraints or outcome.decision not in ("denied", "warned", "dryrun"):
            continue
        details = outcome.details or [None] * len(outcome.messages)
        for message, detail in zip(outcome.messages, details, strict=True):
            found.append(
                Violation(
                    constraints[outcome.policy],
                    outcome.policy,
                    outcome.action,
                    message,
                    kind.get("group", ""),
                    kind.get("version", ""),
                    kind.get("kind", ""),
                    request.get("namespace") or "",
                    request.get("name") or meta.get("name") or "",
                    meta.get("uid") or "",
                    meta.get("resourceVersion") or "",
                    (request.get("userInfo") or {}).get("username", ""),
                    detail,
                    scoped_actions=scoped_actions(outcome.action, outcome.actions),
                )
            )
    return found


def scoped_actions(action: str, actions: Any) -> tuple[str, ...]:
    """What Gatekeeper logs as `constraint_enforcement_actions`: a scoped constraint's actions, else none."""
    return tuple(actions) if action == "scoped" else ()


def audit_violations(
    constraints: dict[str, AuditedConstraint], findings: Iterable[tuple[Any, Iterable[Any]]]
) -> dict[str, list[Violation]]:
    """Each constraint's violations from the audit's findings ((subject, results) pairs, as
    gatekeeper.status reads them): every fail or warn result, with its enforcement action, its
    message cut to Gatekeeper's 256 characters."""
    found: dict[str, list[Violation]] = {name: [] for name in constraints}
    for subject, results in findings:
        group, _, version = subject.api_version.rpartition("/")
        where = (group, version, subject.kind, subject.namespace, subject.name, subject.uid)
        for r in results:
            if r.policy in found and r.result in ("fail", "warn"):
                c = constraints[r.policy]
                found[r.policy].append(
                    Violation(
                        c.kind,
                        r.policy,
                        r.enforcement,
                        truncate(r.message),
                        *where,
                        details=r.details,
                        constraint_annotations=c.annotations,
                        resource_labels=subject.labels,
                        scoped_actions=scoped_actions(r.enforcement, r.actions),
                    )
                )
    return found


def truncate(message: str, size: int = MESSAGE_SIZE) -> str:
    """A message as Gatekeeper's audit keeps it: at most `size` bytes of UTF-8 (Go's len), a cut one
    ending in `...` (a character the cut splits is left out: Go would keep its first bytes)."""
    encoded = message.encode()
    if len(encoded) <= size:
        return message
    return encoded[: size - 3].decode(errors="ignore") + "..."


def constraint_audited(kind: str, name: str, action: str, total: int, audit_id: str) -> dict[str, Any]:
    """The fields of Gatekeeper's per-constraint audit line."""
    return {
        "process": "audit",
        "event_type": "constraint_audited",
        "semantic": True,
        "audit_id": audit_id,
        "constraint_group": CONSTRAINT_GROUP,
        "constraint_api_version": CONSTRAINT_VERSION,
        "constraint_kind": kind,
        "constraint_name": name,
        "constraint_namespace": "",
        "constraint_action": action,
        "constraint_status": "enforced",
        "constraint_violations": str(total),
    }


def events(v: Violation, process: str, home: str, involved_namespace: bool, audit_id: str = "") -> list[dict[str, Any]]:
    """The Events Gatekeeper records for a violation: one, or in admission one per action a scoped
    constraint takes (its reason and message follow the action)."""
    if process == "audit" or not v.scoped_actions:
        return [event(v, process, home, involved_namespace, audit_id)]
    return [event(v, process, home, involved_namespace, action=a) for a in v.scoped_actions]


def event(
    v: Violation, process: str, home: str, involved_namespace: bool, audit_id: str = "", action: str = ""
) -> dict[str, Any]:
    """The Event Gatekeeper records for a violation: in its own namespace (`home`) on a reference
    named after the resource, or (`involved_namespace`) on the resource in its namespace."""
    annotations = {
        k: (",".join(value) if isinstance(value, list) else value)
        for k, value in v.fields(process).items()
        if k not in _NOT_ANNOTATED
    }
    if process == "audit":
        reason, text = "AuditViolation", ""
        annotations["auditTimestamp"] = audit_id
    else:
        reason, text = _ADMISSION_EVENTS.get(action or v.action, _ADMISSION_EVENTS["deny"])
    prefix = f"{text}, " if text else ""
    if involved_namespace:
        message = f"{prefix}Constraint: {v.constraint_name}, Message: {v.message}"
    else:
        message = (
            f"{prefix}Resource Namespace: {v.resource_namespace}, Constraint: {v.constraint_name}, Message: {v.message}"
        )
    namespace = v.resource_namespace if involved_namespace and v.resource_namespace else home
    involved: dict[str, Any] = {"kind": v.resource_kind, "name": v.resource_name, "namespace": namespace}
    if involved_namespace and v.resource_uid and v.resource_version_id:
        involved.update(uid=v.resource_uid, resourceVersion=v.resource_version_id)
    elif not involved_namespace:  # Gatekeeper's synthetic UID, one per resource and constraint
        involved["uid"] = "/".join(
            (v.resource_kind, v.resource_namespace, v.resource_name, v.constraint_kind, "", v.constraint_name)
        )
    stamp = rfc3339(dt.datetime.now(dt.UTC))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{v.resource_name or 'resource'}.",
            "namespace": namespace,
            "annotations": annotations,
        },
        "involvedObject": involved,
        "type": "Warning",
        "reason": reason,
        "message": message[:1024],
        "source": {"component": "gatekeeper-webhook" if process == "admission" else "gatekeeper-audit"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


AUDIT_STARTED, AUDIT_COMPLETED = "audit is started", "audit is completed"  # the export's first and last lines


def export_line(v: Violation, audit_id: str) -> str:
    """A violation as Gatekeeper's audit exports it: its ExportMsg's fields in Go's order, empty ones
    left out (`omitempty`), one line of JSON."""
    return go_json_object(
        {
            "id": audit_id,
            "details": v.details,
            "eventType": "violation_audited",
            "group": CONSTRAINT_GROUP,
            "version": CONSTRAINT_VERSION,
            "kind": v.constraint_kind,
            "name": v.constraint_name,
            "namespace": "",
            "message": v.message,
            "enforcementAction": v.action,
            "enforcementActions": list(v.scoped_actions),
            "constraintAnnotations": _as_map(v.constraint_annotations),
            "resourceGroup": v.resource_group,
            "resourceAPIVersion": v.resource_version,
            "resourceKind": v.resource_kind,
            "resourceNamespace": v.resource_namespace,
            "resourceName": v.resource_name,
            "resourceLabels": _as_map(v.resource_labels),
        }
    )


def export_marker(message: str, audit_id: str) -> str:
    """The line that opens (AUDIT_STARTED) or closes (AUDIT_COMPLETED) one audit's export."""
    return go_json_object({"id": audit_id, "message": message})


def go_json_object(fields: dict[str, Any]) -> str:
    """A Go struct as encoding/json marshals it: fields in order, `omitempty` ones (None, "", empty
    list or map; `details` only when null) left out, maps' keys sorted, <, > and & escaped."""
    kept = {
        k: value for k, value in fields.items() if value is not None and (k == "details" or value not in ("", [], {}))
    }
    return "{" + ",".join(f"{json.dumps(k)}:{_go_json(value)}" for k, value in kept.items()) + "}"


def _go_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def audit_id_of(started: float) -> str:
    """The audit's ID as Gatekeeper stamps every line of one pass: its start, RFC 3339 in UTC."""
    return rfc3339(dt.datetime.fromtimestamp(started, dt.UTC))


def rfc3339(moment: dt.datetime) -> str:
    """A UTC time as Gatekeeper writes its timestamps (RFC 3339, whole seconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """A duration as Go prints one (`audit_finished`'s `duration`): `1m2.5s`, `1.234s`, `12.5ms`."""
    if seconds < 1:
        for unit, scale in (("ms", 1e3), ("µs", 1e6)):
            if seconds * scale >= 1 or unit == "µs":
                return f"{seconds * scale:.3f}".rstrip("0").rstrip(".") + unit
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    text = f"{rest:.6f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text
