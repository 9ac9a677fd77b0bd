"""The input guard: what any engine may be given as `input` or data.

Both engines must see the same value the caller sent, or refuse it; neither
may crash. Measured on regorus 0.13 (gordon-to-regorus): a string holding a
lone UTF-16 surrogate segfaults `set_input`; an integer beyond 64 bits
silently becomes a float (2**64+5 -> 1.8446744073709552e19) while OPA keeps
it exact; NaN and Infinity fail only when a result is serialised; nesting of
tens of thousands of levels overflows its stack. So every value is checked
here first, and a refusal names the problem and its JSON path:

* strings (values and keys) must be Unicode scalar values: no lone surrogates;
* integers must lie in the int64 range, [-2**63, 2**63-1]: exact in both
  engines, and Kubernetes' own integer type (its JSON decoder turns larger
  integers into floats);
* floats must be finite (JSON has no NaN or Infinity), and beyond 2**53 hold
  the number written (`1e23` is the double 99999999999999991611392, which
  the embedded engine computes with; OPA keeps 10**23);
* nesting at most MAX_DEPTH objects/arrays deep: far below Python's recursion
  limit, with room for what `/mutate` does to an object (deepcopy, jsonpatch
  diff) and for the frames of the server around it;
* only JSON types: objects with string keys, arrays (lists, tuples, sets),
  strings, numbers, booleans, null.

`parse_json` is the byte-level door for request bodies: UTF-8 only (no BOM,
no UTF-16/32), then the same checks.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from regokite.errors import RegokiteError

MAX_DEPTH = 100
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
# Longest decimal literal that can be in range ("-9223372036854775808"): a
# longer one is refused before Python converts it (its 4300-digit limit
# would raise a ValueError mid-parse).
_MAX_INT_LITERAL = 20


class InputRejected(RegokiteError, ValueError):
    """A value no engine may evaluate: `path` is where, `problem` is what."""

    def __init__(self, problem: str, path: str = "") -> None:
        self.problem = problem
        self.path = path
        super().__init__(f"{path}: {problem}" if path else problem)


def check(value: Any, root: str = "input", *, int_max: int = INT_MAX) -> None:
    """Raise InputRejected for the first value that breaks the rules above.

    `int_max` 2**64-1 is for values regokite computes itself (an extension
    builtin's result, such as a certificate serial): regorus holds u64 exactly,
    and a larger serial is its nearest double (documented), not refused.

    A flat pass over the containers, level by level, settles the usual case
    (about 0.1 us a value); anything it doubts goes to a second walk that
    decides exactly and names the path. Both are iterative, so a value nested
    deeper than Python's recursion limit is refused, not a crash.
    """
    if not _plainly_valid(value, int_max):
        _explain(value, root, int_max)


_DOUBLE_EXACT = 2.0**53  # from here on a double is an integer, and may not be the one written


def _plainly_valid(value: Any, int_max: int) -> bool:
    """True when `value` is certainly fine; False when unsure (tuples, sets, subclasses too). The value
    goes in a list of its own, so a string or a number (an extension's result) is settled here too."""
    level = [[value]]
    for _ in range(MAX_DEPTH):
        deeper: list[Any] = []
        for container in level:
            kind = type(container)
            if kind is dict:
                for key in container:
                    if type(key) is not str or (not key.isascii() and _has_surrogate(key)):
                        return False
                values: Any = container.values()
            elif kind is list:
                values = container
            else:
                return False
            for item in values:
                kind = type(item)
                if kind is str:
                    if not item.isascii() and _has_surrogate(item):
                        return False
                elif kind is dict or kind is list:
                    deeper.append(item)
                elif kind is int:
                    if item > int_max or item < INT_MIN:
                        return False
                elif kind is float:
                    if item - item != 0 or not -_DOUBLE_EXACT < item < _DOUBLE_EXACT:  # NaN, inf, 1e23
                        return False
                elif kind is not bool and item is not None:
                    return False
        if not deeper:
            return True
        level = deeper
    return False


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _explain(value: Any, root: str, int_max: int) -> None:
    """The exact check: raise InputRejected with the path of the first bad value."""
    stack: list[tuple[Any, int, _Link]] = []
    visit = functools.partial(_visit, root=root, stack=stack, int_max=int_max)
    visit(value, 0, None)
    while stack:
        container, depth, link = stack.pop()
        if isinstance(container, Mapping):
            for key, item in container.items():
                if type(key) is not str:
                    raise InputRejected(f"object key {key!r} is not a string", _path(root, link))
                if not key.isascii():
                    _check_text(key, root, (key, link), "object key")
                visit(item, depth, (key, link))
        else:
            for index, item in enumerate(container):
                visit(item, depth, (index, link))


_Link = tuple[Any, "_Link"] | None  # (key, parent's link): the path from the root, backwards


def _visit(item: Any, depth: int, here: _Link, *, root: str, stack: list[tuple[Any, int, _Link]], int_max: int) -> None:
    if isinstance(item, str):
        if not item.isascii():
            _check_text(item, root, here)
    elif isinstance(item, Mapping | list | tuple | set | frozenset):
        if depth >= MAX_DEPTH:
            raise InputRejected(f"nested deeper than {MAX_DEPTH} levels", _path(root, here))
        stack.append((item, depth + 1, here))
    elif isinstance(item, bool) or item is None:
        pass
    elif isinstance(item, int):
        if not INT_MIN <= item <= int_max:
            upper = "2^63-1" if int_max == INT_MAX else str(int_max)
            raise InputRejected(f"integer {item} is outside [-2^63, {upper}]", _path(root, here))
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise InputRejected(f"{item} is not a JSON number", _path(root, here))
        if int_max == INT_MAX and abs(item) >= _DOUBLE_EXACT and Fraction(repr(item)) != Fraction(item):
            raise InputRejected(
                f"number {item!r} is not held exactly by a 64-bit double (it is {int(item)} there): "
                "write it as an integer within int64, or as a string",
                _path(root, here),
            )
    else:
        raise InputRejected(f"a {type(item).__name__} is not a JSON value", _path(root, here))


def parse_json(body: bytes) -> Any:
    """Decode UTF-8 JSON text and check it; raise InputRejected naming the problem."""
    if body.startswith(b"\xef\xbb\xbf"):
        raise InputRejected("body is not UTF-8 JSON: it starts with a byte order mark")
    if body[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in body[:4]:
        raise InputRejected("body is not UTF-8 JSON: it looks like UTF-16 or UTF-32")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRejected(f"body is not UTF-8 JSON: {exc.reason} at byte {exc.start}") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise InputRejected(f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputRejected(f"body is nested deeper than {MAX_DEPTH} levels") from None
    check(value, root="body")
    return value


def _refuse_constant(name: str) -> Any:
    raise InputRejected(f"{name} is not a JSON number")


def _parse_int(literal: str) -> int:
    if len(literal) > _MAX_INT_LITERAL:
        raise InputRejected(f"integer of {len(literal.lstrip('-'))} digits is outside [-2^63, 2^63-1]")
    return int(literal)


def _check_text(text: str, root: str, here: _Link, what: str = "string") -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise InputRejected(
            f"{what} holds a lone surrogate U+{code:04X} (not a Unicode scalar value)", _path(root, here)
        ) from None


def _path(root: str, link: _Link) -> str:
    parts: list[Any] = []
    while link:
        key, link = link
        parts.append(key)
    out = root
    for key in reversed(parts):
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if _plain(key) else f"[{json.dumps(key)}]"
    return out if len(out) <= 200 else f"{root}...{out[-150:]}"


def _plain(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier() and key.isascii()
