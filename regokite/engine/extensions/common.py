"""What every extension builtin shares: OPA's operand checks and error style.

A builtin that fails raises BuiltinError; regorus turns any exception raised by
an extension into an evaluation error at the call's file:line:col, which is
what OPA does with a builtin error under strict evaluation (and what `opa
test` reports). Python cannot make an extension undefined, so the builtins
added here are the ones whose OPA result is always a value or an error.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import regorus


class BuiltinError(Exception):
    """A builtin's own error, worded as OPA words it (`name: message`)."""


class Refusal(BuiltinError):
    """The embedded engine cannot answer this call as OPA would: an error even where OPA's non-strict
    evaluation (`regokite test`) makes a builtin's error undefined, since OPA answers there."""


class Conflict(Refusal):
    """OPA's own evaluation error (its eval_conflict_error), not a builtin's: an error in every mode."""


class Panic(Refusal):
    """Where OPA's builtin panics in Go (an integer that wraps, an index out of range): its evaluator reports
    the panic as an error, in every mode."""


Builtin = tuple[int, Callable[..., object]]  # (its number of operands, its function)
F = TypeVar("F", bound=Callable[..., object])

BUILTINS: dict[str, Builtin] = {}
"""Every extension builtin by name, as `@builtin` registered it when its module was imported (the
package imports them all): what `install` adds, `arities` and `provided` list."""


def builtin(name: str, *, arity: int | None = None) -> Callable[[F], F]:
    """Register the function decorated (or given: `builtin(name)(function)`) as the extension builtin
    `name`, whose operands are its parameters; `arity` only where its signature cannot say (*args)."""

    def register(function: F) -> F:
        if name in BUILTINS:
            first = BUILTINS[name][1].__module__
            raise ValueError(f"extension builtin {name}: registered by {first} and again by {function.__module__}")
        BUILTINS[name] = (_arity(name, function) if arity is None else arity, function)
        return function

    return register


def _arity(name: str, function: Callable[..., object]) -> int:
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind not in positional or p.default is not p.empty for p in parameters):
        raise TypeError(f"extension builtin {name}: its signature does not say its operands: give arity=")
    return len(parameters)


_TYPE_NAMES = {bool: "boolean", str: "string", list: "array", dict: "object", set: "set", frozenset: "set"}


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def string_operand(name: str, value: Any, position: int) -> str:
    if not isinstance(value, str):
        raise BuiltinError(f"{name}: operand {position} must be string but got {type_name(value)}")
    return value


def int_operand(name: str, value: Any, position: int) -> int:
    """OPA's IntOperand: an integer number that fits a Go int (a float, even 2.0, is refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuiltinError(f"{name}: operand {position} must be number but got {type_name(value)}")
    if isinstance(value, float) or not -(2**63) <= value < 2**63:
        raise BuiltinError(f"{name}: operand {position} must be integer number but got floating-point number")
    return value


def object_operand(name: str, value: Any, position: int) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise BuiltinError(f"{name}: operand {position} must be object but got {type_name(value)}")
    return value


def json_object(text: str, failure: str) -> dict[str, Any]:
    """`text` parsed as a JSON object, else a BuiltinError `failure: why` (a JWS header, a JWK set)."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise BuiltinError(f"{failure}: {exc}") from None
    if not isinstance(parsed, dict):
        raise BuiltinError(f"{failure}: not an object")
    return parsed


def base64url_decode(text: str) -> bytes:
    """OPA's base64url.decode: padding optional."""
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BuiltinError(f"illegal base64 data: {exc}") from None


def base64_std_decode(text: str) -> bytes:
    """Go's base64.StdEncoding.DecodeString (which skips line breaks)."""
    try:
        return base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BuiltinError(f"illegal base64 data: {exc}") from None


def b64(data: bytes | None) -> str | None:
    """A Go []byte as encoding/json writes it: standard base64, nil as null."""
    return None if data is None else base64.b64encode(data).decode()


def big_number(value: int) -> int | float | str:
    """A Go big.Int as a regorus number.

    regorus numbers are 64-bit integers or doubles (a Rego literal beyond 2**64
    is a double there too), so larger values come back as the nearest double,
    and those beyond a double's range (an RSA modulus) as a decimal string.
    """
    if -(2**63) <= value < 2**64:
        return value
    try:
        converted = float(value)
    except OverflowError:
        return str(value)
    return converted if math.isfinite(converted) else str(value)


def go_json(name: str, value: Any) -> str:
    """OPA's value as Go's encoding/json writes it (OPA's ast.JSON, then json.Marshal): object keys
    sorted, no spaces, `<`, `>` and `&` escaped, a set as its members in order. A Refusal for what
    Go could write otherwise than here: a number that is not an integer (OPA keeps the text it was
    written as, `2.50`, `5.0`, `1e3`) and a set holding a boolean (Python merges `true` and `1`)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(name, str(k))}:{go_json(name, v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(name, v) for v in value) + "]"
    if isinstance(value, set | frozenset):
        if any(isinstance(m, bool) for m in value):
            raise Refusal(f"{name}: a set holding a boolean reaches Python with `true` and `1` as one member")
        return go_json(name, sorted(value, key=lambda m: (m is not None, isinstance(m, str), m)))
    if isinstance(value, float):  # OPA writes a number's text as given (2.50, 5.0, 1e3); regorus kept none
        raise Refusal(f"{name}: the number {value!r} may be written otherwise by OPA, which keeps its text")
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def native(builtin: str) -> Callable[..., Any]:
    """`builtin` of regorus itself, on an engine of the calling thread's (a regorus engine is pinned to the
    thread that made it): for an extension answering as regorus where it can."""

    def call(*arguments: Any) -> Any:
        engines = _engines.__dict__.setdefault("by_builtin", {})
        if builtin not in engines:
            operands = ", ".join(f"x[{i}]" for i in range(len(arguments)))
            engines[builtin] = regorus.Engine()
            engines[builtin].add_policy("native.rego", f"package __regokite\n\nf(x) := {builtin}({operands})\n")
        engine = engines[builtin].clone()
        engine.set_input(list(arguments))
        found = engine.eval_query("__value := data.__regokite.f(input)")["result"]
        if not found:
            raise BuiltinError(f"{builtin}: no value")
        return found[0]["bindings"]["__value"]

    return call


_engines = threading.local()
