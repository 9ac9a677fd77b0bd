"""A stand-in for OPA's REST API, driven by the embedded engine.

What it proves: regokite's *REST wiring* against a real HTTP server on
127.0.0.1 — pushing modules (`PUT /v1/policies/{id}`) and base documents
(`PUT /v1/data/{path}`), deleting stale ones, querying (`POST /v1/data`,
`POST /v1/query`, `POST /v0/data`), mapping OPA's status codes and error
bodies, keep-alive connection reuse, and repairing an OPA that restarted and
lost every policy and document it had been given.

Which engine evaluates: for Rego v1 (the default) OPA's own Go engine
(tests/opa_oracle.py), so evaluation and the compile errors of `PUT
/v1/policies` are OPA's; with `v0_compatible` regorus (OPA's library parses
v1 only), and then it proves the wiring but not OPA's semantics. Known places
where it is cruder than OPA, for both:

* builtin errors in ad-hoc queries are fatal (OPA's `/v1/query` has no
  strict switch and treats a failing builtin as undefined); the data API
  honours `?strict-builtin-errors` as OPA does (without it, OPA's default);
* v0 only: a module is checked by regorus's parser; errors OPA's compiler
  reports at `PUT` time (unsafe variables, type errors, recursion, data/rule
  path conflicts) surface here at evaluation time, as a 500;
* the `ast` of a listed policy holds only its package path;
* error `code`s inside `errors[]` are a best guess from regorus's message.

Status codes, response shapes and error bodies follow OPA's server
(`v1/server/server.go`, `v1/server/types`): 200 `{"result": ...}` (`{}` when
undefined, plus an `api_usage_warning` when a data POST carries no `input`),
204 for data writes, 400 `invalid_parameter` with `errors[]` for a module that
does not parse, 404 `resource_not_found` for a missing policy or document, 500
`internal_error` / "error(s) occurred while evaluating query" with `errors[]`
for a runtime error, and `/v1/query` answering bindings only.

Start and stop it from Python (`OpaStandin().start()`, or as a context
manager), simulate a restart that drops all state (`restart()`), or an OPA that
is down (`stop()` ... `start()` on the same port). For benches run it alone:
`python tests/opa_standin.py --port 8181 [--v0-compatible]`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

if __package__ in (None, ""):  # run as a script: make `regokite` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import regorus
from opa_oracle import OracleEngine, compile_errors

from regokite.bundle import Bundle, Module
from regokite.engine import UNDEFINED, Engine
from regokite.engine.embedded import EmbeddedEngine, attempt
from regokite.errors import EvaluationError, engine_diagnostic

# OPA's messages (v1/server/types/types.go).
MSG_COMPILE_MODULE = "error(s) occurred while compiling module(s)"
MSG_PARSE_QUERY = "error(s) occurred while parsing query"
MSG_COMPILE_QUERY = "error(s) occurred while compiling query"
MSG_EVALUATION = "error(s) occurred while evaluating query"
MSG_INPUT_KEY_MISSING = "'input' key missing from the request"

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PACKAGE = re.compile(r"^\s*package\s+([^\s#;]+)", re.MULTILINE)
_COMMENT_OR_SPACE = re.compile(r"(#[^\n]*|\s+)")
_QUERY_FILE = "<query.rego>"  # regorus's name for an ad-hoc query


class OpaError(Exception):
    """An error answer: HTTP status plus OPA's `{code, message, errors}` body."""

    def __init__(self, status: int, code: str, message: str, errors: list | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {"code": code, "message": message}
        if errors:
            self.body["errors"] = errors


class OpaStandin:
    """OPA's REST API subset regokite uses, served over real HTTP on 127.0.0.1."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, v0_compatible: bool = False):
        self.host = host
        self.port = port
        self.v0_compatible = v0_compatible
        self.delay = 0.0  # seconds to sleep before answering an evaluation (timeouts)
        self.connections = 0  # TCP connections accepted since the last start()
        self.requests: collections.deque[str] = collections.deque(maxlen=1000)  # "POST /v1/..."
        self._policies: dict[str, str] = {}
        self._data: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._generation = 0  # bumped on every write; evaluators rebuild when it moves
        self._local = threading.local()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> OpaStandin:
        if self._server is not None:
            return self
        server = _Server((self.host, self.port), _Handler)
        server.standin = self
        self.port = server.server_address[1]
        self.connections = 0
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop open connections: clients now get 'connection refused'."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_connections()  # first: server_close() waits for handler threads
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def restart(self) -> None:
        """Simulate OPA restarting: same port, every policy and document gone."""
        self.stop()
        self.clear()
        self.start()

    def clear(self) -> None:
        with self._lock:
            self._policies.clear()
            self._data = {}
            self._generation += 1

    def __enter__(self) -> OpaStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ state views

    @property
    def policies(self) -> dict[str, str]:
        with self._lock:
            return dict(self._policies)

    @property
    def data(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._data))

    # ------------------------------------------------------------------ policies API

    def list_policies(self) -> dict[str, Any]:
        with self._lock:
            return {"result": [self._policy_doc(i, raw) for i, raw in self._policies.items()]}

    def get_policy(self, policy_id: str) -> dict[str, Any]:
        with self._lock:
            if policy_id not in self._policies:
                raise _policy_not_found(policy_id)
            return {"result": self._policy_doc(policy_id, self._policies[policy_id])}

    def put_policy(self, policy_id: str, raw: str) -> dict[str, Any]:
        with self._lock:
            if self._policies.get(policy_id) == raw:
                return {}
            if not _COMMENT_OR_SPACE.sub("", raw):
                raise OpaError(400, "invalid_parameter", "empty module")
            candidate = dict(self._policies)
            candidate[policy_id] = raw
            self._check_modules(candidate, "invalid_parameter")
            self._policies = candidate
            self._generation += 1
            return {}

    def delete_policy(self, policy_id: str) -> dict[str, Any]:
        with self._lock:
            if policy_id not in self._policies:
                raise _policy_not_found(policy_id)
            candidate = {k: v for k, v in self._policies.items() if k != policy_id}
            self._check_modules(candidate, "invalid_operation")
            self._policies = candidate
            self._generation += 1
            return {}

    def _check_modules(self, modules: dict[str, str], code: str) -> None:
        """regorus's parser first (OPA's library gives no columns), then OPA's compiler for v1."""
        engine = regorus.Engine()
        engine.set_rego_v0(self.v0_compatible)
        for policy_id, raw in modules.items():
            _, failure = attempt(engine.add_policy, policy_id, raw)
            if failure is not None:
                raise OpaError(400, code, MSG_COMPILE_MODULE, [_compile_error("rego_parse_error", failure, raw)])
        _, failure = attempt(engine.eval_query, "true")  # regorus compiles on first evaluation, OPA on PUT
        if failure is not None:
            raise OpaError(400, code, MSG_COMPILE_MODULE, [_compile_error("rego_compile_error", failure, None)])
        errors = [] if self.v0_compatible else compile_errors(modules)
        if errors:
            raise OpaError(400, code, MSG_COMPILE_MODULE, errors)

    def _policy_doc(self, policy_id: str, raw: str) -> dict[str, Any]:
        match = _PACKAGE.search(raw)
        path = [{"type": "var", "value": "data"}]
        if match:
            path += [{"type": "string", "value": p} for p in match.group(1).split(".")]
        return {"id": policy_id, "raw": raw, "ast": {"package": {"path": path}}}

    # ------------------------------------------------------------------ data API (writes)

    def put_data(self, path: list[str], value: Any, *, if_none_match: bool = False) -> int:
        with self._lock:
            if not path:
                if not isinstance(value, dict):
                    raise OpaError(400, "invalid_parameter", "storage_invalid_patch_error: root must be object")
                self._data = value
            else:
                node = self._data
                for key in path[:-1]:
                    child = node.get(key) if isinstance(node, dict) else None
                    if child is None:
                        child = node[key] = {}
                    if not isinstance(child, dict):
                        raise _doc_not_found(path)
                    node = child
                if if_none_match and path[-1] in node:
                    return 304
                node[path[-1]] = value
            self._generation += 1
            return 204

    def delete_data(self, path: list[str]) -> None:
        with self._lock:
            if not path:
                self._data = {}
            else:
                parent = self._lookup(path[:-1])
                if not isinstance(parent, dict) or path[-1] not in parent:
                    raise _doc_not_found(path)
                del parent[path[-1]]
            self._generation += 1

    def patch_data(self, root: list[str], ops: Any) -> None:
        if not isinstance(ops, list):
            raise OpaError(400, "invalid_parameter", "patch body must be a JSON array")
        with self._lock:
            data = json.loads(json.dumps(self._data))
            for op in ops:
                kind = op.get("op") if isinstance(op, dict) else None
                if kind not in ("add", "remove", "replace"):
                    raise OpaError(400, "invalid_parameter", f"bad patch operation: {kind}")
                rel = [
                    p.replace("~1", "/").replace("~0", "~") for p in str(op.get("path", "")).strip("/").split("/") if p
                ]
                data = _apply_patch(data, [*root, *rel], kind, op.get("value"))
            self._data = data
            self._generation += 1

    def _lookup(self, path: list[str]) -> Any:
        node: Any = self._data
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        return node

    # ------------------------------------------------------------------ evaluation

    def engine(self, *, for_query: bool = False, strict: bool = True) -> Engine:
        """This handler thread's engine for the current state: OPA's for v1 documents, else regorus.

        Ad-hoc queries stay with regorus: OPA's library answers them with
        bindings only, and `opa eval`-shaped results need expression values.

        A regorus engine is pinned to the thread that made it and must also be
        dropped there, so each handler thread keeps its own, in a thread-local
        that dies with the thread.
        """
        kind = ("regorus" if for_query or self.v0_compatible else "opa") + ("-strict" if strict or for_query else "")
        cached = getattr(self._local, kind, None)
        with self._lock:
            generation = self._generation
            if cached is not None and cached[0] == generation:
                return cached[1]
            modules = tuple(Module(i, raw, v0=self.v0_compatible) for i, raw in self._policies.items())
            data = json.loads(json.dumps(self._data))
        bundle = Bundle(modules, data)
        strict = strict or for_query
        if kind.startswith("regorus"):
            engine: Engine = EmbeddedEngine(bundle, strict_builtin_errors=strict)
        else:
            engine = OracleEngine(bundle, strict_builtin_errors=strict)
        setattr(self._local, kind, (generation, engine))
        return engine

    def evaluate(self, path: list[str], input: Any, *, strict: bool = False) -> Any:
        if self.delay:
            time.sleep(self.delay)
        ref = _data_ref(path)
        try:
            return self.engine(strict=strict).evaluate(ref, input)
        except EvaluationError as exc:
            error = _eval_error(_detached(exc))
        raise error

    def query(self, query: str, input: Any) -> list[dict[str, Any]]:
        if self.delay:
            time.sleep(self.delay)
        try:
            results = self.engine(for_query=True).query(query, input)
        except EvaluationError as exc:
            error = _query_error(_detached(exc))
        else:
            return [r.get("bindings", {}) for r in results]
        raise error

    def has_rules_for(self, path: list[str]) -> bool:
        """Approximates OPA's GetRulesForVirtualDocument for v0's 404 message."""
        if not path:
            return False
        package, rule = ".".join(path[:-1]), path[-1]
        head = re.compile(rf"^\s*(default\s+)?{re.escape(rule)}\b", re.MULTILINE)
        with self._lock:
            for raw in self._policies.values():
                match = _PACKAGE.search(raw)
                if match and match.group(1) == package and head.search(raw):
                    return True
        return False


OpaStandIn = OpaStandin  # the spelling bench/engine_latency.py imports


# ---------------------------------------------------------------------- HTTP layer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    standin: OpaStandin

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's net/http does
        with self._open_lock:
            self._open.add(sock)
        self.standin.connections += 1
        return sock, addr

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            open_socks, self._open = list(self._open), set()
        for sock in open_socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like OPA
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -------------------------------------------------------------- routing

    def _dispatch(self, method: str) -> None:
        standin = self.server.standin
        url = urlsplit(self.path)
        params = parse_qs(url.query, keep_blank_values=True)
        body = self._body()
        standin.requests.append(f"{method} {self.path}")
        try:
            self._route(standin, method, url.path, params, body)
        except OpaError as exc:
            self._send(exc.status, _error_bytes(exc.body))
        except Exception as exc:  # a bug in the stand-in: answer like OPA's default branch
            body_err = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            self._send(500, _error_bytes(body_err))

    def _route(self, s: OpaStandin, method: str, path: str, params: dict, body: bytes) -> None:
        if path == "/health":
            if method != "GET":
                return self._send(405, b"")
            return self._send_json(200, {})
        if path == "/v1/policies":
            if method != "GET":
                return self._send(405, b"")
            return self._send_json(200, s.list_policies())
        if path.startswith("/v1/policies/"):
            # Like OPA's router (Go 1.22 ServeMux, `/v1/policies/{path...}`), a
            # trailing slash is a policy id that is empty, not the list.
            policy_id = unquote(path[len("/v1/policies/") :])
            if method == "GET":
                return self._send_json(200, s.get_policy(policy_id))
            if method == "PUT":
                return self._send_json(200, s.put_policy(policy_id, body.decode("utf-8")))
            if method == "DELETE":
                return self._send_json(200, s.delete_policy(policy_id))
            return self._send(405, b"")
        if path == "/v1/data" or path.startswith("/v1/data/"):
            return self._v1_data(s, method, _split_path(path[len("/v1/data") :]), params, body)
        if path == "/v0/data" or path.startswith("/v0/data/"):
            if method != "POST":
                return self._send(405, b"")
            return self._v0_data(s, _split_path(path[len("/v0/data") :]), body)
        if path == "/v1/query":
            if method != "POST":
                return self._send(405, b"")
            return self._v1_query(s, body)
        self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

    def _v1_data(self, s: OpaStandin, method: str, path: list[str], params: dict, body: bytes):
        strict = params.get("strict-builtin-errors", ["false"])[-1] != "false"  # OPA: present, or true
        if method == "PUT":
            value = _decode(body)
            status = s.put_data(path, value, if_none_match=self.headers.get("If-None-Match") == "*")
            return self._send(status, b"")
        if method == "DELETE":
            s.delete_data(path)
            return self._send(204, b"")
        if method == "PATCH":
            s.patch_data(path, _decode(body))
            return self._send(204, b"")
        if method == "GET":
            raw_inputs = params.get("input")
            value_in = _decode(raw_inputs[-1].encode()) if raw_inputs else UNDEFINED
            return self._send_json(200, _data_response(s.evaluate(path, value_in, strict=strict)))
        if method == "POST":
            request = _decode(body) if body.strip() else {}
            if not isinstance(request, dict):
                raise OpaError(400, "invalid_parameter", "body contains malformed input document")
            value_in = request.get("input")
            missing = value_in is None  # Go decodes `"input": null` to a nil pointer too
            result = _data_response(s.evaluate(path, UNDEFINED if missing else value_in, strict=strict))
            if missing:
                result["warning"] = {"code": "api_usage_warning", "message": MSG_INPUT_KEY_MISSING}
            return self._send_json(200, result)
        return self._send(405, b"")

    def _v0_data(self, s: OpaStandin, path: list[str], body: bytes) -> None:
        value_in = _decode(body) if body.strip() else UNDEFINED
        value = s.evaluate(path, value_in)
        if value is UNDEFINED:
            kind = "document undefined" if s.has_rules_for(path) else "document missing"
            raise OpaError(404, "undefined_document", f"{kind}: {_data_ref(path)}")
        self._send_json(200, value)

    def _v1_query(self, s: OpaStandin, body: bytes) -> None:
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError as exc:
            raise OpaError(400, "invalid_parameter", f"error(s) occurred while decoding request: {exc}") from None
        query = request.get("query") or ""
        value_in = request.get("input")
        results = s.query(query, UNDEFINED if value_in is None else value_in)
        self._send_json(200, {"result": results} if results else {})

    # -------------------------------------------------------------- I/O

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload, separators=(",", ":")).encode() + b"\n")

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        # One write per response: headers and body in separate segments would
        # meet the client's delayed ACK (Nagle) and cost ~40 ms per request.
        reason = self.responses.get(status, ("",))[0]
        head = [f"HTTP/1.1 {status} {reason}"]
        if status not in (204, 304):
            head.append(f"Content-Type: {content_type}")
            head.append(f"Content-Length: {len(body)}")
        else:
            body = b""
        raw = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        self.wfile.write(raw)
        self.wfile.flush()


# ---------------------------------------------------------------------- helpers


def _compile_error(kind: str, failure: str, raw: str | None) -> dict[str, Any]:
    message, loc = engine_diagnostic(failure)
    error: dict[str, Any] = {"code": kind, "message": message}
    if loc is not None:
        error["location"] = {"file": loc.file, "row": loc.line, "col": loc.col}
        line = _line(raw, loc.line) if raw is not None else None
        if line is not None:
            error["details"] = {"line": line, "idx": max(loc.col - 1, 0)}
    return error


def _detached(exc: BaseException) -> BaseException:
    """Drop the tracebacks of an exception chain.

    They keep frames alive, and the embedded engine's frames hold a regorus
    engine pinned to this thread; through `f_back` and an exception stored in
    a local they form a cycle that the collector may free on another thread,
    where pyo3 refuses to drop the engine.
    """
    current: BaseException | None = exc
    while current is not None:
        current.__traceback__ = None
        current = current.__cause__ or current.__context__
    return exc


def _split_path(path: str) -> list[str]:
    return [unquote(p) for p in path.split("/") if p]


def _data_ref(path: list[str]) -> str:
    """OPA's stringPathToDataRef: integer segments become numbers."""
    ref = "data"
    for seg in path:
        if '"' in seg:
            raise OpaError(400, "invalid_parameter", f"invalid path: invalid ref term '{seg}'")
        if seg.lstrip("-").isdigit():
            ref += f"[{int(seg)}]"
        elif _IDENT.match(seg):
            ref += f".{seg}"
        else:
            ref += f"[{json.dumps(seg)}]"
    return ref


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OpaError(400, "invalid_parameter", f"body contains malformed input document: {exc}") from None


def _data_response(value: Any) -> dict[str, Any]:
    return {} if value is UNDEFINED else {"result": value}


def _error_bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body, indent=2).encode() + b"\n"  # OPA indents error bodies


def _line(text: str, number: int) -> str | None:
    lines = text.splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else None


def _eval_error_code(message: str) -> str:
    given = re.match(r"(eval_\w+|rego_\w+): ", message)  # OPA's own, from the oracle
    if given:
        return given.group(1)
    lowered = message.lower()
    if "conflict" in lowered:
        return "eval_conflict_error"
    if "zero" in lowered or "builtin" in lowered:
        return "eval_builtin_error"
    return "eval_internal_error"


def _eval_error(exc: EvaluationError) -> OpaError:
    code = _eval_error_code(exc.message)
    error: dict[str, Any] = {"code": code, "message": exc.message.removeprefix(f"{code}: ")}
    if exc.location is not None:
        file = "" if exc.location.file == _QUERY_FILE else exc.location.file
        error["location"] = {"file": file, "row": exc.location.line, "col": exc.location.col}
    return OpaError(500, "internal_error", MSG_EVALUATION, [error])


def _query_error(exc: EvaluationError) -> OpaError:
    """Parse and compile errors in the query itself are 400s in OPA; the rest are 500s."""
    loc = exc.location
    if loc is None or loc.file != _QUERY_FILE or _eval_error_code(exc.message) != ("eval_internal_error"):
        return _eval_error(exc)
    parse = re.match(r"(expect|unexpected|invalid|missing)", exc.message.lower()) is not None
    error = {
        "code": "rego_parse_error" if parse else "rego_compile_error",
        "message": exc.message,
        "location": {"file": "", "row": loc.line, "col": loc.col},
    }
    message = MSG_PARSE_QUERY if parse else MSG_COMPILE_QUERY
    return OpaError(400, "invalid_parameter", message, [error])


def _policy_not_found(policy_id: str) -> OpaError:
    return OpaError(404, "resource_not_found", f"storage_not_found_error: policy id {json.dumps(policy_id)}")


def _doc_not_found(path: list[str]) -> OpaError:
    shown = "/" + "/".join(path)
    return OpaError(404, "resource_not_found", f"storage_not_found_error: {shown}: document does not exist")


def _apply_patch(data: Any, path: list[str], kind: str, value: Any) -> Any:
    if not path:
        if kind == "remove":
            return {}
        if not isinstance(value, dict):
            raise OpaError(400, "invalid_parameter", "storage_invalid_patch_error: root must be object")
        return value
    parent: Any = data
    for key in path[:-1]:
        if isinstance(parent, dict) and key in parent:
            parent = parent[key]
        elif isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
            parent = parent[int(key)]
        else:
            raise _doc_not_found(path)
    key = path[-1]
    if isinstance(parent, dict):
        if kind != "add" and key not in parent:
            raise _doc_not_found(path)
        if kind == "remove":
            del parent[key]
        else:
            parent[key] = value
    elif isinstance(parent, list):
        if key == "-" and kind == "add":
            parent.append(value)
        elif key.isdigit() and int(key) <= len(parent) - (kind != "add"):
            index = int(key)
            if kind == "add":
                parent.insert(index, value)
            elif kind == "remove":
                del parent[index]
            else:
                parent[index] = value
        else:
            raise _doc_not_found(path)
    else:
        raise _doc_not_found(path)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8181)
    parser.add_argument("--v0-compatible", action="store_true", help="parse modules as Rego v0")
    args = parser.parse_args(argv)
    standin = OpaStandin(args.host, args.port, v0_compatible=args.v0_compatible).start()
    print(f"OPA stand-in listening on {standin.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
