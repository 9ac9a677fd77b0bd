"""OPA's default (not strict) builtin errors on the embedded engine: a builtin's error makes its call
undefined (OPA's topdown records it and goes on; `opa eval`, `opa test`, the REST API without
`strict-builtin-errors` and Gatekeeper evaluate so).

regorus has no such switch, so the calls that err are found as they err: an evaluation that errs at
a place where a builtin is called is run again on the modules rewritten with the calls written there
undefined where they err (the rewrite's LenientCalls stage, `rewrite.rewrite(..., lenient=)`), until it
answers or errs where no builtin is called (a rule conflict, an object key conflict, a `with`: errors
in OPA too) or where the lenient call itself refused (a Refusal: OPA answers where this engine
cannot). Calls that never err keep their strict, fast form. The places found stay lenient for the
engine's later evaluations (`Places`, shared by its threads); each thread builds the engine of a new
set of places from an engine holding its data and no modules (embedded.py), so no data is loaded
again for it.
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from regokite.bundle import Module
from regokite.engine.builtin_errors import COMPILE_ERROR, UndefinedCall
from regokite.engine.extensions import LENIENT
from regokite.engine.rewrite import Columns
from regokite.errors import Location

ROUNDS = 32  # new places one evaluation may find before it is given up as an error

_LENIENT_CALL = re.compile(re.escape(LENIENT) + r'\("([^"]+)"')
_EXTENSION = re.compile(r"^extension '[\w.]+' raises Python error: \w+: ")  # regorus's words around a Python error
_NAMED = re.compile(r"^`([\w.]+)`|^([\w.]+): ")  # `count` requires ..., div: divide by zero
_INTERNAL = "__regokite_"  # the rewrite's helpers: the log names the builtin they answer for


@dataclass(frozen=True)
class Variant:
    """The modules regorus reads for one set of lenient places, and the map back to their columns."""

    lenient: frozenset[Location]
    modules: tuple[Module, ...]
    columns: Columns
    builtins: Mapping[Location, tuple[str, ...]] = field(default_factory=dict)  # made lenient at each place


class Places:
    """The lenient places of one engine and the variant reading them, for all its threads."""

    def __init__(self, base: Variant, build: Callable[[frozenset[Location]], Variant]) -> None:
        self.current = base
        self._build = build
        self._lock = threading.Lock()
        self._no_call: set[Location] = set()  # places where an error was met and no builtin is called

    def covering(self, message: str, location: Location | None, tried: Variant) -> Variant | None:
        """The variant in which the builtin call that erred at `location` on `tried` is undefined where it
        errs; None where the error is no builtin's (no call there, an error OPA's compiler raises, or
        one met at a place `tried` already made lenient)."""
        if location is None or location in tried.lenient or COMPILE_ERROR.search(message):
            return None
        with self._lock:
            current = self.current
            if location in current.lenient:
                return current  # another evaluation found it meanwhile
            if location in self._no_call:
                return None
            found = self._build(current.lenient | {location})
            if found.modules == current.modules:
                self._no_call.add(location)
                return None
            builtins = {**current.builtins, location: _added_calls(current.modules, found.modules)}
            self.current = Variant(found.lenient, found.modules, found.columns, builtins)
            return self.current


def undefined_calls(
    variant: Variant,
    found: list[tuple[Location, str]],
    swallowed: list[tuple[str, str]],
    packages: Mapping[str, str],
    placed: Callable[[Location], Location | None],
) -> list[UndefinedCall]:
    """What one evaluation made undefined, one per place: the places it `found` erring (with their
    errors) and the errors the lenient calls `swallowed` (builtin, error), each given the place of
    `variant` making that builtin lenient (every such place, where several do). Places are in the
    modules as written; `placed` says where they are in the files holding them (a template's YAML)."""
    calls: dict[str, UndefinedCall] = {}
    for location, message in found:
        builtin = _shown(variant.builtins.get(location, ()), message)
        where = str(placed(location))
        calls[where] = UndefinedCall(where, packages.get(location.file, ""), builtin, _clean(message))
    for builtin, message in swallowed:
        places = sorted((p for p, names in variant.builtins.items() if builtin in names), key=str)
        if any(location in places for location, _ in found):
            continue  # the retry on the variant that found it met it again
        where = " or ".join(str(placed(p)) for p in places)
        if where not in calls:
            package = packages.get(places[0].file, "") if places else ""
            calls[where] = UndefinedCall(where, package, _shown((builtin,), message), _clean(message))
    return list(calls.values())


def _added_calls(before: tuple[Module, ...], after: tuple[Module, ...]) -> tuple[str, ...]:
    """The builtins whose calls `after` makes lenient beyond `before`."""
    counted = collections.Counter(n for m in after for n in _LENIENT_CALL.findall(m.text))
    counted.subtract(n for m in before for n in _LENIENT_CALL.findall(m.text))
    return tuple(sorted(n for n, more in counted.items() if more > 0))


def _clean(message: str) -> str:
    return _EXTENSION.sub("", message)


def _shown(names: tuple[str, ...], message: str) -> str:
    """The builtins as the log names them: a helper of the rewrite's (arithmetic) by the builtin its
    error names (`div`), as does a call made lenient in Rego (count)."""
    named = _NAMED.search(_clean(message))
    said = next((n for n in named.groups() if n), "") if named else ""
    shown = [said if n.startswith(_INTERNAL) else n for n in names] or [said]
    return ", ".join(sorted({n for n in shown if n}))
