"""Decoders whose output is a string of bytes (base64, base64url, hex, URL query escapes), as OPA.

A Go string holds any bytes: OPA's `base64.decode("/w==")` is the one byte
0xFF, which equals no written string. regorus holds text, so it wrote U+FFFD
for such a byte and `base64.decode("/w==") == "\ufffd"` was true (false in
OPA). Where the decoded bytes are not UTF-8 the call is therefore an
evaluation error (a Refusal: it stays one under `regokite test`); text
decodes as before.
"""

from __future__ import annotations

import binascii
import string
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, base64_std_decode, builtin, string_operand


def utf8_text(name: str, data: bytes) -> str:
    """`data` as text, or a Refusal where it is not UTF-8 (OPA keeps such bytes as they are)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(
            f"{name}: the result holds bytes that are not UTF-8, which OPA keeps as they are and the embedded "
            "engine cannot (it would read U+FFFD for each): decode text only, or use --engine opa"
        ) from None


@builtin("base64.decode")
def base64_decode(value: Any) -> str:
    return utf8_text("base64.decode", base64_std_decode(string_operand("base64.decode", value, 1)))


@builtin("base64url.decode")
def base64url_decode(value: Any) -> str:
    """OPA pads a string that has no `=` (RFC 7515's rule), then decodes with Go's URL alphabet."""
    text = string_operand("base64url.decode", value, 1)
    if not text.endswith("="):
        if len(text) % 4 == 1:
            raise BuiltinError(f"base64url.decode: illegal base64url string: {text}")
        text += "=" * (-len(text) % 4)
    cleaned = text.replace("\r", "").replace("\n", "")
    if "+" in cleaned or "/" in cleaned:
        raise BuiltinError("base64url.decode: illegal base64 data")
    try:
        data = binascii.a2b_base64(cleaned.replace("-", "+").replace("_", "/").encode(), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise BuiltinError(f"base64url.decode: illegal base64 data: {exc}") from None
    return utf8_text("base64url.decode", data)


@builtin("hex.decode")
def hex_decode(value: Any) -> str:
    text = string_operand("hex.decode", value, 1)
    try:
        data = binascii.unhexlify(text.encode())
    except (binascii.Error, ValueError) as exc:
        raise BuiltinError(f"hex.decode: encoding/hex: {exc}") from None
    return utf8_text("hex.decode", data)


@builtin("urlquery.decode")
def urlquery_decode(value: Any) -> str:
    return utf8_text("urlquery.decode", _unescape("urlquery.decode", string_operand("urlquery.decode", value, 1)))


@builtin("urlquery.decode_object")
def urlquery_decode_object(value: Any) -> dict[str, list[str]]:
    """Go's url.ParseQuery: pairs split at `&`, a `;` in one is an error, an empty one skipped."""
    name = "urlquery.decode_object"
    query = string_operand(name, value, 1)
    found: dict[str, list[str]] = {}
    for pair in query.split("&") if query else []:
        if ";" in pair:
            raise BuiltinError(f"{name}: invalid semicolon separator in query")
        if not pair:
            continue
        key, _, item = pair.partition("=")
        decoded = utf8_text(name, _unescape(name, key))
        found.setdefault(decoded, []).append(utf8_text(name, _unescape(name, item)))
    return found


def _unescape(name: str, text: str) -> bytes:
    """Go's url.QueryUnescape: `+` is a space, `%XX` a byte, a `%` without two hex digits an error."""
    data, out, at = text.encode(), bytearray(), 0
    while at < len(data):
        byte = data[at]
        if byte == 0x25:  # %
            escape = data[at + 1 : at + 3].decode("latin-1")
            if len(escape) < 2 or not all(c in string.hexdigits for c in escape):
                bad = data[at : at + 3].decode("utf-8", "replace")
                raise BuiltinError(f'{name}: invalid URL escape "{bad}"')
            out.append(int(escape, 16))
            at += 3
            continue
        out.append(0x20 if byte == 0x2B else byte)
        at += 1
    return bytes(out)
