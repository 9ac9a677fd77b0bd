"""Changes to a module's text, and the map from the rewritten text's locations back to the text as written.

A stage says what to change as `Change`s (byte offsets into the module's
text as that stage read it); `apply` makes them, keeping every line (a
change adds lines only to text appended at the module's end) and records
per line what moved: `Edit` (a column shift) or `Redirect` (appended lines
whose errors belong at a place of the text before). `Columns` chains the
records of every stage and maps an engine's location back through them, the
last stage first. The engine counts columns as regorus does: a byte each, a
tab four.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from regokite.bundle import Module
from regokite.engine.rewrite.tree import Node, body, extent, kind, span
from regokite.errors import Location, PolicyLoadError

# strings, raw strings and comments: what may hold braces or newlines that are not code
NOT_CODE = re.compile(rb'"(?:[^"\\\n]|\\.)*"|`[^`]*`|#[^\n]*')


@dataclass(frozen=True)
class Change:
    """Replace source[start:end] with `text` (an insertion when start == end); `place`: where
    (line, col, before this change) an error located on the lines of `text` belongs."""

    start: int
    end: int
    text: bytes
    place: tuple[int, int] | None = None


@dataclass(frozen=True)
class Edit:
    """Text replaced on one line: where it was (line, regorus column) and its widths before and after."""

    line: int
    col: int
    old: int
    new: int


@dataclass(frozen=True)
class Redirect:
    """Lines of text appended by a rewrite (a helper made for one place) whose locations belong at that
    place: (line, col) in the text before the rewrite."""

    first: int
    last: int
    line: int
    col: int


Moves = dict[str, list[Edit | Redirect]]  # by the name the engine knows a module by (engine_name)


def engine_name(module: Module) -> str:
    """The name a module is given to the engine, and its locations carry: what `Columns` is keyed by."""
    return module.path


class Columns:
    """Maps locations in the rewritten modules back to the modules as written.

    Several rewrites in a row chain: each stage's edits hold columns of the
    text before it, so a location goes back through the last stage first.
    """

    def __init__(self, edits: Moves, earlier: tuple[Moves, ...] = ()) -> None:
        self._stages = (*earlier, edits)

    @classmethod
    def chain(cls, *stages: Columns) -> Columns:
        """The map back through `stages`, applied to the text in that order."""
        edits = tuple(e for stage in stages for e in stage._stages if e)
        return cls(edits[-1], edits[:-1]) if edits else cls({})

    @property
    def changed(self) -> bool:
        """Whether any rewrite moved a column."""
        return any(self._stages)

    def original(self, location: Location | None) -> Location | None:
        for edits in reversed(self._stages):
            location = _before(edits, location)
        return location


def _before(edits: Moves, location: Location | None) -> Location | None:
    """`location` in the text before one rewrite."""
    if location is None:
        return None
    found = edits.get(location.file, ())
    for redirect in found:
        if isinstance(redirect, Redirect) and redirect.first <= location.line <= redirect.last:
            return replace(location, line=redirect.line, col=redirect.col)
    col, shift = location.col, 0
    for edit in found:
        if isinstance(edit, Redirect) or edit.line != location.line:
            continue
        start = edit.col + shift  # where the new text begins in the rewritten line
        if col < start:
            break
        if col < start + edit.new:
            return replace(location, col=edit.col)  # inside the new text: where the old one was
        shift += edit.new - edit.old
    return replace(location, col=col - shift)


def apply(module: Module, changes: list[Change]) -> tuple[Module, list[Edit | Redirect]]:
    """`module` with `changes` made, and what moved."""
    source = module.text.encode()
    changes = sorted(changes, key=lambda c: (c.start, c.end))
    out: list[bytes] = []
    moves: list[Edit | Redirect] = []
    at, added = 0, 0  # added: lines the changes so far added
    for change in changes:
        if change.start < at:
            raise AssertionError(f"overlapping rewrites in {module.path}")  # a bug here, never input
        out += [source[at : change.start], change.text]
        line, col = position(source, change.start)
        moves.append(Edit(line, col, width(source[change.start : change.end]), width(change.text)))
        if change.place is not None:
            first = line + added + change.text.startswith(b"\n")  # the lines the text begins
            moves.append(Redirect(first, line + added + change.text.count(b"\n"), *change.place))
        added += change.text.count(b"\n") - source[change.start : change.end].count(b"\n")
        at = change.end
    out.append(source[at:])
    return replace(module, text=b"".join(out).decode()), moves


def located(error: PolicyLoadError, columns: Columns, originals: Sequence[Module]) -> PolicyLoadError:
    """`error`, raised on rewritten modules, pointing into the modules as written."""
    by_name = {engine_name(m): m for m in originals}
    location = columns.original(error.location)
    module = by_name.get(location.file) if location else None
    line = module.line(location.line) if module and location else error.source_line
    also = tuple(_located_text(text, columns) for text in error.also)
    return PolicyLoadError(error.message, location, line, also=also)


_PREFIX = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): ")


def _located_text(text: str, columns: Columns) -> str:
    found = _PREFIX.match(text)
    if not found:
        return text
    where = columns.original(Location(found["file"], int(found["line"]), int(found["col"])))
    return f"{where}: {text[found.end() :]}"


# ------------------------------------------------------------------ offsets, columns and the code in a text


def width(text: bytes) -> int:
    """Columns `text` takes in regorus's count: a byte each, a tab four."""
    return len(text) + 3 * text.count(b"\t")


def position(source: bytes, offset: int) -> tuple[int, int]:
    """(line, regorus column) of a byte offset."""
    line_start = source.rfind(b"\n", 0, offset) + 1
    return source.count(b"\n", 0, offset) + 1, width(source[line_start:offset]) + 1


def offset(source: bytes, line: int, col: int) -> int | None:
    """The byte offset of a regorus (line, column)."""
    start = 0
    for _ in range(line - 1):
        start = source.find(b"\n", start) + 1
        if start == 0:
            return None
    at = 1
    for i in range(start, len(source) + 1):
        if at >= col:
            return i
        at += 4 if source[i : i + 1] == b"\t" else 1
    return None


def masked(text: bytes) -> bytes:
    """`text` with strings and comments blanked (newlines kept), offsets kept."""
    return NOT_CODE.sub(lambda m: re.sub(rb"[^\n]", b" ", m.group()), text)


def flat(source: bytes, start: int, end: int) -> bytes:
    """source[start:end] on one line (`one_line`)."""
    return one_line(source[start:end])


def one_line(code: bytes) -> bytes:
    """Rego `code` on one line: comments blanked, newlines as spaces, a raw string spanning lines written
    as the same string with `\\n`."""
    if b"\n" not in code:
        return code

    def single(found: re.Match[bytes]) -> bytes:
        text = found.group()
        if text.startswith(b"#"):
            return b" " * len(text)
        if text.startswith(b"`") and b"\n" in text:
            return json.dumps(text[1:-1].decode(), ensure_ascii=False).encode()
        return text

    return NOT_CODE.sub(single, code).replace(b"\n", b" ")


def refusal(module: Module, source: bytes, at: int, message: str) -> PolicyLoadError:
    """A load error at byte offset `at` of the module's text as a stage read it."""
    line, col = position(source, at)
    return PolicyLoadError(message, Location(engine_name(module), line, col), module.line(line))


def closing(source: bytes, start: int) -> int | None:
    """The offset just past the bracket that closes the one at `start`."""
    code, depth = masked(source), 0
    for i in range(start, len(code)):
        if code[i] in b"{[(":
            depth += 1
        elif code[i] in b"}])":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def balanced(code: bytes) -> bool:
    """No bracket left open."""
    return all(code.count(o) == code.count(c) for o, c in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")))


def trimmed(source: bytes, start: int, end: int) -> tuple[int, int]:
    """A span with its brackets balanced: regorus counts a closing one too many in (`set()` inside
    parentheses) or leaves one out (an object's closing brace)."""
    code = masked(source[start:end])
    for opening, closing_ in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")):
        while code.endswith(closing_) and code.count(closing_) > code.count(opening):
            code, end = code[:-1], end - 1
    whole = masked(source)
    for opening, closing_ in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")):
        while whole[start:end].count(opening) > whole[start:end].count(closing_):
            found = whole.find(closing_, end)
            if found < 0:
                break
            end = found + 1  # a closing brace regorus's span leaves out
    return start, end


def operand_extent(source: bytes, term: Node) -> tuple[int, int]:
    """An operand's text; regorus's span of `set()` runs past its parenthesis (into ` <` after it)."""
    start = span(term)["start"]
    if kind(term) == "Set" and not body(term).get("items") and source.startswith(b"set()", start):
        return start, start + len(b"set()")
    return trimmed(source, **extent(term))


def grouped(code: bytes, start: int, sign: int, after: int, end: int) -> tuple[int, int]:
    """An operator's operands' extent with the brackets around either side that regorus's spans leave
    out (the parentheses around a side, an object's closing brace)."""
    for opening, closing_ in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")):
        while code[start:sign].count(closing_) > code[start:sign].count(opening):
            start = code.rfind(opening, 0, start)
        while code[after:end].count(opening) > code[after:end].count(closing_):
            end = code.find(closing_, end) + 1
    return start, end


def infix_operands(
    module: Module, source: bytes, code: bytes, node: Node, sign: str, unfound: str
) -> tuple[int, int, int]:
    """An infix operator's offset between its operands and their grouped extent (`first`, `at`, `last`),
    for a stage that turns `a op b` into a call; `code` is masked(source); `unfound` is the refusal where
    the operator's text is not between them."""
    left, right = operand_extent(source, node["lhs"]), operand_extent(source, node["rhs"])
    at = code.find(sign.encode(), left[1], right[0])
    if at < 0:
        raise refusal(module, source, left[0], unfound)
    first, last = grouped(code, left[0], at, at + len(sign), right[1])
    return first, at, last
