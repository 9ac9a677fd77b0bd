"""Rewrite the Rego that regorus reads otherwise than OPA, before regorus parses it.

Each stage (pipeline.STAGES, one module each) is exact: the module as
rewritten means to regorus what it means to OPA as written. Lines are
kept; columns move on the lines touched, and the `Columns` returned maps
the engine's locations back (edits). What cannot be rewritten without
changing the meaning is refused at load with file:line:col.

    rewrite(modules)      -> (modules as regorus must read them, Columns)
    located(error, ...)   -> a load error raised on the rewritten modules, pointing into the written ones
    parsed(modules)       -> the modules' ASTs, from the parses the stages cached
    query(text)           -> a query as regorus must read it (its template strings lowered)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from regokite.bundle import Module
from regokite.engine.extensions import ExtensionOptions
from regokite.engine.rewrite.base import Options
from regokite.engine.rewrite.edits import Columns, engine_name, located
from regokite.engine.rewrite.imports import check_shadowing
from regokite.engine.rewrite.pipeline import NAMES, STAGES, run
from regokite.engine.rewrite.routes import ALWAYS_ROUTED
from regokite.engine.rewrite.templates import lowered as query
from regokite.engine.rewrite.tree import new_engine, parse
from regokite.errors import Location

__all__ = [
    "ALWAYS_ROUTED",
    "NAMES",
    "STAGES",
    "Columns",
    "check_shadowing",
    "located",
    "new_engine",
    "parsed",
    "query",
    "rewrite",
]


def rewrite(
    modules: Sequence[Module],
    *,
    lenient: frozenset[Location] = frozenset(),
    mockable: frozenset[str] | None = None,
    without: frozenset[str] = frozenset(),
) -> tuple[tuple[Module, ...], Columns]:
    """`modules` as regorus must read them to answer as OPA, and the map back to their columns.

    A module regorus cannot parse is left as written where no stage applies
    (loading it reports the error). Raises PolicyLoadError for a construct
    with no exact rewrite. `lenient`: where the builtin calls at these
    locations (as written) err, they are undefined instead, as in OPA's
    evaluation without `strict-builtin-errors`. `mockable`: the extension builtins the engine
    has that a `with` may replace (by default those of default ExtensionOptions). `without`: stages
    (by name) not to run, to see what each is for.
    """
    if mockable is None:
        from regokite.engine.catalog import extension_only  # catalog reaches regorus's list lazily

        mockable = extension_only(ExtensionOptions())
    unknown = without - NAMES
    if unknown:
        raise ValueError(f"no rewrite stage named {', '.join(sorted(unknown))}")
    return _rewrite(tuple(modules), Options(lenient, mockable), without)


@functools.lru_cache(maxsize=64)
def _rewrite(
    modules: tuple[Module, ...], options: Options, without: frozenset[str]
) -> tuple[tuple[Module, ...], Columns]:
    # cached: outline() and the engine rewrite the same modules, and gator suites build an engine per case
    return run(modules, options, without)


def parsed(modules: Sequence[Module]) -> list[dict[str, Any]] | None:
    """The modules' ASTs as `get_ast_as_json` of an engine holding them lists them, or None where
    one does not parse. From the stages' cached parses: loading does not parse twice (the entries
    are shared: never modified)."""
    entries = []
    for module in modules:
        tree, failure = parse(module)
        if failure is not None or tree is None:
            return None
        entries.append({"ast": tree.tree, "source": {"file": engine_name(module), "contents": module.text}})
    return entries
