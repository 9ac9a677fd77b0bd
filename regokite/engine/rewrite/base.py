"""What a stage is given and what it gives back.

A stage is a function of a `Pass` (every module of the bundle, as the
stages before left them) yielding, for the modules it changes, the changes
to make: `(identity, [Change, ...])`, a module's identity being its place in
the bundle (two modules may share a path: two templates of one file). It
never changes a module itself; `pipeline.run` applies the changes and keeps
the map back to the text as written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from regokite.bundle import Module
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.edits import Change, Columns
from regokite.engine.rewrite.tree import Parsed, parse
from regokite.errors import Location

Changes = Iterable[tuple[int, list[Change]]]


@dataclass(frozen=True)
class Options:
    """lenient: the builtin calls at these locations (as written) are undefined where they err, as in
    OPA's evaluation without strict builtin errors. mockable: the extension builtins the engine has
    that a `with` may replace."""

    lenient: frozenset[Location]
    mockable: frozenset[str]


@dataclass(frozen=True)
class Target:
    """One module a stage may change: its identity and tag (helpers.tag)."""

    identity: int
    module: Module

    @property
    def tag(self) -> str:
        return helpers.tag(self.module, self.identity)

    @property
    def source(self) -> bytes:
        return self.module.text.encode()

    def parsed(self) -> Parsed | None:
        return parse(self.module)[0]


@dataclass(frozen=True)
class Pass:
    """The bundle as one run of a stage sees it."""

    modules: tuple[Module, ...]
    pending: frozenset[int]  # the identities this run may change: in a fixed point, those the last round changed
    options: Options
    columns: Columns  # back through the stages before, to the text as written

    def targets(self) -> Iterator[Target]:
        """The modules this run may change."""
        return (Target(identity, self.modules[identity]) for identity in sorted(self.pending))

    def parsed(self, words: Iterable[str] = ()) -> list[tuple[Target, Parsed]]:
        """Every module of the bundle that parses, with its tree (only those whose text holds one of
        `words`, when given: the others need no parse). A stage changes only the `pending` ones."""
        words = tuple(words)
        targets = (Target(i, m) for i, m in enumerate(self.modules) if not words or any(w in m.text for w in words))
        return [(target, tree) for target in targets if (tree := target.parsed()) is not None]


StageFunction = Callable[[Pass], Changes]


@dataclass(frozen=True)
class Stage:
    """One step of the rewriter: `function` run once, or again on the modules it changed until it
    changes none (`fixed_point`: a construct nested in another is rewritten in a later round)."""

    name: str
    function: StageFunction
    fixed_point: bool = False
    applies: Callable[[Options], bool] = lambda options: True


def each(function: Callable[[Target], list[Change]], wanted: Callable[[Module], bool] | None = None) -> StageFunction:
    """A stage that changes modules one at a time (only those `wanted`, when given: a cheap look at the
    text that spares the others a parse)."""

    def stage(run: Pass) -> Changes:
        for target in run.targets():
            if wanted is None or wanted(target.module):
                yield target.identity, function(target)

    stage.__doc__ = function.__doc__
    return stage


def each_parsed(
    function: Callable[[Target, Parsed], list[Change]], wanted: Callable[[Module], bool] | None = None
) -> StageFunction:
    """`each`, for a stage that reads a module's tree: a module regorus cannot parse is left as it is (the
    load reports its error)."""

    def changes(target: Target) -> list[Change]:
        tree = target.parsed()
        return [] if tree is None else function(target, tree)

    changes.__doc__ = function.__doc__
    return each(changes, wanted)
