"""The regex.* builtins as OPA's: Go's regexp, through RE2 (the library Go's regexp was written after),
in place of regorus's (Rust's regex crate).

Rust's crate reads patterns otherwise than Go: `\\d`, `\\w`, `\\s` and `\\b` are
Unicode there and ASCII in Go (`regex.match("\\\\w", "é")` was true), `(?x)`
and `a{1001}` were accepted, `\\Q...\\E` and `[[a]` refused, and an invalid
pattern made regex.replace undefined where OPA errs. RE2 has Go's syntax but
for what `go_pattern` writes or refuses: `\\p{...}` names as Go 1.25 looks
them up (any case, `_`, `-` and spaces dropped; only one-word scripts;
`ASCII`, `LC` and the long category names), `\\C`, capture names beyond ASCII
word characters, and nesting Go refuses. The matching loops are Go's: every
match of FindAll but an empty one right after a match, Split's pieces,
ReplaceAll's `$1`/`${name}` expansion. A pattern RE2 cannot answer as Go would
(`\\p{Cn}`, `\\p{Assigned}`, a program beyond RE2's memory) is an error saying so.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, int_operand, string_operand

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 64 << 20
_DEEP = 250  # groups nesting deeper may pass Go's height check (1,000, counting more than groups) or not
# unicode.CategoryAliases of Go 1.25 (Unicode's general category names), by Go's canonical name
_CATEGORY_ALIASES = {
    "Casedletter": "LC", "Closepunctuation": "Pe", "Combiningmark": "M", "Connectorpunctuation": "Pc",
    "Control": "Cc", "Currencysymbol": "Sc", "Dashpunctuation": "Pd", "Decimalnumber": "Nd",
    "Enclosingmark": "Me", "Finalpunctuation": "Pf", "Format": "Cf", "Initialpunctuation": "Pi",
    "Letter": "L", "Letternumber": "Nl", "Lineseparator": "Zl", "Lowercaseletter": "Ll", "Mark": "M",
    "Mathsymbol": "Sm", "Modifierletter": "Lm", "Modifiersymbol": "Sk", "Nonspacingmark": "Mn",
    "Number": "N", "Openpunctuation": "Ps", "Other": "C", "Otherletter": "Lo", "Othernumber": "No",
    "Otherpunctuation": "Po", "Othersymbol": "So", "Paragraphseparator": "Zp", "Privateuse": "Co",
    "Punctuation": "P", "Separator": "Z", "Spaceseparator": "Zs", "Spacingmark": "Mc", "Surrogate": "Cs",
    "Symbol": "S", "Titlecaseletter": "Lt", "Unassigned": "Cn", "Uppercaseletter": "Lu", "Cntrl": "Cc",
    "Digit": "Nd", "Punct": "P",
}  # fmt: skip
_CLASSES = {"Ascii": "\\x00-\\x7f", "LC": "\\p{Lu}\\p{Ll}\\p{Lt}"}  # Go's names RE2 lacks, as class items
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@builtin("regex.is_valid")
def is_valid(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        compiled(pattern)
    except Refusal:
        raise
    except BuiltinError:
        return False
    return True


@builtin("regex.match")
def match(pattern: Any, value: Any) -> bool:
    expression = compiled(string_operand("regex.match", pattern, 1))
    return _search(expression, string_operand("regex.match", value, 2).encode(), 0) is not None


@builtin("regex.find_n")
def find_n(pattern: Any, value: Any, number: Any) -> list[str]:
    expression = compiled(string_operand("regex.find_n", pattern, 1))
    data = string_operand("regex.find_n", value, 2).encode()
    return [m.group(0).decode() for m in _all(expression, data, int_operand("regex.find_n", number, 3))]


@builtin("regex.find_all_string_submatch_n")
def find_all_string_submatch_n(pattern: Any, value: Any, number: Any) -> list[list[str]]:
    name = "regex.find_all_string_submatch_n"
    expression = compiled(string_operand(name, pattern, 1))
    data = string_operand(name, value, 2).encode()
    found = _all(expression, data, int_operand(name, number, 3))
    return [[m.group(0).decode(), *((group or b"").decode() for group in m.groups())] for m in found]


@builtin("regex.split")
def split(pattern: Any, value: Any) -> list[str]:
    """Go's Regexp.Split(s, -1): an empty match at the start makes no piece, nor the end when a match ends it."""
    expression = compiled(string_operand("regex.split", pattern, 1))
    data = string_operand("regex.split", value, 2).encode()
    if pattern and not data:
        return [""]
    pieces, begin, end = [], 0, 0
    for found in _all(expression, data, -1):
        end = found.start()
        if found.end() != 0:
            pieces.append(data[begin:end].decode())
        begin = found.end()
    if end != len(data):
        pieces.append(data[begin:].decode())
    return pieces


@builtin("regex.replace")
def replace(value: Any, pattern: Any, replacement: Any) -> str:
    """Go's Regexp.ReplaceAllString: `$1`, `${1}`, `$name`, `${name}` expanded, `$$` a dollar."""
    data = string_operand("regex.replace", value, 1).encode()
    expression = compiled(string_operand("regex.replace", pattern, 2))
    template = string_operand("regex.replace", replacement, 3)
    out, last, search = [], 0, 0
    while search <= len(data):
        found = _search(expression, data, search)
        if found is None:
            break
        out.append(data[last : found.start()])
        if found.end() > last or found.start() == 0:
            out.append(_expand(expression, template, found).encode())
        last = found.end()
        width = _width(data, search)
        search = search + max(width, 1) if search + max(width, 1) > found.end() else found.end()
    out.append(data[last:])
    return b"".join(out).decode()


@builtin("regex.template_match")
def template_match(template: Any, value: Any, start: Any, end: Any) -> bool:
    """OPA's regex.template_match (gorilla/mux's template): `start`/`end` one byte each, every
    delimited part a pattern of its own, the rest literal, the whole anchored."""
    name = "regex.template_match"
    text, subject = string_operand(name, template, 1), string_operand(name, value, 2)
    opening, closing = string_operand(name, start, 3), string_operand(name, end, 4)
    if len(opening.encode()) != 1:
        raise BuiltinError(f"start delimiter has to be exactly one character long but is {len(opening.encode())} long")
    if len(closing.encode()) != 1:  # OPA's message gives the start delimiter's length here too
        raise BuiltinError(f"end delimiter has to be exactly one character long but is {len(opening.encode())} long")
    pattern, level, at, literal_from = ["^"], 0, 0, 0
    for i, character in enumerate(text):
        if character == opening:
            level += 1
            if level == 1:
                at = i
        elif character == closing:
            level -= 1
            if level == 0:
                part = text[at + 1 : i]
                compiled(f"^{part}$")
                pattern.append(f"{_quote(text[literal_from:at])}({part})")
                literal_from = i + 1
            elif level < 0:
                raise BuiltinError(f"unbalanced braces in {text!r}")
    if level != 0:
        raise BuiltinError(f"unbalanced braces in {text!r}")
    pattern.append(_quote(text[literal_from:]) + "$")
    return _search(compiled("".join(pattern)), subject.encode(), 0) is not None


def _all(expression: Any, data: bytes, number: int) -> Iterator[Any]:
    """Go's allMatches: at most `number` (all when negative), none empty right after the one before."""
    limit = len(data) + 1 if number < 0 else number
    position, previous_end, delivered = 0, -1, 0
    while delivered < limit and position <= len(data):
        found = _search(expression, data, position)
        if found is None:
            return
        accept = True
        if found.end() == position:
            accept = found.start() != previous_end
            position += max(_width(data, position), 1)
        else:
            position = found.end()
        previous_end = found.end()
        if accept:
            delivered += 1
            yield found


def _search(expression: Any, data: bytes, position: int) -> Any:
    """The leftmost match from `position` that starts where a character does, as Go's (which reads runes):
    RE2 reads bytes, and finds an empty match between the bytes of one character (`\\B` inside `😀`)."""
    while True:
        found = expression.search(data, position)
        if found is None or found.start() == len(data) or data[found.start()] & 0xC0 != 0x80:
            return found
        position = found.start() + 1
        while position < len(data) and data[position] & 0xC0 == 0x80:
            position += 1


def _width(data: bytes, position: int) -> int:
    """The bytes of the UTF-8 character at `position` (0 at the end)."""
    if position >= len(data):
        return 0
    lead = data[position]
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _expand(expression: Any, template: str, found: Any) -> str:
    """Go's Regexp.expand of `template` for one match."""
    out, rest = [], template
    while "$" in rest:
        before, _, rest = rest.partition("$")
        out.append(before)
        if rest.startswith("$"):
            out.append("$")
            rest = rest[1:]
            continue
        name, after = _group_name(rest)
        if name is None:
            out.append("$")
            continue
        rest = after
        ascii_number = name.isascii() and name.isdigit() and (name == "0" or name[0] != "0")
        index = int(name) if ascii_number else expression.groupindex.get(name.encode(), -1)
        if 0 <= index <= expression.groups and found.start(index) >= 0:
            out.append(found.group(index).decode())
    out.append(rest)
    return "".join(out)


def _group_name(text: str) -> tuple[str | None, str]:
    """Go's extract: a leading `name` or `{name}` (letters, digits, `_`), and what follows."""
    braced = text.startswith("{")
    body = text[1:] if braced else text
    length = 0
    while length < len(body) and (body[length].isalpha() or body[length].isdecimal() or body[length] == "_"):
        length += 1
    if length == 0 or (braced and body[length : length + 1] != "}"):
        return None, text
    return body[:length], body[length + 1 if braced else length :]


def _quote(text: str) -> str:
    """Go's regexp.QuoteMeta."""
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in text)


@functools.lru_cache(maxsize=256)
def compiled(pattern: str) -> Any:
    """The pattern as Go reads it, compiled by RE2; a BuiltinError where Go refuses it."""
    translated = go_pattern(pattern)
    try:
        return re2.compile(translated.encode(), _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        if "too large" in reason:
            refusal = f"regex: the pattern {pattern!r} is beyond what this engine compiles: use --engine opa"
            raise Refusal(refusal) from None
        raise BuiltinError(f"error parsing regexp: {reason}") from None


def go_pattern(pattern: str) -> str:
    """`pattern` for RE2 as Go reads it: its `\\p{...}` names resolved, what Go refuses an error."""
    out, i, depth, in_class, deepest = [], 0, 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                end = len(pattern) if end < 0 else end + 2
                out.append(pattern[i:end])
                i = end
                continue
            if nxt == "C":
                raise BuiltinError("error parsing regexp: invalid escape sequence: `\\C`")
            if nxt in "pP":
                text, i = _unicode_class(pattern, i, in_class)
                out.append(text)
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end >= 0:
                    out.append(pattern[i : end + 2])
                    i = end + 2
                    continue
            if c == "]" and not _class_start(pattern, i):
                in_class = False
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
            _check_name(pattern, i)
        elif c == ")":
            depth -= 1
        out.append(c)
        i += 1
    if deepest > _DEEP:
        raise Refusal(f"regex: a pattern nesting {deepest} groups deep, which Go may refuse: use --engine opa")
    return "".join(out)


def _class_start(pattern: str, i: int) -> bool:
    """Whether the `]` at i is a class's first item (`[]a]`, `[^]a]`): a literal there."""
    j = i - 1
    if j >= 0 and pattern[j] == "^":
        j -= 1
    return j >= 0 and pattern[j] == "[" and (j == 0 or pattern[j - 1] != "\\")


def _check_name(pattern: str, i: int) -> None:
    """Go takes capture names of ASCII letters, digits and `_` only (RE2 any word character)."""
    for opening in ("(?P<", "(?<"):
        if pattern.startswith(opening, i):
            end = pattern.find(">", i)
            name = pattern[i + len(opening) : end if end >= 0 else len(pattern)]
            if end >= 0 and (not name or not set(name) <= _WORD):
                raise BuiltinError(f"error parsing regexp: invalid named capture: `{pattern[i : end + 1]}`")


def _unicode_class(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """`\\p{Name}` (or `\\pN`, `\\P`, `{^Name}`) at i, as Go 1.25's unicodeTable resolves the name."""
    negated = pattern[i + 1] == "P"
    if pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        if end < 0:
            raise BuiltinError(f"error parsing regexp: invalid character class range: `{pattern[i:]}`")
        name, after = pattern[i + 3 : end], end + 1
    else:
        if i + 2 >= len(pattern):
            raise BuiltinError("error parsing regexp: invalid character class range: `\\p`")
        name, after = pattern[i + 2], i + 3
    if name.startswith("^"):
        negated, name = not negated, name[1:]
    canonical = _canonical(name)
    resolved = {"Lc": "LC"}.get(canonical, _CATEGORY_ALIASES.get(canonical, canonical))
    if resolved in ("Assigned", "Cn", "C"):  # Go's C holds the unassigned characters, RE2's not
        raise Refusal(f"regex: `{pattern[i:after]}` (Unicode's unassigned characters) has no RE2 class as Go's")
    if resolved in _CLASSES:
        items = _CLASSES[resolved]
        if in_class and negated:
            raise Refusal(f"regex: `{pattern[i:after]}` negated inside a class: use --engine opa")
        text = items if in_class else f"[{'^' if negated else ''}{items}]"
        return text, after
    if resolved != "Any" and not _known(resolved):
        raise BuiltinError(f"error parsing regexp: invalid character class range: `{pattern[i:after]}`")
    return f"\\{'P' if negated else 'p'}{{{resolved}}}", after


@functools.cache
def _known(name: str) -> bool:
    try:
        re2.compile(f"\\p{{{name}}}", _OPTIONS)
    except re2.error:
        return False
    return True


def _canonical(name: str) -> str:
    """Go's regexp/syntax canonicalName: `_`, `-` and spaces dropped, the first letter upper, the rest lower."""
    kept = [c for c in name if c not in "_- "]
    return "".join((c.upper() if n == 0 else c.lower()) if c.isascii() else c for n, c in enumerate(kept))
