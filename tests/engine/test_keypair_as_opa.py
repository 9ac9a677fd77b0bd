"""crypto.x509.parse_keypair beside the OPA oracle: RSA (PKCS #1, PKCS #8), EC (SEC 1, PKCS #8, P-256 and
P-384) and Ed25519 keys, each as PEM, base64 PEM and base64 DER, and the errors (a key of another
certificate, operands swapped, not base64). Numbers past 2^64 are compared as `common.big_number` writes
them (regorus holds none exactly: policies/README.md), everything else as OPA answers. Also
parse_certificates' `Extensions` of a certificate with none: null, as Go's nil slice (was []).

On the code before, the builtin was refused at load.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from functools import cache
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from opa_oracle import both

from regokite.engine.extensions.common import big_number

KEYPAIR = "package p\n\nx := crypto.x509.parse_keypair(input.cert, input.key)\n"
NOW = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


@cache
def pair(kind: str) -> tuple[x509.Certificate, Any]:
    key: Any = {
        "rsa": lambda: rsa.generate_private_key(65537, 1024),
        "ec256": lambda: ec.generate_private_key(ec.SECP256R1()),
        "ec384": lambda: ec.generate_private_key(ec.SECP384R1()),
        "ed25519": ed25519.Ed25519PrivateKey.generate,
    }[kind]()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{kind}.example")])
    builder = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
    builder = builder.serial_number(4242).not_valid_before(NOW).not_valid_after(NOW + datetime.timedelta(days=9))
    if kind == "ec256":  # extensions, SANs of every kind
        sans = [x509.DNSName("a.example"), x509.UniformResourceIdentifier("spiffe://a/b")]
        sans.append(x509.IPAddress(ipaddress.ip_address("10.0.0.1")))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
    return builder.sign(key, None if kind == "ed25519" else hashes.SHA256()), key


def pem_key(key: Any, private_format: serialization.PrivateFormat) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())


def operands(kind: str, form: str) -> dict[str, str]:
    cert, key = pair(kind)
    if form == "base64 DER":
        der = key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return {
            "cert": base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode(),
            "key": base64.b64encode(der).decode(),
        }
    legacy = form == "PEM, PKCS #1 or SEC 1"
    private = pem_key(
        key, serialization.PrivateFormat.TraditionalOpenSSL if legacy else serialization.PrivateFormat.PKCS8
    )
    text = {"cert": cert.public_bytes(serialization.Encoding.PEM), "key": private}
    if form == "base64 PEM":
        return {k: base64.b64encode(v).decode() for k, v in text.items()}
    return {k: v.decode() for k, v in text.items()}


def as_regorus_holds(value: Any) -> Any:
    """OPA's answer with its integers past 64 bits as the embedded engine writes them."""
    if isinstance(value, dict):
        return {k: as_regorus_holds(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_regorus_holds(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return big_number(value)
    return value


@pytest.mark.parametrize("kind", ["rsa", "ec256", "ec384", "ed25519"])
@pytest.mark.parametrize("form", ["PEM", "PEM, PKCS #1 or SEC 1", "base64 PEM", "base64 DER"])
def test_parse_keypair_as_opa(kind: str, form: str) -> None:
    if kind == "ed25519" and form == "PEM, PKCS #1 or SEC 1":
        pytest.skip("an Ed25519 key has only PKCS #8")
    regokite, opa = both(KEYPAIR, operands(kind, form))
    assert isinstance(opa, dict) and set(opa) == {
        "Certificate",
        "PrivateKey",
        "Leaf",
        "OCSPStaple",
        "SignedCertificateTimestamps",
        "SupportedSignatureAlgorithms",
    }
    assert regokite == as_regorus_holds(opa)


@pytest.mark.parametrize(
    "given",
    [
        {"cert": "rsa", "key": "ec256"},  # a key of another certificate
        {"cert": "swapped", "key": "rsa"},
        {"cert": "not base64 at all!", "key": "x"},
        {"cert": "", "key": ""},
    ],
)
def test_parse_keypair_errors_as_opa(given: dict[str, str]) -> None:
    if given["cert"] == "rsa":
        value = {"cert": operands("rsa", "PEM")["cert"], "key": operands("ec256", "PEM")["key"]}
    elif given["cert"] == "swapped":
        value = {"cert": operands("rsa", "PEM")["key"], "key": operands("rsa", "PEM")["cert"]}
    else:
        value = given
    assert both(KEYPAIR, value) == ("<error>", "<error>")
    assert both(KEYPAIR, value, strict=False) == ("<undefined>", "<undefined>")


def test_a_certificate_without_extensions_has_null_extensions_as_in_opa() -> None:
    rule = "package p\n\nx := crypto.x509.parse_certificates(input.cert)[0].Extensions\n"
    assert both(rule, {"cert": operands("ed25519", "PEM")["cert"]}) == (None, None)
