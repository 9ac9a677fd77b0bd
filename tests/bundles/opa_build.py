"""Bundles as `opa build` lays them out (OPA's docs, "Bundle File Format"), signed as `opa sign` signs them.

A gzipped tarball with `/data.json` (always: `{}` when there is no data),
`/.manifest` when the manifest says anything, the modules at `/<path>`, and
`/.signatures.json` (`{"signatures": [JWT]}`, indented) when signed. The JWT's
payload lists every file, `.manifest` and `data.json` included, each with
`"algorithm": "SHA-256"` and the digest OPA computes (structured documents in
their normal form); `keyid` is the header's `kid`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import tarfile
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from regokite.bundles.signing import file_digest


@dataclass(frozen=True)
class SigningKey:
    """A private key (or HS secret) and the public half the configuration's `keys` holds."""

    algorithm: str
    private: Any
    public_pem: str

    def sign(self, signed: bytes) -> bytes:
        if self.algorithm == "HS256":
            return hmac.new(self.private, signed, hashlib.sha256).digest()
        if self.algorithm == "RS256":
            return self.private.sign(signed, padding.PKCS1v15(), hashes.SHA256())
        r, s = decode_dss_signature(self.private.sign(signed, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def make_key(algorithm: str) -> SigningKey:
    if algorithm == "HS256":
        return SigningKey(algorithm, b"shared-secret", "shared-secret")
    private = rsa.generate_private_key(65537, 2048) if algorithm == "RS256" else ec.generate_private_key(ec.SECP256R1())
    pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return SigningKey(algorithm, private, pem.decode())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(key: SigningKey, payload: dict[str, Any], kid: str | None = None) -> str:
    header = {"alg": key.algorithm, **({"kid": kid} if kid else {})}
    signed = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    return f"{signed}.{_b64(key.sign(signed.encode()))}"


def signatures(files: dict[str, bytes], key: SigningKey, kid: str, scope: str | None = None) -> bytes:
    listed = [{"name": name, "hash": file_digest(name, blob), "algorithm": "SHA-256"} for name, blob in files.items()]
    payload: dict[str, Any] = {"files": listed, **({"scope": scope} if scope else {})}
    return json.dumps({"signatures": [jwt(key, payload, kid)]}, indent=1).encode()


def bundle_files(modules: dict[str, str], data: Any = None, manifest: dict[str, Any] | None = None) -> dict[str, bytes]:
    """The files of a bundle, as `opa build` writes them (paths without the leading slash)."""
    files = {"data.json": json.dumps(data if data is not None else {}).encode()}
    if manifest:
        files[".manifest"] = json.dumps(manifest).encode()
    files.update({path: text.encode() for path, text in modules.items()})
    return files


def tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, blob in files.items():
            info = tarfile.TarInfo(f"/{name}")
            info.size, info.mode = len(blob), 0o644
            tar.addfile(info, io.BytesIO(blob))
    return buffer.getvalue()


def build(
    modules: dict[str, str],
    data: Any = None,
    manifest: dict[str, Any] | None = None,
    *,
    key: SigningKey | None = None,
    kid: str = "global",
    scope: str | None = None,
) -> bytes:
    """`opa build [--signing-key ...]` of these files: the .tar.gz's bytes."""
    files = bundle_files(modules, data, manifest)
    if key is not None:
        files[".signatures.json"] = signatures(files, key, kid, scope)
    return tarball(files)
