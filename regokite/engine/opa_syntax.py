"""Rewrite the Rego that regorus reads otherwise than OPA, before regorus parses it.

Each rewrite is exact: the module as rewritten means to regorus what it means
to OPA as written.

* Several bodies after one head (`p[x] { a } { b }`, v0): OPA defines one rule
  per body; regorus reads the second body as an `else` (a partial set rule
  fails to parse, a complete rule takes `true` for its value). Each further
  body gets a copy of the head.
* A reference followed by `(` on the next line: OPA ends the expression at the
  newline and reads two; regorus reads a call. A `;` ends the line.
* `not E`: OPA's compiler binds E's references, nested calls and composite
  operands to variables before the negation, so `not f(input.missing)` is
  undefined there; regorus evaluates them inside it and answers true. The same
  bindings are written before the `not`, in OPA's order:
  `__rk0__ := input.missing; not f(__rk0__)`.

Lines are kept; columns move on the lines touched and `Columns` maps the
engine's locations back. What cannot be rewritten without moving lines (a
negated expression whose hoisted operand spans lines) is refused with
file:line.
"""

from __future__ import annotations

import functools
import json
import math
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import regorus

from regokite import rego_ast
from regokite.bundle import Module
from regokite.engine.extensions import (
    ARITH,
    HTTP_SEND_OFF,
    LENIENT,
    NUMBER_TEXT,
    REPLACE_EMPTY,
    STRLEN,
    UNORDERED,
    YAML_PLAIN,
    ExtensionOptions,
    arities,
)
from regokite.engine.extensions.arithmetic import exact_value
from regokite.engine.extensions.formatting import SPRINTF
from regokite.engine.import_refs import Columns, Edit, Redirect
from regokite.errors import Location, PolicyLoadError, engine_diagnostic
from regokite.rego_ast import ref_parts, rule_heads

# strings, raw strings and comments: what may hold braces or newlines that are not code
_NOT_CODE = re.compile(rb'"(?:[^"\\\n]|\\.)*"|`[^`]*`|#[^\n]*')
_CALLS = frozenset({"Call", "ArithExpr", "BinExpr", "BoolExpr", "Membership", "UnaryExpr"})  # calls in OPA
_COMPREHENSIONS = frozenset({"ArrayCompr", "SetCompr", "ObjectCompr"})
_REFS = frozenset({"RefDot", "RefBrack"})
_SET_BODIES = "else cannot be used with set rules"  # regorus's word for a partial set rule's second body


@dataclass(frozen=True)
class _Change:
    """Replace source[start:end] with `text` (an insertion when start == end); `place`: where
    (line, col, before this change) an error located on the lines of `text` belongs."""

    start: int
    end: int
    text: bytes
    place: tuple[int, int] | None = None


def rewrite(
    modules: Sequence[Module], *, lenient: frozenset[Location] = frozenset(), mockable: frozenset[str] | None = None
) -> tuple[tuple[Module, ...], Columns]:
    """`modules` as regorus must read them to answer as OPA, and the map back to their columns.

    A module regorus cannot parse is left as written where no rewrite applies
    (loading it reports the error). Raises PolicyLoadError for a construct
    with no exact rewrite. `lenient`: where the builtin calls at these
    locations (as written) err, they are undefined instead, as in OPA's
    evaluation without `strict-builtin-errors`. `mockable`: the extension builtins the engine
    has that a `with` may replace (by default those of default ExtensionOptions).
    """
    if mockable is None:
        from regokite.engine.catalog import extension_only  # catalog reaches regorus's list lazily

        mockable = extension_only(ExtensionOptions())
    return _rewrite(tuple(modules), lenient, mockable)


@functools.lru_cache(maxsize=64)
def _rewrite(
    modules: tuple[Module, ...], lenient: frozenset[Location], mockable: frozenset[str]
) -> tuple[tuple[Module, ...], Columns]:
    # cached: outline() and the engine rewrite the same modules, and gator suites build an engine per case
    current = list(modules)
    for module in current:
        _check_numbers(module)
    stages: list[Columns] = []
    for step in (_split_bodies, _split_lines, _output_arguments):
        stages.append(_stage(current, ((m, step(m)) for m in list(current))))
    stages.append(_stage(current, _builtin_mocks(list(current))))
    stages.append(_stage(current, _routes(list(current), mockable)))
    stages.append(_stage(current, _function_mocks(list(current))))
    for rounds in (_negations, _sprintf_rounds, _comparison_rounds, _arithmetic_rounds, _membership_rounds):
        pending = list(current)
        for _ in range(16):  # a construct nested in another is rewritten on the next round
            before = {m.path: m.text for m in current}
            stage = _stage(current, rounds(list(current) if rounds is _negations else pending))
            if not stage.changed:
                break
            stages.append(stage)
            pending = [m for m in current if m.text != before[m.path]]  # the others have nothing left
    if lenient:
        back = Columns.chain(*stages)
        stages.append(_stage(current, _lenient_calls(list(current), lenient, back)))
    return tuple(current), Columns.chain(*stages)


def _stage(current: list[Module], found: Iterator[tuple[Module, list[_Change]]]) -> Columns:
    """Apply each module's changes in `current`; the map back through them."""
    edits: dict[str, list[Edit | Redirect]] = {}
    for module, changes in found:
        if changes:
            index = current.index(module)
            current[index], edits[module.path] = _apply(module, changes)
    return Columns(edits)


def located(error: PolicyLoadError, columns: Columns, originals: Sequence[Module]) -> PolicyLoadError:
    """`error`, raised on rewritten modules, pointing into the modules as written."""
    by_path = {m.path: m for m in originals}
    location = columns.original(error.location)
    module = by_path.get(location.file) if location else None
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


# ------------------------------------------------------------------ parsing and applying


def _parse(module: Module, text: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The module's AST (never modified by the caller), or regorus's error text."""
    return _parsed(module.path, text, module.v0)


def parsed(modules: Sequence[Module]) -> list[dict[str, Any]] | None:
    """The modules' ASTs as `get_ast_as_json` of an engine holding them lists them, or None where
    one does not parse. Cached with the rewrite's own parses: loading does not parse twice (the
    entries are shared: never modified)."""
    entries = []
    for module in modules:
        tree, failure = _parse(module, module.text.encode())
        if failure is not None or tree is None:
            return None
        entries.append({"ast": tree, "source": {"file": module.path, "contents": module.text}})
    return entries


def new_engine() -> regorus.Engine:
    """A regorus engine that reads any module OPA reads: regorus's default refuses lines over
    1,024 columns, files over 1 MiB and 20,000 lines; OPA has no such limits (a generated policy
    or one rewritten here may pass them)."""
    engine = regorus.Engine()
    engine.set_policy_length_config(max_col=1 << 24, max_file_bytes=1 << 28, max_lines=1 << 24)
    return engine


@functools.lru_cache(maxsize=512)
def _parsed(path: str, text: bytes, v0: bool) -> tuple[dict[str, Any] | None, str | None]:
    # cached: loading parses a module up to four times, and outline() and the engine both load
    engine = new_engine()
    engine.set_rego_v0(v0)
    try:
        engine.add_policy(path, text.decode())
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # regorus raises RuntimeError (a panic: BaseException); its text is the diagnostic
        return None, str(exc)
    return json.loads(engine.get_ast_as_json())[0]["ast"], None


def _width(text: bytes) -> int:
    """Columns `text` takes in regorus's count: a byte each, a tab four."""
    return len(text) + 3 * text.count(b"\t")


def _position(source: bytes, offset: int) -> tuple[int, int]:
    """(line, regorus column) of a byte offset."""
    line_start = source.rfind(b"\n", 0, offset) + 1
    return source.count(b"\n", 0, offset) + 1, _width(source[line_start:offset]) + 1


def _offset(source: bytes, line: int, col: int) -> int | None:
    """The byte offset of a regorus (line, column)."""
    start = 0
    for _ in range(line - 1):
        start = source.find(b"\n", start) + 1
        if start == 0:
            return None
    width = 1
    for i in range(start, len(source) + 1):
        if width >= col:
            return i
        width += 4 if source[i : i + 1] == b"\t" else 1
    return None


def _apply(module: Module, changes: list[_Change]) -> tuple[Module, list[Edit | Redirect]]:
    source = module.text.encode()
    changes = sorted(changes, key=lambda c: (c.start, c.end))
    out: list[bytes] = []
    edits: list[Edit | Redirect] = []
    at, added = 0, 0  # added: lines the changes so far added
    for change in changes:
        if change.start < at:
            raise AssertionError(f"overlapping rewrites in {module.path}")  # a bug here, never input
        out += [source[at : change.start], change.text]
        line, col = _position(source, change.start)
        edits.append(Edit(line, col, _width(source[change.start : change.end]), _width(change.text)))
        if change.place is not None:
            first = line + added + change.text.startswith(b"\n")  # the lines the text begins
            edits.append(Redirect(first, line + added + change.text.count(b"\n"), *change.place))
        added += change.text.count(b"\n") - source[change.start : change.end].count(b"\n")
        at = change.end
    out.append(source[at:])
    return replace(module, text=b"".join(out).decode()), edits


# ------------------------------------------------------------------ helpers placed where they are called

# A helper appended to a module for one place (an arithmetic operator, a routed builtin call) has lines of
# its own that Redirect maps back to that place: its errors are located where OPA locates them. Its name
# (`<kind>_<tag>_<n>`) says what it is; `_payload` which of its calls can fail as the builtin it answers for.
_PLACED = re.compile(r"(?P<kind>__rk_(?:b_\w+|ar_[a-z]+|lt|le|gt|ge))_[0-9a-f]{8}_[0-9]+")
_PLACED_NUMBER = re.compile(rb"\n__rk_\w+_[0-9a-f]{8}_([0-9]+)\(")


def _tag(module: Module) -> str:
    """A name part of the module's own, so that helpers appended to modules of one package do not clash."""
    return format(zlib.crc32(module.path.encode()), "08x")


def _placed_name(kind: str, module: Module, number: int) -> str:
    return f"{kind}_{_tag(module)}_{number}"


def _next_number(source: bytes) -> int:
    """A number no helper placed in `source` has (rewrites run in rounds, each adding helpers)."""
    return max((int(n) for n in _PLACED_NUMBER.findall(source)), default=-1) + 1


def _called(call: dict[str, Any]) -> str:
    """The name a call ends with, a placed helper's by its kind (`data.p.__rk_b_count_<tag>_<n>`: `__rk_b_count`)."""
    name = (_fcn_name(call) or "").rpartition(".")[2]
    placed = _PLACED.fullmatch(name)
    return placed["kind"] if placed else name


def _placed(source: bytes, text: str, at: int) -> _Change:
    """`text` (a helper's definition) appended to the module, its errors located at offset `at`."""
    return _Change(len(source), len(source), text.encode(), _position(source, at))


def _masked(text: bytes) -> bytes:
    """`text` with strings and comments blanked (newlines kept), offsets kept."""
    return _NOT_CODE.sub(lambda m: re.sub(rb"[^\n]", b" ", m.group()), text)


def _flat(module: Module, source: bytes, start: int, end: int) -> bytes:
    """source[start:end] on one line: comments blanked, newlines as spaces (a raw string spanning lines refused)."""
    text = source[start:end]
    if b"\n" not in text:
        return text
    for found in _NOT_CODE.finditer(text):
        if found.group().startswith(b"`") and b"\n" in found.group():
            raise _refusal(module, source, start, "a raw string spanning lines would be copied here: write it with \\n")
    blanked = _NOT_CODE.sub(lambda m: b" " * len(m.group()) if m.group().startswith(b"#") else m.group(), text)
    return blanked.replace(b"\n", b" ")


def _refusal(module: Module, source: bytes, offset: int, message: str) -> PolicyLoadError:
    line, col = _position(source, offset)
    return PolicyLoadError(message, Location(module.path, line, col), module.line(line))


# ------------------------------------------------------------------ several bodies


def _split_bodies(module: Module) -> list[_Change]:
    """A copy of the head before each body after a rule's first (not an `else`)."""
    source = module.text.encode()
    probe, refused = source, []  # bodies regorus refused to parse are blanked until it parses the rest
    for _ in range(source.count(b"{") + 1):
        tree, failure = _parse(module, probe)
        if failure is None:
            break
        message, location = engine_diagnostic(failure)
        start = _offset(probe, location.line, location.col) if location and _SET_BODIES in message else None
        end = _closing(probe, start) if start is not None and probe[start : start + 1] == b"{" else None
        if end is None:
            return []
        probe = probe[:start] + re.sub(rb"[^\n]", b" ", probe[start:end]) + probe[end:]
        refused.append(start)
    else:
        return []
    assert tree is not None
    changes = []
    for rule, first, extra in _bodies(tree, probe, refused):
        head = _flat(module, source, rule["span"]["start"], first)
        changes += [_Change(start, start, head) for start in extra]
    return changes


def _bodies(tree: dict[str, Any], probe: bytes, refused: list[int]) -> Iterator[tuple[dict[str, Any], int, list[int]]]:
    """(rule, where its first body starts, where each further body starts) of every rule with several."""
    rules = [body for rule in tree.get("rules", []) for kind, body in rule.items() if kind == "Spec"]
    for rule in rules:
        bodies = rule["bodies"]
        first = _opening(probe, bodies[0]["span"]["start"]) if bodies else None
        if first is None:
            continue
        extra = [b["span"]["start"] for b in bodies[1:] if not b["is_else"]]
        if any(b["is_else"] for b in bodies) and extra:
            continue  # bodies and `else` mixed: regorus refuses it; so does the load
        end = rule["span"]["end"]
        for start in sorted(refused):
            if start >= end and not _masked(probe[end:start]).strip():
                extra.append(start)
                end = _closing(probe, start) or end
        if extra:
            yield rule, first, extra


def _opening(source: bytes, start: int) -> int | None:
    """Where a rule body starting at `start` opens its brace (after v1's `if`); None for a body without."""
    if source[start : start + 1] == b"{":
        return start
    after = re.match(rb"if\s*\{", _masked(source[start : start + 64]))
    return start + after.end() - 1 if after else None


def _closing(source: bytes, start: int) -> int | None:
    """The offset just past the brace that closes the one at `start`."""
    code, depth = _masked(source), 0
    for i in range(start, len(code)):
        if code[i] in b"{[(":
            depth += 1
        elif code[i] in b"}])":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


# ------------------------------------------------------------------ a reference, then ( on the next line


def _split_lines(module: Module) -> list[_Change]:
    """`;` after a reference that regorus would call with the parenthesis on the next line."""
    source = module.text.encode()
    tree, failure = _parse(module, source)
    if failure is not None:
        return []
    assert tree is not None
    code = _masked(source)
    statements = [st["span"] for st in _statements(tree)]
    changes = []
    for call in rego_ast.calls(tree):
        end = next(iter(call["fcn"].values()))["span"]["end"]
        paren = code.find(b"(", end)
        if b"\n" not in code[end:paren]:
            continue
        around = [sp for sp in statements if sp["start"] <= end <= sp["end"]]
        start = max((sp["start"] for sp in around), default=None)  # the innermost statement holding the call
        if start is not None and _balanced(code[start:end]):
            changes.append(_Change(end, end, b";"))
    return changes


def _balanced(code: bytes) -> bool:
    """No bracket left open: a newline here ends the expression in OPA."""
    return all(code.count(o) == code.count(c) for o, c in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")))


def _statements(node: Any) -> Iterator[dict[str, Any]]:
    """Every statement of every query below `node`, outermost first."""
    return (obj for obj in rego_ast.objects(node) if "literal" in obj and "span" in obj)


# ------------------------------------------------------------------ not


def _negations(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    """Each module's bindings before its negations, for those whose operands OPA evaluates first."""
    parsed = []
    for module in modules:
        tree, failure = _parse(module, module.text.encode())
        if failure is None and tree is not None:
            parsed.append((module, tree))
    rules: dict[tuple[str, ...], set[str]] = {}
    for _, tree in parsed:
        package = tuple(ref_parts(tree["package"]["refr"]))
        rules.setdefault(package, set()).update(ref_parts(head["refr"])[0] for _, head in rule_heads(tree))
    for module, tree in parsed:
        package = tuple(ref_parts(tree["package"]["refr"]))
        refs = rules[package] | _import_names(tree) | {"input", "data"}
        changes = _negation_changes(module, tree, refs)
        if changes:
            yield module, changes


def _import_names(tree: dict[str, Any]) -> set[str]:
    """Names imports bring in without `as` (an alias's name is read from the source)."""
    names = set()
    for imported in tree.get("imports", []):
        parts = ref_parts(imported["refr"])
        if parts[0] in ("data", "input") and imported.get("as") is None:
            names.add(parts[-1])
    return names


def _negation_changes(module: Module, tree: dict[str, Any], refs: set[str]) -> list[_Change]:
    source = module.text.encode()
    refs = refs | _aliases(source, tree)
    found = []  # (statement, negation, hoisted spans, whether its query has braces)
    for query in _queries(tree):
        braced = source[query["span"]["start"] : query["span"]["start"] + 1] in (b"{", b"|")
        for statement in query["stmts"]:
            kind, negation = next(iter(statement["literal"].items()))
            hoisted = _hoisted(negation["expr"], refs) if kind == "NotExpr" else []
            if hoisted:
                found.append((statement, negation, hoisted, braced))
    starts = [statement["span"]["start"] for statement, *_ in found]
    counter = _first_free(source)
    changes: list[_Change] = []
    for statement, negation, hoisted, braced in found:
        if any(span["start"] <= at < span["end"] for span in hoisted for at in starts):
            continue  # a negation to bind inside an operand (a comprehension's): that one first, next round
        made, counter = _bind(module, source, statement, negation, hoisted, counter, braced)
        changes += made
    return changes


def _aliases(source: bytes, tree: dict[str, Any]) -> set[str]:
    names = set()
    for imported in tree.get("imports", []):
        alias = imported.get("as")
        if alias is not None:
            names.add(source[alias["start"] : alias["end"]].decode())
    return names


def _first_free(source: bytes) -> int:
    used = [int(n) for n in re.findall(rb"__rk(\d+)__", source)]
    return max(used, default=-1) + 1


def _queries(node: Any) -> Iterator[dict[str, Any]]:
    """Every query (a rule body, a comprehension's) below `node`, outermost first."""
    return (obj for obj in rego_ast.objects(node) if "stmts" in obj and "span" in obj)


def _bind(
    module: Module,
    source: bytes,
    statement: dict[str, Any],
    negation: dict[str, Any],
    hoisted: list[dict[str, Any]],
    counter: int,
    braced: bool,
) -> tuple[list[_Change], int]:
    """The bindings before `not`, and each outermost operand replaced by its variable."""
    withs = b"".join(
        b" " + _flat(module, source, w["span"]["start"], w["span"]["end"]) for w in statement.get("with_mods", [])
    )
    names: dict[tuple[int, int], bytes] = {}
    bindings = []
    for span in hoisted:
        start, end = _trimmed(source, span["start"], span["end"])
        if b"\n" in source[start:end]:
            raise _refusal(
                module,
                source,
                start,
                "a negated expression's operand spans lines, which the embedded engine cannot bind before the "
                "`not` as OPA does: write it on one line, or assign it to a variable before the `not`",
            )
        inner = sorted((s, e, n) for (s, e), n in names.items() if start <= s and e <= end)
        text, at = b"", start
        for s, e, name in inner:
            if s >= at:
                text += source[at:s] + name
                at = e
        text += source[at:end]
        names[(start, end)] = f"__rk{counter}__".encode()
        bindings.append(names[(start, end)] + b" := (" + text + b")" + withs + b"; ")
        counter += 1
    at = negation["span"]["start"]
    opening = b"" if braced else b"{ "
    changes = [_Change(at, at, opening + b"".join(bindings))]
    outermost = [
        (s, e) for (s, e) in names if not any(s2 <= s and e <= e2 and (s2, e2) != (s, e) for (s2, e2) in names)
    ]
    changes += [_Change(s, e, names[(s, e)]) for s, e in outermost]
    if not braced:
        changes.append(_Change(statement["span"]["end"], statement["span"]["end"], b" }"))
    return changes, counter


def _hoisted(expr: dict[str, Any], refs: set[str]) -> list[dict[str, Any]]:
    """Spans of the operands OPA evaluates before negating `expr`, in its order.

    OPA's compiler first moves nested calls (operators included) out of the
    expression, then every reference and composite holding one in an operand
    position (`==` and `=` compare references in place, indexing only).
    """
    calls: list[dict[str, Any]] = []
    dynamic: list[dict[str, Any]] = []
    kind, node = next(iter(expr.items()))
    if kind == "AssignExpr" or (kind == "BoolExpr" and node["op"] == "Eq"):
        for side in (node["lhs"], node["rhs"]):
            _in_place(side, refs, calls, dynamic)
    elif kind in _CALLS:
        for operand in _operands(kind, node):
            _operand(operand, refs, calls, dynamic)
    else:
        _in_place(expr, refs, calls, dynamic)
    return calls + dynamic


def _operands(kind: str, node: dict[str, Any]) -> list[dict[str, Any]]:
    if kind == "Call":
        return node["params"]
    if kind == "Membership":
        return [t for t in (node.get("key"), node["value"], node["collection"]) if t]
    if kind == "UnaryExpr":
        return [node["expr"]]
    return [node["lhs"], node["rhs"]]


def _in_place(term: dict[str, Any], refs: set[str], calls: list, dynamic: list) -> None:
    """A term compared in place: only what its reference's brackets hold is evaluated first."""
    kind, node = next(iter(term.items()))
    if kind in _REFS:
        _indexes(node, refs, calls, dynamic)
    elif kind in _CALLS:
        calls.append(_extent(term))
    elif kind not in _COMPREHENSIONS and kind != "Var":
        _operand(term, refs, calls, dynamic)


def _indexes(node: dict[str, Any], refs: set[str], calls: list, dynamic: list) -> None:
    head_kind, head = next(iter(node["refr"].items()))
    if head_kind in _REFS:
        _indexes(head, refs, calls, dynamic)
    elif head_kind in _CALLS:
        calls.append(_extent(node["refr"]))
    if "index" in node:
        _operand(node["index"], refs, calls, dynamic)


def _operand(term: dict[str, Any], refs: set[str], calls: list, dynamic: list) -> None:
    """A term in an operand position: nested calls, references and comprehensions are bound first."""
    kind, node = next(iter(term.items()))
    if kind in _CALLS:
        calls.append(_extent(term))
    elif kind in _REFS:
        _indexes(node, refs, calls, dynamic)
        dynamic.append(_extent(term))
    elif kind == "Var":
        if node["value"] in refs:
            dynamic.append(_extent(term))
    elif kind in _COMPREHENSIONS:
        dynamic.append(_extent(term))
    elif kind in ("Array", "Set"):
        for item in node["items"]:
            _operand(item, refs, calls, dynamic)
    elif kind == "Object":
        for _, key, value in node["fields"]:
            _operand(key, refs, calls, dynamic)
            _operand(value, refs, calls, dynamic)


# ------------------------------------------------------------------ sprintf


def _sprintf_rounds(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    for module in modules:
        if "sprintf" in module.text:  # else nothing to parse
            yield module, _sprintf_calls(module)


def _sprintf_calls(module: Module) -> list[_Change]:
    """Each `sprintf(f, args)` as a call of regokite's, which formats as Go (`SPRINTF`).

    Python cannot receive every Rego value (a set of objects), and OPA hands
    Go anything but a number or a string as its text anyway: so the call
    gets `args` with each such value written by regorus's `%v` (which writes
    values as OPA does), and whether `args` was an array (else OPA's error).
    """
    source = module.text.encode()
    tree, failure = _parse(module, source)
    if failure is not None or tree is None:
        return []
    spans = [c for c in rego_ast.calls(tree) if _is_sprintf(c) and not _written_here(source, c)]
    changes: list[_Change] = []
    counter = _first_free(source)
    for call in spans:
        start, end = _call_span(call)
        if any(start < _call_span(other)[0] and _call_span(other)[1] <= end for other in spans if other is not call):
            continue  # a sprintf in its arguments: that one first, next round
        if len(call["params"]) != 2:
            continue  # wrong arity: left to the load's own error
        arguments = next(iter(call["params"][1].values()))["span"]
        fcn = next(iter(call["fcn"].values()))["span"]
        name = f"__rk{counter}__".encode()
        counter += 1
        converted = (
            b'[object.get({"number": '
            + name
            + b', "string": '
            + name
            + b"}, type_name("
            + name
            + b'), sprintf("%v", ['
            + name
            + b"])) | "
            + name
            + b" := "
        )
        flat = _flat(module, source, arguments["start"], arguments["end"])
        changes += [
            _Change(fcn["start"], fcn["end"], SPRINTF.encode()),
            _Change(arguments["start"], arguments["start"], converted),
            _Change(arguments["end"], arguments["end"], b"[_]], is_array(" + flat + b")"),
        ]
    return changes


def _written_here(source: bytes, call: dict[str, Any]) -> bool:
    """The `sprintf("%v", [__rkN__])` this rewrite writes: regorus's own, left as it is."""
    start, end = _call_span(call)
    return re.fullmatch(rb'sprintf\("%v", \[__rk\d+__\]\)', source[start:end]) is not None


def _is_sprintf(call: dict[str, Any]) -> bool:
    kind, node = next(iter(call["fcn"].items()))
    return kind == "Var" and node["value"] == "sprintf"


def _call_span(call: dict[str, Any]) -> tuple[int, int]:
    """A call's extent: from its name to its closing parenthesis (regorus's span starts at the parenthesis)."""
    return next(iter(call["fcn"].values()))["span"]["start"], call["span"]["end"]


# ------------------------------------------------------------------ builtin errors as undefined (opa test's default)


def _lenient_calls(
    modules: list[Module], at: frozenset[Location], back: Columns
) -> Iterator[tuple[Module, list[_Change]]]:
    """`b(x, y)` written at one of `at` (as the file was written) becomes
    `__regokite_lenient("b", [x, y])[0]`: undefined where the builtin errs. In a helper placed at one
    of `at`, whose every line is located there, only the calls that answer for the builtin do."""
    parsed = [(m, t) for m in modules for t, failure in [_parse(m, m.text.encode())] if failure is None and t]
    rules: dict[tuple[str, ...], set[str]] = {}
    for _, tree in parsed:
        package = tuple(ref_parts(tree["package"]["refr"]))
        rules.setdefault(package, set()).update(ref_parts(head["refr"])[0] for _, head in rule_heads(tree))
    for module, tree in parsed:
        source = module.text.encode()
        functions = rules[tuple(ref_parts(tree["package"]["refr"]))] | _aliases(source, tree) | _import_names(tree)
        wanted = {(loc.line, loc.col) for loc in at if loc.file == module.path}
        changes = []
        for rule in tree.get("rules", []):
            placed = _PLACED.fullmatch(_rule_name(rule))
            for call in rego_ast.calls(rule):
                name = _fcn_name(call)
                if name is None or name.split(".")[0] in functions | {"data"}:
                    continue  # a function of the bundle: its own calls are made lenient where they err
                if name in (LENIENT, UNORDERED, YAML_PLAIN, "print", "http.send"):  # refusals stay errors
                    continue
                if placed and not _payload(placed["kind"], name, source, call):
                    continue
                if not _erred(module, source, call, wanted, back):
                    continue
                if placed and name in _TYPE_ERRORS_ONLY and len(call["params"]) == 1:
                    changes += _typed_call(source, call, _TYPE_ERRORS_ONLY[name])
                else:
                    changes += _lenient_call(source, call)
        yield module, changes


# builtins whose only errors are of their operand's type: made lenient in Rego, by indexing the operand by
# its type (undefined for any other), not through Python, which cannot receive every value (a set of objects)
_TYPE_ERRORS_ONLY = {
    "count": ("array", "object", "set", "string"),
    "sort": ("array", "set"),
    "min": ("array", "set"),
    "max": ("array", "set"),
}


def _typed_call(source: bytes, call: dict[str, Any], types: Sequence[str]) -> list[_Change]:
    """`count(a0)` as `count({"array": a0, ...}[type_name(a0)])`: undefined where count would fail."""
    start, end = _trimmed(source, **_extent(call["params"][0]))
    operand = source[start:end]
    typed = b"{" + b", ".join(b'"' + t.encode() + b'": ' + operand for t in types) + b"}"
    return [_Change(start, end, typed + b"[type_name(" + operand + b")]")]


def _rule_name(rule: dict[str, Any]) -> str:
    kind, body = next(iter(rule.items()))
    head = body if kind == "Default" else next(iter(body["head"].values()))
    return ref_parts(head["refr"])[0]


def _payload(kind: str, name: str, source: bytes, call: dict[str, Any]) -> bool:
    """Whether a call in a placed helper of `kind` can fail as the builtin it answers for (the others are
    its guards, such as `is_string(a0)`, which made lenient could receive values Python cannot hold)."""
    if name in (ARITH, NUMBER_TEXT, REPLACE_EMPTY, SPRINTF):
        return True
    return kind == _route_name(name) and not _written_here(source, call)


def _erred(module: Module, source: bytes, call: dict[str, Any], wanted: set[tuple[int, int]], back: Columns) -> bool:
    """Whether an error was located (as the file was written) within the call's extent."""
    start, end = _call_span(call)
    first = back.original(Location(module.path, *_position(source, start)))
    last = back.original(Location(module.path, *_position(source, end)))
    # regorus places a builtin's error at the call or at the operand it refused: every call around that
    # place is made lenient (one that does not err answers as before)
    if first is None or last is None:
        return False
    return any((first.line, first.col) <= place <= (last.line, last.col) for place in wanted)


def _lenient_call(source: bytes, call: dict[str, Any]) -> list[_Change]:
    start, end = _call_span(call)
    paren = _masked(source).find(b"(", next(iter(call["fcn"].values()))["span"]["end"])
    name = source[start:paren].strip()
    return [
        _Change(start, paren + 1, LENIENT.encode() + b'("' + name + b'", ['),
        _Change(end - 1, end, b"])[0]"),
    ]


def _fcn_name(call: dict[str, Any]) -> str | None:
    try:
        return ".".join(ref_parts(call["fcn"]))
    except (ValueError, KeyError):
        return None


def _extent(term: dict[str, Any]) -> dict[str, Any]:
    """Where a term's text starts and ends: regorus's spans leave out a string's quotes, and an
    operator's span starts at its first operand's (so at that string's first character)."""
    start, end = None, None
    for kind, node in _tagged(term):
        quoted = 1 if kind in ("String", "RawString") else 0
        first, last = node["span"]["start"] - quoted, node["span"]["end"] + quoted
        start = first if start is None else min(start, first)
        end = last if end is None else max(end, last)
    return {"start": start, "end": end}


def _tagged(node: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tagged node (`{"Kind": {"span": ...}}`) at or below `node`."""
    if isinstance(node, list):
        for item in node:
            yield from _tagged(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and "span" in value and key[:1].isupper():
                yield key, value
            if isinstance(value, dict | list):
                yield from _tagged(value)


def _trimmed(source: bytes, start: int, end: int) -> tuple[int, int]:
    """A span with its brackets balanced: regorus counts a closing one too many in (`set()` inside
    parentheses) or leaves one out (an object's closing brace)."""
    code = _masked(source[start:end])
    for opening, closing in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")):
        while code.endswith(closing) and code.count(closing) > code.count(opening):
            code, end = code[:-1], end - 1
    masked = _masked(source)
    for opening, closing in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")):
        while masked[start:end].count(opening) > masked[start:end].count(closing):
            found = masked.find(closing, end)
            if found < 0:
                break
            end = found + 1  # a closing brace regorus's span leaves out
    return start, end


# ------------------------------------------------------------------ comparing a set with an object

_ORDERED = {"Lt": "lt", "Le": "le", "Gt": "gt", "Ge": "ge"}
_SCALAR_TERMS = frozenset({"Number", "String", "RawString", "Bool", "Null", "ArithExpr"})
_SCALAR_CALLS = frozenset(
    {"count", "__rk_b_count", "sum", "product", "abs", "round", "ceil", "floor", "to_number", "indexof"}
)
# OPA orders an object before a set, regorus a set before an object; otherwise they agree. A set and an
# object compared inside values of one type (`[{1}] < [{"a": 1}]`) fail the comparison (UNORDERED).
# one rule with `else`s: as three bodies, regorus evaluated every body's checks on every call
_HELPERS = {
    False: (
        "\n{name}(a, b) := {first}(a) if {{\n\t__rk_swapped_{tag}(a, b)\n}} "
        'else := {unordered}("{sign}") if {{\n\t__rk_deep_{tag}(a, b)\n}} '
        "else := a {sign} b\n"
    ),
    True: (
        "\n{name}(a, b) = x {{\n\t__rk_swapped_{tag}(a, b)\n\tx := {first}(a)\n}} "
        'else = x {{\n\t__rk_deep_{tag}(a, b)\n\tx := {unordered}("{sign}")\n}} '
        "else = x {{\n\tx := a {sign} b\n}}\n"
    ),
}
_DEEP = (
    '\ttype_name(a) == type_name(b)\n\tcontains(json.marshal([a, b]), "{{")\n'
    "\ttypes := {{type_name(v) | walk([a, b], [p, v]); count(p) >= 2}} | "
    "{{type_name(w) | walk([a, b], [_, o]); is_object(o); _ = o[k]; walk(k, [_, w])}}\n"
    '\ttypes["set"]\n\ttypes["object"]\n}}\n'
)
_SWAPPED = {
    False: "\n__rk_swapped_{tag}(a, b) if {{\n\tis_object(a)\n\tis_set(b)\n}}\n"
    "\n__rk_swapped_{tag}(a, b) if {{\n\tis_set(a)\n\tis_object(b)\n}}\n"
    "\n__rk_deep_{tag}(a, b) if {{\n" + _DEEP,
    True: "\n__rk_swapped_{tag}(a, b) {{\n\tis_object(a)\n\tis_set(b)\n}}\n"
    "\n__rk_swapped_{tag}(a, b) {{\n\tis_set(a)\n\tis_object(b)\n}}\n"
    "\n__rk_deep_{tag}(a, b) {{\n" + _DEEP,
}
_SIGNS = {"lt": ("<", "is_object"), "le": ("<=", "is_object"), "gt": (">", "is_set"), "ge": (">=", "is_set")}


def _comparison_rounds(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    for module in modules:
        if "<" in module.text or ">" in module.text:  # else nothing to parse
            yield module, _comparisons(module)


def _written_rules(module: Module, source: bytes) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each rule of `module` (parsed from `source`) with its body, but the helpers appended to it
    (`__rk_...`); none when regorus cannot parse it (its own error is reported at load)."""
    tree, failure = _parse(module, source)
    if failure is not None or tree is None:
        return
    for rule in tree.get("rules", []):
        if not _appended(rule):
            yield rule, next(iter(rule.values()))


def _appended(rule: dict[str, Any]) -> bool:
    """A helper a rewrite appended to the module (`__rk_...`), not a rule the user wrote."""
    kind, body = next(iter(rule.items()))
    return kind != "Default" and ref_parts(next(iter(body["head"].values()))["refr"])[0].startswith("__rk_")


def _comparisons(module: Module) -> list[_Change]:
    """`a < b` (and <=, >, >=) where either side may be a set or an object, as a call of a helper
    appended to the module that orders them as OPA. A side that is a number, a string or a
    count is compared in place (the orders agree there)."""
    source = module.text.encode()
    tag = _tag(module)
    found = []
    for rule, _body in _written_rules(module, source):
        found += [n for n in _bool_exprs(rule) if n["op"] in _ORDERED and not _plainly_scalar(n)]
    extents = [_trimmed(source, **_extent({"BoolExpr": n})) for n in found]
    code = _masked(source)
    changes: list[_Change] = []
    taken: list[tuple[int, int]] = []
    number = _next_number(source)
    for node, (start, end) in zip(found, extents, strict=True):
        if any(start <= s and e <= end and (s, e) != (start, end) for s, e in extents):
            continue  # a comparison inside it: that one first, next round
        op = _ORDERED[node["op"]]
        left, right = _operand_extent(source, node["lhs"]), _operand_extent(source, node["rhs"])
        sign = code.find(_SIGNS[op][0].encode(), left[1], right[0])
        if sign < 0:
            raise _refusal(
                module,
                source,
                left[0],
                "a comparison whose sides may be a set and an object, which the embedded engine orders "
                "otherwise than OPA, could not be rewritten here: compare values of known types, or use "
                "--engine opa",
            )
        first, last = _grouped(code, left[0], sign, sign + len(_SIGNS[op][0]), right[1])
        if any(first < e and s < last for s, e in taken):
            continue  # sharing text with another rewritten here: next round
        taken.append((first, last))
        name = _placed_name(f"__rk_{op}", module, number)
        number += 1
        sign_text, first_of = _SIGNS[op]
        helper = _HELPERS[module.v0].format(name=name, tag=tag, sign=sign_text, first=first_of, unordered=UNORDERED)
        changes += [
            _Change(first, first, f"{name}(".encode()),
            _Change(sign, sign + len(sign_text), b","),
            _Change(last, last, b")"),
            _placed(source, helper, sign),
        ]
    if changes and f"__rk_swapped_{tag}(a, b)".encode() not in source:
        changes.append(_Change(len(source), len(source), _SWAPPED[module.v0].format(tag=tag).encode()))
    return changes


def _operand_extent(source: bytes, term: dict[str, Any]) -> tuple[int, int]:
    """An operand's text; regorus's span of `set()` runs past its parenthesis (into ` <` after it)."""
    kind, node = next(iter(term.items()))
    start = node["span"]["start"]
    if kind == "Set" and not node.get("items") and source.startswith(b"set()", start):
        return start, start + len(b"set()")
    return _trimmed(source, **_extent(term))


def _bool_exprs(node: Any) -> Iterator[dict[str, Any]]:
    for kind, value in _tagged(node):
        if kind == "BoolExpr":
            yield value


def _plainly_scalar(node: dict[str, Any]) -> bool:
    for side in (node["lhs"], node["rhs"]):
        kind, value = next(iter(side.items()))
        if kind in _SCALAR_TERMS:
            return True
        if kind == "Call" and _called(value) in _SCALAR_CALLS:
            return True
    return False


def _grouped(code: bytes, start: int, sign: int, after: int, end: int) -> tuple[int, int]:
    """The operands' extent with the brackets around either side that regorus's spans leave out
    (the parentheses around a side, an object's closing brace)."""
    for opening, closing in ((b"(", b")"), (b"[", b"]"), (b"{", b"}")):
        while code[start:sign].count(closing) > code[start:sign].count(opening):
            start = code.rfind(opening, 0, start)
        while code[after:end].count(opening) > code[after:end].count(closing):
            end = code.find(closing, end) + 1
    return start, end


# ------------------------------------------------------------------ arithmetic regorus rounds

_ARITH = {"Add": ("add", "+"), "Sub": ("sub", "-"), "Mul": ("mul", "*"), "Div": ("div", "/")}
_SMALL_CALLS = frozenset({"count", "__rk_b_count"})
_SMALL_LITERAL = re.compile(rb"-?[0-9]{1,9}")
# Integers below 2^53 (both operands and the result; a quotient an integer) answer in place: regorus is
# exact there, as OPA. Anything else goes to ARITH, which answers as OPA or fails (extensions.arithmetic).
_SMALL_CHECKS = (
    "\tis_number(a)\n\tis_number(b)\n\tround(a) == a\n\tround(b) == b\n"
    "\tabs(a) < 9007199254740992\n\tabs(b) < 9007199254740992\n"
)  # in the helper's body, not a function of their own: a call costs several microseconds in regorus
_ARITH_HELPERS = {
    False: (
        "\n{name}(a, b) := x if {{\n{small}{checks}}} else := a {sign} b if {{\n\tnot is_number(a)\n}} "
        'else := {arith}("{sign}", json.marshal(a), json.marshal(b))\n'
    ),
    True: (
        "\n{name}(a, b) = x {{\n{small}{checks}}} else = x {{\n\tnot is_number(a)\n\tx := a {sign} b\n}} "
        'else = x {{\n\tx := {arith}("{sign}", json.marshal(a), json.marshal(b))\n}}\n'
    ),
}
_ARITH_CHECKS = {
    "div": "\tb != 0\n\tx := a / b\n\tround(x) == x\n",
    "other": "\tx := a {sign} b\n\tabs(x) < 9007199254740992\n",
}


_ARITH_SIGN = re.compile(rb"[\w)\]}]\s*[-+*/]")  # an operand's end, then an operator (strings masked)


def _arithmetic_rounds(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    for module in modules:
        if _ARITH_SIGN.search(_masked(module.text.encode())):  # else nothing to parse
            yield module, _arithmetic(module)


def _arithmetic(module: Module) -> list[_Change]:
    """`a + b` (and -, *, /) as a call of a helper appended to the module that answers as OPA where
    regorus's doubles would not (`0.1 + 0.2`, `9007199254740993 / 2`), or fails. Each place gets a
    helper of its own, so that an error in it (`1 / 0`) is located at the place. Sides that are small
    integer literals or counts are left in place (+, -, *: exact in both)."""
    source = module.text.encode()
    code = _masked(source)
    found = []
    for rule, body in _written_rules(module, source):
        if not _ARITH_SIGN.search(code, body["span"]["start"], body["span"]["end"]):
            continue  # no operator in its text: no walk
        found += [n for k, n in _tagged(rule) if k == "ArithExpr" and n["op"] in _ARITH and not _exact(source, n)]
    extents = [_trimmed(source, **_extent({"ArithExpr": n})) for n in found]
    changes: list[_Change] = []
    taken: list[tuple[int, int]] = []
    number = _next_number(source)
    for node, (start, end) in zip(found, extents, strict=True):
        if any(start <= s and e <= end and (s, e) != (start, end) for s, e in extents):
            continue  # arithmetic inside it: that first, next round
        op, sign = _ARITH[node["op"]]
        left, right = _operand_extent(source, node["lhs"]), _operand_extent(source, node["rhs"])
        at = code.find(sign.encode(), left[1], right[0])
        if at < 0:
            raise _refusal(
                module,
                source,
                left[0],
                "arithmetic that the embedded engine's 64-bit doubles may compute otherwise than OPA could "
                "not be rewritten here: write it on a line of its own, or use --engine opa",
            )
        first, last = _grouped(code, left[0], at, at + 1, right[1])
        if any(first < e and s < last for s, e in taken):
            continue  # sharing text with another rewritten here: next round
        taken.append((first, last))
        name = _placed_name(f"__rk_ar_{op}", module, number)
        number += 1
        checks = _ARITH_CHECKS["div" if op == "div" else "other"].format(sign=sign)
        helper = _ARITH_HELPERS[module.v0].format(name=name, small=_SMALL_CHECKS, sign=sign, arith=ARITH, checks=checks)
        changes += [
            _Change(first, first, f"{name}(".encode()),
            _Change(at, at + 1, b","),
            _Change(last, last, b")"),
            _placed(source, helper, at),
        ]
    return changes


def _exact(source: bytes, node: dict[str, Any]) -> bool:
    """Both sides small integers (literals below 2^30 or counts), or a side a set: exact in regorus."""
    if node["op"] == "Div":
        return False
    sides = [next(iter(side.items())) for side in (node["lhs"], node["rhs"])]
    if any(kind in ("Set", "SetCompr") for kind, _ in sides):
        return True
    for kind, value in sides:
        if kind == "Number":
            text = source[value["span"]["start"] : value["span"]["end"]]
            if not _SMALL_LITERAL.fullmatch(text):
                return False
        elif kind != "Call" or _called(value) not in _SMALL_CALLS:
            return False
    return True


# ------------------------------------------------------------------ f(x, out)


def _output_arguments(module: Module) -> list[_Change]:
    """`f(x, out)` standing as a statement, for a builtin regokite adds in Python, as
    `out = f(x)`: OPA unifies the result with the extra operand; regorus passes an
    extension every operand (and finds `out` unsafe)."""
    source = module.text.encode()
    tree, failure = _parse(module, source)
    if failure is not None or tree is None:
        return []
    known = arities()
    changes = []
    for statement in _statements(tree):
        kind, literal = next(iter(statement["literal"].items()))
        expr_kind, call = next(iter(literal["expr"].items())) if kind == "Expr" else (None, None)
        if expr_kind != "Call" or known.get(_fcn_name(call) or "") != len(call["params"]) - 1 or not call["params"]:
            continue
        output = _trimmed(source, **_extent(call["params"][-1]))
        before = _trimmed(source, **_extent(call["params"][-2])) if len(call["params"]) > 1 else None
        start, end = _call_span(call)
        cut = before[1] if before else source.find(b"(", start) + 1
        changes += [
            _Change(start, start, _flat(module, source, *output) + b" = "),
            _Change(cut, end - 1, b"\n" * source[cut : end - 1].count(b"\n")),  # lines kept
        ]
    return changes


# ------------------------------------------------------------------ numbers regorus would round

_INTEGER = re.compile(rb"-?[0-9]+")


def _check_numbers(module: Module) -> None:
    """Refuse a number literal regorus would hold otherwise than OPA, which keeps its text: an integer
    beyond 64 bits that a double cannot hold (123456789012345678901234567890 becomes
    1.2345678901234568e+29), a fraction whose double reads back otherwise (0.10000000000000000001
    becomes 0.1), an integral double that is not the number written (1e23 becomes
    99999999999999991611392). One a double holds (gatekeeper-library's 1000000000000000000000) loads."""
    source = module.text.encode()
    tree, failure = _parse(module, source)
    if failure is not None or tree is None:
        return
    for kind, node in _tagged(tree):
        if kind != "Number":
            continue
        text = source[node["span"]["start"] : node["span"]["end"]]
        if _INTEGER.fullmatch(text):
            if not -(2**63) <= int(text) < 2**64 and int(float(text)) != int(text):
                raise _refusal(
                    module,
                    source,
                    node["span"]["start"],
                    f"the integer {text.decode()} is beyond 64 bits and not a double, which the embedded engine "
                    "would round: write it as a string, or use --engine opa",
                )
        elif _held_otherwise(text):
            raise _refusal(
                module,
                source,
                node["span"]["start"],
                f"the number {text.decode()} is not held exactly by the embedded engine's 64-bit double "
                f"(it would read as {_as_held(float(text))}): write fewer digits, or use --engine opa",
            )


def _as_held(double: float) -> str:
    return str(int(double)) if double.is_integer() else repr(double)


def _held_otherwise(text: bytes) -> bool:
    try:
        written, double = Fraction(text.decode().replace("_", "")), float(text)
    except (ValueError, OverflowError):
        return False  # regorus's own error at load
    if not math.isfinite(double):
        return False
    return written != exact_value(double)


# ------------------------------------------------------------------ with f as builtin


def _builtin_mocks(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    """`with f as count` (a function or builtin replaced by a builtin): regorus takes only a
    function of the bundle there, so the builtin gets one, appended to the module:
    `__rk_mock_<tag>_<n>(a) := x if { x := count(a) }`. The arity is the replaced function's,
    or, for a builtin, that of its calls in the bundle; with neither, left to the load's error."""
    from regokite.engine.catalog import regorus_builtins  # catalog reaches regorus's list lazily

    if not any("with" in m.text for m in modules):
        return  # no `with` at all: nothing to parse
    parsed = [(m, t) for m in modules for t, failure in [_parse(m, m.text.encode())] if failure is None and t]
    builtins = regorus_builtins() | set(arities())
    functions: dict[str, int] = {}  # a function of the bundle (full path, and name in its package) -> arity
    called: dict[str, int] = {}  # a builtin -> the fewest operands it is called with
    for _, tree in parsed:
        package = ref_parts(tree["package"]["refr"])
        for kind, head in rule_heads(tree):
            if kind == "Func":
                name = ".".join(ref_parts(head["refr"]))
                functions[name] = functions[".".join(["data", *package, name])] = len(head["args"])
        for call in rego_ast.calls(tree):
            name = _fcn_name(call)
            if name:
                called[name] = min(called.get(name, 99), len(call["params"]))
    for module, tree in parsed:
        yield module, _mocks(module, tree, builtins, functions, called)


def _mocks(
    module: Module,
    tree: dict[str, Any],
    builtins: set[str] | frozenset[str],
    functions: dict[str, int],
    called: dict[str, int],
) -> list[_Change]:
    source = module.text.encode()
    tag = _tag(module)
    changes, helpers = [], 0
    for statement in _statements(tree):
        for modifier in statement.get("with_mods", []):
            target, value = _fcn_name({"fcn": modifier["refr"]}), _fcn_name({"fcn": modifier["as"]})
            if value is None or value not in builtins or value in functions or target is None:
                continue
            arity = functions.get(target, called.get(target))
            if arity is None or arity == 99:
                continue
            name = f"__rk_mock_{tag}_{helpers}"
            helpers += 1
            where = _extent(modifier["as"])
            changes.append(_Change(where["start"], where["end"], name.encode()))
            operands = ", ".join(f"a{i}" for i in range(arity))
            keyword = "= x {" if module.v0 else ":= x if {"
            # placed at the builtin named: its errors are located at the `with` that put it there
            changes.append(
                _placed(source, f"\n{name}({operands}) {keyword}\n\tx := {value}({operands})\n}}\n", where["start"])
            )
    return changes


# ------------------------------------------------------------------ `a in c` as a value


def _membership_rounds(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    for module in modules:
        if _IN.search(module.text):  # else nothing to parse
            yield module, _memberships(module)


_IN = re.compile(r"\bin\b")


def _memberships(module: Module) -> list[_Change]:
    """`x := a in c` with `c` undefined is undefined in OPA (a call of internal.member_2) and false
    in regorus: `a in c` as a value (not a statement of its own) calls a helper appended to the
    module, undefined where an operand is."""
    source = module.text.encode()
    tree, failure = _parse(module, source)
    if failure is not None or tree is None:
        return []
    tag = _tag(module)
    standing = {
        id(next(iter(s["literal"][k]["expr"].values())))
        for s in _statements(tree)
        for k in ("Expr", "NotExpr")
        if k in s["literal"]
    }
    code = _masked(source)
    changes: list[_Change] = []
    taken: list[tuple[int, int]] = []
    arities_used: set[int] = set()
    for rule in tree.get("rules", []):
        if _appended(rule):
            continue
        for node_kind, node in _tagged(rule):
            if node_kind != "Membership" or id(node) in standing:
                continue
            operands = [t for t in (node.get("key"), node["value"], node["collection"]) if t]
            first = _operand_extent(source, operands[0])
            last = _operand_extent(source, operands[-1])
            keyword = code.rfind(b" in ", first[1], last[0])
            if keyword < 0:
                continue
            start, end = _grouped(code, first[0], keyword, keyword + 4, last[1])
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            arities_used.add(len(operands))
            changes += [
                _Change(start, start, f"__rk_in{len(operands)}_{tag}(".encode()),
                _Change(keyword, keyword + 4, b", "),
                _Change(end, end, b")"),
            ]
    helpers = ""
    for n in sorted(arities_used):
        name = f"__rk_in{n}_{tag}"
        if f"{name}(".encode() in source:
            continue
        names = ["k", "v", "c"][-n:] if n == 3 else ["v", "c"]
        member = f"{names[0]}, {names[1]} in c" if n == 3 else "v in c"
        keyword = "= x {" if module.v0 else ":= x if {"
        helpers += f"\n{name}({', '.join(names)}) {keyword}\n\tx := {member}\n}}\n"
    if helpers:
        changes.append(_Change(len(source), len(source), helpers.encode()))
    return changes


# ------------------------------------------------------------------ builtins called through a function of the module

# The builtins every call of which (but for the exceptions in _routed_calls) goes through a function placed
# at it. count of a string counts UTF-16 units in regorus (2 for U+1F600) and characters in OPA; json.marshal
# writes <, >, &, U+2028 and U+2029 as they are, where Go escapes them (\u003c ...)
ALWAYS_ROUTED = frozenset(
    {
        "count",
        "to_number",
        "json.marshal",
        "json.marshal_with_options",
        "sort",
        "min",
        "max",
        "replace",
        "regex.split",
        "yaml.marshal",
    }
)
_NEVER_STRING = frozenset({"Array", "Set", "Object", "ArithExpr", "BinExpr"}) | _COMPREHENSIONS
_JSON_ESCAPES = r'{"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}'
_ROUTE = "__rk_b_"
# http.send mocked: see _wrapper; sprintf: the wrapper's own call is the one the sprintf rounds rewrite
_MOCKED_ROUTED = frozenset({"http.send", "sprintf"})
_ROUTE_WORDS = (*ALWAYS_ROUTED, "with")  # a module mentioning none needs no parse for routing


def _routes(modules: list[Module], mockable: frozenset[str]) -> Iterator[tuple[Module, list[_Change]]]:
    """Calls of `count` and `json.marshal` (and of an extension builtin a `with` replaces somewhere)
    as calls of a function appended to the module, `data.<package>.__rk_b_count_<tag>_<n>(x)`, that
    answers as OPA; each `with count as m` also replaces every such function of the bundle.

    Each call gets a function of its own (a helper placed at the call, as arithmetic's): an error in
    it is located at the call, as OPA locates it. regorus's `with` replaces a function only where a
    call is written with the name the `with` names (and knows no extension of regokite's), so calls
    are written by full path, as the mocks.
    """
    parsed = _parsed_with(modules, _ROUTE_WORDS)  # no parse for the rest
    functions = _bundle_functions(parsed)
    mocked = {name for _, tree in parsed for name, _ in _mock_targets(tree)} - functions.keys()
    routed = ALWAYS_ROUTED | (mocked & (mockable | _MOCKED_ROUTED))
    if routed != ALWAYS_ROUTED:
        parsed = _parsed_with(modules, (*_ROUTE_WORDS, *routed))
    calls: dict[str, list[tuple[dict[str, Any], str, str]]] = {}  # module -> (call, builtin, its function)
    places: dict[str, list[str]] = {}  # builtin -> the full path of each function answering a call of it
    for module, tree in parsed:
        package = _package_ref(tuple(ref_parts(tree["package"]["refr"])))
        found = calls[module.path] = [
            (call, name, f"{package}.{_placed_name(_route_name(name), module, n)}")
            for n, (call, name) in enumerate(_routed_calls(tree, module, routed))
        ]
        for _, name, path in found:
            places.setdefault(name, []).append(path)
    ordering: set[str] = set()  # packages given the ordering helpers (once each)
    for module, tree in parsed:
        package = _package_ref(tuple(ref_parts(tree["package"]["refr"])))
        source = module.text.encode()
        changes = [_Change(*_fcn_span(call), path.encode()) for call, _, path in calls[module.path]]
        changes += _route_mocks(module, tree, routed, routed - mockable - {"http.send"}, places)
        for call, name, path in calls[module.path]:
            builtin = HTTP_SEND_OFF if name == "http.send" and name not in mockable else name
            text = _wrapper(builtin, len(call["params"]), module.v0, path.rpartition(".")[2])
            changes.append(_placed(source, text, _fcn_span(call)[0]))
        if package not in ordering and any(name in _ORDERING for _, name, _ in calls[module.path]):
            ordering.add(package)
            changes.append(_Change(len(source), len(source), _ordering_helpers(module.v0).encode()))
        yield module, changes


def _parsed_with(modules: list[Module], words: Sequence[str]) -> list[tuple[Module, dict[str, Any]]]:
    """The modules whose text holds one of `words`, with their trees (those that parse)."""
    mentioned = [m for m in modules if any(word in m.text for word in words)]
    return [(m, t) for m in mentioned for t, failure in [_parse(m, m.text.encode())] if failure is None and t]


def _bundle_functions(parsed: list[tuple[Module, dict[str, Any]]]) -> dict[str, tuple[str, ...]]:
    """Every function of the bundle by full path, and by its name within its own package's modules
    (`pkg:name`), each to its package."""
    functions: dict[str, tuple[str, ...]] = {}
    for _, tree in parsed:
        package = tuple(ref_parts(tree["package"]["refr"]))
        for kind, head in rule_heads(tree):
            if kind == "Func":
                name = ".".join(ref_parts(head["refr"]))
                functions[f"{_package_ref(package)}.{name}"] = package
                functions[name] = package
    return functions


def _mock_targets(tree: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for statement in _statements(tree):
        for modifier in statement.get("with_mods", []):
            name = _fcn_name({"fcn": modifier["refr"]})
            if name and name.split(".")[0] != "input":
                yield name, modifier


def _routed_calls(tree: dict[str, Any], module: Module, routed: frozenset[str]) -> Iterator[tuple[dict, str]]:
    local = {ref_parts(head["refr"])[0] for _, head in rule_heads(tree)} | _import_names(tree)
    local |= _aliases(module.text.encode(), tree)
    for rule in tree.get("rules", []):
        kind, body = next(iter(rule.items()))
        if kind != "Default" and ref_parts(next(iter(body["head"].values()))["refr"])[0].startswith(_ROUTE):
            continue  # a wrapper itself
        for call in rego_ast.calls(rule):
            name = _fcn_name(call)
            if name not in routed or name.split(".")[0] in local:
                continue
            if name == "count" and len(call["params"]) == 1 and next(iter(call["params"][0])) in _NEVER_STRING:
                continue  # a collection: regorus counts it as OPA (and `with count as` still reaches it)
            if name == "replace" and len(call["params"]) == 3 and _nonempty_string(call["params"][1]):
                continue  # replace(s, ".", x): regorus replaces as OPA
            yield call, name


def _nonempty_string(term: dict[str, Any]) -> bool:
    kind, node = next(iter(term.items()))
    return kind in ("String", "RawString") and node.get("value", "") != ""


def _route_mocks(
    module: Module,
    tree: dict[str, Any],
    routed: frozenset[str],
    regorus_mocks: frozenset[str],
    places: dict[str, list[str]],
) -> list[_Change]:
    """`with B as m` for a routed builtin B: `with data.<p>.__rk_b_B_<tag>_<n> as m` for each function
    answering a call of B in the bundle; the original kept where regorus knows B (it replaces the
    calls left as written)."""
    source = module.text.encode()
    changes = []
    for name, modifier in _mock_targets(tree):
        if name not in routed:
            continue
        where = _trimmed(source, **_extent(modifier["as"]))
        value = _flat(module, source, *where)
        added = b"".join(b" with " + path.encode() + b" as " + value for path in places.get(name, ()))
        start, end = modifier["span"]["start"], max(modifier["span"]["end"], where[1])  # a string's quote
        if name in regorus_mocks:
            changes.append(_Change(end, end, added))
        else:
            changes.append(_Change(start, end, added.strip()))
    return changes


def _route_name(builtin: str) -> str:
    return _ROUTE + builtin.replace(".", "_")


def _package_ref(package: tuple[str, ...]) -> str:
    return "data" + "".join(f".{p}" if re.fullmatch(r"[A-Za-z_]\w*", p) else f"[{json.dumps(p)}]" for p in package)


def _fcn_span(call: dict[str, Any]) -> tuple[int, int]:
    fcn = next(iter(call["fcn"].values()))["span"]
    return fcn["start"], fcn["end"]


def _wrapper(builtin: str, arity: int, v0: bool, name: str) -> str:
    """The function `name` that answers a call as OPA does by calling `builtin`: one or more bodies, in
    the module's syntax. A bundle whose tests replace http.send loads without --allow-http-send, as
    under `opa test`; a call they leave is an error naming the flag (HTTP_SEND_OFF)."""
    operands = ", ".join(f"a{i}" for i in range(arity))
    bodies: list[tuple[tuple[str, ...], str]]
    if builtin == "count" and arity == 1:
        return _string_or(name, f"{STRLEN}(a0)", "count(a0)", v0)
    elif builtin == "to_number" and arity == 1:
        # regorus's number as its JSON text: it passes no integral double beyond 64-bit integers to Python
        return _string_or(name, f"{NUMBER_TEXT}(a0, json.marshal(to_number(a0)))", "to_number(a0)", v0)
    elif builtin == "yaml.marshal" and arity == 1:
        bodies = [((f"{YAML_PLAIN}(a0)",), "yaml.marshal(a0)")]
    elif builtin.startswith("json.marshal"):
        bodies = [((), f"strings.replace_n({_JSON_ESCAPES}, {builtin}({operands}))")]
    elif builtin in _ORDERING and arity == 1:
        return _ordering_wrapper(builtin, name, v0)
    elif (builtin, arity) in _GO_STRINGS:
        return _GO_STRINGS[builtin, arity][v0].format(name=name, replace_empty=REPLACE_EMPTY)
    else:
        bodies = [((), f"{builtin}({operands})")]
    return "".join(_function(name, operands, value, conditions, v0) for conditions, value in bodies)


def _string_or(name: str, string: str, other: str, v0: bool) -> str:
    """`name(a0)`: `string` where a0 is a string, else `other`. One rule with an `else`: a function of
    two bodies costs regorus both (11 against 8 µs a call, measured) and the load a rule more."""
    if v0:
        return f"\n{name}(a0) = x {{\n\tis_string(a0)\n\tx := {string}\n}} else = x {{\n\tx := {other}\n}}\n"
    return f"\n{name}(a0) := {string} if is_string(a0) else := {other}\n"


def _function(name: str, operands: str, value: str, conditions: Sequence[str], v0: bool) -> str:
    """`name(operands) := value if { conditions }` in v1 or v0 syntax."""
    if v0:
        statements = "".join(f"\t{c}\n" for c in conditions)
        return f"\n{name}({operands}) = __x {{\n{statements}\t__x := {value}\n}}\n"
    if not conditions:
        return f"\n{name}({operands}) := {value}\n"
    if len(conditions) == 1:
        return f"\n{name}({operands}) := {value} if {conditions[0]}\n"
    statements = "".join(f"\t{c}\n" for c in conditions)
    return f"\n{name}({operands}) := {value} if {{\n{statements}}}\n"


# replace(s, "", x): Go's strings.Replacer puts x between every two bytes (so around each byte of a character
# beyond ASCII, which then reads as U+FFFD), regorus between characters. regex.split: Go's Split leaves out
# the empty piece before an empty match at the start and after one at the end, and splits "" into [""].
_GO_STRINGS = {
    ("replace", 3): {
        False: '\n{name}(a0, a1, a2) := replace(a0, a1, a2) if a1 != "" else := {replace_empty}(a0, a2)\n',
        True: '\n{name}(a0, a1, a2) = replace(a0, a1, a2) {{\n\ta1 != ""\n}} '
        "else = {replace_empty}(a0, a2) {{\n\ttrue\n}}\n",
    },
    ("regex.split", 2): {
        False: """
{name}(a0, a1) := [""] if {{
\ta1 == ""
\ta0 != ""
\tregex.split(a0, a1)
}} else := array.slice(pieces, lo, hi) if {{
\tpieces := regex.split(a0, a1)
\tfound := regex.find_n(a0, a1, -1)
\tlo := count({{1 | count(found) > 0; found[0] == ""; pieces[0] == ""}})
\thi := count(pieces) - count({{1 | count(found) > 0; found[count(found) - 1] == ""; pieces[count(pieces) - 1] == ""}})
}}
""",
        True: """
{name}(a0, a1) = [""] {{
\ta1 == ""
\ta0 != ""
\tregex.split(a0, a1)
}} else = x {{
\tpieces := regex.split(a0, a1)
\tfound := regex.find_n(a0, a1, -1)
\tlo := count({{1 | count(found) > 0; found[0] == ""; pieces[0] == ""}})
\thi := count(pieces) - count({{1 | count(found) > 0; found[count(found) - 1] == ""; pieces[count(pieces) - 1] == ""}})
\tx := array.slice(pieces, lo, hi)
}}
""",
    },
}

# sort, min and max of items holding sets and objects: OPA orders an object before a set, regorus a set
# before an object. Where they meet among the items themselves (`min([{"a": 1}, set()])`), the items are
# ordered as OPA: the others, then the objects, then the sets, each sorted by regorus (which orders them
# as OPA among themselves); where they meet deeper (`sort([[{1}], [{"a": 1}]])`), the call fails. Items
# whose JSON holds no brace hold no object: they take the builtin at once (a json.marshal, about free).
_ORDERING = {"sort": "{}", "min": "{}[0]", "max": "__rk_b_last({})"}
_ORDERING_WRAPPER = {
    False: (
        '\n{name}(a0) := {builtin}(a0) if {{\n\tnot contains(json.marshal(a0), "{{")\n}} '
        "else := {builtin}(a0) if {{\n\t__rk_b_mixing(a0) == 0\n}} "
        "else := {ordered} if {{\n\t__rk_b_mixing(a0) == 1\n}} "
        'else := {unordered}("{builtin}")\n'
    ),
    True: (
        '\n{name}(a0) = {builtin}(a0) {{\n\tnot contains(json.marshal(a0), "{{")\n}} '
        "else = {builtin}(a0) {{\n\t__rk_b_mixing(a0) == 0\n}} "
        "else = {ordered} {{\n\t__rk_b_mixing(a0) == 1\n}} "
        'else = {unordered}("{builtin}") {{\n\ttrue\n}}\n'
    ),
}
_ORDERING_HELPERS = {
    False: """
__rk_b_ordered(c) := array.concat(array.concat(sort(o), sort(j)), sort(s)) if {
\to := [v | v := c[_]; not is_set(v); not is_object(v)]
\tj := [v | v := c[_]; is_object(v)]
\ts := [v | v := c[_]; is_set(v)]
}

__rk_b_last(a) := a[count(a) - 1]

__rk_b_mixing(c) := 0 if {
\tnot __rk_b_braced(c)
} else := count({1 | __rk_b_meet(c, 1)} | {2 | __rk_b_meet(c, 2)})

__rk_b_meet(c, depth) if {
\tt := __rk_b_types(c, depth)
\tt["set"]
\tt["object"]
}

__rk_b_braced(c) if {
\tnot is_object(c)
\tcontains(json.marshal(c), "{")
}

__rk_b_types(c, depth) := {type_name(v) | walk(c, [p, v]); count(p) >= depth} if {
\tnot regex.match(`"[\\[{]`, json.marshal(c))
} else := {type_name(v) | walk(c, [p, v]); count(p) >= depth} | __rk_b_key_types(c)

__rk_b_key_types(c) := {type_name(w) | walk(c, [_, o]); is_object(o); _ = o[k]; walk(k, [_, w])}
""",
    True: """
__rk_b_ordered(c) = x {
\to := [v | v := c[_]; not is_set(v); not is_object(v)]
\tj := [v | v := c[_]; is_object(v)]
\ts := [v | v := c[_]; is_set(v)]
\tx := array.concat(array.concat(sort(o), sort(j)), sort(s))
}

__rk_b_last(a) = a[count(a) - 1] {
\ttrue
}

__rk_b_mixing(c) = 0 {
\tnot __rk_b_braced(c)
} else = x {
\tx := count({1 | __rk_b_meet(c, 1)} | {2 | __rk_b_meet(c, 2)})
}

__rk_b_meet(c, depth) {
\tt := __rk_b_types(c, depth)
\tt["set"]
\tt["object"]
}

__rk_b_braced(c) {
\tnot is_object(c)
\tcontains(json.marshal(c), "{")
}

__rk_b_types(c, depth) = x {
\tnot regex.match(`"[\\[{]`, json.marshal(c))
\tx := {type_name(v) | walk(c, [p, v]); count(p) >= depth}
} else = x {
\tx := {type_name(v) | walk(c, [p, v]); count(p) >= depth} | __rk_b_key_types(c)
}

__rk_b_key_types(c) = {type_name(w) | walk(c, [_, o]); is_object(o); _ = o[k]; walk(k, [_, w])} {
\ttrue
}
""",
}


def _ordering_wrapper(builtin: str, name: str, v0: bool) -> str:
    ordered = _ORDERING[builtin].format("__rk_b_ordered(a0)")
    return _ORDERING_WRAPPER[v0].format(name=name, builtin=builtin, ordered=ordered, unordered=UNORDERED)


def _ordering_helpers(v0: bool) -> str:
    """The functions the sort, min and max wrappers call (once per package)."""
    return _ORDERING_HELPERS[v0]


# ------------------------------------------------------------------ with f as m, f a function of the bundle


def _function_mocks(modules: list[Module]) -> Iterator[tuple[Module, list[_Change]]]:
    """Every call of a function of the bundle, and every `with` replacing one, written by full path
    (`w(x)` in package q: `data.q.w(x)`), once any `with` replaces a function of the bundle.

    regorus matches a `with` to calls by the name as written: `with w as m` in package p replaced
    the `w(x)` calls of package q too, and `with data.p.w as m` none written `w(x)`; OPA replaces
    the function the name resolves to, wherever it is called.
    """
    if not any("with" in m.text for m in modules):
        return  # no `with` at all: nothing to parse
    parsed = [(m, t) for m in modules for t, failure in [_parse(m, m.text.encode())] if failure is None and t]
    paths = {path for path, package in _bundle_functions(parsed).items() if path.startswith("data.")}
    resolved = [(module, tree, _resolver(module, tree, paths)) for module, tree in parsed]
    if not any(resolve(name) for _, tree, resolve in resolved for name, _ in _mock_targets(tree)):
        return
    for module, tree, resolve in resolved:
        changes = []
        for call in rego_ast.calls(tree):
            name = _fcn_name(call)
            full = resolve(name) if name and not name.startswith("data.") else None
            if full:
                changes.append(_Change(*_fcn_span(call), full.encode()))
        for name, modifier in _mock_targets(tree):
            full = resolve(name)
            if full and full != name:
                where = _extent(modifier["refr"])
                changes.append(_Change(where["start"], where["end"], full.encode()))
        yield module, changes


def _resolver(module: Module, tree: dict[str, Any], paths: set[str]) -> Callable[[str | None], str | None]:
    """The full path of a function of the bundle as a name in `module` refers to it, else None."""
    package = ref_parts(tree["package"]["refr"])
    aliases = {}
    for imported in tree.get("imports", []):
        parts = ref_parts(imported["refr"])
        alias = imported.get("as")
        name = module.text.encode()[alias["start"] : alias["end"]].decode() if alias else parts[-1]
        if parts[0] == "data":
            aliases[name] = parts

    def resolve(name: str | None) -> str | None:
        if not name:
            return None
        parts = name.split(".")
        if parts[0] == "data":
            full = parts
        elif parts[0] in aliases:
            full = [*aliases[parts[0]], *parts[1:]]
        else:
            full = ["data", *package, *parts]
        text = _package_ref(tuple(full[1:]))
        return text if text in paths else None

    return resolve
