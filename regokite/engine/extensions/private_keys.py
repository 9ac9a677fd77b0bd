"""crypto.x509.parse_rsa_private_key as OPA: the first private key of PEM (or base64 PEM) data as a JWK.

OPA reads RSA PRIVATE KEY (PKCS #1), PRIVATE KEY (PKCS #8) and EC PRIVATE KEY blocks, skips other
blocks, answers null when it finds none, and writes the key's numbers as unpadded base64url of
their big-endian bytes (an RSA key: kty, n, e, d, p, q, dp, dq, qi; an EC key kty, crv, x, y, d at the curve's size).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, string_operand

NAME = "crypto.x509.parse_rsa_private_key"
_CURVES = {"secp256r1": ("P-256", 32), "secp384r1": ("P-384", 48), "secp521r1": ("P-521", 66)}
_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


@builtin(NAME)
def parse_rsa_private_key(value: Any) -> dict[str, str] | None:
    text = string_operand(NAME, value, 1)
    if text == "":
        raise BuiltinError(f"{NAME}: input PEM data was empty")
    data = text.encode()
    if not text.startswith("-----BEGIN"):
        data = _std_b64(data, strict=True)
    decoded = _std_b64(data, strict=False)  # OPA tries base64 once more, keeping the text where it fails
    data = decoded if decoded is not None else data
    for kind, body in _BLOCK.findall(data):
        if kind not in (b"RSA PRIVATE KEY", b"PRIVATE KEY", b"EC PRIVATE KEY"):
            continue
        der = _std_b64(b"".join(body.split()), strict=True)
        try:
            key = serialization.load_der_private_key(der, password=None)
        except ValueError as exc:
            raise BuiltinError(f"{NAME}: {exc}") from None
        if isinstance(key, rsa.RSAPrivateKey):
            return _rsa_jwk(key)
        if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVES:
            return _ec_jwk(key)
        raise Refusal(f"{NAME}: a {type(key).__name__}: its JWK is not written as OPA writes it here")
    return None


def _std_b64(data: bytes, *, strict: bool) -> Any:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        if strict:
            raise BuiltinError(f"{NAME}: illegal base64 data") from None
        return None


def _unpadded(number: int) -> str:
    raw = number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _ec_jwk(key: ec.EllipticCurvePrivateKey) -> dict[str, str]:
    numbers = key.private_numbers()
    crv, size = _CURVES[key.curve.name]
    coordinates = {"x": numbers.public_numbers.x, "y": numbers.public_numbers.y, "d": numbers.private_value}
    encoded = {
        k: base64.urlsafe_b64encode(v.to_bytes(size, "big")).rstrip(b"=").decode() for k, v in coordinates.items()
    }
    return {"kty": "EC", "crv": crv, **encoded}


def _rsa_jwk(key: rsa.RSAPrivateKey) -> dict[str, str]:
    n = key.private_numbers()
    fields = {"n": n.public_numbers.n, "e": n.public_numbers.e, "d": n.d, "p": n.p, "q": n.q}
    fields |= {"dp": n.dmp1, "dq": n.dmq1, "qi": n.iqmp}
    return {"kty": "RSA", **{k: _unpadded(v) for k, v in fields.items()}}
