"""RouteBuiltins: calls of the builtins regorus answers otherwise than OPA, each through a function of its own.

Every call of a routed builtin becomes a call of a function appended to its
module, `data.<package>.__rk_b_count_<tag>_<n>(x)`, that answers as OPA
(rego/*.rego): count of a string counts UTF-16 units in regorus (2 for
U+1F600) and characters in OPA; json.marshal writes <, >, &, U+2028 and
U+2029 as they are, where Go escapes them; sort, min and max order a set
after an object, as OPA; replace(s, "", x) and regex.split as Go's;
format_int of a number between -1 and 0 is "0" (Go truncates it to 0),
regorus's "-0".

Each call gets a function of its own, placed at the call: an error in it is
located at the call, as OPA locates it. regorus's `with` replaces a function
only where a call is written with the name the `with` names (and knows no
extension of regokite's), so calls are written by full path, and each `with
count as m` also replaces every such function of the bundle. An extension
builtin that a `with` replaces somewhere is routed the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

from regokite.engine.extensions.internal import (
    FAIL,
    HTTP_SEND_OFF,
    NUMBER_TEXT,
    REPLACE_EMPTY,
    STRLEN,
    UNORDERED,
    YAML_PLAIN,
    YAML_SINGLE,
)
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Changes, Pass, Target
from regokite.engine.rewrite.edits import Change, flat, trimmed
from regokite.engine.rewrite.tree import (
    COMPREHENSIONS,
    Node,
    Parsed,
    body,
    bundle_functions,
    calls,
    extent,
    fcn_name,
    fcn_span,
    kind,
    mock_targets,
    package_ref,
    ref_parts,
    rule_heads,
)

# The builtins every call of which (but for the exceptions in _routed_calls) goes through a function placed at
# it, with their operands
ROUTED = {
    "count": 1,
    "to_number": 1,
    "json.marshal": 1,
    "json.marshal_with_options": 2,
    "sort": 1,
    "min": 1,
    "max": 1,
    "replace": 3,
    "regex.split": 2,
    "yaml.marshal": 1,
    "json.patch": 2,
    "object.subset": 2,
    "base64.is_valid": 1,
    "yaml.unmarshal": 1,
    "net.cidr_is_valid": 1,
    "format_int": 2,
}
# false for a non-string, as OPA's (regorus errs): regorus's answer for a string
_FALSE_UNLESS_STRING = frozenset({"base64.is_valid", "net.cidr_is_valid"})
ALWAYS_ROUTED = frozenset(ROUTED)
ROUTE = "__rk_b_"
_NEVER_STRING = frozenset({"Array", "Set", "Object", "ArithExpr", "BinExpr"}) | COMPREHENSIONS
# http.send mocked: see _wrapper; sprintf: the wrapper's own call is the one the sprintf stage rewrites
_MOCKED_ROUTED = frozenset({"http.send", "sprintf"})
_ROUTE_WORDS = (*ALWAYS_ROUTED, "with")  # a module mentioning none needs no parse for routing
# sort, min and max of items holding sets and objects: OPA orders an object before a set, regorus a set
# before an object. Where they meet among the items themselves (`min([{"a": 1}, set()])`), the items are
# ordered as OPA: the others, then the objects, then the sets, each sorted by regorus (which orders them
# as OPA among themselves); where they meet deeper (`sort([[{1}], [{"a": 1}]])`), the call fails. Items
# whose JSON holds no brace hold no object: they take the builtin at once (a json.marshal, about free).
_ORDERING = {"sort": "{}", "min": "{}[0]", "max": "__rk_b_last({})"}
# helpers appended once to each package calling the builtin (rego/<name>.rego)
_SHARED = {
    **dict.fromkeys(_ORDERING, "ordering_helpers"),
    **dict.fromkeys(("json.patch", "object.subset"), "builtin_helpers"),
}


def route_name(builtin: str) -> str:
    """The kind of the functions answering calls of `builtin` (`__rk_b_json_marshal`)."""
    return ROUTE + builtin.replace(".", "_")


def rewrite(run: Pass) -> Changes:
    parsed = run.parsed(_ROUTE_WORDS)  # no parse for the rest
    functions = bundle_functions(tree for _, tree in parsed)
    mocked = {name for _, tree in parsed for name, _ in mock_targets(tree.tree)} - functions.keys()
    routed = ALWAYS_ROUTED | (mocked & (run.options.mockable | _MOCKED_ROUTED))
    if routed != ALWAYS_ROUTED:
        parsed = run.parsed((*_ROUTE_WORDS, *routed))
    calls_of: dict[int, list[tuple[Node, str, str]]] = {}  # module -> (call, builtin, its function)
    places: dict[str, list[str]] = {}  # builtin -> the full path of each function answering a call of it
    for target, tree in parsed:
        found = calls_of[target.identity] = [
            (call, name, f"{package_ref(tree.package)}.{helpers.placed_name(route_name(name), target.tag, n)}")
            for n, (call, name) in enumerate(_routed_calls(tree, routed))
        ]
        for _, name, path in found:
            places.setdefault(name, []).append(path)
    shared: set[tuple[tuple[str, ...], str]] = set()  # (package, helpers) appended (once each)
    for target, tree in parsed:
        if target.identity in run.pending:
            changes = list(_changes(target, tree, calls_of[target.identity], routed, run.options.mockable, places))
            for template in sorted({_SHARED[name] for _, name, _ in calls_of[target.identity] if name in _SHARED}):
                if (tree.package, template) not in shared:
                    shared.add((tree.package, template))
                    changes.append(helpers.appended(tree.source, helpers.rego(template, target.module.v0)))
            yield target.identity, changes


def _changes(
    target: Target,
    tree: Parsed,
    found: list[tuple[Node, str, str]],
    routed: frozenset[str],
    mockable: frozenset[str],
    places: dict[str, list[str]],
) -> Iterator[Change]:
    for call, _, path in found:
        yield Change(*fcn_span(call), path.encode())
    yield from _route_mocks(target, tree, routed, routed - mockable - {"http.send"}, places)
    for call, name, path in found:
        builtin = HTTP_SEND_OFF if name == "http.send" and name not in mockable else name
        text = _wrapper(builtin, len(call["params"]), target.module.v0, path.rpartition(".")[2])
        yield helpers.placed(tree.source, text, fcn_span(call)[0])


def _routed_calls(tree: Parsed, routed: frozenset[str]) -> Iterator[tuple[Node, str]]:
    local = {ref_parts(head["refr"])[0] for _, head in rule_heads(tree.tree)} | tree.import_names() | tree.aliases()
    for rule in tree.rules:
        if kind(rule) != "Default" and ref_parts(body(body(rule)["head"])["refr"])[0].startswith(ROUTE):
            continue  # a wrapper itself
        for call in calls(rule):
            name = fcn_name(call)
            if name not in routed or name.split(".")[0] in local:
                continue
            if name == "count" and len(call["params"]) == 1 and kind(call["params"][0]) in _NEVER_STRING:
                continue  # a collection: regorus counts it as OPA (and `with count as` still reaches it)
            if name == "replace" and len(call["params"]) == 3 and _nonempty_string(call["params"][1]):
                continue  # replace(s, ".", x): regorus replaces as OPA
            yield call, name


def _nonempty_string(term: Node) -> bool:
    return kind(term) in ("String", "RawString") and body(term).get("value", "") != ""


def _route_mocks(
    target: Target, tree: Parsed, routed: frozenset[str], regorus_mocks: frozenset[str], places: dict[str, list[str]]
) -> Iterator[Change]:
    """`with B as m` for a routed builtin B: `with data.<p>.__rk_b_B_<tag>_<n> as m` for each function
    answering a call of B in the bundle; the original kept where regorus knows B (it replaces the
    calls left as written)."""
    source = tree.source
    for name, modifier in mock_targets(tree.tree):
        if name not in routed:
            continue
        where = trimmed(source, **extent(modifier["as"]))
        value = flat(source, *where)
        added = b"".join(b" with " + path.encode() + b" as " + value for path in places.get(name, ()))
        start, end = modifier["span"]["start"], max(modifier["span"]["end"], where[1])  # a string's quote
        if name in regorus_mocks:
            yield Change(end, end, added)
        else:
            yield Change(start, end, added.strip())


def _wrapper(builtin: str, arity: int, v0: bool, name: str) -> str:
    """The function `name` that answers a call as OPA does by calling `builtin`, in the module's syntax.
    A bundle whose tests replace http.send loads without --allow-http-send, as under `opa test`; a call
    they leave is an error naming the flag (HTTP_SEND_OFF)."""
    operands = helpers.operands(arity)
    if builtin == "count" and arity == 1:
        return helpers.rego("string_or", v0, name=name, string=f"{STRLEN}(a0)", other="count(a0)")
    if builtin == "to_number" and arity == 1:
        # regorus's number as its JSON text: it passes no integral double beyond 64-bit integers to Python
        string = f"{NUMBER_TEXT}(a0, json.marshal(to_number(a0)))"
        return helpers.rego("string_or", v0, name=name, string=string, other="to_number(a0)")
    if builtin == "yaml.marshal" and arity == 1:
        return helpers.rego(
            "checked_call", v0, name=name, operands=operands, value="yaml.marshal(a0)", check=f"{YAML_PLAIN}(a0)"
        )
    if builtin == "yaml.unmarshal" and arity == 1:
        check = f"{YAML_SINGLE}(a0)"
        return helpers.rego("checked_call", v0, name=name, operands=operands, value="yaml.unmarshal(a0)", check=check)
    if builtin.startswith("json.marshal"):
        # an object key that is no string is written as its JSON text, ordered as Go orders a map[string] (regorus
        # ordered keys as values: 9 before 10): the value goes through its own JSON, where each key is that text
        keyed = operands.replace("a0", "json.unmarshal(json.marshal(a0))", 1)
        return helpers.rego("json_marshal", v0, name=name, operands=operands, builtin=builtin, keyed=keyed)
    if builtin in _ORDERING and arity == 1:
        ordered = _ORDERING[builtin].format("__rk_b_ordered(a0)")
        return helpers.rego("ordering", v0, name=name, builtin=builtin, ordered=ordered, unordered=UNORDERED)
    if builtin == "replace" and arity == 3:
        return helpers.rego("replace", v0, name=name, replace_empty=REPLACE_EMPTY)
    if builtin in _FALSE_UNLESS_STRING and arity == 1:
        return helpers.rego("string_or", v0, name=name, string=f"{builtin}(a0)", other="false")
    if builtin in ("json.patch", "object.subset") and arity == 2:
        return helpers.rego(builtin.replace(".", "_"), v0, name=name, fail=FAIL)
    if builtin == "regex.split" and arity == 2:
        return helpers.rego("regex_split", v0, name=name)
    if builtin == "format_int" and arity == 2:
        return helpers.rego("format_int", v0, name=name)
    return helpers.rego("call", v0, name=name, operands=operands, value=f"{builtin}({operands})")
