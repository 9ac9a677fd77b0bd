"""`regokite hooks`: Rego packages served as Metacontroller webhooks over HTTP.

So an existing Metacontroller can use regokite as its hook backend:

* `POST /<a>/<b>` — the body is the hook request, the answer the response
  fields (`children`, `status`, `resyncAfterSeconds`, `finalized`) of package
  `a.b` (or the object value of rule `a.b`);
* `POST /v0/data/<a>/<b>` — OPA's v0 data API: the body is `input`, the answer
  the document itself (404 when undefined), as Metacontroller + OPA expects;
* `POST /v1/data/<a>/<b>` — OPA's v1 data API: `{"input": ...}` in,
  `{"result": ...}` out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from regokite import input_guard, outline
from regokite.bundle import load_bundle
from regokite.clusterdata.replicate import Replicator, check_access
from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.controllers.definitions import HookTarget
from regokite.controllers.hooks import HookError, evaluate_hook, resolve_hook
from regokite.engine import UNDEFINED, Engine, open_engine
from regokite.engine.extensions import ExtensionOptions
from regokite.errors import RegokiteError
from regokite.kube.client import KubeClient

log = logging.getLogger("regokite.hooks")
REPLICA_MAX_LAG = 0.5  # as the admission server: a changed object shows within this (a new one at once)


def create_app(engine: Engine, packages: dict[str, set[str]], replica: Replicator | None = None) -> FastAPI:
    """`replica`: the cluster data the hooks read; until its initial lists are in, every hook gets a 503."""
    app = FastAPI(title="regokite hooks", docs_url=None, redoc_url=None, openapi_url=None)

    def loading() -> JSONResponse | None:
        if replica is None or replica.ready():
            return None
        pending = ", ".join(replica.pending())
        return _error(503, "unavailable", f"cluster data not loaded yet ({pending}): no hook answers before it is")

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        return input_guard.parse_json(raw) if raw.strip() else {}  # InputRejected is a ValueError

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", media_type="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        return loading() or Response("ok\n", media_type="text/plain")

    @app.post("/v0/data/{path:path}")
    async def v0(path: str, request: Request) -> Response:
        if waiting := loading():
            return waiting
        try:
            body = await body_of(request)
        except ValueError as exc:
            return _error(400, "invalid_parameter", f"request body refused: {exc}")
        try:
            value = engine.evaluate(_ref(path), body)
        except RegokiteError as exc:
            return _error(500, "internal_error", str(exc))
        if value is UNDEFINED:
            return _error(404, "undefined_document", f"document {_ref(path)} is undefined")
        return JSONResponse(value)

    @app.post("/v1/data/{path:path}")
    async def v1(path: str, request: Request) -> Response:
        if waiting := loading():
            return waiting
        try:
            body = await body_of(request)
        except ValueError as exc:
            return _error(400, "invalid_parameter", f"request body refused: {exc}")
        if not isinstance(body, dict):
            return _error(400, "invalid_parameter", "request body must be an object with an input field")
        try:
            value = engine.evaluate(_ref(path), body.get("input", UNDEFINED))
        except RegokiteError as exc:
            return _error(500, "internal_error", str(exc))
        return JSONResponse({} if value is UNDEFINED else {"result": value})

    @app.post("/{path:path}")
    async def hook(path: str, request: Request) -> Response:
        if waiting := loading():
            return waiting
        package = ".".join(p for p in path.split("/") if p)
        try:
            body = await body_of(request)
            resolved = resolve_hook(HookTarget(package), packages)
            return JSONResponse(evaluate_hook(engine, resolved, body))
        except ValueError as exc:
            return _error(400, "invalid_parameter", f"request body refused: {exc}")
        except HookError as exc:
            return _error(404 if exc.reason == "HookNotFound" else 500, exc.reason, str(exc))

    return app


def _ref(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "data." + ".".join(parts) if parts else "data"


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


def serve_hooks(
    policies: list[str],
    *,
    host: str = "0.0.0.0",
    port: int = 8181,
    engine: str = "embedded",
    opa_url: str | None = None,
    v0_compatible: bool = False,
    options: ExtensionOptions | None = None,
    replicate: Sequence[ResourceRef] = (),
    replicate_path: str = "kubernetes",
    kubeconfig: str | None = None,
) -> int:
    import uvicorn

    bundle = load_bundle(policies, v0_compatible=v0_compatible).without_tests()
    packages = outline.packages(outline.outline(bundle.modules))
    evaluator = open_engine(bundle, engine, opa_url=opa_url, options=options)
    replica = None
    if replicate:
        client = KubeClient(kubeconfig)
        check_access(client, replicate)
        replica = Replicator(client, ReplicaStore(replicate_path, max_lag=REPLICA_MAX_LAG))
        replica.ensure(replicate)
        evaluator.follow(replica.store)
    app = create_app(evaluator, packages, replica)
    log.info("serving hooks", extra={"host": host, "port": port, "packages": sorted(packages)})
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False)
    return 0
