"""An in-memory API server behind `KubeClient`'s interface, for unit tests of `regokite.kube`.

It keeps objects by (API prefix, resource, namespace, name), stamps a
resourceVersion on every write, honours the preconditions the actuator
sends (a merge patch's `metadata.resourceVersion` and `uid` -> 409, a JSON
patch `test` -> 422, a delete's `preconditions.uid` -> 409), serves
discovery documents, pages lists, and plays watch streams a test scripts
(events, then the end of the stream, or an ApiError such as a 410). Errors
can be queued for the next call of a method on a path. Not a Kubernetes:
no defaulting, no field ownership, no garbage collection.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from regokite.kube.client import JSON_PATCH, ApiError

_PATH = re.compile(
    r"^(?P<prefix>/api/v1|/apis/[^/]+/[^/]+)(/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)"
    r"(/(?P<name>[^/]+))?(/(?P<sub>[^/]+))?$"
)
Key = tuple[str, str, str | None, str]


def _split(path: str) -> tuple[str, str, str | None, str | None, str | None]:
    m = _PATH.match(path)
    assert m, f"the fake cannot read the path {path}"
    return m["prefix"], m["resource"], m["ns"], m["name"], m["sub"]


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.discovery: dict[str, list[dict[str, Any]]] = {}  # "/api/v1" -> resource entries
        self.streams: deque[list[Any]] = deque()  # each: the events (or an ApiError) of one watch
        self.errors: dict[tuple[str, str], deque[ApiError | None]] = {}
        self.calls: list[tuple[str, str]] = []
        self.events: list[dict[str, Any]] = []  # Events POSTed
        self.write_guard: Callable[[str, str], None] | None = None
        self.page_size: int | None = None
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)

    # -- setting up

    def serve(self, api_version: str, resource: str, kind: str, *, namespaced: bool = True, status: bool = False):
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        entries = self.discovery.setdefault(prefix, [])
        entries.append({"name": resource, "kind": kind, "namespaced": namespaced})
        if status:
            entries.append({"name": f"{resource}/status", "kind": kind, "namespaced": namespaced})
        return self

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` under the collection `path` (as if created), returning what is stored."""
        prefix, resource, ns, _, _ = _split(path)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if ns:
            meta["namespace"] = ns
        meta.setdefault("uid", f"uid-{next(self._uid)}")
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[(prefix, resource, ns, meta["name"])] = obj
        return copy.deepcopy(obj)

    def script_watch(self, *events: Any) -> None:
        """The next watch: `("ADDED", obj)` pairs, raw event dicts, or an ApiError to raise when it opens."""
        self.streams.append(list(events))

    def fail(self, method: str, path: str, status: int, reason: str = "", *, after: int = 0) -> None:
        """The next `method` on `path` (after `after` more that succeed) answers `status`."""
        err = ApiError(status, reason, {"message": reason or str(status)}, f"{method} {path}")
        self.errors.setdefault((method, path), deque()).extend([None] * after + [err])

    def stored(self, path: str) -> dict[str, Any] | None:
        prefix, resource, ns, name, _ = _split(path)
        found = self.objects.get((prefix, resource, ns, name or ""))
        return copy.deepcopy(found) if found else None

    # -- KubeClient's interface

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        if method == "GET":
            return self.get(path)
        if method == "POST" and path.endswith("/events"):
            self._guard(method, path)
            self.events.append(body)
            return body
        if method == "DELETE":
            return self.delete(path, body)
        self._called(method, path, write=True)
        if method == "POST":  # create
            if self.stored(f"{path}/{body['metadata']['name']}") is not None:
                raise ApiError(409, "AlreadyExists", {"message": "exists"}, f"POST {path}")
            return self.put(path, body)
        if method == "PUT":  # replace, as of the resourceVersion it carries
            current = self.stored(path)
            if current is None:
                raise ApiError(404, "NotFound", {"message": "not found"}, f"PUT {path}")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", {"message": "changed"}, f"PUT {path}")
            return self.put(path.rsplit("/", 1)[0], body)
        raise AssertionError(f"the fake does not serve {method} {path}")

    def get(self, path: str, **query: Any) -> Any:
        self._called("GET", path)
        if path in self.discovery:
            return {"resources": self.discovery[path]}
        if not _PATH.match(path):  # the discovery document of an API group version nobody serves
            raise ApiError(404, "NotFound", {"message": "not found"}, f"GET {path}")
        prefix, resource, ns, name, _ = _split(path)
        if name:
            found = self.objects.get((prefix, resource, ns, name))
            if found is None:
                raise ApiError(404, "NotFound", {"message": "not found"}, f"GET {path}")
            return copy.deepcopy(found)
        items = [
            copy.deepcopy(o)
            for (p, r, n, _), o in sorted(self.objects.items(), key=lambda kv: str(kv[0]))
            if (p, r) == (prefix, resource) and (ns is None or n == ns)
        ]
        start = int(query.get("continue") or 0)
        end = start + self.page_size if self.page_size else len(items)
        meta = {"resourceVersion": str(next(self._rv))}
        if end < len(items):
            meta["continue"] = str(end)
        return {"kind": "List", "items": items[start:end], "metadata": meta}

    def apply(self, path: str, obj: dict[str, Any], manager: str, *, force: bool = True, parse: bool = True) -> Any:
        """As KubeClient.apply: the object as applied, None with `parse=False`."""
        self._called("PATCH", path, write=True)
        current = self.stored(path)
        body = copy.deepcopy(obj)
        if current is None:
            created = self.put(path.rsplit("/", 1)[0], body)
            return created if parse else None
        merged = _merge(current, body)
        merged["metadata"]["resourceVersion"] = str(next(self._rv))
        self._store(path, merged)
        return copy.deepcopy(merged) if parse else None

    def patch(self, path: str, patch: Any, content_type: str = "", **query: Any) -> Any:
        self._called("PATCH", path, write=True)
        current = self.stored(path)
        if current is None:
            raise ApiError(404, "NotFound", {"message": "not found"}, f"PATCH {path}")
        if content_type == JSON_PATCH:
            for op in patch:
                if op["op"] == "test":
                    if _pointer(current, op["path"]) != op["value"]:
                        raise ApiError(422, "Invalid", {"message": "test failed"}, f"PATCH {path}")
                elif op["op"] in ("add", "replace"):
                    _set_pointer(current, op["path"], copy.deepcopy(op["value"]))
                else:
                    raise AssertionError(f"the fake does not apply {op['op']}")
        else:
            meta = (patch or {}).get("metadata") or {}
            for field in ("resourceVersion", "uid"):
                if field in meta and meta[field] != current["metadata"].get(field):
                    raise ApiError(409, "Conflict", {"message": f"{field} changed"}, f"PATCH {path}")
            current = _merge(current, patch)
        current["metadata"]["resourceVersion"] = str(next(self._rv))
        self._store(path, current)
        return copy.deepcopy(current)

    def delete(self, path: str, body: dict[str, Any] | None = None) -> Any:
        self._called("DELETE", path, write=True)
        prefix, resource, ns, name, _ = _split(path)
        key = (prefix, resource, ns, name or "")
        if key not in self.objects:
            raise ApiError(404, "NotFound", {"message": "not found"}, f"DELETE {path}")
        preconditions = (body or {}).get("preconditions") or {}
        for field in ("uid", "resourceVersion"):
            if preconditions.get(field) and self.objects[key]["metadata"].get(field) != preconditions[field]:
                raise ApiError(409, "Conflict", {"message": f"{field} precondition"}, f"DELETE {path}")
        return self.objects.pop(key)

    def stream(self, path: str, query: dict[str, Any], timeout: float) -> Iterator[dict[str, Any]]:
        self._called("WATCH", path)
        script = self.streams.popleft() if self.streams else []
        if isinstance(script, ApiError):
            raise script
        if script and isinstance(script[0], ApiError):
            raise script[0]
        return iter([e if isinstance(e, dict) else {"type": e[0], "object": copy.deepcopy(e[1])} for e in script])

    # -- internals

    def _called(self, method: str, path: str, write: bool = False) -> None:
        self.calls.append((method, path))
        if write:
            self._guard(method, path)
        queued = self.errors.get((method, path))
        if queued and (err := queued.popleft()) is not None:
            raise err

    def _guard(self, method: str, path: str) -> None:
        if self.write_guard is not None:
            self.write_guard(method, path)

    def _store(self, path: str, obj: dict[str, Any]) -> None:
        prefix, resource, ns, name, _ = _split(path)
        self.objects[(prefix, resource, ns, name or "")] = obj

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.calls if m in ("PATCH", "DELETE", "POST", "PUT")]


def _merge(base: Any, patch: Any) -> Any:
    """RFC 7386: null removes a key."""
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(base.get(k), v)
    return out


def _pointer(doc: Any, pointer: str) -> Any:
    for part in pointer.split("/")[1:]:
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _set_pointer(doc: dict[str, Any], pointer: str, value: Any) -> None:
    parts = pointer.split("/")[1:]
    for part in parts[:-1]:
        doc = doc.setdefault(part, {})
    doc[parts[-1]] = value


class ScriptedEngine:
    """An Engine whose answers a Python function gives: `decide(ref, input) -> value` (UNDEFINED for none).
    `seen` records every (ref, input) evaluated, in order."""

    def __init__(self, decide: Callable[[str, Any], Any]) -> None:
        self.decide = decide
        self.seen: list[tuple[str, Any]] = []

    def evaluate(self, ref: str, input: Any = None) -> Any:
        self.seen.append((ref, copy.deepcopy(input)))
        return self.decide(ref, input)

    def bind(self, input: Any) -> Any:
        engine = self

        class Bound:
            def evaluate(self, ref: str) -> Any:
                return engine.evaluate(ref, input)

        return Bound()
