"""io.jwt.encode_sign and io.jwt.encode_sign_raw as OPA: a JWS in compact serialization.

encode_sign_raw signs the header and payload texts as given (OPA's jws.SignLiteral); encode_sign
writes its header and payload objects as OPA does (common.go_json) and signs those. The key is
a JWK or the first key of a JWK set, private for RS*, PS*, ES* and EdDSA. The
header's `alg` chooses the algorithm; a payload that is not JSON is an error unless the header's
`typ` is something other than JWT. HS*, RS* and EdDSA signatures are deterministic, as in OPA; PS*
and ES* are randomised in both.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

from regokite.engine.extensions.common import (
    BuiltinError,
    base64url_decode,
    builtin,
    go_json,
    json_object,
    object_operand,
    string_operand,
)

_BITS = {
    "256": (hashes.SHA256, hashlib.sha256),
    "384": (hashes.SHA384, hashlib.sha384),
    "512": (hashes.SHA512, hashlib.sha512),
}
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
_CURVE_BITS = {"ES256": (ec.SECP256R1, 32), "ES384": (ec.SECP384R1, 48), "ES512": (ec.SECP521R1, 66)}


@builtin("io.jwt.encode_sign_raw")
def encode_sign_raw(header: Any, payload: Any, key: Any) -> str:
    name = "io.jwt.encode_sign_raw"
    return _signed(string_operand(name, header, 1), string_operand(name, payload, 2), string_operand(name, key, 3))


@builtin("io.jwt.encode_sign")
def encode_sign(header: Any, payload: Any, key: Any) -> str:
    name = "io.jwt.encode_sign"
    texts = [go_json(name, object_operand(name, value, i)) for i, value in enumerate((header, payload, key), start=1)]
    return _signed(*texts)


def _signed(header: str, payload: str, jwk_text: str) -> str:
    jwk = _first_jwk(jwk_text)
    fields = json_object(header, "invalid JWS header")
    alg = fields.get("alg")
    if not isinstance(alg, str) or alg not in _SIGNERS:
        raise BuiltinError("unknown signature algorithm")
    typ = fields.get("typ", "")
    if typ in ("", "JWT"):
        try:
            json.loads(payload)
        except ValueError:
            raise BuiltinError("type is JWT but payload is not JSON") from None
    signing_input = f"{_b64(header.encode())}.{_b64(payload.encode())}"
    return f"{signing_input}.{_b64(_SIGNERS[alg](jwk, signing_input.encode()))}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _first_jwk(text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise BuiltinError(f"failed to parse a JWK key (set): {exc}") from None
    if isinstance(parsed, dict) and "keys" in parsed:
        parsed = parsed["keys"][0] if isinstance(parsed["keys"], list) and parsed["keys"] else None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("kty"), str):
        raise BuiltinError("failed to parse a JWK key (set): no key")
    return parsed


def _int(jwk: dict[str, Any], field: str) -> int:
    value = jwk.get(field)
    if not isinstance(value, str):
        raise BuiltinError(f"failed to parse a JWK key: missing {field}")
    return int.from_bytes(base64url_decode(value), "big")


def _rsa(jwk: dict[str, Any]) -> rsa.RSAPrivateKey:
    if jwk["kty"] != "RSA":
        raise BuiltinError("JWK derived key type and keyType parameter do not match")
    n, e, d = _int(jwk, "n"), _int(jwk, "e"), _int(jwk, "d")
    if all(isinstance(jwk.get(f), str) for f in ("p", "q")):
        p, q = _int(jwk, "p"), _int(jwk, "q")
    else:
        p, q = rsa.rsa_recover_prime_factors(n, e, d)
    numbers = rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), rsa.RSAPublicNumbers(e, n)
    )
    return numbers.private_key()


def _hs(bits: str) -> Callable[[dict[str, Any], bytes], bytes]:
    def sign(jwk: dict[str, Any], data: bytes) -> bytes:
        if jwk["kty"] != "oct":
            raise BuiltinError("JWK derived key type and keyType parameter do not match")
        return hmac.new(base64url_decode(str(jwk.get("k", ""))), data, _BITS[bits][1]).digest()

    return sign


def _rs(bits: str, pss: bool) -> Callable[[dict[str, Any], bytes], bytes]:
    def sign(jwk: dict[str, Any], data: bytes) -> bytes:
        digest = _BITS[bits][0]()
        scheme = padding.PSS(padding.MGF1(digest), digest.digest_size) if pss else padding.PKCS1v15()
        return _rsa(jwk).sign(data, scheme, digest)

    return sign


def _es(alg: str) -> Callable[[dict[str, Any], bytes], bytes]:
    curve, size = _CURVE_BITS[alg]

    def sign(jwk: dict[str, Any], data: bytes) -> bytes:
        if jwk["kty"] != "EC" or _CURVES.get(jwk.get("crv", "")) is not curve:
            raise BuiltinError("JWK derived key type and keyType parameter do not match")
        public = ec.EllipticCurvePublicNumbers(_int(jwk, "x"), _int(jwk, "y"), curve())
        key = ec.EllipticCurvePrivateNumbers(_int(jwk, "d"), public).private_key()
        r, s = utils.decode_dss_signature(key.sign(data, ec.ECDSA(_BITS[alg[2:]][0]())))
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")

    return sign


def _eddsa(jwk: dict[str, Any], data: bytes) -> bytes:
    if jwk["kty"] != "OKP" or jwk.get("crv") != "Ed25519":
        raise BuiltinError("JWK derived key type and keyType parameter do not match")
    return ed25519.Ed25519PrivateKey.from_private_bytes(base64url_decode(str(jwk.get("d", "")))).sign(data)


_SIGNERS: dict[str, Callable[[dict[str, Any], bytes], bytes]] = {
    **{f"HS{b}": _hs(b) for b in _BITS},
    **{f"RS{b}": _rs(b, False) for b in _BITS},
    **{f"PS{b}": _rs(b, True) for b in _BITS},
    **{f"ES{b}": _es(f"ES{b}") for b in _BITS},
    "EdDSA": _eddsa,
}
