"""One decision log event as OPA writes it, and what `system.log.mask` / `system.log.drop` do to it.

OPA evaluates the drop decision with the event as input (a true answer drops
it), then the mask decision: a set of JSON pointers into the event (`/input/...`,
`/result/...`) to erase, or `{"op": "upsert" | "remove", "path": ..., "value": ...}`
objects; erased paths are listed under `erased`, upserted ones under `masked`.
A pointer to nothing is skipped, as in OPA.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any


def event(
    path: str,
    input: Any,
    result: Any,
    *,
    labels: Mapping[str, str] | None = None,
    revisions: Mapping[str, str] | None = None,
    elapsed_ns: int = 0,
) -> dict[str, Any]:
    """An event: decision_id, path, input, result, bundles' revisions, timestamp, metrics, labels."""
    entry: dict[str, Any] = {
        "labels": dict(labels or {}),
        "decision_id": str(uuid.uuid4()),
        "path": path,
        "input": input,
        "result": result,
        "timestamp": timestamp(time.time_ns()),
        "metrics": {"timer_server_handler_ns": elapsed_ns},
    }
    if revisions:
        entry["bundles"] = {name: {"revision": revision} for name, revision in revisions.items()}
    return entry


def timestamp(ns: int) -> str:
    """RFC 3339 with nanoseconds, UTC, as Go's time.RFC3339Nano writes it (trailing zeros dropped)."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def masked(entry: dict[str, Any], rules: Iterable[Any]) -> dict[str, Any]:
    """`entry` with the mask decision's `rules` applied (a copy where anything changes)."""
    rules = list(rules)
    if not rules:
        return entry
    entry = copy.deepcopy(entry)
    for rule in rules:
        op, path, value = ("remove", rule, None) if isinstance(rule, str) else _op(rule)
        parts = _pointer(path)
        if not parts or parts[0] not in ("input", "result"):
            continue  # OPA masks under /input and /result only
        if op == "remove" and _remove(entry, parts):
            entry.setdefault("erased", []).append(path)
        elif op == "upsert" and _upsert(entry, parts, value):
            entry.setdefault("masked", []).append(path)
    return entry


def _op(rule: Any) -> tuple[str, str, Any]:
    if not isinstance(rule, Mapping) or not isinstance(rule.get("path"), str):
        return "", "", None
    return str(rule.get("op", "remove")), rule["path"], rule.get("value")


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(entry: Any, parts: list[str]) -> Any:
    node = entry
    for part in parts[:-1]:
        node = _child(node, part)
        if node is None:
            return None
    return node


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return None


def _remove(entry: dict[str, Any], parts: list[str]) -> bool:
    parent = _parent(entry, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        del parent[int(last)]
        return True
    return False


def _upsert(entry: dict[str, Any], parts: list[str], value: Any) -> bool:
    parent = _parent(entry, parts)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
        return True
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        parent[int(last)] = value
        return True
    return False
