"""Go composite literals and string constants read from Gatekeeper's own test files (test machinery).

The gator verify runner's table tests are Go: a slice of structs whose fields
are strings, composite literals (`Suite{Tests: []Test{{...}}}`,
`fstest.MapFS{"a.yaml": &fstest.MapFile{Data: []byte(fixtures.X)}}`), calls
(`gator.IntStrFromStr("no")`, `ptr.To[string]("x")`) and references
(`gator.ErrInvalidSuite`). This reads that subset into Python values, so the
harness runs the tables where they lie, never copied.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"""(?P<space>\s+|//[^\n]*|/\*.*?\*/)
      |(?P<raw>`[^`]*`)
      |(?P<str>"(?:\\.|[^"\\])*")
      |(?P<num>-?\d+)
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
      |(?P<punct>[{}\[\]():,&*=])
      |(?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Ref:
    """A name Go resolves (an error value, a constant): `gator.ErrInvalidSuite`."""

    name: str


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Composite:
    """`Type{...}`: `fields` when its elements are keyed, else `items`."""

    type: str
    fields: dict[str, Any]
    items: tuple[Any, ...]


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        assert found is not None  # `other` takes any character
        kind = found.lastgroup or ""
        if kind != "space":
            out.append((kind, found.group()))
        pos = found.end()
    return out


def string_constants(text: str) -> dict[str, str]:
    """`Name = `...`` (raw strings) and `Name = "..."` of a Go file's const and var blocks."""
    found = {}
    for name, value in re.findall(r"^\s*([A-Za-z_]\w*)\s*=\s*(`[^`]*`|\"(?:\\.|[^\"\\])*\")", text, re.MULTILINE):
        found[name] = _string(value)
    return found


def table(text: str, function: str) -> list[Composite]:
    """The elements of the table literal (`testCases := []struct{...}{...}`) in a Go test function."""
    start = text.index(f"func {function}(")
    body = tokens(text[start:])
    i = next(n for n, t in enumerate(body) if t[1] == "struct")
    i = _skip_braces(body, i + 1)  # the struct type
    reader = _Reader(body, i)
    value = reader.composite("[]struct")
    return list(value.items)


def _skip_braces(toks: list[tuple[str, str]], i: int) -> int:
    """The index after the brace block starting at `i`."""
    assert toks[i][1] == "{"
    depth = 0
    while True:
        depth += {"{": 1, "}": -1}.get(toks[i][1], 0)
        i += 1
        if depth == 0:
            return i


def _string(token: str) -> str:
    return token[1:-1] if token.startswith("`") else ast.literal_eval(token)


class _Reader:
    def __init__(self, toks: list[tuple[str, str]], i: int) -> None:
        self.toks, self.i = toks, i

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        return self.toks[self.i + ahead]

    def take(self, want: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise ValueError(f"expected {want!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def value(self) -> Any:
        kind, text = self.peek()
        if text in ("&", "*"):
            self.take()
            return self.value()
        if kind in ("str", "raw"):
            self.take()
            return _string(text)
        if kind == "num":
            self.take()
            return int(text)
        if text == "{":
            return self.composite("")
        type_name = self.type_name()
        if self.peek()[1] == "{":
            return self.composite(type_name)
        if self.peek()[1] == "(":
            self.take("(")
            args = []
            while self.peek()[1] != ")":
                args.append(self.value())
                if self.peek()[1] == ",":
                    self.take()
            self.take(")")
            return Call(type_name, tuple(args))
        return {"true": True, "false": False, "nil": None}.get(type_name, Ref(type_name))

    def type_name(self) -> str:
        """`[]*pkg.T`, `pkg.F[string]`, `map[string]T`: the name as written."""
        parts = []
        while True:
            kind, text = self.peek()
            if text == "[":
                while self.peek()[1] != "]":
                    parts.append(self.take()[1])
                parts.append(self.take("]")[1])
            elif text == "*":
                parts.append(self.take()[1])
            elif kind == "ident":
                parts.append(self.take()[1])
                if self.peek()[1] != "[":  # a generic's or a map's brackets follow the name
                    return "".join(parts)
            else:
                return "".join(parts)

    def composite(self, type_name: str) -> Composite:
        self.take("{")
        fields: dict[str, Any] = {}
        items: list[Any] = []
        while self.peek()[1] != "}":
            first = self.value()
            if self.peek()[1] == ":":
                self.take()
                key = first.name if isinstance(first, Ref) else first
                fields[str(key)] = self.value()
            else:
                items.append(first)
            if self.peek()[1] == ",":
                self.take()
        self.take("}")
        return Composite(type_name, fields, tuple(items))
