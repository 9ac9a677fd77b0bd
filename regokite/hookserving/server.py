"""`regokite hooks`: Rego packages served as Metacontroller webhooks over HTTP.

So an existing Metacontroller can use regokite as its hook backend:

* `POST /<a>/<b>` — the body is the hook request, the answer the response
  fields of package `a.b` (or the object value of rule `a.b`) for the hook
  the request is for, told by its shape as Metacontroller sends it: a
  decorator's sync/finalize (`object`, `attachments`) gets `labels`,
  `annotations`, `status`, `attachments`, `resyncAfterSeconds`, `finalized`;
  a customize call (`parent` without `children`) gets `relatedResources`; a
  composite's sync/finalize gets `children`, `status`, `resyncAfterSeconds`,
  `finalized`;
* `POST /v0/data/<a>/<b>` — OPA's v0 data API: the body is `input`, the answer
  the document itself (404 when undefined), as Metacontroller + OPA expects;
* `POST /v1/data/<a>/<b>` — OPA's v1 data API: `{"input": ...}` in,
  `{"result": ...}` out.

The policy files are polled; a changed set is built off to the side and
swapped in whole, and one that fails to load leaves the last good set
serving. Every call is one log line. With cluster data (`regokite hooks
--replicate`), every hook answers 503 until its initial lists are in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from regokite import input_guard, outline
from regokite.bundle import fingerprint
from regokite.controllers import customize
from regokite.controllers.decorator import decisions as decorator
from regokite.controllers.definitions import HookTarget
from regokite.controllers.hooks import RESPONSE_FIELDS, evaluate_hook, resolve_hook
from regokite.engine import UNDEFINED, Engine, EngineSettings, builtin_errors, open_engine
from regokite.errors import HookError, RegokiteError
from regokite.ops import builtin_error_metrics
from regokite.replication.replicate import Replicator

builtin_errors.listen(builtin_error_metrics.count)  # this server's /metrics counts its undefined calls

log = logging.getLogger("regokite.hooks")


@dataclass(frozen=True)
class HookPolicies:
    """One loaded policy set: its engine and what each package defines."""

    engine: Engine
    packages: dict[str, set[str]]


class Served:
    """The policy set being served, and how to build the next one from the files."""

    def __init__(self, load: Callable[[], HookPolicies], paths: list[str] | None = None) -> None:
        self.load, self.paths = load, paths or []
        self.current = load()
        self.reload_error: str | None = None
        self._seen = fingerprint(self.paths)

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            seen = await asyncio.to_thread(fingerprint, self.paths)
            if seen != self._seen:
                await asyncio.sleep(0.2)  # let an editor or a ConfigMap update finish writing
                self._seen = await asyncio.to_thread(fingerprint, self.paths)
                await self.reload()

    async def reload(self) -> None:
        candidate = await asyncio.to_thread(self._build)
        if isinstance(candidate, str):
            self.reload_error = candidate
            log.error("policy reload failed; still serving the last good set", extra={"error": candidate})
            return
        self.current, self.reload_error = candidate, None
        log.info("policies reloaded", extra={"packages": sorted(candidate.packages)})

    def _build(self) -> HookPolicies | str:
        """Load on a worker thread; a failure comes back as its message (see admission's Reloader)."""
        try:
            candidate = self.load()
        except RegokiteError as exc:
            return str(exc)
        candidate.engine.release_thread()  # prepared again on the serving thread
        return candidate


def contract_of(body: Any) -> tuple[tuple[str, ...], str]:
    """The response fields of the hook a Metacontroller request is for, told by its shape."""
    if isinstance(body, dict) and "object" in body:
        return decorator.RESPONSE_FIELDS, "decorator hook response rules"
    if isinstance(body, dict) and "parent" in body and "children" not in body:
        return customize.RESPONSE_FIELDS, "customize hook response rules"
    return RESPONSE_FIELDS, "hook response rules"


def create_app(served: Served, reload_interval: float = 0.0, replica: Replicator | None = None) -> FastAPI:
    """`replica`: the cluster data the hooks read; until its initial lists are in, every hook gets a 503."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(served.watch(reload_interval)) if reload_interval > 0 else None
        yield
        if task is not None:
            task.cancel()

    app = FastAPI(title="regokite hooks", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    app.middleware("http")(_access_log)

    def loading() -> JSONResponse | None:
        return _loading(replica)

    async def data_api_body(request: Request) -> tuple[Any, JSONResponse | None]:
        return await _data_api_body(request, replica)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", media_type="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        detail = {"packages": len(served.current.packages), "reload": {"error": served.reload_error}}
        return loading() or JSONResponse(detail)

    @app.post("/v0/data/{path:path}")
    async def v0(path: str, request: Request) -> Response:
        body, refused = await data_api_body(request)
        if refused is not None:
            return refused
        try:
            value = served.current.engine.evaluate(_ref(path), body)
        except RegokiteError as exc:
            return _error(500, "internal_error", str(exc))
        if value is UNDEFINED:
            return _error(404, "undefined_document", f"document {_ref(path)} is undefined")
        return JSONResponse(value)

    @app.post("/v1/data/{path:path}")
    async def v1(path: str, request: Request) -> Response:
        body, refused = await data_api_body(request)
        if refused is not None:
            return refused
        if not isinstance(body, dict):
            return _error(400, "invalid_parameter", "request body must be an object with an input field")
        try:
            value = served.current.engine.evaluate(_ref(path), body.get("input", UNDEFINED))
        except RegokiteError as exc:
            return _error(500, "internal_error", str(exc))
        return JSONResponse({} if value is UNDEFINED else {"result": value})

    @app.post("/{path:path}")
    async def hook(path: str, request: Request) -> Response:
        if waiting := loading():
            return waiting
        package = ".".join(p for p in path.split("/") if p)
        policies = served.current
        try:
            body = await _body_of(request)
            fields, noun = contract_of(body)
            resolved = resolve_hook(HookTarget(package), policies.packages, fields, noun)
            return JSONResponse(evaluate_hook(policies.engine, resolved, body))
        except ValueError as exc:
            return _error(400, "invalid_parameter", f"request body refused: {exc}")
        except HookError as exc:
            return _error(404 if exc.reason == "HookNotFound" else 500, exc.reason, str(exc))

    return app


async def _access_log(request: Request, call_next: Callable[..., Any]) -> Response:
    """One log line per hook call."""
    started = time.perf_counter()
    response = await call_next(request)
    if request.method == "POST":
        log.info(
            "hook call",
            extra={
                "path": request.url.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            },
        )
    return response


def _loading(replica: Replicator | None) -> JSONResponse | None:
    """The 503 every call gets until the cluster data's initial lists are in; None once they are."""
    if replica is None or replica.ready():
        return None
    pending = ", ".join(replica.pending())
    return _error(503, "unavailable", f"cluster data not loaded yet ({pending}): no hook answers before it is")


async def _body_of(request: Request) -> Any:
    raw = await request.body()
    return input_guard.parse_json(raw) if raw.strip() else {}  # InputRejected is a ValueError


async def _data_api_body(request: Request, replica: Replicator | None) -> tuple[Any, JSONResponse | None]:
    """The body of an OPA data API call, or the answer refusing it (data not loaded, body refused)."""
    if waiting := _loading(replica):
        return None, waiting
    try:
        return await _body_of(request), None
    except ValueError as exc:
        return None, _error(400, "invalid_parameter", f"request body refused: {exc}")


def _ref(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "data." + ".".join(parts) if parts else "data"


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


def loader(
    policies: list[str], engine: EngineSettings | None = None, *, prepare: Callable[[Engine], None] | None = None
) -> Callable[[], HookPolicies]:
    """How to load the policy set from files for `engine`; `prepare` readies each new engine (follows
    the cluster data)."""
    engine = engine or EngineSettings()

    def load() -> HookPolicies:
        bundle = engine.load(policies).without_tests()
        packages = outline.packages(outline.outline(bundle.modules))
        opened = open_engine(bundle, engine)
        if prepare is not None:
            prepare(opened)
        return HookPolicies(opened, packages)

    return load
