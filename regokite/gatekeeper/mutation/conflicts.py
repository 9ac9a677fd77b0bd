"""Gatekeeper's schema conflicts: mutators that disagree on the shape of a kind are not applied.

For each kind and operation a mutator's `applyTo` binds, its location says
what each node is: an object field, a list keyed by a field, and at its end
a terminal (a set for ModifySet, a string for AssignImage, anything for
Assign). Two mutators that see the same node as different types (an object
and a list, a set and a string), or the same list keyed by different fields,
conflict; so does one that must end where another goes deeper (AssignImage,
or an Assign of external data).
As in Gatekeeper, every mutator in a conflict is left out until it is
resolved; AssignMetadata binds no kind and never conflicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from regokite.gatekeeper.mutation.location import Entry, Field, Node
from regokite.gatekeeper.mutation.mutators import Mutator

UNKNOWN, SET, STRING, OBJECT, LIST = "Unknown", "Set", "String", "Object", "List"
TERMINAL = {"Assign": UNKNOWN, "ModifySet": SET, "AssignImage": STRING}


@dataclass
class _Node:
    referenced_by: set[str] = field(default_factory=set)
    children: dict[str, dict[str, _Node]] = field(default_factory=dict)
    must_terminate: set[str] = field(default_factory=set)

    def add(self, ident: str, path: Sequence[Node], terminal: str, must_terminate: bool) -> None:
        self.referenced_by.add(ident)
        if not path:
            if must_terminate:
                self.must_terminate.add(ident)
            return
        by_type = self.children.setdefault(_key(path[0]), {})
        kind = terminal if len(path) < 2 else (LIST if isinstance(path[1], Entry) else OBJECT)
        by_type.setdefault(kind, _Node()).add(ident, path[1:], terminal, must_terminate)

    def conflicts(self) -> set[str]:
        """Every mutator in a conflict anywhere below this node."""
        found: set[str] = set()
        for key, by_type in self.children.items():
            found |= self._conflicts_at(key)
            for child in by_type.values():
                found |= child.conflicts()
        return found

    def _conflicts_at(self, key: str) -> set[str]:
        by_type = self.children[key]
        known = len(by_type) - (UNKNOWN in by_type)
        found: set[str] = set()
        for kind, child in by_type.items():
            if kind != UNKNOWN and (known > 1 or (kind == LIST and len(child.children) > 1)):
                found |= child.referenced_by
        must_terminate = any(c.must_terminate for c in by_type.values())
        if must_terminate and any(c.children for c in by_type.values()):
            for child in by_type.values():
                found |= child.must_terminate
                found |= {i for grand in child.children.values() for g in grand.values() for i in g.referenced_by}
        return found


def _key(node: Node) -> str:
    return node.name if isinstance(node, Field) else node.key


def _bindings(m: Mutator) -> Iterable[tuple[str, str, str, str]]:
    for entry in m.apply_to:
        ops = entry["operations"]
        operations = ("CREATE", "UPDATE") if not ops or "*" in ops else ops
        for group in entry["groups"]:
            for version in entry["versions"]:
                for kind in entry["kinds"]:
                    for op in operations:
                        yield group, version, kind, op


def conflicting(mutators: Sequence[Mutator]) -> dict[str, str]:
    """Mutator ID -> why it is left out (Gatekeeper's ErrConflictingSchema message)."""
    trees: dict[tuple[str, str, str, str], _Node] = {}
    for m in mutators:
        if m.kind not in TERMINAL:
            continue
        for binding in set(_bindings(m)):
            must_terminate = m.kind == "AssignImage" or m.external is not None  # a string where it ends
            trees.setdefault(binding, _Node()).add(m.id, m.location, TERMINAL[m.kind], must_terminate)
    found: set[str] = set()
    for tree in trees.values():
        found |= tree.conflicts()
    message = f"the following mutators have conflicting schemas: [{','.join(sorted(found))}]"
    return dict.fromkeys(sorted(found), message)
