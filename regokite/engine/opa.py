"""The sidecar engine: a separate OPA answering over its REST API.

On construction the engine pushes the bundle into OPA: it deletes the
`regokite/` modules an earlier push left behind (first, so a renamed file does
not clash with its old self), writes each top-level base document
(`PUT /v1/data/<key>`, one per key, so documents other clients wrote elsewhere
survive; a `PUT /v1/data` would replace them all), puts every module
(`PUT /v1/policies/regokite/<path>`, raw text, retried while a module waits for
one it depends on), deletes the top-level documents an earlier push left
behind, and last writes a marker document, `data.system.regokite`, recording
what it pushed. OPA's REST API has no transactions: during a push (start-up,
or repairing a restarted OPA) answers can mix old and new modules.

Evaluations go to `POST /v1/data/<path>?strict-builtin-errors=true`, or to
`POST /v1/query` for anything that is not a plain `data` reference. Unless the
engine is strict, an evaluation that OPA answers with a builtin error
(`eval_builtin_error`, `eval_type_error`) is asked again without the switch,
OPA's default, and that first error is reported (builtin_errors): OPA's API
tells nothing of the builtin errors its default evaluation made undefined, so
only the first of an evaluation is seen.

OPA keeps policies in memory, so a restarted sidecar answers every reference
with "undefined" — which an admission policy reads as "no deny": fail open.
So an undefined answer is never trusted blindly: the engine reads the marker
(one small GET) and, when it is gone, pushes the bundle again and re-asks.
`ensure_loaded()` does the same check for a periodic health probe.

Rego v0 bundles: OPA 1.x chooses the Rego version per server, not per module
(`opa run --server --v0-compatible`), so a bundle of v0 modules needs a sidecar
started with `--v0-compatible` — and under that flag, v1 modules must carry
`import rego.v1`. A push that fails on v0 syntax says so.

Known differences from the embedded engine: OPA's `/v1/query` has no
strict-builtin-errors switch, so in an ad-hoc query that is not a plain
reference, a failing builtin (e.g. division by zero) is undefined, even when
the engine is strict, and is not reported; and `data.system.regokite` (the
marker) is visible to a query of `data` or `data.system`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import requests
import urllib3
from opa_client import OpaClient
from opa_client.errors import DeletePolicyError, RegoParseError, TypeException

from regokite import input_guard
from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import ReplicaStore, check_replica_root, jsonable
from regokite.engine import KINDS, UNDEFINED, builtin_errors, first_value, rule_ref
from regokite.engine.builtin_errors import UndefinedCall
from regokite.engine.query_plan import QueryPlan, data_api_path
from regokite.errors import (
    EngineUnavailable,
    EvaluationError,
    Location,
    PolicyLoadError,
    RegokiteError,
)

log = logging.getLogger(__name__)

POLICY_PREFIX = "regokite/"
MARKER_PATH = ("system", "regokite")
QUERY_FILE = "<query.rego>"  # the file name the embedded engine gives an ad-hoc query
_V0_HINT_NEEDLES = ("`if` keyword is required", "`contains` keyword is required")
BUILTIN_ERROR_CODES = ("eval_builtin_error", "eval_type_error")  # topdown's codes for what a builtin returns


def policy_id(module_path: str) -> str:
    """The OPA policy id regokite uses for a module."""
    return POLICY_PREFIX + module_path.replace("\\", "/").lstrip("/")


class OpaEngine:
    """Evaluates against a sidecar OPA that this engine keeps loaded with `bundle`."""

    name = "opa"
    capabilities = KINDS[name]

    def __init__(
        self,
        bundle: Bundle,
        url: str = "http://127.0.0.1:8181",
        *,
        timeout: float = 2.0,
        token: str | None = None,
        pool_size: int = 16,
        strict_builtin_errors: bool = True,
    ) -> None:
        self.bundle = bundle
        self.strict_builtin_errors = strict_builtin_errors
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"OPA url must look like http://host:port, not {url!r}")
        if parts.path not in ("", "/"):
            raise ValueError(f"OPA url must not have a path: {url!r}")
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        # The hot path (evaluate/query) uses a urllib3 pool directly, not
        # opa-python-client: its query calls raise_for_status() and so drop
        # OPA's error body, skip a falsy input (`if input_data:`), retry
        # HTTP 500 (an evaluation error) with back-off, and requests adds about
        # 0.2 ms per call over urllib3 (measured). urllib3 pools are thread-safe
        # and keep connections alive.
        self._pool = urllib3.connectionpool.connection_from_url(
            self.url,
            maxsize=pool_size,
            block=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
            headers=self._headers,
        )
        # Pushing the bundle is rare and not latency-bound: opa-python-client.
        https = parts.scheme == "https"
        self._client = _ControlClient(
            host=parts.hostname,
            port=parts.port or (443 if https else 80),
            ssl=https,
            token=token,
            retries=1,
            timeout=max(timeout, 10.0),  # OPA recompiles every module on each PUT
        )
        self._modules = {policy_id(m.path): m for m in bundle.modules}
        self._digest = bundle_digest(bundle)
        self._push_lock = threading.Lock()
        self._pushes = 0
        self._replica: ReplicaStore | None = None
        self._replica_lock = threading.Lock()
        self._replica_generation: int | None = None  # None: OPA holds none of it yet
        try:
            self._push(expected=0)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"OpaEngine({self.url!r}, {len(self._modules)} modules)"

    # ------------------------------------------------------------------ Engine API

    # Every input is checked as the embedded engine checks it: OPA would take
    # more (big integers, U+FFFD for a lone surrogate), and both engines must
    # refuse or answer alike.

    def evaluate(self, ref: str, input: Any = UNDEFINED) -> Any:
        _check(input)
        self._catch_up()
        return self._evaluate(rule_ref(ref), input, _input_body(input))

    def bind(self, input: Any) -> _Bound:
        """An evaluator with `input` serialised once, for several refs in a row."""
        _check(input)
        self._catch_up()
        return _Bound(self, input)

    def query(self, query: str, input: Any = UNDEFINED) -> list[dict[str, Any]]:
        _check(input)
        self._catch_up()
        pushes = self._pushes
        results = self._query(query, input)
        if not results and self._repair(pushes):
            results = self._query(query, input)
        return results

    def follow(self, store: ReplicaStore, *, stepped: bool = False) -> None:
        """Keep `store`'s objects in OPA's data: the whole document once
        (`PUT /v1/data/<root>`, which OPA applies whole), then the changes
        since, batched into one `PATCH` before the next evaluation; again
        whole after OPA restarts. `stepped` changes nothing: every write is
        one request, loaded by OPA in one transaction."""
        check_replica_root(self.bundle.data, store)
        self._replica = store
        self._catch_up()

    def loaded_generation(self) -> int | None:
        """None: each evaluation catches up first (see `follow`)."""
        return None

    def load_replica(self) -> Iterator[None]:
        """Nothing to do in steps: evaluations catch up themselves."""
        return iter(())

    def _catch_up(self) -> None:
        store = self._replica
        if store is None or self._replica_generation == store.generation:
            return
        with self._replica_lock:
            seen = self._replica_generation
            changes = None if seen is None else store.changes_since(seen)
            try:
                if changes:
                    try:
                        self._client.patch_json(store.root, store.json_patch(changes))
                        self._replica_generation = seen + len(changes)  # type: ignore[operator]
                        return
                    except PolicyLoadError as exc:
                        # another writer (a second admission worker) got there first: a path
                        # to remove is gone, or one to add exists; the whole document settles it
                        log.info("replica patch refused; writing the whole replica", extra={"error": str(exc)})
                if changes is None or changes:
                    self._replica_generation = store.full(
                        lambda doc: self._client.put_encoded(store.root, store.dumps(doc))
                    )
            except requests.RequestException as exc:
                raise self._unavailable(exc) from None

    def ensure_loaded(self) -> bool:
        """Push the bundle again if OPA lost it (a restart). True when it did."""
        return self._repair(self._pushes)

    def release_thread(self) -> None:
        """Nothing is pinned to threads: the connection pool is shared."""

    def close(self) -> None:
        # The modules stay in OPA: a reload's new engine has already replaced
        # them, and deleting here would pull them from under it.
        self._pool.close()
        self._client.close_connection()

    # ------------------------------------------------------------------ evaluation

    def _evaluate(self, ref: str, input: Any, body: bytes | None, bound: _Bound | None = None) -> Any:
        path = data_api_path(ref)
        if path is None or body is None:
            # Not a plain reference, or a null input: OPA reads `"input": null`
            # as "no input", and only `with input as null` gives the embedded
            # engine's null input. Both go through the query API.
            return first_value(self.query(ref, input))
        pushes = self._pushes
        value = self._eval_path(ref, path, body)
        if value is UNDEFINED and (bound is None or not bound.verified):
            repaired = self._repair(pushes)
            if bound is not None:
                bound.verified = True
            if repaired:
                value = self._eval_path(ref, path, body)
        return value

    def _eval_path(self, ref: str, path: str, body: bytes) -> Any:
        response = self._request("POST", f"/v1/data/{path}?strict-builtin-errors=true", body)
        if response.status != 200:
            error = self._answer_error(ref, response)
            if self.strict_builtin_errors or not isinstance(error, EvaluationError) or not _builtin_error(response):
                raise error
            builtin_errors.report(self._undefined_call(error))
            response = self._request("POST", f"/v1/data/{path}", body)  # OPA's default: the call undefined
            if response.status != 200:
                raise self._answer_error(ref, response)
        document = _loads(response.data)
        return document.get("result", UNDEFINED)  # no "result" key: undefined; null is null

    def _query(self, query: str, input: Any) -> list[dict[str, Any]]:
        plan = QueryPlan.build(query, null_input=input is None)
        if plan.ref_path is not None:
            value = self._eval_path(query, plan.ref_path, _input_body(input) or b"{}")
            return [] if value is UNDEFINED else [plan.result({}, value)]
        request: dict[str, Any] = {"query": plan.text}
        if input is not UNDEFINED and input is not None:
            request["input"] = input
        response = self._request("POST", "/v1/query", _dumps(request))
        if response.status != 200:
            raise self._answer_error(query, response, plan)
        rows = _loads(response.data).get("result") or []
        return [plan.result(row) for row in rows]

    def _request(self, method: str, target: str, body: bytes | None = None) -> Any:
        for attempt in (1, 2):
            try:
                return self._pool.urlopen(method, target, body=body, headers=self._headers)
            except urllib3.exceptions.ProtocolError as exc:
                # A kept-alive connection OPA closed (e.g. it restarted) fails
                # mid-request; one retry on a fresh connection tells that from
                # an OPA that is really gone. Evaluations are idempotent.
                if attempt == 2:
                    raise self._unavailable(exc) from None
            except urllib3.exceptions.HTTPError as exc:
                raise self._unavailable(exc) from None
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ pushing

    def _repair(self, seen: int) -> bool:
        """After an undefined answer: if OPA lost regokite's state, push it again; True: ask again.

        `seen` is the push count from before the evaluation: when another
        thread re-pushed since, the answer may predate that push and is asked
        again rather than trusted.
        """
        marker = self._read_marker()
        if marker is not None:
            # Ours, or a newer engine's (a reload in progress): OPA holds a
            # bundle, and the undefined answer stands unless a push came after it.
            return self._pushes != seen
        log.warning("OPA at %s holds no regokite bundle (restarted?); pushing it again", self.url)
        self._push(expected=seen)
        return True

    def _push(self, expected: int) -> None:
        with self._push_lock:
            if self._pushes != expected:  # another thread re-pushed meanwhile
                return
            try:
                self._push_locked()
            except requests.RequestException as exc:
                raise self._unavailable(exc) from None
            self._pushes += 1

    def _push_locked(self) -> None:
        previous = self._read_marker() or {}
        ours = {i for i in self._list_policy_ids() if i.startswith(POLICY_PREFIX)}
        # Stale modules go first, so a renamed file does not clash with itself
        # (two `default` rules); one still needed by a module about to be
        # replaced is retried after the upserts.
        stuck = self._delete_policies(sorted(ours - self._modules.keys()))
        for key, value in self.bundle.data.items():
            self._client.put_json((key,), value)
        self._put_policies(list(self._modules.items()))
        still = self._delete_policies(stuck)
        if still:
            policy, exc = still[0]
            raise PolicyLoadError(f"OPA would not delete stale policy {policy}: {exc.message}")
        for key in sorted(set(previous.get("data") or ()) - self.bundle.data.keys()):
            self._client.delete_json((key,))
        self._replica_generation = None  # a fresh OPA holds no replicated objects
        self._client.put_json(
            MARKER_PATH,
            {
                "digest": self._digest,
                "policies": sorted(self._modules),
                "data": sorted(self.bundle.data),
            },
        )

    def _put_policies(self, pending: list[tuple[str, Module]]) -> None:
        # OPA compiles all its modules on every PUT, so a module calling a
        # function from one not pushed yet fails; retry while there is progress.
        while pending:
            failed: list[tuple[str, Module, RegoParseError]] = []
            for pid, module in pending:
                try:
                    self._client.update_policy_from_string(module.text, quote(pid), False)
                except TypeException:  # the client refuses an empty string
                    raise PolicyLoadError(f"{module.path}: empty module") from None
                except RegoParseError as exc:
                    if exc.expression != "invalid_parameter":
                        raise EngineUnavailable(
                            f"OPA at {self.url} refused policy {pid}: {exc.expression}: {exc.message}"
                        ) from None
                    failed.append((pid, module, exc))
            if len(failed) == len(pending):
                parse_errors = [f for f in failed if _codes(f[2]) & {"rego_parse_error"}]
                _, module, exc = (parse_errors or failed)[0]
                raise self._load_error(module, exc)
            pending = [(pid, module) for pid, module, _ in failed]

    def _delete_policies(self, ids: Iterable[str]) -> list[tuple[str, DeletePolicyError]]:
        pending = list(ids)
        while pending:
            failed = []
            for pid in pending:
                try:
                    self._client.delete_policy(quote(pid))
                except DeletePolicyError as exc:
                    if exc.expression != "resource_not_found":
                        failed.append((pid, exc))
            if len(failed) == len(pending):
                return failed
            pending = [pid for pid, _ in failed]
        return []

    def _list_policy_ids(self) -> list[str]:
        # Not OpaClient.get_policies_list(): it asks for `/v1/policies/`, which
        # OPA 1.x's router reads as "the policy whose id is empty" (a 404).
        response = self._request("GET", "/v1/policies")
        if response.status != 200:
            raise self._answer_error("GET /v1/policies", response)
        listed = _loads(response.data).get("result") or []
        return [str(p["id"]) for p in listed if isinstance(p, dict) and "id" in p]

    def _read_marker(self) -> dict[str, Any] | None:
        path = "/".join(quote(p, safe="") for p in MARKER_PATH)
        response = self._request("GET", f"/v1/data/{path}")
        if response.status != 200:
            raise self._answer_error("data." + ".".join(MARKER_PATH), response)
        marker = _loads(response.data).get("result")
        return marker if isinstance(marker, dict) else None

    # ------------------------------------------------------------------ errors

    def _load_error(self, module: Module, exc: RegoParseError) -> PolicyLoadError:
        errors = [e for e in exc.errors if isinstance(e, dict)]
        if not errors:
            return PolicyLoadError(f"{module.path}: {exc.message}")
        first = errors[0]
        message = self._unprefix(str(first.get("message") or exc.message))
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more error(s))"
        if any(needle in message for needle in _V0_HINT_NEEDLES):
            message += (
                " (this module is Rego v0: run the OPA sidecar with --v0-compatible)"
                if module.v0
                else " (this module is Rego v0 syntax: load it with --v0-compatible, and run"
                " the OPA sidecar with --v0-compatible)"
            )
        location = self._location(first.get("location"))
        if location is None:
            return PolicyLoadError(f"{module.path}: {message}")
        source = self._modules.get(policy_id(location.file))
        source_line = source.line(location.line) if source is not None else None
        return PolicyLoadError(message, location, source_line)

    def _answer_error(self, query: str, response: Any, plan: QueryPlan | None = None) -> RegokiteError:
        body = _loads(response.data, default=None)
        if not isinstance(body, dict) or "code" not in body:
            snippet = response.data[:200].decode("utf-8", "replace").strip()
            return EngineUnavailable(
                f"OPA at {self.url} answered HTTP {response.status}, not an OPA response: {snippet or '(empty body)'}"
            )
        code, message = str(body["code"]), str(body.get("message", ""))
        if code not in ("internal_error", "invalid_parameter"):
            return EngineUnavailable(
                f"OPA at {self.url} refused the request (HTTP {response.status}): {code}: {message}"
            )
        errors = [e for e in body.get("errors") or () if isinstance(e, dict)]
        location = None
        if errors:
            message = self._unprefix(str(errors[0].get("message") or message))
            location = self._location(errors[0].get("location"), plan)
            if len(errors) > 1:
                message += f" (and {len(errors) - 1} more error(s))"
        return EvaluationError(query, message, location)

    def _undefined_call(self, error: EvaluationError) -> UndefinedCall:
        """The builtin error OPA reported, as a call its default evaluation made undefined."""
        module = self.bundle.module(error.location.file) if error.location else None
        named = re.match(r"([\w.]+): ", error.message)  # OPA's words: "regex.match: error parsing regexp..."
        return UndefinedCall(
            str(error.location or ""), module.package if module else "", named[1] if named else "", error.message
        )

    def _unprefix(self, message: str) -> str:
        """OPA names modules by policy id in messages too; name them by path."""
        if POLICY_PREFIX not in message:
            return message
        for pid in sorted(self._modules, key=len, reverse=True):
            message = message.replace(pid, self._modules[pid].path)
        return message

    def _location(self, raw: Any, plan: QueryPlan | None = None) -> Location | None:
        if not isinstance(raw, dict) or "row" not in raw:
            return None
        file, row, col = str(raw.get("file") or ""), int(raw["row"]), int(raw.get("col") or 0)
        module = self._modules.get(file)
        if module is not None:
            return module.placed(Location(module.path, row, col))
        if file:
            return Location(file, row, col)
        if plan is not None:
            col = plan.original_col(row, col)
        return Location(QUERY_FILE, row, col)

    def _unavailable(self, exc: BaseException) -> RegokiteError:
        return EngineUnavailable(f"OPA at {self.url} unreachable: {_reason(exc, self.timeout)}")


class _Bound:
    """`OpaEngine.bind`: one input (one admission request) for several refs.

    The request body is encoded once. And OPA's state is verified at most once
    per bound input: an admission decision reads several documents, many of
    them legitimately undefined, and one marker read per decision (not per
    document) is enough to catch an OPA that restarted before it.
    """

    def __init__(self, engine: OpaEngine, input: Any) -> None:
        self._engine = engine
        self._input = input
        self._body = _input_body(input)
        self.verified = False

    def evaluate(self, ref: str) -> Any:
        return self._engine._evaluate(rule_ref(ref), self._input, self._body, self)


class _ControlClient(OpaClient):
    """opa-python-client, plus data writes for any JSON value.

    The client's `update_or_create_data` accepts only a dict, but a top-level
    base document may be a list or a scalar, so data writes use its session.
    """

    def _init_session(self) -> requests.Session:
        session = super()._init_session()
        session.trust_env = False  # a sidecar on loopback must not go through HTTP(S)_PROXY
        return session

    def _data_url(self, path: tuple[str, ...]) -> str:
        return f"{self.root_url}/data/" + "/".join(quote(p, safe="") for p in path)

    def put_json(self, path: tuple[str, ...], value: Any) -> None:
        self._write_json("PUT", path, _dumps(value), "application/json")

    def put_encoded(self, path: tuple[str, ...], text: str) -> None:
        """PUT a document already written as JSON (a replica store's `dumps`)."""
        self._write_json("PUT", path, text.encode(), "application/json")

    def patch_json(self, path: tuple[str, ...], ops: str) -> None:
        """PATCH with RFC 6902 operations already written as JSON (a replica store's `json_patch`)."""
        self._write_json("PATCH", path, ops.encode(), "application/json-patch+json")

    def _write_json(self, method: str, path: tuple[str, ...], body: bytes, content_type: str) -> None:
        response = self._session.request(
            method,
            self._data_url(path),
            data=body,
            headers={"Content-Type": content_type},
            timeout=self.timeout,
        )
        if response.status_code != 204:
            _raise_data_error("write" if method == "PUT" else "patch", path, response)

    def delete_json(self, path: tuple[str, ...]) -> None:
        response = self._session.delete(self._data_url(path), timeout=self.timeout)
        if response.status_code not in (204, 404):
            _raise_data_error("delete", path, response)


def _raise_data_error(verb: str, path: tuple[str, ...], response: requests.Response) -> None:
    body = _loads(response.content, default={})
    message = body.get("message") if isinstance(body, dict) else None
    dotted = ".".join(("data", *path))
    raise PolicyLoadError(
        f"OPA would not {verb} {dotted} (HTTP {response.status_code}): {message or response.text.strip()[:200]}"
    )


# ---------------------------------------------------------------------- helpers


def bundle_digest(bundle: Bundle) -> str:
    blob = json.dumps(
        [[[m.path, m.text, m.v0] for m in bundle.modules], bundle.data],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _codes(exc: RegoParseError) -> set[str]:
    return {str(e.get("code")) for e in exc.errors if isinstance(e, dict)}


def _check(input: Any) -> None:
    if input is not UNDEFINED:
        input_guard.check(input)


def _input_body(input: Any) -> bytes | None:
    """The data API request body for `input`; None for a null input (see _evaluate)."""
    if input is UNDEFINED:
        return b"{}"
    if input is None:
        return None
    return _dumps({"input": input})


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=jsonable).encode()


_NO_DEFAULT = object()


def _builtin_error(response: Any) -> bool:
    """Whether OPA's error answer is a builtin's (its default evaluation makes the call undefined)."""
    body = _loads(response.data, default=None)
    errors = body.get("errors") if isinstance(body, dict) else None
    return bool(errors) and isinstance(errors[0], dict) and errors[0].get("code") in BUILTIN_ERROR_CODES


def _loads(data: bytes, default: Any = _NO_DEFAULT) -> Any:
    try:
        return json.loads(data) if data else {}
    except ValueError:
        if default is _NO_DEFAULT:
            raise
        return default


_REASONS = (
    ("connection refused", "connection refused"),
    ("timed out", "no answer within {timeout}s"),
    ("name or service not known", "unknown host"),
    ("nodename nor servname", "unknown host"),
    ("temporary failure in name resolution", "unknown host"),
    ("connection reset", "connection reset"),
    ("remote end closed connection", "connection closed"),
    ("connection aborted", "connection closed"),
)


def _reason(exc: BaseException, timeout: float) -> str:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = getattr(current, "reason", None) or current.__cause__ or current.__context__
        if not isinstance(current, BaseException):
            current = None
    text = " ".join(str(e) for e in seen).lower()
    for needle, reason in _REASONS:
        if needle in text:
            return reason.format(timeout=timeout)
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return first
