"""glob.match as OPA's (gobwas/glob), in place of regorus's.

regorus matched bytes (`?` did not match `é`), read `[^a]` as a negation
(gobwas reads `^` as a member), kept delimiters out of `[!a]`, read `**`
inside a segment as `*`, and answered for patterns OPA refuses (`[]a]`,
`[a-]`). Here a pattern is read as gobwas reads it and matched by characters:
`*` any run without a delimiter, `**` any run, `?` one character that is no
delimiter, `[ab]`, `[a-c]`, `[!ab]` one character (a delimiter included),
`{a,b}` either, `\\x` the character x. Delimiters: null is none, `[]` is
`["."]`, each must be one character.

gobwas's matchers answer otherwise than those rules for a few forms: runs
of wildcards other than `*`, `**` and `?`s (`***`, `*?`, `?*`), `?` or a class beside
characters beyond ASCII (it counts bytes in fixed-length runs: `?a` does
not match "éa"), an unclosed `{`, `{}`, a trailing `\\`, and a lone `?` or
`[!a]`, which matches "". Those are an error here, even under `regokite
test` (a Refusal), with a message saying so.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, string_operand, type_name

_WILD = frozenset("*?")


class _Quirk(Refusal):
    """A pattern form whose gobwas match is not the plain reading."""


@builtin("glob.match")
def match(pattern: Any, delimiters: Any, value: Any) -> bool:
    text = string_operand("glob.match", pattern, 1)
    subject = string_operand("glob.match", value, 3)
    compiled, lone = _compiled(text, _delimiters(delimiters))
    if (not text.isascii() or not subject.isascii()) and ("?" in text or "[" in text):
        raise _quirk(text, "? or [...] beside characters beyond ASCII (OPA's glob library then counts bytes)")
    if not subject and lone:
        raise _quirk(text, "a lone ? or [!...] (OPA's glob library matches it to the empty string)")
    return compiled.fullmatch(subject) is not None


def _delimiters(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BuiltinError(f"glob.match: operand 2 must be one of {{array, null}} but got {type_name(value)}")
    if not value:
        return (".",)
    for item in value:
        if not isinstance(item, str):
            raise BuiltinError(f"glob.match: operand 2 must be array of strings but got {type_name(item)}")
        if len(item) != 1:
            raise BuiltinError(f"glob.match: delimiter {item!r} is not one character")
    return tuple(value)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str, delimiters: tuple[str, ...]) -> tuple[re.Pattern[str], bool]:
    """The pattern as a Python expression, and whether it (or an alternative) is a lone `?` or `[!...]`."""
    reader = _Reader(pattern, delimiters)
    expression = reader.sequence(top=True)
    return re.compile(expression, re.DOTALL), reader.lone


class _Reader:
    """The pattern read left to right into a Python regular expression."""

    def __init__(self, pattern: str, delimiters: tuple[str, ...]) -> None:
        self.text = pattern
        self.at = 0
        not_delimiter = "[^" + "".join(_in_class(d) for d in delimiters) + "]" if delimiters else "."
        self.star, self.one = f"{not_delimiter}*", not_delimiter
        self.lone = False

    def sequence(self, top: bool) -> str:
        out: list[str] = []
        start = self.at
        while self.at < len(self.text):
            char = self.text[self.at]
            if not top and char in ",}":
                self._check_lone(self.text[start : self.at])
                return "".join(out)
            self.at += 1
            if char == "\\":
                if self.at == len(self.text):
                    raise _quirk(self.text, "a trailing \\")
                out.append(re.escape(self.text[self.at]))
                self.at += 1
            elif char in _WILD:
                out.append(self._wildcard(char))
            elif char == "[":
                out.append(self._class())
            elif char == "{":
                if self.text.startswith("}", self.at):
                    raise _quirk(self.text, "an empty {}")
                out.append(self._alternatives())
            else:
                out.append(re.escape(char))
        if not top:
            raise _quirk(self.text, "an unclosed {")
        self._check_lone(self.text[start:])
        return "".join(out)

    def _check_lone(self, written: str) -> None:
        if written == "?" or (written.startswith("[!") and written.endswith("]") and written.count("]") == 1):
            self.lone = True

    def _wildcard(self, char: str) -> str:
        start = self.at - 1
        while self.at < len(self.text) and self.text[self.at] in _WILD:
            self.at += 1
        run = self.text[start : self.at]
        if run in ("*", "**"):
            return self.star if run == "*" else ".*"
        if "*" in run:
            raise _quirk(self.text, f"the run of wildcards {run}")
        return self.one * len(run)

    def _class(self) -> str:
        end = self.text.find("]", self.at)
        while end > 0 and _escaped(self.text, end):
            end = self.text.find("]", end + 1)
        if end < 0:
            raise BuiltinError(f"glob.match: unexpected end of input in {self.text!r}")
        body, self.at = self.text[self.at : end], end + 1
        negated = body.startswith("!")
        members = _members(body[1:] if negated else body, self.text)
        return ("[^" if negated else "[") + members + "]"

    def _alternatives(self) -> str:
        choices = []
        while True:
            choices.append(self.sequence(top=False))
            if self.at >= len(self.text):
                raise _quirk(self.text, "an unclosed {")
            closing = self.text[self.at] == "}"
            self.at += 1
            if closing:
                return "(?:" + "|".join(choices) + ")"


def _members(body: str, pattern: str) -> str:
    """A class's members (`ab`, `a-c`, `\\]`) as a Python class body; gobwas refuses an empty class and
    a range that is not `lo-hi` with lo <= hi."""
    chars: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            i += 1
        chars.append(body[i])
        i += 1
    if not chars:
        raise BuiltinError(f"glob.match: empty character class in {pattern!r}")
    out, i = [], 0
    while i < len(chars):
        if i + 1 < len(chars) and chars[i + 1] == "-":
            if i + 2 >= len(chars) or chars[i] > chars[i + 2] or (i + 3 < len(chars) and chars[i + 3] == "-"):
                raise BuiltinError(f"glob.match: malformed character range in {pattern!r}")
            out.append(f"{_in_class(chars[i])}-{_in_class(chars[i + 2])}")
            i += 3
        elif chars[i] == "-":
            raise BuiltinError(f"glob.match: malformed character range in {pattern!r}")
        else:
            out.append(_in_class(chars[i]))
            i += 1
    return "".join(out)


def _escaped(text: str, index: int) -> bool:
    slashes = 0
    while index - slashes - 1 >= 0 and text[index - slashes - 1] == "\\":
        slashes += 1
    return slashes % 2 == 1


def _in_class(char: str) -> str:
    return char if char.isalnum() else "\\" + char


def _quirk(pattern: str, form: str) -> _Quirk:
    return _Quirk(
        f"glob.match: the pattern {pattern!r} holds {form}, which OPA's glob library matches in a way of "
        "its own that the embedded engine does not reproduce: write the pattern without it, or use --engine opa"
    )
