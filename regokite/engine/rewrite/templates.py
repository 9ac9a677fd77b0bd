"""TemplateStrings: OPA 1.x's template strings, `$"... {expr} ..."` and `` $`...` ``, which regorus does not parse.

OPA lowers a template string to `internal.template_string([parts])`: each
literal part a string, each `{expr}` the set of the expression's values,
written as `print` writes them: a string as it is, anything else as Rego
writes the value (`[1, "a"]`, `{"a": 1}`, `set()`), no value as
`<undefined>`, more than one value an error. Here each template becomes
`__regokite_template([...])` (internal.TEMPLATE) with the same parts, each
value written to text in Rego first, as sprintf's `%v` writes it
(helpers.written). `\\{` is a literal brace. Lines are kept: a raw
template spanning lines keeps its newlines between the parts. Where OPA's
versions read a template otherwise (1.20 and the conformance suite's: `\\}`,
a raw template's first newline), it is refused. Runs on the text, before
any parse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

from regokite.engine.extensions.internal import TEMPLATE
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, refusal, trimmed
from regokite.engine.rewrite.helpers import first_free, written
from regokite.engine.rewrite.tree import body, end_of, extent, fcn_name, kind

_OPENERS = {b"(": b")", b"[": b"]", b"{": b"}"}
_CLOSERS = (b")", b"]", b"}")


@dataclass(frozen=True)
class _Template:
    start: int  # the `$`
    end: int  # just past the closing quote
    raw: bool
    parts: tuple[tuple[str, int, int], ...]  # ("text", start, end) of literal text, ("expr", `{`, past `}`)


def rewrite(target: Target) -> list[Change]:
    source = target.source
    changes: list[Change] = []
    counter = first_free(source)
    for template in _scan(source, 0, len(source), target):
        try:
            made, counter = _lowered(source, template, counter)
        except ValueError as exc:  # an escape a string may not hold
            raise refusal(target.module, source, template.start, f"a template string's text: {exc}") from None
        changes += made
    return changes


def lowered(text: str) -> str:
    """A query's template strings lowered (a query has no module to append to: nothing is)."""
    if "$" not in text:
        return text
    source = text.encode()
    changes: list[Change] = []
    counter = first_free(source)
    for template in _scan(source, 0, len(source), None):
        made, counter = _lowered(source, template, counter)
        changes += made
    out, at = b"", 0
    for change in sorted(changes, key=lambda c: (c.start, c.end)):
        out += source[at : change.start] + change.text
        at = change.end
    return (out + source[at:]).decode()


def _lowered(source: bytes, template: _Template, counter: int) -> tuple[list[Change], int]:
    changes = [Change(template.start, template.start + 2, TEMPLATE.encode() + b"([")]
    first = True
    for part, start, end in template.parts:
        comma = b"" if first else b", "
        if part == "text":
            text = _text(source[start:end], template.raw)
            if not text:
                changes.append(Change(start, end, b""))
                continue
            newlines = b"\n" * source[start:end].count(b"\n")
            changes.append(Change(start, end, comma + json.dumps(text, ensure_ascii=False).encode() + newlines))
        else:
            names = [f"__rk{counter + i}__" for i in range(5)]
            counter += 5
            value = (
                f'{{object.get({{"string": {names[0]}}}, type_name({names[0]}), {written(names[0], names[1:])}) | '
                f"{names[0]} := "
            ).encode()
            changes.append(Change(start, start + 1, comma + value))
        first = False
    changes.append(Change(template.end - 1, template.end, b"])"))
    return changes, counter


def _text(literal: bytes, raw: bool) -> str:
    """A literal part's value: `\\{` is a brace; in `$"..."` the other escapes are a string's."""
    if raw:
        return re.sub(rb"\\\{", b"{", literal).decode()
    return json.loads(b'"' + re.sub(rb"\\(\{|.)", lambda m: b"{" if m[1] == b"{" else m[0], literal) + b'"')


def _scan(source: bytes, start: int, end: int, target: Target | None) -> Iterator[_Template]:
    """Every template string in source[start:end], nested ones included, outermost first."""
    i = start
    while i < end:
        c = source[i : i + 1]
        if c == b"#":
            i = _line_end(source, i)
        elif c == b'"':
            i = _string_end(source, i)
        elif c == b"`":
            i = source.find(b"`", i + 1) + 1 or end
        elif c == b"$" and source[i + 1 : i + 2] in (b'"', b"`"):
            template = _template(source, i, target)
            yield template
            for part, s, e in template.parts:
                if part == "expr":
                    yield from _scan(source, s + 1, e - 1, target)
            i = template.end
        else:
            i += 1


def _template(source: bytes, start: int, target: Target | None) -> _Template:
    raw = source[start + 1 : start + 2] == b"`"
    quote = b"`" if raw else b'"'
    parts: list[tuple[str, int, int]] = []
    i = text = start + 2
    if raw and source[i : i + 1] in (b"\n", b"\r"):
        _refuse(source, i, target, _VERSIONS + " whether a raw template string's first newline is part of it")
    while i < len(source):
        c = source[i : i + 1]
        if c == b"\\" and source[i + 1 : i + 2] == b"}":
            _refuse(source, i, target, _VERSIONS + r" whether `\}` is an escape (OPA 1.20 refuses it)")
        if c == b"\\":
            i += 2 if not raw or source[i + 1 : i + 2] == b"{" else 1
        elif c == quote:
            parts.append(("text", text, i))
            return _Template(start, i + 1, raw, tuple(parts))
        elif c == b"\n" and not raw:
            break
        elif c == b"{":
            parts.append(("text", text, i))
            close = _expression_end(source, i)
            if close is None:
                break
            _check_wildcards(source, i + 1, close - 1, target)
            _check_numbers(source, i + 1, close - 1, target)
            parts.append(("expr", i, close))
            i = text = close
        else:
            i += 1
    _refuse(source, start, target, "a template string is not closed")


_VERSIONS = "OPA's versions differ on"


def _refuse(source: bytes, at: int, target: Target | None, message: str) -> NoReturn:
    if target is None:
        raise ValueError(message)
    raise refusal(target.module, source, at, message + ": write the template string otherwise")


def _expression_end(source: bytes, start: int) -> int | None:
    """Just past the `}` closing the template expression whose `{` is at `start`."""
    depth, i = 0, start
    while i < len(source):
        c = source[i : i + 1]
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
            if depth == 0:
                return i + 1 if c == b"}" else None
        elif c == b'"':
            i = _string_end(source, i)
            continue
        elif c == b"`":
            i = source.find(b"`", i + 1) + 1 or len(source)
            continue
        elif c == b"$" and source[i + 1 : i + 2] in (b'"', b"`"):
            i = _template(source, i, None).end
            continue
        i += 1
    return None


def _check_wildcards(source: bytes, start: int, end: int, target: Target | None) -> None:
    """OPA declares no variable in a template expression outside a comprehension: `_` there is a
    compile error ("var _ is undeclared"), which regorus would iterate."""
    depth_comprehension = [False]  # for each open bracket: whether it is a comprehension
    code = _masked_expression(source[start:end])
    comprehensions = _comprehensions(code)
    for i, byte in enumerate(code):
        c = bytes([byte])
        if c in _OPENERS:
            depth_comprehension.append(depth_comprehension[-1] or i in comprehensions)
        elif c in _CLOSERS and len(depth_comprehension) > 1:
            depth_comprehension.pop()
        elif c == b"_" and not depth_comprehension[-1]:
            before, after = code[i - 1 : i], code[i + 1 : i + 2]
            if not re.match(rb"[\w.]", before or b" ") and not re.match(rb"\w", after or b" "):
                _refuse(
                    source,
                    start + i,
                    target,
                    "var _ is undeclared (OPA's compile error: a template expression declares no variable "
                    "outside a comprehension)",
                )


_NUMBER = re.compile(rb"(?<![\w.])-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.])")


def _check_numbers(source: bytes, start: int, end: int, target: Target | None) -> None:
    """OPA writes a number literal's text (`1.0`, `1e3`), regokite the value regorus holds (`1`, `1000`):
    a literal in a template expression written otherwise than its value is refused."""
    code = _masked_expression(source[start:end])
    for found in _NUMBER.finditer(code):
        text = found.group().decode()
        value = float(text)
        held = str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
        if held != text:
            _refuse(
                source,
                start + found.start(),
                target,
                f"OPA writes the number {text} as written, the embedded "
                f"engine as {held}: write it as {held}, or use --engine opa",
            )


def _comprehensions(code: bytes) -> set[int]:
    """The offsets of the brackets that open a comprehension (a `|` at their own depth)."""
    open_at: list[int] = []
    found = set()
    for i, byte in enumerate(code):
        c = bytes([byte])
        if c in _OPENERS:
            open_at.append(i)
        elif c in _CLOSERS:
            if open_at:
                open_at.pop()
        elif c == b"|" and open_at:
            found.add(open_at[-1])
    return found


def _masked_expression(text: bytes) -> bytes:
    """`text` with its strings (and template strings) blanked, offsets kept."""
    out = bytearray(text)
    i = 0
    while i < len(text):
        c = text[i : i + 1]
        if c == b'"' or (c == b"$" and text[i + 1 : i + 2] == b'"'):
            j = _string_end(text, i + (c == b"$"))
        elif c == b"`" or (c == b"$" and text[i + 1 : i + 2] == b"`"):
            j = text.find(b"`", i + 1 + (c == b"$")) + 1 or len(text)
        else:
            i += 1
            continue
        out[i:j] = b" " * (j - i)
        i = j
    return bytes(out)


def _string_end(source: bytes, start: int) -> int:
    """Just past the `"` closing the string opening at `start`."""
    i = start + 1
    while i < len(source) and source[i : i + 1] not in (b'"', b"\n"):
        i += 2 if source[i : i + 1] == b"\\" else 1
    return i + 1


def _line_end(source: bytes, start: int) -> int:
    end = source.find(b"\n", start)
    return len(source) if end < 0 else end


def arguments(target: Target) -> list[Change]:
    """TemplateArguments: a template string as a function's argument (`f($"{x}-{y}") := ...`) as OPA reads
    it: the argument a variable, unified with the template at the end of the body, where the body has
    bound the template's variables (regorus cannot schedule a call in an argument)."""
    tree = target.parsed()
    if tree is None:
        return []
    source, changes, counter = tree.source, [], first_free(tree.source)
    for rule in tree.written_rules():
        head_kind, head = next(iter(body(rule)["head"].items())) if kind(rule) == "Spec" else ("", {})
        templated = [a for a in head.get("args", []) if kind(a) == "Call" and fcn_name(body(a)) == TEMPLATE]
        if head_kind != "Func" or not templated:
            continue
        bodies = body(rule)["bodies"]
        if len(bodies) > 1:
            raise refusal(
                target.module,
                source,
                body(rule)["span"]["start"],
                "a template string as the argument of a function with several bodies: bind it in each body",
            )
        checks = []
        for argument in templated:
            name = f"__rk{counter}__".encode()
            counter += 1
            where = trimmed(source, **extent(argument))
            changes.append(Change(*where, name))
            checks.append(name + b" = " + source[where[0] : where[1]])
        if bodies:
            end = end_of(bodies[0]["query"]["stmts"][-1])
            changes.append(Change(end, end, b"".join(b"; " + c for c in checks)))
        else:
            end = body(rule)["span"]["end"]
            opening = b" { " if target.module.v0 else b" if { "
            changes.append(Change(end, end, opening + b"; ".join(checks) + b" }"))
    return changes
