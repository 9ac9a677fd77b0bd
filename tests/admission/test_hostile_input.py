"""Hostile reviews: each class is a 400 naming the problem, never a crash or a 500.

In process (the ASGI app, no sockets): fast, and a crash of the engine would
take the test run down with it, which is the failure these tests guard
against. tests/admission/test_fuzz.py replays the same classes over HTTPS.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging

import httpx
import pytest

from regokite.admission.app import ServingState, create_app
from regokite.admission.policies import load_policy_set
from regokite.admission.review import BadReview, parse_review
from regokite.input_guard import MAX_DEPTH
from tests.admission.reviews import deployment, review

REPLICAS = """package admission.replicas

deny contains msg if {
	input.request.object.spec.replicas > 3
	msg := sprintf("replicas %d is more than 3", [input.request.object.spec.replicas])
}
"""

MATCHED = """package admission.matched

match := {"rules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["*"]}]}

deny contains "matched" if input.request.object.metadata.labels.deny == "yes"
"""

LABEL = """package admission.label

patch contains {"op": "add", "path": "/metadata/labels", "value": {"team": "core"}} if {
	not input.request.object.metadata.labels
}
"""


def text(doc: object) -> bytes:
    return json.dumps(doc).encode()


def with_object_field(key: str, raw_json: str | bytes) -> bytes:
    """A valid review whose object has `key` set to the JSON text `raw_json` (what json.dumps cannot write)."""
    doc = review(deployment())
    doc["request"]["object"]["metadata"]["annotations"] = {key: "@@"}
    return text(doc).replace(b'"@@"', raw_json if isinstance(raw_json, bytes) else raw_json.encode())


def nested_object(levels: int) -> dict:
    """A review whose whole document is `levels` objects/arrays deep (review 1, request 2, object 3, ...)."""
    doc = review(deployment())
    obj = doc["request"]["object"]
    value: list = []
    for _ in range(levels - 5):  # object.spec.deep holds the rest
        value = [value]
    obj["spec"]["deep"] = value
    return doc


HOSTILE = [
    (with_object_field("a", '"\\ud800"'), "request.object.metadata.annotations.a: string holds a lone surrogate"),
    (with_object_field("a", '"x\\udc00y"'), "lone surrogate U+DC00"),
    (with_object_field("a", b'"\xed\xa0\x80"'), "not UTF-8 JSON: invalid continuation byte"),  # U+D800 as UTF-8
    (with_object_field("a", str(2**64 + 5)), "annotations.a: integer 18446744073709551621 is outside"),
    (with_object_field("a", str(-(2**63) - 1)), "is outside [-2^63, 2^63-1]"),
    (with_object_field("a", "9" * 5000), "integer of 5000 digits is outside"),
    (with_object_field("a", "NaN"), "NaN is not a JSON number"),
    (with_object_field("a", "Infinity"), "Infinity is not a JSON number"),
    (with_object_field("a", "-Infinity"), "-Infinity is not a JSON number"),
    (with_object_field("a", "1e400"), "annotations.a: inf is not a JSON number"),
    (text(nested_object(MAX_DEPTH + 1)), f"nested deeper than {MAX_DEPTH} levels"),
    (with_object_field("a", "[" * 50_000 + "]" * 50_000), f"nested deeper than {MAX_DEPTH} levels"),
    (text(review(deployment())).decode().encode("utf-16"), "not UTF-8 JSON: it looks like UTF-16"),
    (text(review(deployment())).decode().encode("utf-16-le"), "not UTF-8 JSON: it looks like UTF-16"),
    (text(review(deployment())).decode().encode("utf-32"), "not UTF-8 JSON: it looks like UTF-16 or UTF-32"),
    (b"\xef\xbb\xbf" + text(review(deployment())), "not UTF-8 JSON: it starts with a byte order mark"),
]
IDS = [
    "surrogate",
    "surrogate-mid",
    "surrogate-raw-bytes",
    "2^64+5",
    "-2^63-1",
    "5000-digits",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "depth-max+1",
    "depth-50000",
    "utf-16",
    "utf-16-le",
    "utf-32",
    "bom",
]


@pytest.mark.parametrize(("body", "complaint"), HOSTILE, ids=IDS)
def test_each_hostile_class_is_refused_naming_the_problem(body: bytes, complaint: str) -> None:
    with pytest.raises(BadReview) as refused:
        parse_review(body)
    assert complaint in str(refused.value)


def test_the_limits_themselves_are_taken() -> None:
    assert parse_review(text(nested_object(MAX_DEPTH)))
    assert parse_review(with_object_field("a", str(2**63 - 1)))
    assert parse_review(with_object_field("a", str(-(2**63))))
    assert parse_review(with_object_field("a", '"\\ud83d\\ude00 caf\\u00e9"'))  # a surrogate pair is one scalar


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("policies")
    for name, source in {"replicas.rego": REPLICAS, "matched.rego": MATCHED, "label.rego": LABEL}.items():
        (root / name).write_text(source)
    return create_app(ServingState(load_policy_set([str(root)])))


async def call(app, path: str, body: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post(path, content=body)


def post(app, path: str, body: bytes) -> httpx.Response:
    return asyncio.run(call(app, path, body))


@pytest.mark.parametrize(("body", "complaint"), HOSTILE, ids=IDS)
@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
def test_the_server_answers_each_class_with_a_400_json_error(app, endpoint: str, body: bytes, complaint: str) -> None:
    answer = post(app, endpoint, body)
    assert answer.status_code == 400
    assert answer.json()["reason"] == "malformed"
    assert answer.json()["error"].startswith("not an AdmissionReview: ")


def test_mutate_works_at_the_deepest_nesting_taken(app) -> None:
    doc = nested_object(MAX_DEPTH)
    answer = post(app, "/mutate", text(doc))
    assert answer.status_code == 200
    response = answer.json()["response"]
    assert response["allowed"] is True
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"team": "core"}}
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kind.group", 5),
        ("kind.group", ["apps"]),
        ("kind.kind", {"a": 1}),
        ("userInfo", ["alice"]),
        ("userInfo", "alice"),
        ("object.metadata", ["web"]),
        ("object.metadata", 7),
        ("name", 12),
        ("namespace", {"n": 1}),
        ("dryRun", "yes"),
    ],
)
def test_odd_shapes_elsewhere_never_turn_a_denial_into_a_500(app, caplog, field: str, value: object) -> None:
    doc = review(deployment(replicas=9))
    target = doc["request"]
    *parents, last = field.split(".")
    for key in parents:
        target = target[key]
    target[last] = value
    with caplog.at_level(logging.INFO, logger="regokite.admission.access"):
        answer = post(app, "/validate", text(doc))
    assert answer.status_code == 200
    response = answer.json()["response"]
    if field != "object.metadata":
        assert response["allowed"] is False
        assert response["status"]["message"] == "[admission.replicas] replicas 9 is more than 3"
    access = [r for r in caplog.records if r.name == "regokite.admission.access"]
    assert len(access) == 1 and access[0].uid == doc["request"]["uid"]


def test_a_client_gone_mid_body_is_counted_not_a_traceback(app, caplog) -> None:
    body = text(review(deployment()))
    messages = [
        {"type": "http.request", "body": body[:100], "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": "/validate",
        "raw_path": b"/validate",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8443),
    }
    with caplog.at_level(logging.DEBUG):
        asyncio.run(app(scope, receive, send))  # raised ClientDisconnect before
    assert not any(r.exc_info for r in caplog.records)
    assert sent[0]["status"] == 400
