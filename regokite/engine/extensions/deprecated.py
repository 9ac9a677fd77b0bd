"""OPA 1.x's deprecated builtins, which it evaluates under v0 only (its v0 compatibility): re_match,
any, all, set_diff, cast_array, cast_set, cast_string, cast_boolean, cast_null, cast_object,
net.cidr_overlap. Under v1 OPA refuses a module calling one ("deprecated built-in function calls
in expression"); so does the load check (capabilities.check_builtins).

A set reaches Python as a Python set, where `true` and `1` (and `false`, `0`) are one member: where
that could change the answer (a set holding a boolean, an array holding `true` and `1`) the call is
refused (an error) rather than answered otherwise than OPA.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from regokite.engine.extensions import regexes
from regokite.engine.extensions.common import (
    BuiltinError,
    F,
    Refusal,
    builtin,
    native,
    string_operand,
    type_name,
)

_NAMES: list[str] = []


def _deprecated(name: str, *, arity: int | None = None) -> Callable[[F], F]:
    """A builtin OPA 1.x keeps for v0 only: registered as any other, and listed in DEPRECATED."""
    _NAMES.append(name)
    return builtin(name, arity=arity)


def _collection(name: str, value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, set | frozenset):
        return list(value)
    raise BuiltinError(f"{name}: operand 1 must be one of {{array, set}} but got {type_name(value)}")


def _may_hide(members: Iterable[Any]) -> bool:
    """Could a member of this set (from the engine, where Rego's order inserts booleans first) hide
    another? `{true, 1}` arrives as `{True}`: only a set holding a boolean can have lost one."""
    return any(isinstance(m, bool) for m in members)


def _would_merge(members: list[Any]) -> bool:
    """Would a Python set of these array members merge two of OPA's (`true` and `1`, `false` and `0`)?"""
    numbers = {m for m in members if isinstance(m, int | float) and not isinstance(m, bool)}
    return any(isinstance(m, bool) and m in numbers for m in members)


def _refused(name: str) -> Refusal:
    return Refusal(
        f"{name}: a set holding a boolean reaches the embedded engine's Python builtins with `true` and `1` "
        "(`false` and `0`) as one member: use an array, or use --engine opa"
    )


@_deprecated("any")
def any_true(value: Any) -> bool:
    # a set arrives with `true` kept over `1` (inserted first, in Rego's order): membership is exact
    return any(m is True for m in _collection("any", value))


@_deprecated("all")
def all_true(value: Any) -> bool:
    members = _collection("all", value)
    if isinstance(value, set | frozenset) and any(m is True for m in members):
        raise _refused("all")  # {true, 1} arrives as {true}, where OPA answers false
    return all(m is True for m in members)


@_deprecated("set_diff")
def set_diff(a: Any, b: Any) -> set[Any]:
    for position, value in enumerate((a, b), start=1):
        if not isinstance(value, set | frozenset):
            raise BuiltinError(f"set_diff: operand {position} must be set but got {type_name(value)}")
    if _may_hide(a) or _may_hide(b):
        raise _refused("set_diff")
    return set(a) - set(b)


@_deprecated("cast_array")
def cast_array(value: Any) -> list[Any]:
    members = _collection("cast_array", value)
    if isinstance(value, list):
        return value
    if _may_hide(members):
        raise _refused("cast_array")
    return sorted(members, key=_order)


def _order(member: Any) -> tuple[int, Any]:
    """OPA's order of a set's scalar members (a set of collections cannot reach Python)."""
    if member is None:
        return (0, 0)
    if isinstance(member, int | float):
        return (2, member)
    return (3, member.encode())


@_deprecated("cast_set")
def cast_set(value: Any) -> set[Any]:
    members = _collection("cast_set", value)
    if _would_merge(members) if isinstance(value, list) else _may_hide(members):
        raise _refused("cast_set")
    return set(members)


@_deprecated("cast_string")
def cast_string(value: Any) -> str:
    return string_operand("cast_string", value, 1)


@_deprecated("cast_boolean")
def cast_boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BuiltinError(f"cast_boolean: operand 1 must be boolean but got {type_name(value)}")
    return value


@_deprecated("cast_null")
def cast_null(value: Any) -> None:
    if value is not None:
        raise BuiltinError(f"cast_null: operand 1 must be null but got {type_name(value)}")
    return None


@_deprecated("cast_object")
def cast_object(value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise BuiltinError(f"cast_object: operand 1 must be object but got {type_name(value)}")
    return value


_deprecated("re_match")(regexes.match)
_deprecated("net.cidr_overlap", arity=2)(native("net.cidr_contains"))
DEPRECATED = frozenset(_NAMES)
