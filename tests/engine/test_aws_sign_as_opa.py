"""providers.aws.sign_req beside OPA's evaluator (tests/opa_oracle.py); refused at load on the code before."""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import EvaluationError

CONFIG = {"aws_access_key": "AKID", "aws_secret_access_key": "SECRET", "aws_service": "s3", "aws_region": "eu-west-1"}
NS = 1451311705000000000

CASES = [
    ({"method": "get", "url": "http://example.com"}, CONFIG),
    ({"method": "GET", "url": "https://example.com:8443/a/b.txt?x=1&y=two"}, CONFIG),
    ({"method": "PUT", "url": "https://u:p@example.com/k", "raw_body": "hello"}, CONFIG),
    (
        {"method": "POST", "url": "https://example.com/", "body": {"b": [1, 25, "<&>"], "a": None, "c": {"z": True}}},
        CONFIG,
    ),
    ({"method": "POST", "url": "https://example.com/", "body": {"s": ["b", "a"]}, "raw_body": "raw"}, CONFIG),
    (
        {
            "method": "get",
            "url": "https://example.com",
            "headers": {"Foo": "bar", "User-Agent": "x", "Authorization": "y"},
        },
        CONFIG,
    ),
    ({"method": "get", "url": "https://example.com", "headers": {"x-amz-content-sha256": "mine", "n": 5}}, CONFIG),
    ({"method": "get", "url": "https://example.com"}, {**CONFIG, "aws_session_token": "TOKEN"}),
    ({"method": "get", "url": "https://example.com"}, {**CONFIG, "aws_service": "execute-api"}),
    ({"method": "get", "url": "https://example.com", "body": {"a": 1}}, {**CONFIG, "disable_payload_signing": True}),
    ({"method": "get", "url": "https://example.com"}, {**CONFIG, "disable_payload_signing": "yes"}),
    ({"method": "get", "url": "https://example.com"}, {k: v for k, v in CONFIG.items() if k != "aws_region"}),
    ({"method": "get", "url": "https://example.com"}, {**CONFIG, "aws_region": 1}),
    ({"method": "get"}, CONFIG),
    ({"method": 1, "url": "https://example.com"}, CONFIG),
    ({"method": "get", "url": "https://example.com", "bogus": 1}, CONFIG),
    ({"method": "get", "url": "https://example.com", "headers": "x"}, CONFIG),
]


@pytest.mark.parametrize(("request_", "config"), CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("time_ns", [NS, 0, 1.5])
def test_sign_req_answers_as_opa(request_: dict[str, Any], config: dict[str, Any], time_ns: Any) -> None:
    text = "package p\n\nx := providers.aws.sign_req(input.r, input.c, input.t)\n"
    mine, opa = opa_oracle.both(text, {"r": request_, "c": config, "t": time_ns})
    assert mine == opa


@pytest.mark.parametrize(
    "url",
    ["https://example.com/a%20b", "https://example.com/a b", "https://exa mple.com/", "https://example.com/?q=a b"],
)
def test_a_url_go_may_read_otherwise_is_refused(url: str) -> None:
    module = Module(
        "p.rego", 'package p\n\nx := providers.aws.sign_req({"method": "get", "url": input.u}, input.c, 0)\n'
    )
    with pytest.raises(EvaluationError, match="may be signed otherwise than OPA"):
        EmbeddedEngine(Bundle((module,))).evaluate("data.p.x", {"u": url, "c": CONFIG})


def test_a_body_holding_a_fraction_is_refused() -> None:
    """OPA signs a number's text as written (2.50, 5.0); the embedded engine keeps no number's text."""
    module = Module(
        "p.rego",
        'package p\n\nx := providers.aws.sign_req({"method": "get", "url": "https://e", "body": {"n": 2.5}}, input, 1)',
    )
    with pytest.raises(EvaluationError, match="may be written otherwise by OPA"):
        EmbeddedEngine(Bundle((module,))).evaluate("data.p.x", CONFIG)
