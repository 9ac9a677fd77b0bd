"""graph.reachable_paths as OPA (topdown/reachable.go): regorus erred on a node that is no string and
answered otherwise where a node's edges are neither an array nor a set."""

from __future__ import annotations

from typing import Any

from regokite.engine.extensions.common import BuiltinError, builtin, type_name


def _key(node: Any) -> Any:
    """The node as the graph's keys hold it (an array as a tuple); None-like `_ABSENT` for a node no key can
    be (an object or a set: Python's keys cannot hold one, so neither does the graph)."""
    if isinstance(node, list | tuple):
        members = tuple(_key(m) for m in node)
        return _ABSENT if _ABSENT in members else members
    if isinstance(node, dict | set | frozenset):
        return _ABSENT
    return node


_ABSENT = object()


def _vertices(collection: Any) -> list[Any]:
    """An array's or a set's members; any other value has none (OPA's foreachVertex)."""
    return list(collection) if isinstance(collection, list | tuple | set | frozenset) else []


def _paths(graph: dict, root: Any, path: tuple, reached: frozenset, found: set[tuple]) -> None:
    """OPA's pathBuilder: a node outside the graph ends the path before it; a node without edges, or a
    neighbour already on the path, ends it after."""
    key = _key(root)
    if key is _ABSENT or key not in graph:
        found.add(path)
        return
    path, edges = (*path, key), _vertices(graph[key])
    if not edges:
        found.add(path)
        return
    reached = reached | {key}
    for neighbour in edges:
        if _key(neighbour) in reached:
            found.add(path)
        else:
            _paths(graph, neighbour, path, reached, found)


@builtin("graph.reachable_paths")
def reachable_paths(graph: Any, initial: Any) -> set[tuple]:
    name = "graph.reachable_paths"
    if not isinstance(graph, dict):
        raise BuiltinError(f"{name}: operand 1 must be object but got {type_name(graph)}")
    if not isinstance(initial, list | set | frozenset):
        raise BuiltinError(f"{name}: operand 2 must be one of {{array, set}} but got {type_name(initial)}")
    found: set[tuple] = set()
    for node in _vertices(initial):
        key = _key(node)
        if key is _ABSENT or key not in graph:
            continue
        edges = _vertices(graph[key])
        if not edges:
            found.add((key,))
        for neighbour in edges:
            _paths(graph, neighbour, (key,), frozenset((key,)), found)
    return found
