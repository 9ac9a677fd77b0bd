"""Numbers: number literals regorus would hold otherwise than OPA, folded where OPA's answer is known at load,
else refused.

OPA keeps a number's text and computes on it exactly; regorus holds a 64-bit
integer or a double. An integer beyond 64 bits that a double cannot hold
(123456789012345678901234567890 becomes 1.2345678901234568e+29), a fraction
whose double reads back otherwise (0.10000000000000000001 becomes 0.1), an
integral double that is not the number written (1e23 becomes
99999999999999991611392): where such a literal is an operand of constants
only (`+ - * %`, a comparison, `sum`, `product`, `abs`, `sprintf`,
`numbers.range(_step)`, inside arrays and sets), the outermost such expression is computed here as OPA
computes it and written as its value, if regorus holds that value
(`sprintf("%v", [18446744073709551617 + 1])` is "18446744073709551618");
otherwise the literal is refused. One a double holds (gatekeeper-library's
1000000000000000000000) loads as written.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any

from regokite.bundle import Module
from regokite.engine.extensions.arithmetic import exact_value
from regokite.engine.extensions.common import BuiltinError
from regokite.engine.extensions.formatting import sprintf
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, refusal, trimmed
from regokite.engine.rewrite.tree import Node, Parsed, body, extent, fcn_name, kind

_INTEGER = re.compile(rb"-?[0-9]+")
_EXPONENT = re.compile(rb"[eE]([+-]?[0-9]+)$")
_MOST_DIGITS = 400  # a longer literal, or a larger exponent, is not computed on exactly (1e-99999999: minutes)
_NUMBER = re.compile(rb"-?[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9]+)?")  # every number literal's text, and more
_UNKNOWN = object()  # not a constant
_MOST_ITEMS = 10_000
_ARITH = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b}
_ORDER = {"Lt": "__lt__", "Le": "__le__", "Gt": "__gt__", "Ge": "__ge__", "Eq": "__eq__", "Ne": "__ne__"}


def wanted(module: Module) -> bool:
    """Whether the text holds a number regorus would hold otherwise (maybe in a string or a name: the tree
    decides then). Most modules hold none, and spare the walk of their tree."""
    numbers = (m[0] for m in _NUMBER.finditer(module.text.encode()))
    return any(_held_otherwise(n) is not None or _held_otherwise(n.lstrip(b"-")) is not None for n in numbers)


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source = parsed.source
    parents: dict[int, Node] = {}
    literals: list[Node] = []
    _link(parsed.tree, None, parents, literals)
    changes: list[Change] = []
    folded: set[int] = set()
    for term in literals:
        node = body(term)
        text = source[node["span"]["start"] : node["span"]["end"]]
        problem = _held_otherwise(text)
        if problem is None:
            continue
        outer, value = _outermost_constant(term, parents, source)
        if outer is not None and id(outer) in folded:
            continue
        if outer is None or not _held(value):
            raise refusal(target.module, source, node["span"]["start"], problem)
        folded.add(id(outer))
        changes.append(Change(*trimmed(source, **extent(outer)), _literal(value)))
    return _outermost(changes)


def _link(node: Any, parent: Node | None, parents: dict[int, Node], literals: list[Node]) -> None:
    """Each tagged term's parent term (by the id of its contents), and every number literal."""
    if isinstance(node, list):
        for item in node:
            _link(item, parent, parents, literals)
    elif isinstance(node, dict):
        if len(node) == 1:
            node_kind, contents = next(iter(node.items()))
            if isinstance(contents, dict) and "span" in contents and node_kind[:1].isupper():
                if parent is not None:
                    parents[id(contents)] = parent
                if node_kind == "Number":
                    literals.append(node)
                for value in contents.values():
                    _link(value, node, parents, literals)
                return
        for value in node.values():
            _link(value, parent, parents, literals)


def _outermost_constant(term: Node, parents: dict[int, Node], source: bytes) -> tuple[Node | None, Any]:
    """The outermost term holding `term` whose value is known here, with that value."""
    best, value = None, _UNKNOWN
    at: Node | None = term
    while at is not None:
        found = _value(at, source)
        if found is _UNKNOWN:
            break
        best, value = at, found
        at = parents.get(id(body(at)))
    return best, value


def _value(term: Node, source: bytes) -> Any:
    term_kind, node = kind(term), body(term)
    if term_kind == "Number":
        return _number(source[node["span"]["start"] : node["span"]["end"]])
    if term_kind in ("String", "RawString", "Bool", "Null"):
        return node.get("value")
    if term_kind in ("Array", "Set"):
        items = [_value(item, source) for item in node["items"]]
        return _UNKNOWN if _UNKNOWN in items else (items if term_kind == "Array" else _Set(items))
    if term_kind == "UnaryExpr":
        inner = _value(node["expr"], source)
        return -inner if _is_number(inner) else _UNKNOWN
    if term_kind in ("ArithExpr", "BoolExpr"):
        left, right = _value(node["lhs"], source), _value(node["rhs"], source)
        if not (_is_number(left) and _is_number(right)):
            return _UNKNOWN
        if term_kind == "BoolExpr":
            return getattr(Fraction(left), _ORDER[node["op"]])(Fraction(right)) if node["op"] in _ORDER else _UNKNOWN
        if node["op"] == "Mod" and _integers(left, right) and right:
            return left - right * int(Fraction(left, right))  # Go's remainder: the dividend's sign
        return _ARITH[node["op"]](left, right) if node["op"] in _ARITH and _integers(left, right) else _UNKNOWN
    if term_kind == "Call":
        return _call(fcn_name(node) or "", [_value(p, source) for p in node["params"]])
    return _UNKNOWN


def _call(name: str, operands: list[Any]) -> Any:
    if _UNKNOWN in operands:
        return _UNKNOWN
    if name in ("sum", "product") and len(operands) == 1 and isinstance(operands[0], list | _Set):
        items = list(operands[0])
        if items and all(isinstance(i, int) and not isinstance(i, bool) for i in items):
            return sum(items) if name == "sum" else math.prod(items)
    if name == "abs" and len(operands) == 1 and _is_number(operands[0]):
        return abs(operands[0])
    if name in ("numbers.range", "numbers.range_step") and len(operands) == 2 + (name == "numbers.range_step"):
        return _range(*operands)
    formatted = name == "sprintf" and len(operands) == 2 and isinstance(operands[1], list)
    if formatted and all(isinstance(a, str | int) and not isinstance(a, bool) for a in operands[1]):
        try:
            return sprintf(operands[0], operands[1])
        except BuiltinError:
            return _UNKNOWN
    return _UNKNOWN


def _range(start: Any, stop: Any, step: Any = 1) -> Any:
    """numbers.range(_step): from `start` to `stop` both included, by `step` (OPA's: a positive integer)."""
    if not _integers(start, stop, step) or step <= 0 or abs(stop - start) // step >= _MOST_ITEMS:
        return _UNKNOWN  # its error, or a range too long to write out, is left to evaluation
    sign = 1 if stop >= start else -1
    return [start + sign * step * i for i in range(abs(stop - start) // step + 1)]


class _Set(list):
    """A set literal's items (a set of constants: their order does not matter to what is computed here)."""


def _number(text: bytes) -> Any:
    if _huge(text):
        return _UNKNOWN  # refused (_too_long), not computed
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        value = Fraction(text.decode().replace("_", ""))
    except ValueError:
        return _UNKNOWN
    return int(value) if value.denominator == 1 and b"." not in text else value  # 1e30 is an integer


def _is_number(value: Any) -> bool:
    return isinstance(value, int | Fraction) and not isinstance(value, bool)


def _integers(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _held(value: Any) -> bool:
    """Whether regorus holds `value` as OPA does, so that it can be written in place of what computed it."""
    if isinstance(value, bool | str) or value is None:
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    if isinstance(value, list) and not isinstance(value, _Set):
        return all(_held(item) for item in value)
    return False  # a fraction (its text is OPA's, its double may not be), a set


def _literal(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def _outermost(changes: list[Change]) -> list[Change]:
    """Folds that do not sit inside another fold."""
    return [c for c in changes if not any(o is not c and o.start <= c.start and c.end <= o.end for o in changes)]


def _huge(text: bytes) -> bool:
    """Whether a number is written with more digits, or a larger exponent, than computing it exactly is worth."""
    exponent = _EXPONENT.search(text)
    power = exponent[1].lstrip(b"+-").lstrip(b"0") if exponent else b""
    return len(text) > _MOST_DIGITS or len(power) > 3 or int(power or b"0") > _MOST_DIGITS


def _too_long(text: bytes) -> str | None:
    """_held_otherwise of a literal with more digits, or a larger exponent, than any a double holds exactly:
    regorus's own error where a double cannot hold it at all (inf), none for a zero, else refused."""
    mantissa = _EXPONENT.sub(b"", text)
    if not re.search(rb"[1-9]", mantissa) or (not _INTEGER.fullmatch(text) and math.isinf(float(text))):
        return None
    return (
        f"the number {text[:40].decode()}... is written with more digits than the embedded engine holds "
        "exactly: write it as a string, or use --engine opa"
    )


def _held_otherwise(text: bytes) -> str | None:
    """Why regorus would hold the literal `text` otherwise than OPA, or None."""
    if _huge(text):
        return _too_long(text)
    if _INTEGER.fullmatch(text):
        value, double = int(text), float(text)  # a double beyond its range is inf
        if not -(2**63) <= value < 2**64 and not (math.isfinite(double) and int(double) == value):
            return (
                f"the integer {text.decode()} is beyond 64 bits and not a double, which the embedded engine "
                "would round: write it as a string, or use --engine opa"
            )
        return None
    try:
        written, double = Fraction(text.decode().replace("_", "")), float(text)
    except (ValueError, OverflowError):
        return None  # regorus's own error at load
    if not math.isfinite(double) or written == exact_value(double):
        return None
    shown = str(int(double)) if double.is_integer() else repr(double)
    return (
        f"the number {text.decode()} is not held exactly by the embedded engine's 64-bit double "
        f"(it would read as {shown}): write fewer digits, or use --engine opa"
    )
