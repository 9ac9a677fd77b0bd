"""Bundle signatures verified as OPA verifies them (bundle/verify.go, bundle/hash.go).

`.signatures.json` holds `{"signatures": [JWT]}`, exactly one compact JWS whose
payload lists every file of the bundle (`{"name", "hash", "algorithm"}`) and
may carry `keyid` and `scope`. The key is the bundle's `signing.keyid`, else
the JWT header's `kid`, else the payload's `keyid`; the scope the bundle's
`signing.scope`, else the key's, and it must equal the payload's. Each file
not excluded must be listed with its digest, and each listed file must be
there. A file's digest is of its bytes, except OPA's structured documents
(`data.json`, `data.yaml`, `.manifest`, `signatures.json`): those are parsed
and hashed in a normal form (objects' keys sorted, no whitespace, strings
encoded as Go's encoder writes them, numbers as written), so the signature
does not depend on formatting.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from regokite import yamldoc
from regokite.bundles.config import Key, Signing
from regokite.errors import RegokiteError

SIGNATURES_FILE = ".signatures.json"
_STRUCTURED = {"data.json", "data.yaml", "signatures.json", ".manifest"}  # OPA's IsStructuredDoc, by base name
_DIGESTS = {
    "MD5": hashlib.md5,
    "SHA-1": hashlib.sha1,
    "SHA-224": hashlib.sha224,
    "SHA-256": hashlib.sha256,
    "SHA-384": hashlib.sha384,
    "SHA-512": hashlib.sha512,
    "SHA-512-224": lambda: hashlib.new("sha512_224"),
    "SHA-512-256": lambda: hashlib.new("sha512_256"),
}
_JWS_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}


class SignatureError(RegokiteError):
    """The bundle is unsigned where a signature is required, or its signature does not verify."""


class _Number(str):
    """A JSON number as written: OPA reads numbers as json.Number and hashes their text."""


def verify_bundle(
    files: Mapping[str, bytes], signing: Signing | None, keys: Mapping[str, Key], *, name: str = "bundle"
) -> None:
    """Check `files` (path in the bundle, no leading slash -> bytes; the signatures file among them)."""
    signatures = files.get(SIGNATURES_FILE)
    if signatures is None:
        if signing is not None:
            raise SignatureError(f"bundle {name}: bundle missing {SIGNATURES_FILE} file (signing is configured)")
        return
    if signing is None:
        raise SignatureError(f"bundle {name}: verification key not provided (the bundle is signed; configure signing)")
    listed = verified_files(_token(signatures, name), signing, keys, name)
    for path, blob in sorted(files.items()):
        if path == SIGNATURES_FILE:
            continue
        if any(fnmatch.fnmatchcase(path, glob) for glob in signing.exclude_files):
            listed.pop(path, None)
            continue
        entry = listed.pop(path, None)
        if entry is None:
            raise SignatureError(f"bundle {name}: file {path} not included in bundle signature")
        _check_digest(path, blob, entry, name)
    if listed:
        raise SignatureError(
            f"bundle {name}: file(s) {sorted(listed)} specified in bundle signatures but not found in the target bundle"
        )


def _token(signatures: bytes, name: str) -> str:
    try:
        doc = json.loads(signatures)
        tokens = doc["signatures"]
    except (ValueError, TypeError, KeyError):
        raise SignatureError(f"bundle {name}: {SIGNATURES_FILE}: not a JSON object with a `signatures` list") from None
    if not isinstance(tokens, list) or not tokens:
        raise SignatureError(f"bundle {name}: {SIGNATURES_FILE}: missing JWT (expected exactly one)")
    if len(tokens) > 1:
        raise SignatureError(f"bundle {name}: {SIGNATURES_FILE}: multiple JWTs not supported (expected exactly one)")
    if not isinstance(tokens[0], str):
        raise SignatureError(f"bundle {name}: {SIGNATURES_FILE}: the JWT must be a string")
    return tokens[0]


def verified_files(token: str, signing: Signing, keys: Mapping[str, Key], name: str) -> dict[str, dict]:
    """The payload's files by name, once the token's signature and scope check out (`name`: the bundle's, for
    the errors)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise SignatureError(f"bundle {name}: the signature is not a compact JWS (three parts)")
    try:
        header, payload = (json.loads(_unbase64(p)) for p in parts[:2])
        signature = _unbase64(parts[2])
    except (ValueError, binascii.Error):
        raise SignatureError(f"bundle {name}: the signature's header or payload is not base64url JSON") from None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise SignatureError(f"bundle {name}: the signature's header and payload must be JSON objects")
    keyid = signing.keyid or header.get("kid") or payload.get("keyid") or ""
    if not keyid:
        raise SignatureError(f"bundle {name}: verification key ID is empty")
    key = keys.get(keyid)
    if key is None:
        raise SignatureError(f"bundle {name}: verification key corresponding to ID {keyid} not found")
    if header.get("alg") != key.algorithm:
        raise SignatureError(f"bundle {name}: signed with {header.get('alg')!r}, key {keyid} is {key.algorithm}")
    if not _signature_holds(key, f"{parts[0]}.{parts[1]}".encode(), signature):
        raise SignatureError(f"bundle {name}: failed to verify the signature with key {keyid}")
    scope = signing.scope or key.scope
    if payload.get("scope", "") != scope:
        raise SignatureError(f"bundle {name}: scope mismatch")
    files = payload.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in files):
        raise SignatureError(f"bundle {name}: the signature's payload has no list of files")
    return {f["name"]: f for f in files}


def _unbase64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature_holds(key: Key, signed: bytes, signature: bytes) -> bool:
    kind, bits = key.algorithm[:2], key.algorithm[2:]
    if kind == "HS":
        expected = hmac.new(key.key.encode(), signed, getattr(hashlib, f"sha{bits}")).digest()
        return hmac.compare_digest(expected, signature)
    public = _public_key(key)
    digest = _JWS_HASHES[bits]()
    try:
        if kind == "RS" and isinstance(public, rsa.RSAPublicKey):
            public.verify(signature, signed, padding.PKCS1v15(), digest)
        elif kind == "PS" and isinstance(public, rsa.RSAPublicKey):
            public.verify(signature, signed, padding.PSS(padding.MGF1(digest), padding.PSS.AUTO), digest)
        elif kind == "ES" and isinstance(public, ec.EllipticCurvePublicKey):
            half = len(signature) // 2
            r, s = int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big")
            public.verify(encode_dss_signature(r, s), signed, ec.ECDSA(digest))
        else:
            raise SignatureError(f"key {key.id}: a {type(public).__name__} cannot verify {key.algorithm}")
    except InvalidSignature:
        return False
    return True


def _public_key(key: Key) -> Any:
    """A PEM public key or certificate (OPA takes both)."""
    data = key.key.encode()
    try:
        if b"CERTIFICATE" in data:
            return x509.load_pem_x509_certificate(data).public_key()
        return serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise SignatureError(f"key {key.id}: not a PEM public key or certificate ({exc})") from None


def _check_digest(path: str, blob: bytes, entry: dict, name: str) -> None:
    algorithm = entry.get("algorithm")
    if not algorithm:
        raise SignatureError(f"bundle {name}: no hashing algorithm provided for file {path}")
    if algorithm not in _DIGESTS:
        raise SignatureError(f"bundle {name}: unsupported hashing algorithm: {algorithm}")
    got = file_digest(path, blob, algorithm)
    if got != str(entry.get("hash", "")).lower():
        raise SignatureError(f"bundle {name}: {path}: digest mismatch (want: {entry.get('hash')}, got: {got})")


def file_digest(path: str, blob: bytes, algorithm: str = "SHA-256") -> str:
    """OPA's digest of a bundle file, hex: of its bytes, or of its normal form for a structured document."""
    digest = _DIGESTS[algorithm]()
    if path.rsplit("/", 1)[-1] not in _STRUCTURED:
        digest.update(blob)
        return digest.hexdigest()
    try:
        if path.endswith(".yaml"):
            value = yamldoc.load(blob.decode())
        else:
            value = json.loads(blob, parse_int=_Number, parse_float=_Number)
    except (ValueError, yamldoc.YAMLError) as exc:
        raise SignatureError(f"{path}: cannot be parsed to compute its digest: {exc}") from None
    for chunk in _normal_form(value):
        digest.update(chunk.encode())
    return digest.hexdigest()


def _normal_form(value: Any) -> Iterable[str]:
    """OPA's walk: `{` keys sorted `"k":v` joined by `,` `}`, `[` items `]`, primitives as Go's encoder
    (HTML characters unescaped) writes them."""
    if isinstance(value, dict):
        yield "{"
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "") + _go_string(key) + ":"
            yield from _normal_form(value[key])
        yield "}"
    elif isinstance(value, list):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _normal_form(item)
        yield "]"
    elif isinstance(value, _Number):
        yield str(value)
    elif isinstance(value, str):
        yield _go_string(value)
    else:
        yield json.dumps(value)  # true, false, null, and YAML's numbers


def _go_string(text: str) -> str:
    """As Go's json.Encoder with SetEscapeHTML(false): Python's escapes, plus U+2028 and U+2029."""
    return json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
