"""Builtins regorus lacks, added in Python through `Engine.add_extension`.

Each gives OPA's result on the same operands, or an evaluation error where
OPA raises a builtin error. `provided` is the list the load-time capability
check accepts beside regorus's own builtins; `http.send` is in it only when
hosts are allowed (regorus lists an `http.send` of its own that evaluates to
undefined, so without the flag it must be refused, never called).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import regorus

from regokite import input_guard
from regokite.engine import builtin_errors

# every module of the package: each registers its builtins (common.builtin) as it is imported
from regokite.engine.extensions import (  # noqa: F401
    arithmetic,
    arrays,
    aws,
    certificates,
    cidr,
    decoding,
    deprecated,
    formatting,
    glob_intersection,
    globs,
    graphql,
    graphs,
    hashing,
    interpolation,
    jwt,
    jwt_sign,
    keypairs,
    lookup,
    private_keys,
    regexes,
    rounding,
    runtime,
    schemas,
    semver,
    strings,
    templates,
    times,
    units,
    yamlcheck,
)
from regokite.engine.extensions.common import BUILTINS, BuiltinError, Refusal
from regokite.engine.extensions.external_data import MUTATION_NAME, ExternalData
from regokite.engine.extensions.http_send import DEFAULT_TIMEOUT, HttpSend
from regokite.engine.extensions.internal import (
    ARITH,
    FAIL,
    HTTP_SEND_OFF,
    LENIENT,
    NUMBER_TEXT,
    REPLACE_EMPTY,
    SPRINTF,
    STRLEN,
    TEMPLATE,
    TEXT,
    UNORDERED,
    YAML_PLAIN,
    YAML_SINGLE,
)
from regokite.errors import engine_diagnostic

U64_MAX = 2**64 - 1  # regorus holds integers up to u64 exactly (common.big_number)


@dataclass(frozen=True)
class ExtensionOptions:
    """http_send_hosts: HOST or HOST:PORT that http.send may reach (none: http.send refused).
    http_send_timeout: the longest any http.send may take, whatever its `timeout` asks.
    external_data: Gatekeeper's `external_data` (its Providers, cache and client certificate)."""

    http_send_hosts: tuple[str, ...] = ()
    http_send_timeout: float = DEFAULT_TIMEOUT
    external_data: ExternalData = field(default_factory=ExternalData, compare=False)


@dataclass(frozen=True)
class Internal:
    """A builtin the rewriter calls (extensions.internal names them).

    errors: what its errors are. "builtin": the error of the OPA builtin it answers for, which OPA's
    non-strict evaluation makes undefined (a lenient call may name it: it is called here directly).
    "always": an error in every mode (regokite's refusal to answer otherwise than OPA, or OPA's own
    evaluation error, such as a template string's conflict).
    "none": it fails only on operands the rewrite never passes.
    """

    arity: int
    function: Callable[..., object]
    errors: str
    guarded: bool = False  # its result passes the input guard (it may hold text from the operands)


def _strlen(text: object) -> int:
    """A string's length in characters, as OPA's count (regorus's counts UTF-16 units: 2 for U+1F600)."""
    if not isinstance(text, str):
        raise TypeError(f"{STRLEN}: operand 1 must be string")
    return len(text)


def _unordered(builtin: object) -> object:
    """Always an error: `builtin` met a set and an object inside the items it orders.

    OPA orders an object before a set, regorus a set before an object. Where
    the two meet at the top of the compared values the rewrite orders them as
    OPA; deeper inside (`sort([[{1}], [{"a": 1}]])`) it cannot, so the
    evaluation fails rather than answer otherwise than OPA.
    """
    raise Refusal(
        f"{builtin}: the values compared hold a set and an object inside them, which the embedded engine "
        "orders otherwise than OPA (an object before a set): compare values without both, or use --engine opa"
    )


def _http_send_off(_request: object) -> object:
    raise BuiltinError(
        "http.send: not enabled in the embedded engine (only a `with http.send as ...` may replace it): "
        "allow the hosts it may call with --allow-http-send HOST[:PORT], or use --engine opa"
    )


def _fail(message: object) -> object:
    """Always the builtin's error: a routed builtin regorus left undefined where OPA errs (rewrite.routes)."""
    raise BuiltinError(str(message))


def _lenient(name: object, arguments: object, place: object) -> list[object]:
    """[the builtin's value], or [] where it errs (OPA's non-strict evaluation: the call is undefined).
    `place`: the call's FILE:LINE:COL as written (rewrite.lenient), for whoever reports the errors swallowed.

    regorus has no switch for it, so the call is made here: an extension of
    regokite's directly, one of regorus's on an engine of its own.
    """
    if not isinstance(name, str) or not isinstance(arguments, list):
        return []
    internal = INTERNAL.get(name)
    extension = internal.function if internal and internal.errors == "builtin" else BUILTINS.get(name, (0, None))[1]
    operands = ", ".join(f"input[{i}]" for i in range(len(arguments)))
    engine = None
    try:
        if extension is not None:
            return [extension(*arguments)]
        engine = regorus.Engine()
        engine.set_input(arguments)
        found = engine.eval_query(f"__value := {name}({operands})")["result"]
    except (KeyboardInterrupt, SystemExit, Refusal):
        raise  # a Refusal: OPA answers where this engine cannot, so it is no builtin error to make undefined
    except BaseException as exc:  # the builtin's error, whatever its type (a panic included): undefined
        if engine is not None and _answers(engine, f"_ = {name}({operands})"):
            raise _unheld(name) from exc
        builtin_errors.swallowed(name, _error_text(exc))
        return []
    if found and _saturated(found[0]["bindings"]["__value"]):
        raise _unheld(name)
    return [found[0]["bindings"]["__value"]] if found else []


def _unheld(name: str) -> Refusal:
    return Refusal(
        f"{name}: its value (a number beyond 64-bit integers) cannot pass through Python where its builtin "
        "errors are made undefined: use --engine opa"
    )


def _saturated(value: object) -> bool:
    """Whether `value` holds U64_MAX, which regorus hands to Python for any number from 2**64 up."""
    if isinstance(value, dict):
        return any(_saturated(k) or _saturated(v) for k, v in value.items())
    if isinstance(value, list | set | frozenset | tuple):
        return any(_saturated(v) for v in value)
    return type(value) is int and value == U64_MAX


def _answers(engine: regorus.Engine, query: str) -> bool:
    """Whether the builtin called in `query` answers without an error (its value is not handed back)."""
    try:
        engine.eval_query(query)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # the builtin's error (a panic included)
        return False
    return True


def _error_text(exc: BaseException) -> str:
    """A builtin's error as the log reads it: regorus's message without its source excerpt."""
    return engine_diagnostic(str(exc))[0]


INTERNAL: dict[str, Internal] = {
    ARITH: Internal(3, arithmetic.arith, "builtin"),
    NUMBER_TEXT: Internal(2, arithmetic.number_text, "builtin"),
    REPLACE_EMPTY: Internal(2, strings.replace_empty, "builtin", guarded=True),
    SPRINTF: Internal(3, formatting.converted_sprintf, "builtin", guarded=True),
    STRLEN: Internal(1, _strlen, "none"),
    FAIL: Internal(1, _fail, "builtin"),
    LENIENT: Internal(3, _lenient, "none", guarded=True),
    UNORDERED: Internal(1, _unordered, "always"),
    TEMPLATE: Internal(1, interpolation.template, "always"),
    TEXT: Internal(2, interpolation.text, "always"),
    YAML_PLAIN: Internal(1, yamlcheck.plain, "always"),
    YAML_SINGLE: Internal(1, yamlcheck.single, "always"),
    HTTP_SEND_OFF: Internal(1, _http_send_off, "always"),
}


def arities() -> dict[str, int]:
    """Each extension builtin's number of operands (its calls may add an output operand, as OPA's)."""
    return {name: arity for name, (arity, _) in BUILTINS.items()} | {
        "http.send": 1,
        "external_data": 1,
        MUTATION_NAME: 1,
    }


def _internal(options: ExtensionOptions) -> dict[str, Internal]:
    """The internal builtins an engine with these options has: HTTP_SEND_OFF where http.send is off."""
    return {n: b for n, b in INTERNAL.items() if n != HTTP_SEND_OFF or not options.http_send_hosts}


def provided(options: ExtensionOptions) -> frozenset[str]:
    """The builtin names `install` adds."""
    names = set(BUILTINS) | set(_internal(options)) | {"external_data", MUTATION_NAME}
    if options.http_send_hosts:
        names.add("http.send")
    return frozenset(names)


def install(engine: regorus.Engine, options: ExtensionOptions) -> None:
    """Add every extension builtin to `engine` (before it is cloned: clones keep them)."""
    for name, (arity, function) in BUILTINS.items():
        engine.add_extension(name, arity, _guarded(name, function))
    for name, internal in _internal(options).items():
        engine.add_extension(
            name, internal.arity, _guarded(name, internal.function) if internal.guarded else internal.function
        )
    engine.add_extension("external_data", 1, _guarded("external_data", options.external_data))
    engine.add_extension(MUTATION_NAME, 1, _guarded(MUTATION_NAME, options.external_data.for_mutation))
    if options.http_send_hosts:
        send = HttpSend(options.http_send_hosts, options.http_send_timeout)
        engine.add_extension("http.send", 1, _guarded("http.send", send))


def _guarded(name: str, function: Callable[..., object]) -> Callable[..., object]:
    """`function` whose result passes the input guard before regorus gets it.

    What a builtin returns comes from its operands or the network (a JWT
    payload, an http.send body): a lone surrogate there would segfault
    regorus as surely as in the input. A refusal is the builtin's error.
    """

    def call(*args: object) -> object:
        result = function(*args)
        input_guard.check(result, root=f"{name} result", int_max=U64_MAX)
        return result

    return call


__all__ = ["INTERNAL", "ExtensionOptions", "Internal", "arities", "install", "provided"]
