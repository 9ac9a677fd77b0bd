"""The stage table, in the order the stages run (as OPA's compiler lists its stages in v1/ast/compile.go),
and the loop that runs it.

Each stage reads the modules as the stages before left them. A stage run
once sees every module; a stage run to a fixed point runs again on the
modules it changed, until it changes none (a construct nested in another
is rewritten in a later round). Every stage can be turned off by name
(`rewrite(..., without=...)`): its test shows what it was for.
"""

from __future__ import annotations

from regokite.bundle import Module
from regokite.engine.rewrite import (
    arithmetic,
    bodies,
    builtin_mocks,
    comparisons,
    function_mocks,
    imports,
    lenient,
    lines,
    memberships,
    negations,
    numbers,
    outputs,
    routes,
    sprintf,
)
from regokite.engine.rewrite.base import Changes, Options, Pass, Stage, each
from regokite.engine.rewrite.edits import Columns, Moves, apply, engine_name, masked

_ROUNDS = 16  # a fixed point's most rounds: nesting deeper than this is left to regorus's own reading

STAGES: tuple[Stage, ...] = (
    Stage("CheckNumbers", each(numbers.check)),
    Stage("SplitBodies", each(bodies.split)),
    Stage("SplitLines", each(lines.split)),
    Stage("OutputArguments", each(outputs.rewrite)),
    Stage("BuiltinMocks", builtin_mocks.rewrite),
    Stage("RouteBuiltins", routes.rewrite),
    Stage("FunctionMocks", function_mocks.rewrite),
    Stage("Negations", negations.rewrite, fixed_point=True),
    Stage("Sprintf", each(sprintf.rewrite, lambda m: "sprintf" in m.text), fixed_point=True),
    Stage("Comparisons", each(comparisons.rewrite, lambda m: "<" in m.text or ">" in m.text), fixed_point=True),
    Stage(
        "Arithmetic",
        each(arithmetic.rewrite, lambda m: arithmetic.SIGN.search(masked(m.text.encode())) is not None),
        fixed_point=True,
    ),
    Stage(
        "Memberships", each(memberships.rewrite, lambda m: memberships.IN.search(m.text) is not None), fixed_point=True
    ),
    Stage("LenientCalls", lenient.rewrite, applies=lambda options: bool(options.lenient)),
    Stage("DirectImports", each(imports.rewrite, lambda m: "import" in m.text)),
)
NAMES = frozenset(stage.name for stage in STAGES)


def run(
    modules: tuple[Module, ...], options: Options, without: frozenset[str] = frozenset()
) -> tuple[tuple[Module, ...], Columns]:
    """Every stage of STAGES but those named in `without`, in order; the modules as rewritten and the map back."""
    current = list(modules)
    maps: list[Columns] = []
    for stage in STAGES:
        if stage.name in without or not stage.applies(options):
            continue
        pending = frozenset(range(len(current)))
        for _ in range(_ROUNDS if stage.fixed_point else 1):
            done = Columns.chain(*maps)
            moves, changed = _apply(current, stage.function(Pass(tuple(current), pending, options, done)))
            if not changed:
                break
            maps.append(moves)
            pending = changed
    return tuple(current), Columns.chain(*maps)


def _apply(current: list[Module], found: Changes) -> tuple[Columns, frozenset[int]]:
    """Make each module's changes in `current`; the map back through them, and which modules changed."""
    moves: Moves = {}
    changed = set()
    for identity, changes in found:
        if changes:
            current[identity], moves[engine_name(current[identity])] = apply(current[identity], changes)
            changed.add(identity)
    return Columns(moves), frozenset(changed)
