"""crypto.x509.parse_keypair as OPA: Go's tls.X509KeyPair of a certificate and a private key, as JSON.

Each operand is PEM, base64 of PEM, or base64 of DER (a certificate, a PKCS #8 key). As Go's
X509KeyPair: every CERTIFICATE block of the first operand (other blocks skipped) and the first
block of the second whose type is PRIVATE KEY or ends in " PRIVATE KEY" (PKCS #1, PKCS #8 or SEC 1),
whose public key must be the leaf's. The answer is Go's tls.Certificate in encoding/json: the
certificates' DER, the key (an RSA key's numbers, an EC key's `Curve` `{}` and numbers, an Ed25519
key's 64 bytes), the Leaf as parse_certificates shows a certificate (but for the URIStrings OPA adds
there), null for the rest. Numbers
beyond 64 bits are as parse_certificates writes them (`common.big_number`): regorus holds none
exactly.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from regokite.engine.extensions.certificates import certificate_value
from regokite.engine.extensions.common import BuiltinError, b64, base64_std_decode, big_number, builtin, string_operand

NAME = "crypto.x509.parse_keypair"
_BLOCK = re.compile(rb"-----BEGIN ([^-\r\n]*)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
_PEM = b"-----BEGIN"


@builtin(NAME)
def parse_keypair(certificate: Any, key: Any) -> dict[str, Any]:
    certs = _blocks(_pem(string_operand(NAME, certificate, 1), b"CERTIFICATE"))
    keys = _blocks(_pem(string_operand(NAME, key, 2), b"PRIVATE KEY"))
    chain = [der for kind, der in certs if kind == b"CERTIFICATE"]
    if not chain:
        raise BuiltinError(f"{NAME}: tls: failed to find certificate PEM data in certificate input")
    private = next((der for kind, der in keys if kind == b"PRIVATE KEY" or kind.endswith(b" PRIVATE KEY")), None)
    if private is None:
        raise BuiltinError(f'{NAME}: tls: failed to find PEM block with type ending in "PRIVATE KEY" in key input')
    try:
        leaf = x509.load_der_x509_certificate(chain[0])
    except ValueError as exc:
        raise BuiltinError(f"{NAME}: x509: {exc}") from None
    parsed = _private_key(private)
    if _public_der(parsed.public_key()) != _public_der(leaf.public_key()):
        raise BuiltinError(f"{NAME}: tls: private key does not match public key")
    return {
        "Certificate": [b64(der) for der in chain],
        "PrivateKey": _key_value(parsed),
        "SupportedSignatureAlgorithms": None,
        "OCSPStaple": None,
        "SignedCertificateTimestamps": None,
        "Leaf": _leaf(leaf),
    }


def _leaf(cert: x509.Certificate) -> dict[str, Any]:
    """The certificate as parse_certificates shows it, less the URIStrings OPA adds there (Go's x509.Certificate
    has none)."""
    value = certificate_value(cert)
    del value["URIStrings"]
    return value


def _pem(text: str, kind: bytes) -> bytes:
    """OPA's reading of an operand: PEM as it is, else base64 of PEM, else base64 of DER made a `kind` block."""
    data = text.encode()
    if data.startswith(_PEM):
        return data
    decoded = base64_std_decode(text)
    if decoded.startswith(_PEM):
        return decoded
    body = base64.encodebytes(decoded)  # pem.Encode's lines are 64 characters; the decoding below ignores them
    return b"-----BEGIN " + kind + b"-----\n" + body + b"-----END " + kind + b"-----\n"


def _blocks(data: bytes) -> list[tuple[bytes, bytes]]:
    if _BLOCK.search(data) is None:
        raise BuiltinError(f"{NAME}: tls: failed to find any PEM data in input")
    return [(block[1], base64_std_decode(block[2].decode())) for block in _BLOCK.finditer(data)]


def _private_key(der: bytes) -> Any:
    """Go's tls.parsePrivateKey: PKCS #1, then PKCS #8, then SEC 1 (the last two through one loader)."""
    try:
        key = serialization.load_der_private_key(der, password=None)
    except (ValueError, TypeError):
        raise BuiltinError(f"{NAME}: tls: failed to parse private key") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise BuiltinError(f"{NAME}: tls: found unknown private key type in PKCS#8 wrapping")
    return key


def _public_der(key: Any) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _key_value(key: Any) -> Any:
    """The key as Go's encoding/json writes *rsa.PrivateKey, *ecdsa.PrivateKey or ed25519.PrivateKey."""
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.private_numbers()
        public = numbers.public_numbers
        return {
            "N": big_number(public.n),
            "E": public.e,
            "D": big_number(numbers.d),
            "Primes": [big_number(numbers.p), big_number(numbers.q)],
            "Precomputed": {
                "Dp": big_number(numbers.dmp1),
                "Dq": big_number(numbers.dmq1),
                "Qinv": big_number(numbers.iqmp),
                "CRTValues": [],
            },
        }
    if isinstance(key, ec.EllipticCurvePrivateKey):
        numbers = key.private_numbers()
        point = numbers.public_numbers
        return {"Curve": {}, "X": big_number(point.x), "Y": big_number(point.y), "D": big_number(numbers.private_value)}
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return b64(raw + _public_raw(key))


def _public_raw(key: ed25519.Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
