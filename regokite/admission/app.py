"""The admission HTTP application: endpoints, access log, metrics, health.

Review endpoints take the raw body and answer with a prebuilt JSON response:
request validation is `review.parse_review`'s job, so no model layer sits on
the hot path. A POST to a review endpoint goes straight to it (`ReviewRoutes`),
past FastAPI's middleware and router, which answer everything else.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from regokite.admission.decide import Decision, Mode, decide, label_verdict, select
from regokite.admission.policies import PolicySet
from regokite.admission.review import BadReview, Review, Verdict, parse_review, response
from regokite.decisionlogs import events
from regokite.decisionlogs.logger import DecisionLogger
from regokite.engine import builtin_errors
from regokite.gatekeeper.exempt import LABEL_WEBHOOK_PATH, Exemptions
from regokite.kube.informer import staleness
from regokite.ops import admission_metrics as metrics
from regokite.ops import builtin_error_metrics
from regokite.ops.logging import log_context
from regokite.ops.metrics import exposition
from regokite.replication.replica_feed import ReplicaFeed
from regokite.replication.replicate import Replicator
from regokite.sources.applied import WEBHOOK_PATH as SOURCES_WEBHOOK_PATH
from regokite.sources.applied import SourceChecks

builtin_errors.listen(builtin_error_metrics.count)  # this server's /metrics counts its undefined calls

log = logging.getLogger("regokite.admission")
access_log = logging.getLogger("regokite.admission.access")


@dataclass
class ServingState:
    """What the server answers with now; `policy_set` is swapped whole on reload."""

    policy_set: PolicySet
    deadline_seconds: float = 3.0
    max_body_bytes: int = 8 * 1024 * 1024
    reload_error: str | None = None
    reloaded_at: float = field(default_factory=time.time)
    files_read_at: float = field(default_factory=time.time)  # when the files of the set served were read
    tls_error: str | None = None
    watch: Callable[[str | None], None] = lambda _policy: None  # the watchdog's tracker for this worker
    replica: Replicator | ReplicaFeed | None = None  # the cluster data policies read, when they read any
    exemptions: Exemptions = field(default_factory=Exemptions)  # --exempt-namespace*: who may carry the ignore label
    # --log-denies / --emit-admission-events: hears each review's decision (Gatekeeper's violation reports)
    on_decision: Callable[[Review, Decision, PolicySet], None] | None = None
    # the bundle plugin's status (OPA's status API document), when bundles are downloaded
    bundle_status: Callable[[], dict[str, Any] | None] | None = None
    # OPA's decision logs (the configuration file's decision_logs): one event per review
    decision_log: DecisionLogger | None = None
    source_checks: SourceChecks | None = None  # /v1/admitsource: ConfigMaps and controller definitions
    stopping: Callable[[], bool] = lambda: False  # SIGTERM received: deciding through --shutdown-delay, not ready

    def swap(self, new: PolicySet, files_read_at: float | None = None) -> None:
        old, self.policy_set = self.policy_set, new
        self.reload_error = None
        self.reloaded_at = time.time()
        self.files_read_at = self.reloaded_at if files_read_at is None else files_read_at
        metrics.policies_loaded.set(len(new.policies))
        metrics.policy_reload_healthy.set(1)
        if old is not new:
            old.close()

    def reload_failed(self, error: str) -> None:
        self.reload_error = error
        metrics.policy_reload_healthy.set(0)


class BodyTooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, reason: str, message: str) -> JSONResponse:
    metrics.bad_requests.labels(reason).inc()
    return JSONResponse({"error": message, "reason": reason}, status_code=status)


class ReviewRoutes:
    """The ASGI application: a POST to /validate or /mutate (with or without a policy after it) goes
    straight to `_review`; everything else, other methods on those paths included, to FastAPI.

    FastAPI's stack (its telemetry check, exception and exit-stack middleware, a regex per route) cost
    as much CPU as the access log on every review. The paths taken here are exactly those the
    `Route`s registered in `create_app` match for a POST (Starlette's `{policy:path}` is `.*`, which
    stops at a line feed: such a path goes the long way, as does any request under a root path), and
    an exception escaping the review is answered as FastAPI's stack answers it
    (`ServerErrorMiddleware`: a plain 500, then re-raised for uvicorn to log).
    """

    def __init__(self, app: FastAPI, state: ServingState) -> None:
        self.app, self.state = app, state
        self._review = ServerErrorMiddleware(self._serve)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = review_target(scope)
        if target is None:
            await self.app(scope, receive, send)
            return
        scope["regokite.review"] = target
        await self._review(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        mode, policy = scope["regokite.review"]
        scope["path_params"] = {} if policy is None else {"policy": policy}  # as the Route would set them
        name = policy.replace("/", ".").replace("-", "_") if policy else None
        response = await _review(self.state, Request(scope, receive, send), mode, name)
        await response(scope, receive, send)


def review_target(scope: Scope) -> tuple[Mode, str | None] | None:
    """The review endpoint (mode, policy path or None) a request is a POST to; None for any other request."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    for mode in ("validate", "mutate"):
        if path == f"/{mode}":
            return cast(Mode, mode), None
        if path.startswith(f"/{mode}/") and "\n" not in path:
            return cast(Mode, mode), path[len(mode) + 2 :]
    return None


def create_app(state: ServingState, lifespan: Callable[[FastAPI], Any] | None = None) -> ReviewRoutes:
    app = FastAPI(title="regokite admission", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.serving = state
    metrics.policies_loaded.set(len(state.policy_set.policies))
    metrics.policy_reload_healthy.set(1)

    def review_route(mode: Mode) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            policy = request.path_params.get("policy")
            name = policy.replace("/", ".").replace("-", "_") if policy else None
            return await _review(state, request, mode, name)

        return endpoint

    # Plain Starlette routes: the review endpoints read the raw body themselves,
    # and FastAPI's parameter resolution is pure overhead on the hot path. A POST
    # reaches them through ReviewRoutes; FastAPI answers other methods (405).
    for mode in ("validate", "mutate"):
        app.router.routes.append(Route(f"/{mode}", review_route(mode), methods=["POST"]))
        app.router.routes.append(Route(f"/{mode}/{{policy:path}}", review_route(mode), methods=["POST"]))

    def checking(endpoint: str, verdict_of: Callable[[Review], Verdict]) -> Callable[[Request], Awaitable[Response]]:
        """A webhook that checks the object itself, before and beside any policy: Gatekeeper's namespace
        label, the policy sources regokite loads."""

        async def answer(request: Request) -> Response:
            try:
                review = parse_review(await _read_body(request, state.max_body_bytes))
            except BodyTooLarge as exc:
                return _error(400, "too_large", str(exc))
            except BadReview as exc:
                return _error(400, "malformed", f"not an AdmissionReview: {exc}")
            except ClientDisconnect:
                return _error(400, "disconnected", "client disconnected before sending the whole body")
            verdict = verdict_of(review)
            access_log.info("review", extra={**review.summary(), "endpoint": endpoint, "allowed": verdict.allowed})
            return Response(json.dumps(response(review, verdict)), media_type="application/json")

        return answer

    # Gatekeeper's namespace-label webhook: only exempt namespaces may carry its ignore label
    label_endpoint = checking("admitlabel", lambda review: label_verdict(review, state.exemptions))
    app.router.routes.append(Route(LABEL_WEBHOOK_PATH, label_endpoint, methods=["POST"]))
    source_endpoint = checking("admitsource", lambda review: _source_verdict(state, review))
    app.router.routes.append(Route(SOURCES_WEBHOOK_PATH, source_endpoint, methods=["POST"]))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        return _readiness(state)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        body, content_type = exposition()
        return Response(body, media_type=content_type)

    return ReviewRoutes(app, state)


async def _review(state: ServingState, request: Request, mode: Mode, policy: str | None) -> Response:
    """One review: read and parse the body, decide under the deadline, log and count it, answer."""
    started = time.monotonic()
    endpoint = mode if policy is None else f"{mode}/{policy}"
    try:
        body = await _read_body(request, state.max_body_bytes)
    except BodyTooLarge as exc:
        return _error(400, "too_large", str(exc))
    except ClientDisconnect:  # gone mid-body: nobody to answer; counted, not a traceback
        log.debug("client disconnected before sending the whole body", extra={"endpoint": endpoint})
        return _error(400, "disconnected", "client disconnected before sending the whole body")
    try:
        review = parse_review(body)
    except BadReview as exc:
        return _error(400, "malformed", f"not an AdmissionReview: {exc}")
    current = state.policy_set
    missing = cluster_data_missing(state, current)
    if missing is not None:
        # an error, not a denial: the API server applies the webhook's failurePolicy
        return _error(503, "not_ready", f"cluster data not loaded yet ({missing}): no policy decides before it is")
    if policy is not None and not select(current, mode, policy):
        return _error(404, "unknown_policy", f"no {mode} policy named {policy!r}")
    try:
        deadline = started + state.deadline_seconds
        with log_context(uid=review.uid):  # for what policies print()
            decision = decide(current, review, mode=mode, only=policy, deadline=deadline, on_policy=state.watch)
    except Exception as exc:  # a bug of ours must still fail closed with an AdmissionReview
        log.exception("admission decision failed", extra={"uid": review.uid})
        decision = Decision(Verdict(allowed=False, messages=[f"regokite internal error: {exc}"], code=500), [])
    finally:
        state.watch(None)
    if state.on_decision is not None:
        try:
            state.on_decision(review, decision, current)
        except Exception:  # a report must never change the answer
            log.exception("violation report failed", extra={"uid": review.uid})
    answer = response(review, decision.verdict)
    elapsed = time.monotonic() - started
    if state.decision_log is not None:
        try:
            _log_decision(state.decision_log, endpoint, review, decision, elapsed)
        except Exception:  # a decision log must never change the answer
            log.exception("decision log failed", extra={"uid": review.uid})
    _record(endpoint, decision, elapsed)
    _log_access(review.summary(), endpoint, decision, elapsed)
    return Response(json.dumps(answer), media_type="application/json")


def _log_decision(logger: DecisionLogger, endpoint: str, review: Review, decision: Decision, elapsed: float) -> None:
    """The review's decision as one OPA decision log event: the AdmissionReview as input, the answer and
    each policy's result as result."""
    result = {
        "allowed": decision.verdict.allowed,
        "policies": [
            {"policy": o.policy, "decision": o.decision, "messages": o.messages, "action": o.action}
            | ({"error": o.error} if o.error else {})
            for o in decision.outcomes
        ],
    }
    config = logger.config
    path = f"regokite/admission/{endpoint}"
    revisions = logger.revisions()
    logger.record(events.event(path, review.raw, result, labels=config.labels, revisions=revisions,
                               elapsed_ns=int(elapsed * 1e9)))  # fmt: skip


def _source_verdict(state: ServingState, review: Review) -> Verdict:
    """A policy or data ConfigMap, a controller definition: refused (422) when a server would not load it."""
    checks = state.source_checks
    refused = checks.refusal(review.request, state.policy_set.engine.bundle) if checks is not None else None
    return Verdict() if refused is None else Verdict(allowed=False, messages=[refused], code=422)


def cluster_data_missing(state: ServingState, policy_set: PolicySet) -> str | None:
    """What `policy_set` still lacks of the cluster data to decide on (None: nothing): a resource whose
    initial list is not in, or the engine's first complete load since it was (see `ReplicaLoader`)."""
    replica = state.replica
    if replica is None:
        return None
    if not replica.ready():
        return ", ".join(replica.pending())
    held, needed = policy_set.engine.loaded_generation(), replica.ready_at()
    if held is not None and needed is not None and held < needed:
        return f"loading {replica.objects()} objects into the engine"
    return None


def _log_access(summary: dict[str, Any], endpoint: str, decision: Decision, elapsed: float) -> None:
    access_log.info(
        "review",
        extra={
            **summary,
            "endpoint": endpoint,
            "allowed": decision.verdict.allowed,
            "policies": {o.policy: o.decision for o in decision.outcomes},
            "warnings": len(decision.verdict.warnings),
            "patched": bool(decision.verdict.patch),
            "duration_ms": round(elapsed * 1000, 3),
        },
    )


def _readiness(state: ServingState) -> JSONResponse:
    """/readyz: the policy set served and its last reload, TLS trouble, and the cluster data (503 until it is in)."""
    current = state.policy_set
    detail = {
        "status": "ok",
        "engine": current.engine.name,
        "policies": [p.name for p in current.policies],
        "reload": {
            "ok": state.reload_error is None,
            "error": state.reload_error,
            "at": state.reloaded_at,
            "files_read_at": state.files_read_at,  # a file changed after it is not served yet
        },
    }
    if current.not_served:
        detail["not_served"] = dict(current.not_served)  # --local: they read cluster data
    if state.tls_error:
        detail["tls"] = {"ok": False, "error": state.tls_error}
    if state.bundle_status is not None:
        # OPA's bundle status: revisions, downloads and activations, and why the last attempt failed
        detail["bundles"] = (state.bundle_status() or {}).get("bundles", {})
    if state.replica is not None:
        missing = cluster_data_missing(state, current)
        ready = missing is None
        watches = state.replica.health()
        detail["replication"] = {
            "ready": ready,
            "resources": [str(r) for r in state.replica.resources],
            "pending": state.replica.pending(),
            "objects": state.replica.objects(),
            "watches": watches,  # connected, last event's age: an outage is served from the last data, said here
            "stale_seconds": staleness(watches),
        }
        if not ready:
            detail["status"] = "loading cluster data"
            if state.replica.ready():
                detail["replication"]["loading"] = missing  # listed, not yet in the engine whole
            return JSONResponse(detail, status_code=503)
    if state.stopping():  # still deciding, but no longer to be sent reviews (a Pod being deleted)
        detail["status"] = "shutting down"
        return JSONResponse(detail, status_code=503)
    return JSONResponse(detail)


_children: dict[tuple[object, tuple[str, ...]], Any] = {}


def _labelled(metric: Any, *labels: str) -> Any:
    """`metric.labels(*labels)`, remembered: prometheus_client checks and locks on every call, for the same
    child each time (none of these is ever removed), and a review asks for four or more of them."""
    child = _children.get((metric, labels))
    if child is None:
        child = _children[(metric, labels)] = metric.labels(*labels)
    return child


def _record(endpoint: str, decision: Decision, elapsed: float) -> None:
    verdict = decision.verdict
    final = "allowed" if verdict.allowed else "denied"
    _labelled(metrics.admission_requests, endpoint, final).inc()
    _labelled(metrics.admission_latency, endpoint).observe(elapsed)
    for outcome in decision.outcomes:
        _labelled(metrics.admission_policy_decisions, outcome.policy, outcome.decision).inc()
        _labelled(metrics.policy_evaluation_latency, outcome.policy).observe(outcome.seconds)
        if outcome.decision == "error":
            metrics.evaluation_errors.labels(outcome.policy).inc()
            log.warning("policy error", extra={"policy": outcome.policy, "error": outcome.error})
