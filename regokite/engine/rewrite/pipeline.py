"""The stage table, in the order the stages run (as OPA's compiler lists its stages in v1/ast/compile.go),
and the loop that runs it.

Each stage reads the modules as the stages before left them. A stage run
once sees every module; a stage run to a fixed point runs again on the
modules it changed, until it changes none (a construct nested in another
is rewritten in a later round). Every stage can be turned off by name
(`rewrite(..., without=...)`): its test shows what it was for.
"""

from __future__ import annotations

import functools

from regokite.bundle import Module
from regokite.engine.extensions.internal import TEMPLATE
from regokite.engine.rewrite import (
    arithmetic,
    bodies,
    builtin_mocks,
    comparisons,
    function_mocks,
    head_terms,
    imports,
    imports_first,
    infix,
    key_bindings,
    lenient,
    lines,
    memberships,
    metadata,
    negations,
    notbodies,
    numbers,
    outputs,
    relations,
    routes,
    sprintf,
    templates,
    with_targets,
    with_values,
)
from regokite.engine.rewrite.base import Changes, Options, Pass, Stage, each, each_parsed
from regokite.engine.rewrite.edits import Columns, Moves, apply, engine_name, masked

_ROUNDS = 16  # a fixed point's most rounds: nesting deeper than this is left to regorus's own reading

STAGES: tuple[Stage, ...] = (
    # on the text, before anything parses it: syntax regorus does not read
    Stage("TemplateStrings", each(templates.rewrite, lambda m: "$" in m.text)),
    Stage("NotBodies", each(notbodies.rewrite, lambda m: "future.keywords" in m.text)),
    Stage("ImportsFirst", each(imports_first.rewrite)),
    Stage("Numbers", each_parsed(numbers.rewrite, numbers.wanted)),
    Stage("SplitBodies", each(bodies.split)),
    Stage("SplitLines", each(lines.split)),
    Stage("TemplateArguments", each(templates.arguments, lambda m: TEMPLATE in m.text)),
    # calling forms, as OPA's compiler normalises them (its RewriteExprTerms, ResolveRefs)
    Stage("OutputArguments", each_parsed(outputs.rewrite)),
    Stage("InfixNames", each_parsed(infix.rewrite, lambda m: infix.CALLED.search(m.text) is not None)),
    Stage("Relations", relations.rewrite, fixed_point=True),
    Stage("KeyBindings", each_parsed(key_bindings.rewrite, lambda m: key_bindings.UNIFIES.search(m.text) is not None)),
    Stage("Metadata", metadata.rewrite),
    Stage("WithTargets", with_targets.rewrite),
    Stage("WithValues", with_values.rewrite, fixed_point=True),
    # builtins and `with`s regorus answers otherwise
    Stage("BuiltinMocks", builtin_mocks.rewrite),
    Stage("RouteBuiltins", routes.rewrite),
    Stage("FunctionMocks", function_mocks.rewrite),
    # evaluation order and values, where regorus's differ
    Stage("Negations", negations.rewrite, fixed_point=True),
    Stage("Sprintf", each_parsed(sprintf.rewrite, lambda m: "sprintf" in m.text), fixed_point=True),
    Stage("Comparisons", each_parsed(comparisons.rewrite, lambda m: "<" in m.text or ">" in m.text), fixed_point=True),
    Stage(
        "Arithmetic",
        each_parsed(arithmetic.rewrite, lambda m: arithmetic.SIGN.search(masked(m.text.encode())) is not None),
        fixed_point=True,
    ),
    Stage(
        "Memberships",
        each_parsed(memberships.rewrite, lambda m: memberships.IN.search(m.text) is not None),
        fixed_point=True,
    ),
    Stage("HeadTerms", each_parsed(head_terms.rewrite)),
    Stage("LenientCalls", lenient.rewrite, applies=lambda options: bool(options.lenient)),
    Stage("DirectImports", each_parsed(imports.rewrite, lambda m: "import" in m.text)),
)
NAMES = frozenset(stage.name for stage in STAGES)


# the first stage that reads `options.lenient`: the stages before it leave the same modules for every lenient set
_LENIENT_FROM = next(i for i, stage in enumerate(STAGES) if stage.name == "LenientCalls")


def run(
    modules: tuple[Module, ...], options: Options, without: frozenset[str] = frozenset()
) -> tuple[tuple[Module, ...], Columns]:
    """Every stage of STAGES but those named in `without`, in order; the modules as rewritten and the map back.

    A serving path that meets a new erring place asks again with one more lenient location: the
    stages before LenientCalls are not run again for it (`_before`, cached without the lenient set)."""
    done, maps = _before(modules, options.mockable, without)
    current, chain = list(done), list(maps)
    _stages(current, chain, STAGES[_LENIENT_FROM:], options, without)
    return tuple(current), Columns.chain(*chain)


@functools.lru_cache(maxsize=16)
def _before(
    modules: tuple[Module, ...], mockable: frozenset[str], without: frozenset[str]
) -> tuple[tuple[Module, ...], tuple[Columns, ...]]:
    current: list[Module] = list(modules)
    maps: list[Columns] = []
    _stages(current, maps, STAGES[:_LENIENT_FROM], Options(frozenset(), mockable), without)
    return tuple(current), tuple(maps)


def _stages(
    current: list[Module], maps: list[Columns], stages: tuple[Stage, ...], options: Options, without: frozenset[str]
) -> None:
    """Run `stages` on `current` in place, appending each change's map back to `maps`."""
    for stage in stages:
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


def _apply(current: list[Module], found: Changes) -> tuple[Columns, frozenset[int]]:
    """Make each module's changes in `current`; the map back through them, and which modules changed."""
    moves: Moves = {}
    changed = set()
    for identity, changes in found:
        if changes:
            current[identity], moves[engine_name(current[identity])] = apply(current[identity], changes)
            changed.add(identity)
    return Columns(moves), frozenset(changed)
