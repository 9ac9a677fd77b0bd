"""substring, indexof, indexof_n, strings.count, strings.reverse, replace_n, split_n, upper and lower as OPA.

substring takes integer operands only (regorus took 1e-07 as a length and
answered); indexof and indexof_n of "" are errors in OPA (regorus answered 0 and every index);
strings.count of "" counts the gaps between runes (regorus panicked);
strings.reverse of a string holding U+FFFD is an error: in OPA such a string
may hold bytes that are not UTF-8, where its strings.reverse panics or
answers garbage. A replacement that cuts a character into bytes that are not
UTF-8 (`replace("é", "", "x")`) is an error, as the decoders' (decoding).

OPA refuses an offset or length that is not an integer and a negative
offset; a negative length takes the rest of the string; offsets count runes.

upper and lower map each character on its own, to one character (Go's
unicode.ToUpper/ToLower): regorus used Unicode's full mappings, `upper("ß")`
"SS" where OPA keeps "ß", and `lower("AΣ")` ended in a final sigma.
"""

from __future__ import annotations

from typing import Any

from regokite.engine.extensions.common import (
    BuiltinError,
    Panic,
    Refusal,
    builtin,
    int_operand,
    object_operand,
    string_operand,
)
from regokite.engine.extensions.decoding import utf8_text

_INT_MAX = 2**63 - 1  # Go's int


@builtin("substring")
def substring(value: Any, offset: Any, length: Any) -> str:
    text = string_operand("substring", value, 1)
    start, count = int_operand("substring", offset, 2), int_operand("substring", length, 3)
    if start < 0:
        raise BuiltinError("substring: negative offset")
    if start >= len(text):
        return ""
    if start + count > _INT_MAX:  # Go's start + length wraps negative: OPA slices with it and panics
        raise Panic(f"substring: panic: runtime error: slice bounds out of range [:{start + count - 2**64}]")
    return text[start:] if count < 0 else text[start : start + count]


@builtin("indexof")
def indexof(value: Any, search: Any) -> int:
    text, wanted = string_operand("indexof", value, 1), string_operand("indexof", search, 2)
    if not wanted:
        raise BuiltinError("indexof: empty search character")
    return text.find(wanted)


@builtin("indexof_n")
def indexof_n(value: Any, search: Any) -> list[int]:
    """Every character index where `search` starts, overlapping ones too; "" is an error, as OPA's."""
    text, wanted = string_operand("indexof_n", value, 1), string_operand("indexof_n", search, 2)
    if not wanted:
        raise BuiltinError("indexof_n: empty search character")
    return [i for i in range(len(text) - len(wanted) + 1) if text.startswith(wanted, i)]


@builtin("strings.count")
def count(value: Any, search: Any) -> int:
    text, wanted = string_operand("strings.count", value, 1), string_operand("strings.count", search, 2)
    return len(text) + 1 if not wanted else text.count(wanted)


@builtin("strings.reverse")
def reverse(value: Any) -> str:
    text = string_operand("strings.reverse", value, 1)
    if "\ufffd" in text:
        raise Refusal(
            "strings.reverse: the string holds U+FFFD, which stands for bytes that are not UTF-8 (from base64.decode, "
            "hex.decode, ...): OPA's reverse of such bytes is not defined; check the decoded text, or use --engine opa"
        )
    return text[::-1]


def replace_empty(value: Any, new: Any) -> str:
    """replace(s, "", new) as OPA's (Go's strings.Replacer): `new` before, between and after every byte
    of s; a character beyond ASCII cut so is an error (OPA's bytes that are not UTF-8)."""
    text, inserted = string_operand("replace", value, 1), string_operand("replace", new, 3).encode()
    data = inserted + b"".join(bytes([byte]) + inserted for byte in text.encode())
    return utf8_text("replace", data)


@builtin("strings.replace_n")
def replace_n(patterns: Any, value: Any) -> str:
    """strings.replace_n as OPA's (a Go strings.Replacer over the keys in order): one pass, at each byte
    the first key in order that matches there, its replacement not read again. regorus replaced key
    after key (`{"a": "b", "b": "a"}` made "ab" "aa"; OPA "ba"). A "" key inserts at every byte."""
    found = object_operand("strings.replace_n", patterns, 1)
    text = string_operand("strings.replace_n", value, 2)
    pairs = []
    for old, new in sorted(found.items()):
        if not isinstance(old, str) or not isinstance(new, str):
            raise BuiltinError("strings.replace_n: operand 1 must be object[string: string]")
        pairs.append((old.encode(), new.encode()))
    data, out, at, after_empty = text.encode(), bytearray(), 0, False
    while True:
        match = next((p for p in pairs if (p[0] or not after_empty) and data.startswith(p[0], at)), None)
        if match is not None:
            out += match[1]
            at, after_empty = at + len(match[0]), not match[0]
            continue
        if at >= len(data):
            break
        out.append(data[at])
        at, after_empty = at + 1, False
    return utf8_text("strings.replace_n", bytes(out))


@builtin("upper")
def upper(value: Any) -> str:
    return "".join(map(_upper_rune, string_operand("upper", value, 1)))


@builtin("lower")
def lower(value: Any) -> str:
    return "".join(map(_lower_rune, string_operand("lower", value, 1)))


def _upper_rune(rune: str) -> str:
    mapped = rune.upper()
    if len(mapped) == 1:
        return mapped
    titled = rune.title()  # a letter with iota subscript: its one-character form is the title case
    return titled if len(titled) == 1 else rune


def _lower_rune(rune: str) -> str:
    mapped = rune.lower()
    if len(mapped) == 1:
        return mapped
    return "i" if rune == "\u0130" else rune  # U+0130's full mapping adds a combining dot; its simple one is "i"


@builtin("strings.split_n")
def split_n(value: Any, delimiter: Any, count: Any) -> list[str]:
    """OPA's strings.split_n: every piece (Go's strings.Split: "" splits into characters), then the
    first n, or the last -n when n is negative, or none when n is 0."""
    text = string_operand("strings.split_n", value, 1)
    separator = string_operand("strings.split_n", delimiter, 2)
    n = int_operand("strings.split_n", count, 3)
    pieces = list(text) if separator == "" else text.split(separator)
    return pieces[:n] if n > 0 else pieces[n:] if n < 0 else []
