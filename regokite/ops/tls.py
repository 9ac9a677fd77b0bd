"""TLS material: the server's context, and a self-signed CA and serving certificate for a fresh machine.

`server_context` builds a context only from a certificate and key that parse
and match, so a reload can build it off to the side and swap it in whole: a
rotation that writes the certificate before its key never reaches a handshake.

The API server must trust the webhook through a caBundle, so `--self-signed`
makes a small CA, signs a serving certificate for the given hosts with it,
and prints the CA for the webhook configuration. Files are reused across
restarts while they still cover the hosts, so the caBundle stays stable.
The same `new_ca` and `issue` make the test control plane's certificates
(`scripts/controlplane.py`): one CA generator in the project.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALIDITY = dt.timedelta(days=365)
# a CA's key signs certificates and CRLs (and digital signatures): KeyUsage's nine flags, in its order
CA_KEY_USAGE = x509.KeyUsage(True, False, False, False, False, True, True, False, False)


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    ca: Path

    def ca_pem(self) -> bytes:
        return self.ca.read_bytes()


def server_context(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> ssl.SSLContext:
    """A TLS 1.2+ server context serving `cert` with `key`; OSError or ssl.SSLError when they do not load or match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)  # checks that the key is the certificate's
    return context


def self_signed(directory: Path, hosts: list[str]) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    if _still_good(files, hosts):
        return files
    ca = new_ca("regokite self-signed CA")
    cert_pem, key_pem = issue(ca, hosts)
    _write_atomically(files.key, key_pem, 0o600)
    _write_atomically(files.cert, cert_pem)
    _write_atomically(files.ca, pem(ca[0]))
    return files


# --------------------------------------------------------------------- the CA, for this and for test clusters

Ca = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def new_key() -> ec.EllipticCurvePrivateKey:
    """EC P-256: fast to generate, accepted by the API server and every client."""
    return ec.generate_private_key(ec.SECP256R1())


def new_ca(common_name: str) -> Ca:
    """A self-signed CA that signs serving certificates (not other CAs)."""
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key.public_key(), dt.datetime.now(dt.UTC))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(CA_KEY_USAGE, critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(ca: Ca, hosts: Sequence[str], common_name: str | None = None) -> tuple[bytes, bytes]:
    """A serving certificate for `hosts` (IPs or DNS names, all in the SAN: Go ignores the CN), signed by
    `ca`: (certificate PEM, key PEM)."""
    ca_cert, ca_key = ca
    key = new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0])])
    cert = (
        _builder(subject, ca_cert.subject, key.public_key(), dt.datetime.now(dt.UTC))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(  # client auth too: external_data presents it to Providers (mTLS), as Gatekeeper's
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return pem(cert), private_pem(key)


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Readers (a client loading the CA, the certificate reloader) never see half a file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    partial.chmod(mode)
    os.replace(partial, path)


def _builder(subject: x509.Name, issuer: x509.Name, public_key, now: dt.datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _still_good(files: TlsFiles, hosts: list[str]) -> bool:
    if not (files.cert.exists() and files.key.exists() and files.ca.exists()):
        return False
    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    covered = {str(n) for n in names.get_values_for_type(x509.DNSName)}
    covered |= {str(n) for n in names.get_values_for_type(x509.IPAddress)}
    fresh = cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=30)
    return fresh and set(hosts) <= covered
