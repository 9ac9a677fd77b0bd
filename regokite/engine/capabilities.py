"""Refuse, at load time, a bundle the embedded engine cannot evaluate as OPA would.

regorus reports a builtin it lacks only when a rule calling it is evaluated
("could not find function ..."), and evaluates `http.send` to undefined
without a word. Either way a policy would load, report ready and then decide
every request on an error or on nothing. OPA refuses such a bundle when it
compiles it; so does this check, before any engine is prepared: every call in
every module is resolved to a function of the bundle or to a builtin, and a
builtin neither regorus nor regokite's extensions provide is a load error
naming it, with file:line:col and what to do instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from regokite.bundle import Bundle
from regokite.engine.catalog import OPA_BUILTINS, SILENTLY_UNDEFINED, regorus_builtins
from regokite.engine.extensions.deprecated import DEPRECATED
from regokite.engine.rewrite.tree import calls as call_nodes
from regokite.engine.rewrite.tree import ref_parts, rule_heads, span
from regokite.errors import Location, PolicyLoadError


@dataclass(frozen=True)
class Call:
    """One call in a module: what it resolves to, and where."""

    name: str  # the builtin's name, or the full data path of a function of the bundle
    builtin: bool
    location: Location
    across_lines: bool = False  # `ref` and its `(` on different lines: OPA reads two expressions there


def check_builtins(bundle: Bundle, ast: list[dict[str, Any]], provided: Iterable[str] = ()) -> None:
    """Raise PolicyLoadError naming every call the embedded engine cannot evaluate.

    `ast` is the parsed bundle (`get_ast_as_json` of an engine holding its
    modules); `provided` are builtins added beside regorus's own. A call to a
    function the bundle does not define is refused too, as OPA refuses it
    ("undefined function"), instead of failing on first evaluation.
    """
    available = regorus_builtins() | frozenset(provided)
    functions = frozenset(path for entry in ast for path in _rule_paths(entry["ast"]))
    problems: list[tuple[Call, str]] = []
    for call in calls(ast):
        if call.across_lines:
            problems.append((call, _across_lines(call.name)))
        elif not call.builtin:
            if not _defined(call.name, functions):
                problems.append((call, f"undefined function {call.name}"))
        elif call.name not in available:
            problems.append(
                (call, _unavailable(call.name) if call.name in OPA_BUILTINS else f"unknown function {call.name}")
            )
        elif call.name in DEPRECATED and not _v0(bundle, call.location.file):
            problems.append((call, f"deprecated built-in function calls in expression: {call.name}"))
    if not problems:
        return
    first, message = problems[0]
    module = bundle.module(first.location.file)
    source_line = module.line(first.location.line) if module else None
    also = tuple(f"{c.location}: {m}" for c, m in problems[1:])
    raise PolicyLoadError(message, first.location, source_line, also=also)


def _v0(bundle: Bundle, file: str) -> bool:
    """Is `file` parsed as Rego v0? OPA 1.x evaluates its deprecated builtins there only."""
    module = bundle.module(file)
    return module is not None and module.v0


def _unavailable(builtin: str) -> str:
    if builtin in SILENTLY_UNDEFINED:
        return (  # OPA's (and Gatekeeper's, --disable-opa-builtin) words first
            f"undefined function {builtin}: not enabled in the embedded engine: allow the hosts it may call "
            "with --allow-http-send HOST[:PORT], or use --engine opa"
        )
    return (
        f"builtin {builtin} is not available in the embedded engine: use --engine opa "
        "(a sidecar OPA has every OPA builtin)"
    )


def _across_lines(name: str) -> str:
    return (
        f"{name} is followed by a parenthesised expression on the next line: OPA reads two expressions, "
        "regorus reads a call of it; join the lines, or write the expression on its line without the "
        "leading parenthesis"
    )


def calls(ast: list[dict[str, Any]]) -> Iterator[Call]:
    """Every function call of every module, resolved through the module's imports."""
    local: dict[tuple[str, ...], set[str]] = {}  # package -> first names of its rules, in every file of it
    for entry in ast:
        package = tuple(ref_parts(entry["ast"]["package"]["refr"]))
        local.setdefault(package, set()).update(path[len(package) + 1] for path in _rule_paths(entry["ast"]))
    for entry in ast:
        source = entry["source"]["contents"].encode()
        module = entry["ast"]
        file = entry["source"]["file"]
        package = ref_parts(module["package"]["refr"])
        aliases = dict(_imports(module.get("imports", []), source))
        for node in call_nodes(module.get("rules", [])):
            parts = ref_parts(node["fcn"])
            where = span(node["fcn"])
            location = _location(file, source, where)
            after = source[where["end"] : source.find(b"(", where["end"])]
            if b"\n" in after:
                yield Call(".".join(parts), True, location, across_lines=True)
                continue
            if parts[0] == "data":
                yield Call(".".join(parts), False, location)
            elif parts[0] in aliases:
                yield Call(".".join([*aliases[parts[0]], *parts[1:]]), False, location)
            elif parts[0] in local[tuple(package)]:
                yield Call(".".join(["data", *package, *parts]), False, location)
            else:
                yield Call(".".join(parts), True, location)


def _location(file: str, source: bytes, where: dict[str, Any]) -> Location:
    """From the span's byte offset: regorus puts a dotted reference's line:col at its last dot."""
    start = where["start"]
    line_start = source.rfind(b"\n", 0, start) + 1
    return Location(file, source.count(b"\n", 0, start) + 1, start - line_start + 1)


def _defined(name: str, rules: frozenset[tuple[str, ...]]) -> bool:
    parts = tuple(name.split("."))
    return any(parts[: len(rule)] == rule or rule[: len(parts)] == parts for rule in rules)


def _rule_paths(module: dict[str, Any]) -> Iterator[tuple[str, ...]]:
    package = ref_parts(module["package"]["refr"])
    for _, head in rule_heads(module):
        yield ("data", *package, *ref_parts(head["refr"]))


def _imports(imports: list[dict[str, Any]], source: bytes) -> Iterator[tuple[str, list[str]]]:
    for imp in imports:
        parts = ref_parts(imp["refr"])
        if parts[0] != "data":
            continue  # input, future.keywords, rego.v1: no functions behind them
        alias = imp.get("as")  # a span: the name is read from the source
        yield (source[alias["start"] : alias["end"]].decode() if alias else parts[-1]), parts


def check_data_paths(bundle: Bundle, ast: list[dict[str, Any]]) -> None:
    """Refuse a rule at a path the bundle's data files write, as OPA's compiler does ("conflicting rule
    for data path a/b found"): at that path, or below a value that is no object. regorus would read
    the data there, so a test of the rule passed here and failed to compile in OPA."""
    for entry in ast:
        module = entry["ast"]
        package = ref_parts(module["package"]["refr"])  # without its `data.`
        for _, head in rule_heads(module):
            path = [*package, *_ground(head["refr"])]
            if _written(bundle.data, path):
                source = entry["source"]["contents"].encode()
                where = _location(entry["source"]["file"], source, span(head["refr"]))
                module_of = bundle.module(where.file)
                line = module_of.line(where.line) if module_of else None
                raise PolicyLoadError(f"conflicting rule for data path {'/'.join(path)} found", where, line)


def _ground(ref: dict[str, Any]) -> list[str]:
    """The leading names of a rule head's reference (`a.b` of `a.b[k]`), where OPA's rule tree holds it."""
    return [name for ground, name in itertools.takewhile(lambda step: step[0], _steps(ref))]


def _steps(ref: dict[str, Any]) -> list[tuple[bool, str]]:
    """A reference's parts, each with whether it is a name (a `.field`, a `["string"]`) rather than a term."""
    kind, node = next(iter(ref.items()))
    if kind == "Var":
        return [(True, node["value"])]
    if kind == "RefDot":
        return [*_steps(node["refr"]), (True, node["field"][1])]
    index_kind, index = next(iter(node["index"].items()))
    return [*_steps(node["refr"]), (index_kind == "String", str(index.get("value")))]


def _written(data: Any, path: list[str]) -> bool:
    """Whether data holds a value at `path`, or a value that is no object on the way (OPA's storage.NonEmpty)."""
    node = data
    for key in path:
        if not isinstance(node, dict):
            return True
        if key not in node:
            return False
        node = node[key]
    return True


def check_arguments(bundle: Bundle, ast: list[dict[str, Any]]) -> None:
    """Refuse a function argument named `data` or `input`, as OPA's compiler does ("args must not
    shadow data"); regorus binds the argument and evaluates, so the policy would load here and
    be refused by a sidecar OPA."""
    for entry in ast:
        for kind, head in rule_heads(entry["ast"]):
            if kind != "Func":
                continue
            for arg in head.get("args", ()):
                name = arg.get("Var", {}).get("value") if isinstance(arg, dict) else None
                if name in ("data", "input"):
                    where = Location(entry["source"]["file"], arg["Var"]["span"]["line"], arg["Var"]["span"]["col"])
                    module = bundle.module(where.file)
                    raise PolicyLoadError(
                        f"args must not shadow {name} (OPA refuses the module): rename the argument",
                        where,
                        module.line(where.line) if module else None,
                    )
