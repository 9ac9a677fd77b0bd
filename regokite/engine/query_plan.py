"""The query planner of the sidecar engine: how an ad-hoc Rego query goes to OPA's REST API.

A plain `data` reference goes to the data API (`data_api_path`); anything else
to `POST /v1/query`, whose answer holds only the bindings of variables: the
plan (`QueryPlan.build`) reads the query's text, captures the value of each
expression that has one of its own in a fresh variable, and maps OPA's answer
and error locations back to the query as the caller wrote it. Its own module:
it reads Rego text, not HTTP, and has its own tests.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from regokite.engine import UNDEFINED

_REF_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*("(?:[^"\\\n]|\\.)*")\s*\]')
_PLAIN_REF = re.compile(r'data(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\s*"(?:[^"\\\n]|\\.)*"\s*\])*')
_FIRST_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NO_CAPTURE_KEYWORDS = frozenset({"some", "not", "every", "import", "package", "default"})
_CONTINUES = ("+", "-", "*", "/", "%", "&", "|", "=", "<", ">", ",", ":", "(", "[", "{")
_CONTINUES_WORDS = frozenset({"in", "as", "with", "not", "some", "every"})
# A reference indexed by a variable (`x[i]`, `x[_]`) iterates; `some` declares
# iteration. (OPA's own test walks the AST; this reads the masked text.)
_ITERATES = re.compile(r"[\w\])]\[\s*[A-Za-z_][A-Za-z0-9_]*\s*\]|\bsome\b")
_WITH = re.compile(r"(?<![A-Za-z0-9_.])with(?![A-Za-z0-9_])")


@functools.lru_cache(maxsize=4096)  # the same few refs on every admission request
def data_api_path(ref: str) -> str | None:
    """`data.a["b c"].d` -> `a/b%20c/d` for the data API; None if it is not that simple."""
    if _PLAIN_REF.fullmatch(ref) is None:
        return None
    parts: list[str] = []
    pos = len("data")
    while pos < len(ref):
        match = _REF_PART.match(ref, pos)
        if match is None:
            return None
        key = match.group(1) or json.loads(match.group(2))
        # OPA turns an all-digit segment into a number and rejects a quote.
        if not key or key.lstrip("-").isdigit() or '"' in key:
            return None
        parts.append(quote(key, safe=""))
        pos = match.end()
    return "/".join(parts)


@dataclass(frozen=True)
class _Expr:
    text: str
    row: int
    col: int
    capture: str | None


@dataclass
class QueryPlan:
    """An ad-hoc query rewritten so that OPA's `/v1/query` reports expression values.

    OPA's query API answers bindings only; `opa eval` (and the embedded engine)
    also report each top-level expression's value. So every expression that has
    a value of its own (a reference, a call, a comparison) is sent as
    `__regokite_eN__ := <expr>`, and the binding is turned back into the
    expression's value; declarations and assignments (`x := ...`, `some`,
    `not`, `every`) have the value `true`, as in the embedded engine.

    Capturing must not change which rows exist. OPA's own `opa eval` capture
    reports a lone, non-iterating expression's `false` as a value, but when
    the query has several expressions or iterates, a `false` expression fails
    its row; so in that case `; __regokite_eN__ != false` follows each capture.
    """

    text: str
    exprs: list[_Expr]
    ref_path: str | None = None
    inserts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def build(cls, query: str, *, null_input: bool = False) -> QueryPlan:
        mask = _mask(query)
        segments = _segments(query, mask)
        exprs: list[_Expr] = []
        inserts: list[tuple[int, str]] = []
        check = len(segments) > 1 or _ITERATES.search(mask) is not None
        for i, (start, end) in enumerate(segments):
            core_end = end
            for match in _WITH.finditer(mask, start, end):
                if _depth(mask, start, match.start()) == 0:
                    core_end = len(mask[: match.start()].rstrip())
                    break
            core_mask = mask[start:core_end]
            row, col = _row_col(query, start)
            capture = f"__regokite_e{i}__" if _has_own_value(core_mask) else None
            exprs.append(_Expr(query[start:core_end], row, col, capture))
            if capture:
                inserts.append((start, f"{capture} := "))
            if null_input and not re.search(r"\bwith\s+input\b", mask[core_end:end]):
                inserts.append((end, " with input as null"))
            if capture and check:
                inserts.append((end, f"; {capture} != false"))
        ref_path = None
        if len(exprs) == 1 and not inserts[1:] and not null_input:
            ref = exprs[0].text
            if exprs[0].capture and segments[0][1] == segments[0][0] + len(ref):
                ref_path = data_api_path(ref)
        text, shifts = _apply_inserts(query, inserts)
        return cls(text, exprs, ref_path, shifts)

    def result(self, bindings: dict[str, Any], value: Any = UNDEFINED) -> dict[str, Any]:
        """One row of `opa eval`'s result shape, from one row of `/v1/query`'s bindings."""
        rest = dict(bindings)
        expressions = []
        for expr in self.exprs:
            if value is not UNDEFINED:
                v = value
            elif expr.capture:
                v = rest.pop(expr.capture, None)
            else:
                v = True
            location = {"row": expr.row, "col": expr.col}
            expressions.append({"value": v, "text": expr.text, "location": location})
        row: dict[str, Any] = {"expressions": expressions}
        if rest:
            row["bindings"] = rest
        return row

    def original_col(self, row: int, col: int) -> int:
        """Map a column in the sent query back to the caller's query."""
        shift = 0
        for at, length in self.inserts.get(row, ()):
            pos = at + shift
            if col < pos:
                break
            if col < pos + length:
                return at
            shift += length
        return col - shift


def _mask(query: str) -> str:
    """`query` with string contents blanked to `s` and comments to spaces (same length)."""
    out = list(query)
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in '"`':
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if c == '"' and query[j] == "\\" else 1
            j = min(j, n - 1)
            for k in range(i + 1, j):
                out[k] = "s"
            i = j + 1
        elif c == "#":
            j = query.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


def _segments(query: str, mask: str) -> list[tuple[int, int]]:
    """Top-level expressions as (start, end) offsets: split at `;` and newlines."""
    raw: list[tuple[int, int]] = []
    depth, begin = 0, 0
    for i, c in enumerate(mask):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0 and c in ";\n":
            raw.append((begin, i))
            begin = i + 1
    raw.append((begin, len(mask)))
    merged: list[tuple[int, int]] = []
    carry: int | None = None
    for begin, end in raw:
        start = begin if carry is None else carry
        body = mask[start:end].strip()
        if not body:
            continue
        words = body.split()
        if body.endswith(_CONTINUES) or (words and words[-1] in _CONTINUES_WORDS):
            carry = start  # the expression goes on on the next line
            continue
        carry = None
        merged.append((start, end))
    if carry is not None:
        merged.append((carry, len(mask)))
    out = []
    for start, end in merged:
        piece = mask[start:end]
        lead = len(piece) - len(piece.lstrip())
        out.append((start + lead, start + len(piece.rstrip())))
    return out


def _depth(mask: str, start: int, end: int) -> int:
    depth = 0
    for c in mask[start:end]:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return depth


def _has_own_value(core: str) -> bool:
    """Does this expression evaluate to a value (not a declaration/assignment)?"""
    first = _FIRST_WORD.match(core)
    if first and (first.group() in _NO_CAPTURE_KEYWORDS or core.startswith("print(")):
        return False
    depth = 0
    for i, c in enumerate(core):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c == ",":
            return False
        elif depth == 0 and c == "=":
            before = core[i - 1] if i else ""
            after = core[i + 1] if i + 1 < len(core) else ""
            if before == ":" or (before not in "=!<>" and after != "="):
                return False  # `:=` or unification `=`
    return True


def _row_col(text: str, offset: int) -> tuple[int, int]:
    row = text.count("\n", 0, offset) + 1
    return row, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _apply_inserts(query: str, inserts: list[tuple[int, str]]) -> tuple[str, dict[int, list[tuple[int, int]]]]:
    out, last = [], 0
    shifts: dict[int, list[tuple[int, int]]] = {}
    for offset, text in sorted(inserts, key=lambda item: item[0]):
        out.append(query[last:offset])
        out.append(text)
        last = offset
        row, col = _row_col(query, offset)
        shifts.setdefault(row, []).append((col, len(text)))
    out.append(query[last:])
    return "".join(out), shifts
