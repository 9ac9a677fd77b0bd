"""AdmissionReview parsing and the response envelope.

Everything the API server (or anything else) sends is checked here before a
policy sees it, so a malformed review is answered with a 4xx naming the
field, never with a policy error or a 500.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from regokite import input_guard

VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class BadReview(ValueError):
    """The body is not an AdmissionReview regokite can answer."""


@dataclass
class Review:
    """A validated AdmissionReview: `raw` is exactly what policies get as input."""

    raw: dict[str, Any]
    # Gatekeeper's process judging it: `webhook`, `audit` (existing objects) or `gator` (`regokite check`);
    # its Config exclusions and its enforcement point (scoped actions, a template's operations)
    process: str = "webhook"

    @property
    def api_version(self) -> str:
        return self.raw["apiVersion"]

    @property
    def request(self) -> dict[str, Any]:
        return self.raw["request"]

    @property
    def uid(self) -> str:
        return self.request["uid"]

    @property
    def operation(self) -> str:
        return self.request["operation"]

    @property
    def object(self) -> Any:
        return self.request.get("object")

    def summary(self) -> dict[str, Any]:
        """Fields for the access log line: strings where the review has them, "" elsewhere.

        Beyond what parse_review checks, a review may hold anything (a numeric
        group, a userInfo that is a list): the decision is made by then, so
        the summary takes what it can and never fails.
        """
        req = self.request
        kind = _object(req.get("kind"))
        meta = _object(_object(req.get("object") or req.get("oldObject")).get("metadata"))
        group, version = _text(kind.get("group")), _text(kind.get("version"))
        return {
            "uid": req["uid"],
            "operation": req["operation"],
            "kind": "/".join(p for p in (group, version) if p) + f" {_text(kind.get('kind'))}",
            "namespace": _text(req.get("namespace")),
            "object": _text(req.get("name")) or _text(meta.get("name")) or _text(meta.get("generateName")),
            "user": _text(_object(req.get("userInfo")).get("username")),
            "dry_run": req.get("dryRun") is True,
        }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_review(body: bytes) -> Review:
    """Decode and check an AdmissionReview; raises BadReview naming the problem."""
    try:
        doc = input_guard.parse_json(body)
    except input_guard.InputRejected as exc:
        raise BadReview(str(exc)) from None
    if not isinstance(doc, dict):
        raise BadReview(f"body must be a JSON object, got {type(doc).__name__}")
    if doc.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be AdmissionReview, got {doc.get('kind')!r}")
    if doc.get("apiVersion") not in VERSIONS:
        raise BadReview(f"apiVersion must be one of {', '.join(VERSIONS)}, got {doc.get('apiVersion')!r}")
    req = doc.get("request")
    if not isinstance(req, dict):
        raise BadReview("request is missing or not an object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or not a non-empty string")
    if req.get("operation") not in OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(OPERATIONS)}, got {req.get('operation')!r}")
    for key in ("kind", "resource"):
        value = req.get(key)
        if not isinstance(value, dict) or not isinstance(value.get("version"), str):
            raise BadReview(f"request.{key} must be an object with group, version and {key}")
    for key in ("object", "oldObject"):
        if req.get(key) is not None and not isinstance(req[key], dict):
            raise BadReview(f"request.{key} must be an object or null")
    if req["operation"] in ("CREATE", "UPDATE") and req.get("object") is None:
        raise BadReview(f"request.object is required for {req['operation']}")
    return Review(doc)


def creation_review(obj: dict[str, Any], resource: tuple[str, str, str], uid: str, process: str = "webhook") -> Review:
    """The CREATE AdmissionReview the API server would send for `obj` as `resource`
    ((group, version, plural)): how `check` and `audit` put existing objects to the policies."""
    group, version, plural = resource
    meta = obj.get("metadata") or {}
    kind = {"group": group, "version": version, "kind": obj.get("kind", "")}
    return Review(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": kind,
                "resource": {"group": group, "version": version, "resource": plural},
                "requestKind": kind,
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace") or "",
                "operation": "CREATE",
                "userInfo": {"username": "regokite"},
                "object": obj,
                "oldObject": None,
                "dryRun": True,
                "options": None,
            },
        },
        process,
    )


@dataclass
class Verdict:
    """What regokite answers, before it is put in the AdmissionReview envelope."""

    allowed: bool = True
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    code: int = 403


def response(review: Review, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview answer, in the apiVersion that was asked, uid echoed."""
    body: dict[str, Any] = {"uid": review.uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        body["status"] = {
            "code": verdict.code,
            "reason": {403: "Forbidden", 422: "Invalid"}.get(verdict.code, "InternalError"),
            "message": "\n".join(verdict.messages) or "denied by policy",
        }
    if verdict.warnings:
        body["warnings"] = verdict.warnings
    if verdict.patch and verdict.allowed:
        body["patchType"] = "JSONPatch"
        body["patch"] = base64.b64encode(json.dumps(verdict.patch).encode()).decode()
    if verdict.audit_annotations:
        body["auditAnnotations"] = verdict.audit_annotations
    return {"apiVersion": review.api_version, "kind": "AdmissionReview", "response": body}
