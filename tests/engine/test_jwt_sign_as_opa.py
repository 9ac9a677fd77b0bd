"""io.jwt.encode_sign / encode_sign_raw beside OPA's evaluator (tests/opa_oracle.py); both were refused
at load on the code before. HS*, RS* and EdDSA signatures are deterministic, so the tokens must be
OPA's own; PS* and ES* are randomised, so OPA must verify ours."""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import opa_oracle
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

PAYLOAD = {"iss": "joe", "exp": 1300819380, "aud": ["bob", "saul"], "x": {"b": 1, "a": "<&>"}}


def _b64(number: int, size: int | None = None) -> str:
    data = number.to_bytes(size or (number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@functools.cache
def _keys() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """kty -> (private JWK, public JWK)."""
    r = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_numbers()
    public_rsa = {"kty": "RSA", "n": _b64(r.public_numbers.n), "e": _b64(r.public_numbers.e)}
    private_rsa = {**public_rsa, "d": _b64(r.d), "p": _b64(r.p), "q": _b64(r.q)}
    e = ec.generate_private_key(ec.SECP256R1()).private_numbers()
    public_ec = {"kty": "EC", "crv": "P-256", "x": _b64(e.public_numbers.x, 32), "y": _b64(e.public_numbers.y, 32)}
    okp = ed25519.Ed25519PrivateKey.generate()
    raw = okp.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    public_okp = {"kty": "OKP", "crv": "Ed25519", "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode()}
    seed = okp.private_bytes_raw()
    return {
        "oct": ({"kty": "oct", "k": "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjA"},)
        * 2,
        "RSA": (private_rsa, public_rsa),
        "EC": ({**public_ec, "d": _b64(e.private_value, 32)}, public_ec),
        "OKP": ({**public_okp, "d": base64.urlsafe_b64encode(seed).rstrip(b"=").decode()}, public_okp),
    }


ENCODE = """package p

x := io.jwt.encode_sign(input.h, input.p, input.k)

y := io.jwt.encode_sign_raw(input.hr, input.pr, input.kr)
"""


def _given(header: dict[str, Any], kty: str, raw_payload: str | None = None) -> dict[str, Any]:
    private = _keys()[kty][0]
    raw_header = json.dumps(header, indent=1).replace("\n", "\r\n")
    payload = json.dumps(PAYLOAD) if raw_payload is None else raw_payload
    return {
        "h": header,
        "p": PAYLOAD,
        "k": private,
        "hr": raw_header,
        "pr": payload,
        "kr": json.dumps({"keys": [private]}),
    }


@pytest.mark.parametrize(
    ("alg", "kty"),
    [("HS256", "oct"), ("HS384", "oct"), ("HS512", "oct"), ("RS256", "RSA"), ("RS512", "RSA"), ("EdDSA", "OKP")],
)
@pytest.mark.parametrize("rule", ["x", "y"])
def test_a_deterministic_signature_is_opas_token(alg: str, kty: str, rule: str) -> None:
    mine, opa = opa_oracle.both(ENCODE, _given({"alg": alg, "typ": "JWT"}, kty), ref=f"data.p.{rule}")
    assert mine == opa and isinstance(mine, str)


@pytest.mark.parametrize(("alg", "kty"), [("PS256", "RSA"), ("PS384", "RSA"), ("ES256", "EC")])
def test_a_randomised_signature_verifies_in_opa(alg: str, kty: str) -> None:
    given = _given({"alg": alg}, kty)
    token = EmbeddedEngine(Bundle((Module("p.rego", ENCODE),))).evaluate("data.p.x", given)
    check = f"package p\n\nok := io.jwt.verify_{alg.lower()}(input.t, input.k)\n"
    _, verified = opa_oracle.both(check, {"t": token, "k": json.dumps(_keys()[kty][1])}, ref="data.p.ok")
    assert verified is True


@pytest.mark.parametrize(
    ("header", "kty", "payload"),
    [
        ({"alg": "dummy"}, "oct", None),
        ({}, "oct", None),
        ({"alg": "HS256"}, "oct", "not json"),
        ({"alg": "HS256", "typ": "JWT"}, "oct", ""),
        ({"alg": "HS256", "typ": "text/plain"}, "oct", ""),
        ({"alg": "HS256", "typ": "text/plain"}, "oct", "e"),
        ({"alg": "RS256"}, "oct", None),
        ({"alg": "HS256"}, "RSA", None),
    ],
)
def test_headers_payloads_and_keys_answer_as_opa(header: dict[str, Any], kty: str, payload: str | None) -> None:
    mine, opa = opa_oracle.both(ENCODE, _given(header, kty, payload), ref="data.p.y")
    assert mine == opa
