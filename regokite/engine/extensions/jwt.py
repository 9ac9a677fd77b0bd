"""io.jwt.decode, io.jwt.decode_verify and io.jwt.verify_*, as OPA evaluates them.

`cryptography` verifies every algorithm OPA accepts (RS/PS/ES/HS/EdDSA) and
reads PEM certificates and keys; a JWK is a few base64url integers, so no
JWT library is needed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, encode_dss_signature

from regokite.engine.extensions.common import (
    BuiltinError,
    base64url_decode,
    builtin,
    json_object,
    object_operand,
    string_operand,
)

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_ALGORITHMS = {f"{family}{bits}" for family in ("RS", "PS", "ES", "HS") for bits in _HASHES} | {"EdDSA"}
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
_CURVE_OF_ALG = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}


@dataclass(frozen=True)
class Token:
    header: str
    payload: str
    signature: str

    @property
    def signed(self) -> bytes:
        return f"{self.header}.{self.payload}".encode()

    def decoded_header(self) -> dict[str, Any]:
        try:
            text = base64url_decode(self.header)
        except BuiltinError as exc:
            raise BuiltinError(f"JWT header had invalid encoding: {exc}") from None
        try:
            header = _json_object(text)
        except BuiltinError as exc:
            raise BuiltinError(f"bad JWT header: {exc}") from None
        if "enc" in header:
            raise BuiltinError("JWT is a JWE object, which is not supported")
        return header

    def decoded_payload(self) -> bytes:
        try:
            return base64url_decode(self.payload)
        except BuiltinError as exc:
            raise BuiltinError(f"JWT payload had invalid encoding: {exc}") from None

    def decoded_signature(self) -> bytes:
        return base64url_decode(self.signature)


@dataclass(frozen=True)
class Key:
    key: Any
    alg: str = ""
    kid: str = ""


def _split(name: str, jwt: Any) -> Token:
    text = string_operand(name, jwt, 1)
    if "." not in text:
        raise BuiltinError("encoded JWT had no period separators")
    parts = text.split(".")
    if len(parts) != 3:
        raise BuiltinError(f"encoded JWT must have 3 sections, found {len(parts)}")
    return Token(*parts)


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BuiltinError(f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BuiltinError("decoded JSON type was not an Object")
    return value


def _header_fields(header: dict[str, Any]) -> tuple[str, str, str, bool]:
    """(alg, kid, cty, valid): OPA's checks of a JOSE header (RFC 7515 4.1)."""
    for field in ("alg", "kid", "typ", "cty"):
        if field in header and not isinstance(header[field], str):
            raise BuiltinError(f"{field}: must be a string")
    critical: set[str] = set()
    if "crit" in header:
        if not isinstance(header["crit"], list):
            raise BuiltinError("crit: must be a list")
        critical = {c for c in header["crit"] if isinstance(c, str)}
        if not critical:
            raise BuiltinError("crit: must be a nonempty list")
    unknown = set(header) - {"alg", "kid", "typ", "cty", "crit"}
    alg = header.get("alg", "")
    return alg, header.get("kid", ""), header.get("cty", ""), bool(alg) and not (unknown & critical)


@builtin("io.jwt.decode")
def decode(jwt: Any) -> list[Any]:
    token = _split("io.jwt.decode", jwt)
    header = token.decoded_header()
    payload = token.decoded_payload()
    if header.get("cty") == "JWT":
        return decode(payload.decode(errors="replace").strip("\"'"))
    return [header, _json_object(payload), token.decoded_signature().hex()]


def _b64int(jwk: dict[str, Any], field: str) -> int:
    value = jwk.get(field)
    if not isinstance(value, str):
        raise BuiltinError(f"failed to parse a JWK key (set): missing {field}")
    return int.from_bytes(base64url_decode(value), "big")


def _jwk_key(jwk: dict[str, Any]) -> Any:
    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_b64int(jwk, "e"), _b64int(jwk, "n")).public_key()
    if kty == "EC" and jwk.get("crv") in _CURVES:
        curve = _CURVES[jwk["crv"]]()
        return ec.EllipticCurvePublicNumbers(_b64int(jwk, "x"), _b64int(jwk, "y"), curve).public_key()
    if kty == "OKP" and jwk.get("crv") == "Ed25519":
        return ed25519.Ed25519PublicKey.from_public_bytes(base64url_decode(str(jwk.get("x", ""))))
    if kty == "oct":
        return base64url_decode(str(jwk.get("k", "")))
    raise BuiltinError(f"failed to parse a JWK key (set): unsupported key {jwk!r}")


def verification_keys(text: str) -> list[Key]:
    """A PEM certificate or public key, or a JWK or JWK set, as OPA reads them."""
    start = text.find("-----BEGIN ")
    if start >= 0:
        end_marker = text.find("-----END ", start)
        end = text.find("-----", end_marker + 9) + 5 if end_marker >= 0 else -1
        if end_marker >= 0 and end >= 5:
            kind = text[start + 11 : text.find("-----", start + 11)]
            if text[end:].strip():
                raise BuiltinError("extra data after a PEM certificate block")
            block = text[start:end].encode()
            try:
                if kind == "CERTIFICATE":
                    return [Key(x509.load_pem_x509_certificate(block).public_key())]
                if kind == "PUBLIC KEY":
                    return [Key(serialization.load_pem_public_key(block))]
            except (ValueError, UnsupportedAlgorithm) as exc:
                what = "certificate" if kind == "CERTIFICATE" else "public key"
                raise BuiltinError(f"failed to parse a PEM {what}: {exc}") from None
            raise BuiltinError("failed to extract a Key from the PEM certificate")
    parsed = json_object(text, "failed to parse a JWK key (set)")
    jwks = parsed.get("keys") if "keys" in parsed else [parsed]
    if not isinstance(jwks, list):
        raise BuiltinError("failed to parse a JWK key (set): keys is not an array")
    keys = []
    for jwk in jwks:
        if not isinstance(jwk, dict):
            raise BuiltinError("failed to parse a JWK key (set): key is not an object")
        alg = jwk.get("alg", "")
        if alg and alg not in _ALGORITHMS:
            continue
        keys.append(Key(_jwk_key(jwk), alg if isinstance(alg, str) else "", str(jwk.get("kid", ""))))
    return keys


def _verify(alg: str, key: Any, signed: bytes, signature: bytes, *, split_ecdsa: bool = False) -> bool:
    """One signature check; a key of the wrong type or a bad signature is False."""
    family, bits = alg[:2], alg[2:]
    try:
        if family in ("RS", "PS") and isinstance(key, rsa.RSAPublicKey):
            pad = (
                padding.PKCS1v15()
                if family == "RS"
                else padding.PSS(mgf=padding.MGF1(_HASHES[bits]()), salt_length=padding.PSS.AUTO)
            )
            key.verify(signature, signed, pad, _HASHES[bits]())
            return True
        if family == "ES" and isinstance(key, ec.EllipticCurvePublicKey):
            size = (key.curve.key_size + 7) // 8
            if not split_ecdsa and (len(signature) != 2 * size or key.curve.name != _CURVE_OF_ALG[alg]):
                return False
            half = len(signature) // 2
            r, s = int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big")
            digest = hashlib.new(f"sha{bits}", signed).digest()
            key.verify(encode_dss_signature(r, s), digest, ec.ECDSA(Prehashed(_HASHES[bits]())))
            return True
        if alg == "EdDSA" and isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, signed)
            return True
        if family == "HS" and isinstance(key, bytes):
            return hmac.compare_digest(hmac.new(key, signed, f"sha{bits}").digest(), signature)
    except (InvalidSignature, ValueError):
        return False
    return False


def _verifier(alg: str) -> Callable[[Any, Any], bool]:
    name = f"io.jwt.verify_{alg.lower()}"

    def verify(jwt: Any, certificate: Any) -> bool:
        token = _split(name, jwt)
        keys = verification_keys(string_operand(name, certificate, 2))
        signature = token.decoded_signature()
        header_alg, kid, _, _ = _header_fields(token.decoded_header())
        by_kid = next((k for k in keys if kid and k.kid == kid), None)
        if by_kid is not None:
            return _verify(alg, by_kid.key, token.signed, signature, split_ecdsa=True)
        return any(
            _verify(alg, k.key, token.signed, signature, split_ecdsa=True)
            for k in keys
            if not k.alg or k.alg == header_alg
        )

    return verify


def _hmac_verifier(alg: str) -> Callable[[Any, Any], bool]:
    name = f"io.jwt.verify_{alg.lower()}"

    def verify(jwt: Any, secret: Any) -> bool:
        string_operand(name, jwt, 1)
        key = string_operand(name, secret, 2).encode()
        token = _split(name, jwt)
        return _verify(alg, key, token.signed, token.decoded_signature())

    return verify


@dataclass
class _Constraints:
    keys: list[Key] | None = None
    secret: str = ""
    alg: str = ""
    iss: str = ""
    aud: str = ""
    time: float = -1.0


def _constraints(raw: dict[Any, Any]) -> _Constraints:
    constraints = _Constraints()
    for name, value in raw.items():
        if name == "cert":
            if not isinstance(value, str):
                raise BuiltinError("cert constraint: must be a string")
            constraints.keys = verification_keys(value)
        elif name in ("secret", "alg", "iss", "aud"):
            if not isinstance(value, str):
                raise BuiltinError(f"{name} constraint: must be a string")
            setattr(constraints, name, value)
        elif name == "time":
            constraints.time = _time_constraint(value)
        else:
            raise BuiltinError(f"unknown token validation constraint: {name}")
    if constraints.time == -1:
        constraints.time = float(time.time_ns())
    if (constraints.keys is not None) + bool(constraints.secret) > 1:
        raise BuiltinError("duplicate key constraints")
    if constraints.keys is None and not constraints.secret:
        raise BuiltinError("no key constraint")
    return constraints


def _time_constraint(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuiltinError("token time constraint: must be a number")
    if value < 0:
        raise BuiltinError("token time constraint: must not be negative")
    return float(value)


def _signature_verified(constraints: _Constraints, alg: str, kid: str, token: Token, signature: bytes) -> bool:
    if constraints.keys is not None:
        by_kid = next((k for k in constraints.keys if kid and k.kid == kid), None)
        if by_kid is not None:
            return _verify(alg, by_kid.key, token.signed, signature)
        return any(_verify(alg, k.key, token.signed, signature) for k in constraints.keys if not k.alg or k.alg == alg)
    return _verify(alg, constraints.secret.encode(), token.signed, signature)


def _audience_ok(aud: Any, wanted: str) -> bool:
    if isinstance(aud, str):
        return aud == wanted
    return isinstance(aud, list) and any(isinstance(a, str) and a == wanted for a in aud)


@builtin("io.jwt.decode_verify")
def decode_verify(jwt: Any, raw_constraints: Any) -> list[Any]:
    name = "io.jwt.decode_verify"
    constraints = _constraints(object_operand(name, raw_constraints, 2))
    unverified: list[Any] = [False, {}, {}]
    while True:
        token = _split(name, jwt)
        header = token.decoded_header()
        alg, kid, cty, valid = _header_fields(header)
        if not valid or (constraints.alg and constraints.alg != alg):
            return unverified
        signature = token.decoded_signature()
        if not _signature_verified(constraints, alg, kid, token, signature):
            return unverified
        payload_bytes = token.decoded_payload()
        if cty.lower() != "jwt":
            break
        jwt = payload_bytes.decode(errors="replace")
    payload = _json_object(payload_bytes)
    if constraints.iss and payload.get("iss") != constraints.iss:
        return unverified
    if "aud" in payload:
        if not _audience_ok(payload["aud"], constraints.aud):
            return unverified
    elif constraints.aud:
        return unverified
    now = constraints.time / 1e9
    for claim, expired in (("exp", lambda t: now >= t), ("nbf", lambda t: now < t)):
        if claim in payload:
            value = payload[claim]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BuiltinError(f"{claim} value must be a number")
            if expired(value):
                return unverified
    return [True, header, payload]


for _alg in sorted(_ALGORITHMS):
    if not _alg.startswith("HS"):
        builtin(f"io.jwt.verify_{_alg.lower()}")(_verifier(_alg))
for _bits in _HASHES:
    builtin(f"io.jwt.verify_hs{_bits}")(_hmac_verifier(f"HS{_bits}"))
