"""crypto.x509.parse_rsa_private_key beside OPA's evaluator (tests/opa_oracle.py); refused at load on
the code before."""

from __future__ import annotations

import base64
import functools

import opa_oracle
import pytest
from cryptography.hazmat.primitives import serialization as s
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def _pem(key: object, form: s.PrivateFormat) -> str:
    return key.private_bytes(s.Encoding.PEM, form, s.NoEncryption()).decode()  # type: ignore[attr-defined]


@functools.cache
def _inputs() -> dict[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pkcs1, pkcs8 = _pem(key, s.PrivateFormat.TraditionalOpenSSL), _pem(key, s.PrivateFormat.PKCS8)
    inputs = {
        "pkcs1": pkcs1,
        "pkcs8": pkcs8,
        "base64 pem": base64.b64encode(pkcs1.encode()).decode(),
        "two keys": pkcs1 + pkcs8,
        "not base64": "invalid",
        "empty": "",
        "another block": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        "text before": "junk\n" + pkcs1,
    }
    for curve in (ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1()):
        for i in range(4):
            inputs[f"{curve.name} {i}"] = _pem(ec.generate_private_key(curve), s.PrivateFormat.PKCS8)
    return inputs


@pytest.mark.parametrize("name", list(_inputs()))
def test_parse_rsa_private_key_answers_as_opa(name: str) -> None:
    mine, opa = opa_oracle.both("package p\n\nx := crypto.x509.parse_rsa_private_key(input)\n", _inputs()[name])
    assert mine == opa
