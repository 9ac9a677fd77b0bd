"""TLS material: the server's context, and a self-signed CA and serving certificate for a fresh machine.

`server_context` builds a context only from a certificate and key that parse
and match, so a reload can build it off to the side and swap it in whole: a
rotation that writes the certificate before its key never reaches a handshake.

The API server must trust the webhook through a caBundle, so `--self-signed`
makes a small CA, signs a serving certificate for the given hosts with it,
and prints the CA for the webhook configuration. Files are reused across
restarts while they still cover the hosts, so the caBundle stays stable.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALIDITY = dt.timedelta(days=365)


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
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "regokite self-signed CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]), ca_name, key.public_key(), now)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_atomically(files.key, key_pem, 0o600)
    _write_atomically(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    _write_atomically(files.ca, ca_cert.public_bytes(serialization.Encoding.PEM))
    return files


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
