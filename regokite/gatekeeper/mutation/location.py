"""A mutator's `location` (and a pathTest's `subPath`), parsed as Gatekeeper's path parser reads it.

`spec.containers[name: *].securityContext` is a list of nodes: object
fields (`spec`), and list entries selected by a key field, either every
element (`[name: *]`, a glob) or the one whose key has a value
(`[name: foo]`, `[port: 80]`, quoted `["a.b": "x"]`). Identifiers are
letters, digits, `_` and `-`; anything else must be quoted with `"` or `'`.
"""

from __future__ import annotations

from dataclasses import dataclass

from regokite.errors import RegokiteError


class LocationError(RegokiteError):
    """A location that Gatekeeper's parser would refuse."""


@dataclass(frozen=True)
class Field:
    """An object's field."""

    name: str


@dataclass(frozen=True)
class Entry:
    """List elements by key: every one (glob) or the one whose `key` equals `value`."""

    key: str
    value: str | int | None = None
    glob: bool = False


Node = Field | Entry


def _ident_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "_-")


def _tokens(text: str) -> list[tuple[str, str]]:
    """(type, literal) pairs: IDENT, INT, '.', '[', ']', ':', '*', EOF."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c.isascii() and c.isdigit():
            j = i
            while j < n and text[j].isascii() and text[j].isdigit():
                j += 1
            out.append(("INT", text[i:j]))
            i = j
        elif _ident_char(c):
            j = i
            while j < n and _ident_char(text[j]):
                j += 1
            out.append(("IDENT", text[i:j]))
            i = j
        elif c in ".[]:*":
            out.append((c, c))
            i += 1
        elif c in "\"'":
            literal, i = _quoted(text, i)
            out.append(("IDENT", literal))
        else:
            raise LocationError(f"error at position {i}: invalid character {c!r}")
    out.append(("EOF", ""))
    return out


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote, i, chars = text[start], start + 1, []
    while i < len(text):
        c = text[i]
        if c == quote:
            return "".join(chars), i + 1
        if c == "\\":
            i += 1
            if i < len(text):
                chars.append(text[i])
        else:
            chars.append(c)
        i += 1
    raise LocationError(f"error at position {len(text)}: unterminated string")


def parse_location(text: str) -> tuple[Node, ...]:
    """The nodes of a location; LocationError says where it is malformed."""
    tokens = _tokens(text)
    nodes: list[Node] = []
    pos = 0

    def take(kind: str) -> str | None:
        nonlocal pos
        if tokens[pos][0] == kind:
            pos += 1
            return tokens[pos - 1][1]
        return None

    while tokens[pos][0] == "IDENT":
        nodes.append(Field(tokens[pos][1]))
        pos += 1
        if take("["):
            nodes.append(_entry(tokens, pos))
            pos += 4
        if take("."):
            if tokens[pos][0] == "EOF":
                raise LocationError(f"{text!r}: trailing separator")
        elif tokens[pos][0] != "EOF":
            raise LocationError(f"{text!r}: expected '.' or eof, got {tokens[pos][1]!r}")
    if tokens[pos][0] != "EOF":
        raise LocationError(f"{text!r}: expected field name or eof, got {tokens[pos][1]!r}")
    if not nodes:
        raise LocationError(f"{text!r}: empty location")
    return tuple(nodes)


def _entry(tokens: list[tuple[str, str]], pos: int) -> Entry:
    """`key: value]` or `key: *]` starting at tokens[pos] (four tokens)."""
    window = [*tokens[pos : pos + 4], *[("EOF", "")] * 4]
    (k_type, key), (colon, _), (v_type, value), (close, _) = window[:4]
    if k_type != "IDENT" or colon != ":":
        raise LocationError(f"expected keyField: in a list entry, got {key!r}")
    if close != "]":
        raise LocationError(f"expected ']' following the list entry of {key!r}")
    if v_type == "*":
        return Entry(key, glob=True)
    if v_type == "IDENT":
        return Entry(key, value)
    if v_type == "INT":
        if int(value) >= 2**63:
            raise LocationError(f"overflow in integer string: {value}")
        return Entry(key, int(value))
    raise LocationError(f"expected key value or glob in the list entry of {key!r}, got {value!r}")


def show(nodes: tuple[Node, ...]) -> str:
    """The location as written canonically (for messages)."""
    out = []
    for node in nodes:
        if isinstance(node, Field):
            out.append(("." if out else "") + node.name)
        else:
            out.append(f"[{node.key}: {'*' if node.glob else node.value}]")
    return "".join(out)
