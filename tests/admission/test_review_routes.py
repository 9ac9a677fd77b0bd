"""ReviewRoutes: a POST to a review endpoint skips FastAPI's stack and answers exactly as the stack does.

Each request goes both ways in process, through `ReviewRoutes` and through
the FastAPI application behind it, and the answers (status, headers, body)
must be the same; `review_target` must pick what Starlette's router picks.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from starlette.routing import Match

import regokite.admission.app as app_module
from regokite.admission.app import ReviewRoutes, ServingState, create_app, review_target
from regokite.admission.policies import load_policy_set
from tests.admission.reviews import REPLICAS, deployment, label_policy, review

LABEL = label_policy("admission.team_label")

# Paths a POST takes straight to the review; the rest go through FastAPI (a review there too, for
# "/validate\n": Starlette's `$` matches before a final line feed; the long way answers it the same).
SHORT = [
    "/validate",
    "/mutate",
    "/validate/",
    "/mutate/",
    "/validate/admission/replicas",
    "/validate/admission.replicas",
]
SHORT += ["/mutate/admission/team-label", "/validate/no/such/policy"]
LONG = ["/validate/a\nb", "/validate\n", "/validatex", "/Validate", "//validate", "/healthz", "/admitlabel"]


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> ReviewRoutes:
    root: Path = tmp_path_factory.mktemp("policies")
    (root / "replicas.rego").write_text(REPLICAS)
    (root / "label.rego").write_text(LABEL)
    return create_app(ServingState(load_policy_set([str(root)]), max_body_bytes=4096))


def scope(path: str, method: str = "POST", root_path: str = "") -> dict:
    return {"type": "http", "method": method, "path": path, "root_path": root_path, "headers": []}


def starlette_route(routes: ReviewRoutes, path: str) -> tuple[str, str | None] | None:
    """The review route (path template, policy) Starlette's router matches for a POST to `path`."""
    for route in routes.app.router.routes:
        match, child = route.matches(scope(path))
        if match == Match.FULL:
            if route.path.startswith(("/validate", "/mutate")):
                return route.path.partition("/{")[0].strip("/"), child["path_params"].get("policy")
            return None
    return None


@pytest.mark.parametrize("path", SHORT)
def test_review_paths_go_where_starlette_routes_them(routes: ReviewRoutes, path: str) -> None:
    target = review_target(scope(path))
    assert target is not None
    assert target == starlette_route(routes, path)


@pytest.mark.parametrize("path", LONG)
def test_other_paths_go_the_long_way(path: str) -> None:
    assert review_target(scope(path)) is None


def test_other_methods_and_root_paths_go_the_long_way() -> None:
    assert review_target(scope("/validate", method="GET")) is None
    assert review_target(scope("/validate", method="PUT")) is None
    assert review_target(scope("/validate", root_path="/admission")) is None
    assert review_target({"type": "websocket", "path": "/validate"}) is None


async def both(routes: ReviewRoutes, method: str, path: str, body: bytes) -> tuple[httpx.Response, httpx.Response]:
    answers = []
    for app in (routes, routes.app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            answers.append(await client.request(method, path, content=body))
    return answers[0], answers[1]


def same(routes: ReviewRoutes, method: str, path: str, body: bytes) -> httpx.Response:
    fast, stack = asyncio.run(both(routes, method, path, body))
    assert fast.status_code == stack.status_code
    assert fast.headers.multi_items() == stack.headers.multi_items()
    assert fast.content == stack.content
    return fast


def body(replicas: int = 1, labels: dict[str, str] | None = None) -> bytes:
    return json.dumps(review(deployment("web", labels=labels, replicas=replicas))).encode()


@pytest.mark.parametrize(
    ("method", "path", "content", "status"),
    [
        ("POST", "/validate", body(), 200),
        ("POST", "/validate", body(replicas=5), 200),
        ("POST", "/validate/admission/replicas", body(replicas=5), 200),
        ("POST", "/mutate", body(labels={}), 200),
        ("POST", "/mutate/admission/team-label", body(labels={}), 200),
        ("POST", "/validate/no/such", body(), 404),
        ("POST", "/validate", b"{not json", 400),
        ("POST", "/validate", b'{"kind": "AdmissionReview"}', 400),
        ("POST", "/validate", b"x" * 5000, 400),
        ("GET", "/validate", b"", 405),
        ("PUT", "/mutate/admission/replicas", b"", 405),
    ],
    ids=lambda value: "body" if isinstance(value, bytes) else str(value),  # the bodies hold random uids
)
def test_answers_are_the_stacks(routes: ReviewRoutes, method: str, path: str, content: bytes, status: int) -> None:
    assert same(routes, method, path, content).status_code == status


def test_a_denial_is_answered(routes: ReviewRoutes) -> None:
    answer = same(routes, "POST", "/validate", body(replicas=5)).json()
    assert answer["response"]["allowed"] is False
    assert "replicas 5 is more than 3" in answer["response"]["status"]["message"]


def test_an_escaping_exception_is_the_stacks_500(routes: ReviewRoutes, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(app_module, "response", broken)

    async def call(app: object) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post("/validate", content=body())

    fast, stack = asyncio.run(call(routes)), asyncio.run(call(routes.app))
    assert fast.status_code == stack.status_code == 500
    assert fast.headers.multi_items() == stack.headers.multi_items()
    assert fast.content == stack.content == b"Internal Server Error"
