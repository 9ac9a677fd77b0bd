"""Malformed AdmissionReviews are refused with a message naming the problem."""

from __future__ import annotations

import json

import pytest

from regokite.admission.review import BadReview, parse_review
from tests.admission.reviews import deployment, review


def body(doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_a_v1_review_parses() -> None:
    assert parse_review(body(review(deployment()))).operation == "CREATE"


def test_a_v1beta1_review_parses() -> None:
    assert parse_review(body(review(deployment(), api_version="admission.k8s.io/v1beta1"))).api_version.endswith(
        "v1beta1"
    )


def broken(path: str, value: object) -> dict:
    doc = review(deployment())
    target = doc
    *parents, last = path.split(".")
    for p in parents:
        target = target[p]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return doc


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        (b"\x00\xff\xfe garbage", "not UTF-8 JSON"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Admiss', "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (body({**review(deployment()), "kind": "Pod"}), "kind must be AdmissionReview"),
        (body({**review(deployment()), "apiVersion": "v1"}), "apiVersion must be one of"),
        (body(broken("request", KeyError)), "request is missing"),
        (body(broken("request.uid", KeyError)), "request.uid is missing"),
        (body(broken("request.uid", "")), "request.uid is missing"),
        (body(broken("request.operation", "PATCH")), "request.operation must be one of"),
        (body(broken("request.kind", "Deployment")), "request.kind must be an object"),
        (body(broken("request.object", [1])), "request.object must be an object or null"),
        (body(broken("request.object", None)), "request.object is required for CREATE"),
    ],
    ids=lambda value: value if isinstance(value, str) else "body",  # the bodies hold random uids
)
def test_malformed_reviews_are_refused_with_the_reason(raw: bytes, complaint: str) -> None:
    with pytest.raises(BadReview, match=complaint):
        parse_review(raw)
