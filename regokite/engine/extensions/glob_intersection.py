"""regex.globs_match as OPA: whether two "glob-style regular expressions" share a non-empty string,
decided as OPA's vendored library decides it (yashtewari/glob-intersection v0.2.0), quirks included.

Its language: `.` any character, `[...]` a set (ranges `a-z`, `\\` escapes), `+` and `*` after a
token, `\\` escaping anything; every other character (`?`, `(`, `|`, ...) is itself. Its decision is
its algorithm's, not the intersection of the languages: a greedy walk after trimming equal plain
prefixes and suffixes. A case its Go code would index out of range for is an error, as OPA
reports the panic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regokite.engine.extensions.common import BuiltinError, builtin, string_operand

NAME = "regex.globs_match"
_NONE, _PLUS, _STAR = 0, 1, 2
_FLAGS = {"+": _PLUS, "*": _STAR}
_CHARACTER, _DOT, _SET = 0, 1, 2  # the library's token types, in its order


@dataclass
class _Token:
    kind: int
    runes: frozenset[str] = frozenset()  # the character (one) or the set's
    flag: int = _NONE

    def same(self, other: _Token) -> bool:
        return self.kind == other.kind and self.runes == other.runes


def _match(a: _Token, b: _Token) -> bool:
    if _DOT in (a.kind, b.kind):
        return True
    return bool(a.runes & b.runes)


def _next_rune(text: str, i: int) -> tuple[int, str, bool]:
    if text[i] == "\\":
        if i == len(text) - 1:
            raise BuiltinError(f"{NAME}: input ends with a \\ (escape) character")
        return i + 2, text[i + 1], True
    return i + 1, text[i], False


def _set(text: str, i: int) -> tuple[int, frozenset[str]]:
    runes: set[str] = set()
    previous: str | None = None
    while i < len(text):
        i, r, escaped = _next_rune(text, i)
        if escaped or r not in "-]":
            runes.add(r)
            previous = r
        elif r == "]":
            return i, frozenset(runes)
        else:  # a range
            if previous is None:
                raise BuiltinError(f"{NAME}: range character '-' must be preceded by a Unicode character")
            if i >= len(text) - 1:
                raise BuiltinError(f"{NAME}: range character '-' must be followed by a Unicode character")
            i, r, escaped = _next_rune(text, i)
            if not escaped and r in "-]":
                raise BuiltinError(f"{NAME}: range character '-' cannot be followed by a special symbol")
            if r < previous:
                raise BuiltinError(f"{NAME}: range is out of order")
            runes.update(chr(c) for c in range(ord(previous), ord(r) + 1))
            previous = None
    raise BuiltinError(f"{NAME}: found [ without matching ]")


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        i, r, escaped = _next_rune(text, i)
        if escaped:
            token = _Token(_CHARACTER, frozenset(r))
        elif r == ".":
            token = _Token(_DOT)
        elif r == "[":
            i, runes = _set(text, i)
            token = _Token(_SET, runes)
        elif r == "]":
            raise BuiltinError(f"{NAME}: set-close ']' with no preceding '['")
        elif r in _FLAGS:
            raise BuiltinError(f"{NAME}: flag '{r}' must be preceded by a non-flag")
        else:
            token = _Token(_CHARACTER, frozenset(r))
        if i < len(text):
            after, flag_rune, flag_escaped = _next_rune(text, i)
            if not flag_escaped and flag_rune in _FLAGS:
                token.flag, i = _FLAGS[flag_rune], after
        tokens.append(token)
    return _simplified(tokens)


def _simplified(tokens: list[_Token]) -> list[_Token]:
    """Two flagged equal tokens in a row are one (`+` wins over `*`)."""
    simple: list[_Token] = []
    for token in tokens:
        latest = simple[-1] if simple else None
        if latest is not None and token.flag != _NONE and latest.flag != _NONE and token.same(latest):
            latest.flag = _PLUS if _PLUS in (token.flag, latest.flag) else _STAR
        else:
            simple.append(token)
    return simple


def _trimmed(g1: list[_Token], g2: list[_Token]) -> tuple[list[_Token], list[_Token]] | None:
    left = 0
    while left < len(g1) and left < len(g2) and g1[left].flag == _NONE and g2[left].flag == _NONE:
        if not _match(g1[left], g2[left]):
            return None
        left += 1
    left = max(left - 1, 0)
    r1, r2 = len(g1) - 1, len(g2) - 1
    while r1 >= 0 and r1 >= left and r2 >= 0 and r2 >= left and g1[r1].flag == _NONE and g2[r2].flag == _NONE:
        if not _match(g1[r1], g2[r2]):
            return None
        r1, r2 = r1 - 1, r2 - 1
    if r1 < len(g1) - 1:
        r1, r2 = r1 + 1, r2 + 1
    return g1[left : r1 + 1], g2[left : r2 + 1]


def _normal(g1: list[_Token], g2: list[_Token]) -> bool:
    i = 0
    while i < len(g1) and i < len(g2):
        if g1[i].flag == _NONE and g2[i].flag == _NONE:
            if not _match(g1[i], g2[i]):
                return False
        else:
            return _special(g1[i:], g2[i:])
        i += 1
    return i == len(g1) and i == len(g2)


def _special(g1: list[_Token], g2: list[_Token]) -> bool:
    flagged, other = (g1, g2) if g1[0].flag != _NONE else (g2, g1)
    return _plus(flagged, other) if flagged[0].flag == _PLUS else _star(flagged, other)


def _plus(plussed: list[_Token], other: list[_Token]) -> bool:
    if not _match(plussed[0], other[0]):
        return False
    return _star(plussed, other[1:]) or (other[0].flag != _NONE and _normal(plussed[1:], other))


def _star(starred: list[_Token], other: list[_Token]) -> bool:
    star, following = starred[0], starred[1] if len(starred) > 1 else None
    for i, token in enumerate(other):
        if following is not None and _match(token, following) and _normal(starred[1:], other[i:]):
            return True
        if not _match(token, star):
            return False
    return following is None


@builtin(NAME)
def globs_match(first: Any, second: Any) -> bool:
    g1 = _tokens(string_operand(NAME, first, 1))
    g2 = _tokens(string_operand(NAME, second, 2))
    trimmed = _trimmed(g1, g2)
    if trimmed is None:
        return False
    try:
        return _normal(*trimmed)
    except IndexError:  # the Go code indexes an empty glob: OPA reports the panic as an error
        raise BuiltinError(f"{NAME}: runtime error: index out of range") from None
