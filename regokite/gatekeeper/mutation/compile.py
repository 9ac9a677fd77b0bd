"""Mutators made into Rego: a module per mutator and one that runs them as Gatekeeper's system does.

A mutator's module holds its ID, its normalised `match` and `applyTo`, and
one function per node of its location (`_at_<depth>(current, value)`), each
doing what Gatekeeper's mutation function does at that depth: check the
type, apply the pathTest of that depth, create what is missing, recurse,
set at the end. The system module (`regokite_gatekeeper.mutation`) applies
the mutators in Gatekeeper's order and repeats the pass until the object no
longer changes, at most one pass more than there are mutators; then it
reports Gatekeeper's non-convergence error. Its `mutated` is the admission
request's object mutated, `errors` why it could not be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from regokite.bundle import Module
from regokite.engine.extensions.external_data import MUTATION_NAME
from regokite.gatekeeper.mutation.conflicts import conflicting
from regokite.gatekeeper.mutation.library import PACKAGE, PLACEHOLDER, library_module
from regokite.gatekeeper.mutation.location import Field, show
from regokite.gatekeeper.mutation.mutators import Mutator

SYSTEM = "regokite_gatekeeper.mutation"
MUTATORS = "regokite_gatekeeper.mutators"
GATEKEEPER_GROUPS = (
    "templates.gatekeeper.sh", "constraints.gatekeeper.sh", "mutations.gatekeeper.sh", "config.gatekeeper.sh",
    "externaldata.gatekeeper.sh", "expansion.gatekeeper.sh", "status.gatekeeper.sh",
)  # fmt: skip


def _rego(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def normalised_match(match: dict[str, Any]) -> dict[str, Any]:
    """spec.match with every field present, so the Rego reads them without defaults."""

    def selector(sel: Any) -> Any:
        if sel is None:
            return None
        exprs = [
            {"key": e.get("key"), "operator": e.get("operator"), "values": e.get("values") or []}
            for e in sel.get("matchExpressions") or []
        ]
        return {"matchLabels": sel.get("matchLabels") or {}, "matchExpressions": exprs}

    return {
        "kinds": [
            {"apiGroups": k.get("apiGroups") or [], "kinds": k.get("kinds") or []} for k in match.get("kinds") or []
        ],
        "scope": match.get("scope") or "*",
        "namespaces": match.get("namespaces") or [],
        "excludedNamespaces": match.get("excludedNamespaces") or [],
        "labelSelector": selector(match.get("labelSelector")),
        "namespaceSelector": selector(match.get("namespaceSelector")),
        "name": match.get("name") or "",
        "source": match.get("source") or "All",
    }


def package_names(mutators: Sequence[Mutator]) -> list[str]:
    """A package per mutator, named after its kind and name (made unique)."""
    names: list[str] = []
    for m in mutators:
        words = (m.kind, m.namespace, m.name) if m.namespace else (m.kind, m.name)
        base = re.sub(r"[^a-z0-9_]", "_", "_".join(words).lower())
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return [f"{MUTATORS}.{n}" for n in names]


def mutator_module(m: Mutator, package: str) -> Module:
    lines = [
        f"package {package}",
        "",
        f"import data.{PACKAGE} as lib",
        "",
        f"# {m.kind} {m.name} ({m.file}): {show(m.location)}",
        f"id := {_rego(m.id)}",
        "",
        f"match := {_rego(normalised_match(m.match))}",
        "",
        f"apply_to := {_rego(list(m.apply_to))}",
        "",
        '# the mutator applied to o: {"object": ...} or {"error": ...}, as Gatekeeper words it; "applied"',
        "# when its setter ran (what Gatekeeper's mutation annotations list)",
        *_apply_rule(m),
        "",
        *_match_rules(m),
        '_result(o, r) := {"error": sprintf("mutation for mutator %s failed for %s: %s",'
        " [id, lib.describe(o), r.error])} if r.error",
        "",
        'else := {"object": r.value, "applied": true} if r.mutated',
        "",
        'else := {"object": o}',
        "",
    ]
    for depth in range(len(m.location)):
        lines += _step(m, depth)
    return Module(f"<{package}>.rego", "\n".join(lines))


def _apply_rule(m: Mutator) -> list[str]:
    mutate = [f"\tr := _result(o, _at_0(o, {_value(m)}))", "}"]
    if m.match.get("namespaceSelector") is None:  # matching cannot fail
        return ['apply(o, ctx) := {"object": o} if not matches(o, ctx)', "", "else := r if {", *mutate]
    # Gatekeeper reaches the namespaceSelector (and its missing-Namespace error) only when applyTo and
    # the criteria before it match
    return [
        'apply(o, ctx) := {"error": sprintf("matching for mutator %s failed for %s: failed to run Match criteria: %s",'
        " [id, lib.describe(o), msg])} if {",
        "\t_reaches_namespace_selector(o, ctx)",
        "\tmsg := lib.match_error(match, o, ctx)",
        '} else := {"object": o} if {',
        "\tnot matches(o, ctx)",
        "} else := r if {",
        *mutate,
    ]


# match criteria and the lib rule judging each when it is not the default (which matches everything)
_CRITERIA = (
    ("kinds", [], "lib.kinds_ok(match, o)"),
    ("scope", "*", "lib.scope_ok(match, o, ctx)"),
    ("namespaces", [], "lib.namespaces_ok(match, o, ctx)"),
    ("excludedNamespaces", [], "not lib.excluded(match, o, ctx)"),
    ("labelSelector", None, "lib.labels_ok(match, o)"),
    ("namespaceSelector", None, "lib.namespace_selector_ok(match, o, ctx)"),
    ("name", "", "lib.name_ok(match, o)"),
    ("source", "All", "lib.source_ok(match, ctx)"),
)


def _match_rules(m: Mutator) -> list[str]:
    """`matches(o, ctx)`: applyTo and spec.match, only the criteria this mutator sets, in Gatekeeper's
    order; with a namespaceSelector, `_reaches_namespace_selector(o, ctx)`: those before it."""
    match = normalised_match(m.match)
    checks = [rule for key, default, rule in _CRITERIA if match[key] != default]
    lines = _applying("matches", m, checks)
    if match["namespaceSelector"] is not None:
        before = [rule for key, default, rule in _CRITERIA[:5] if match[key] != default]
        lines += _applying("_reaches_namespace_selector", m, before)
    return lines


def _applying(name: str, m: Mutator, checks: list[str]) -> list[str]:
    """`name(o, ctx)`: the mutator's applyTo inline (group "" and version v1 is apiVersion "v1"; no
    admission operation where all supported ones apply) and `checks`."""
    if not m.apply_to:  # AssignMetadata
        return [f"{name}(o, ctx) if {{", *[f"\t{c}" for c in checks or ["true"]], "}", ""]
    lines: list[str] = []
    for entry in m.apply_to:
        versions = sorted({f"{g}/{v}" if g else v for g in entry["groups"] for v in entry["versions"]})
        ops = set(entry["operations"])
        allowed = {"CREATE", "UPDATE"} if not ops or "*" in ops else ops
        operations = sorted(allowed | ({""} if allowed >= {"CREATE", "UPDATE"} else set()))
        lines += [
            f"{name}(o, ctx) if {{",
            f"\to.kind in {_rego_set(entry['kinds'])}",
            f"\to.apiVersion in {_rego_set(versions)}",
            f"\tctx.operation in {_rego_set(operations)}",
            *[f"\t{c}" for c in checks],
            "}",
            "",
        ]
    return lines


def _rego_set(values: Sequence[str]) -> str:
    return "{" + ", ".join(_rego(v) for v in sorted(set(values))) + "}"


def _value(m: Mutator) -> str:
    """What the setter is given: the value, the metadata field's, the image parts, the ModifySet values."""
    if m.from_metadata is not None:
        return f"lib.meta(o, {_rego(m.from_metadata)})"
    if m.kind == "AssignImage":
        return _rego(list(m.image))
    if m.external is not None:  # Gatekeeper's placeholder, resolved once the passes are done
        ref = {k: m.external[k] for k in ("provider", "failurePolicy", "default")}
        at = 'object.get(ctx, "username", "")' if m.external["dataSource"] == "Username" else '""'
        return f'{{{_rego(PLACEHOLDER)}: object.union({_rego(ref)}, {{"valueAtLocation": {at}}})}}'
    return _rego(m.value)


def _step(m: Mutator, depth: int) -> list[str]:
    """`_at_<depth>(cur, v)`: Gatekeeper's mutateInternal at one node, specialised for it."""
    node, last = m.location[depth], depth == len(m.location) - 1
    test = m.tests.get(depth)
    where = _rego(show(m.location))
    head = (
        f"_at_{depth}(cur, v) := lib.mismatch({_rego('object' if isinstance(node, Field) else 'List')}, cur, {where})"
    )
    check = "is_object" if isinstance(node, Field) else "is_array"
    lines = [f"{head} if not {check}(cur)"]
    nxt = f"_at_{depth + 1}"
    if isinstance(node, Field):
        key = _rego(node.name)
        if test == "MustNotExist":
            lines.append(f'else := {{"mutated": false}} if {key} in object.keys(cur)')
        elif test == "MustExist":
            lines.append(f'else := {{"mutated": false}} if not {key} in object.keys(cur)')
        if last:
            lines.append(f"else := r if r := {_setter(m, key)}")
        else:
            empty = "{}" if isinstance(m.location[depth + 1], Field) else "[]"
            # the child's answer, or this object with the child's new value: chosen by lookup, not a call
            new = f'object.union(object.remove(cur, [{key}]), {{{key}: object.get(c, "value", null)}})'
            changed = f'{{"mutated": true, "value": {new}}}'
            lines += [
                "else := r if {",
                f"\tc := {nxt}(object.get(cur, {key}, {empty}), v)",
                f'\tr := {{false: c, true: {changed}}}[object.get(c, "mutated", false)]',
                "}",
            ]
    elif node.glob:
        if test == "MustNotExist":
            lines.append('else := {"mutated": false}')
        else:
            lines.append(f"else := r if r := lib.put_elements(cur, [{nxt}(e, v) | some e in cur])")
    else:
        key, value = _rego(node.key), _rego(node.value)
        if last:
            exists_ok = "false" if test == "MustNotExist" else "true"
            missing_ok = "false" if test == "MustExist" else "true"
            lines.append(f"else := r if r := lib.set_keyed(cur, {key}, {value}, v, {exists_ok}, {missing_ok})")
        else:
            hit = f"lib.keyed(e, {key}, {value})"
            found = ["\tsome e in cur", f"\t{hit}"]
            if test == "MustNotExist":
                lines += ['else := {"mutated": false} if {', *found, "}"]
            pick = f"[_pick_{depth}(x, v) | some x in cur]"
            lines += ["else := r if {", *found, f"\tr := lib.put_elements(cur, {pick})", "}"]
            if test == "MustExist":
                lines.append('else := {"mutated": false}')
            else:
                new = _rego({node.key: node.value})
                lines.append(f"else := r if r := lib.append_element(cur, {nxt}({new}, v), {new})")
            lines += ["", f"_pick_{depth}(e, v) := {nxt}(e, v) if {hit}", "", 'else := {"mutated": false}']
    return [*lines, ""]


def _setter(m: Mutator, key: str) -> str:
    if m.external is not None:
        return f"lib.placeholder_field(cur, {key}, v)"
    if m.kind == "ModifySet":
        return f"lib.{m.operation}_field(cur, {key}, v)"
    if m.kind == "AssignImage":
        return f"lib.image_field(cur, {key}, v)"
    return f'{{"mutated": true, "value": object.union(object.remove(cur, [{key}]), {{{key}: v}})}}'


def system_module(
    mutators: Sequence[Mutator], packages: Sequence[str], excluded: Sequence[str] = (), annotate: bool = False
) -> Module:
    """Gatekeeper's System.Mutate: the mutators in order, passes until nothing changes; its webhook
    skips the namespaces a Config excludes from `mutation-webhook` (or `*`); with `annotate`
    (`--mutation-annotations`), a mutated object records them as Gatekeeper's flag has it."""
    n = len(mutators)
    lines = [
        f"package {SYSTEM}",
        "",
        f"import data.{PACKAGE} as lib",
        "",
        "# Gatekeeper's mutators, in the order it applies them (by ID)",
        f"mutators := {_rego([m.id for m in mutators])}",
        "",
        "# what the mutators know of the request: operation, namespace, source (Original; Generated when",
        "# expanded), the requesting user (an externalData's Username)",
        "context := {",
        '\t"operation": object.get(input.request, "operation", ""),',
        '\t"namespace": _request_namespace,',
        '\t"source": "Original",',
        '\t"username": object.get(object.get(input.request, "userInfo", {}), "username", ""),',
        "}",
        "",
        '_request_namespace := "" if lib.is_namespace(input.request.object)',
        "",
        "else := ns if {",
        "\tns := input.request.namespace",
        "\tis_string(ns)",
        "}",
        "",
        'else := ""',
        "",
        "# Gatekeeper's webhook mutates creations and updates, never its own resources",
        '_skipped if not input.request.operation in {"CREATE", "UPDATE"}',
        "",
        f"_skipped if input.request.kind.group in {_rego(list(GATEKEEPER_GROUPS))}",
        "",
        "_skipped if not is_object(input.request.object)",
        "",
        f"excluded_namespaces := {_rego(sorted(excluded))}",
        "",
        "_skipped if {",
        "\tns := lib.namespace_name(input.request.object, context)",
        "\tsome p in excluded_namespaces",
        "\tlib.glob_matches(p, ns)",
        "}",
        "",
        'result := {"object": input.request.object, "iterations": 1} if _skipped',
        "",
        "else := mutate(input.request.object, context)",
        "",
        "# the object mutated, when some mutator changed it",
        "mutated := result.object if {",
        "\tnot result.error",
        "\tresult.iterations > 1",
        "}",
        "",
        "errors := [result.error] if result.error",
        "",
        "else := []",
        "",
        "# System.Mutate: the namespace set from the request while mutators run, restored after",
        "mutate(o, ctx) := _restored(o, _annotated(_resolved(_iter_1(lib.with_namespace(o, ctx.namespace), ctx, []))))",
        "",
        *_resolution(mutators),
        *_annotations(mutators, annotate),
        "_restored(o, s) := s if s.error",
        "",
        'else := {"object": o, "iterations": 1} if s.iterations == 1',
        "",
        'else := {"object": lib.with_namespace(s.object, lib.meta(o, "namespace")), "iterations": s.iterations}',
        "",
    ]
    lines += _passes(n, packages)
    return Module(f"<{SYSTEM}>.rego", "\n".join(lines))


def mutator_string(m: Mutator) -> str:
    """Gatekeeper's Mutator.String(): `<Kind>/<namespace>/<name>:<generation>`, as its annotations list it
    (a mutator read from a file without one has 1, what the API server gives an object it creates)."""
    generation = ((m.raw.get("metadata") or {}) if isinstance(m.raw, dict) else {}).get("generation") or 1
    return f"{m.kind}/{m.namespace}/{m.name}:{generation}"


EXTERNAL_DATA = MUTATION_NAME  # the mutation path's call of a Provider (no cache)


def _resolution(mutators: Sequence[Mutator]) -> list[str]:
    """`_resolved(s)`: Gatekeeper's resolvePlaceholders once the passes are done: each provider asked once
    for the keys of its placeholders, each placeholder replaced by its value or as its failurePolicy says;
    errors (Fail) refuse the mutation in Gatekeeper's words."""
    if not any(m.external is not None for m in mutators):
        return ["_resolved(s) := s", ""]
    return [
        "_resolved(s) := _with_values(s, found, values) if {",
        "\tnot s.error",
        "\ts.iterations > 1",
        "\tfound := lib.placeholders(s.object)",
        "\tcount(found) > 0",
        "\tanswers := {name: answer |",
        "\t\tsome name in {p.provider | some [_, p] in found}",
        "\t\tkeys := sort({p.valueAtLocation | some [_, p] in found; p.provider == name})",
        f'\t\tanswer := {EXTERNAL_DATA}({{"provider": name, "keys": keys}})',
        "\t}",
        "\tvalues := [lib.external_value(p, answers[p.provider]) | some [_, p] in found]",
        "} else := s",
        "",
        '_with_values(s, found, values) := {"error": msg} if {',
        "\terrors := [v.error | some v in values; v.error]",
        "\tcount(errors) > 0",
        '\tmsg := sprintf("failed to resolve external data placeholders: %s", [lib.aggregate(errors)])',
        '} else := {"object": json.patch(s.object, patch), "iterations": s.iterations, "applied": s.applied} if {',
        '\tpatch := [{"op": "replace", "path": found[i][0], "value": v.value} | some i, v in values]',
        "}",
        "",
    ]


def _annotations(mutators: Sequence[Mutator], annotate: bool) -> list[str]:
    """`_annotated(s)`: Gatekeeper's --mutation-annotations on a mutated object: `gatekeeper.sh/mutations`
    (the mutators applied in the passes that changed it, sorted, once each) and `gatekeeper.sh/mutation-id`
    (a UUID; one per object within an evaluation)."""
    if not annotate:
        return ["_annotated(s) := s", ""]
    return [
        f"_mutator_strings := {_rego([mutator_string(m) for m in mutators])}",
        "",
        "_annotated(s) := s if s.error",
        "",
        "else := s if s.iterations == 1",
        "",
        'else := object.union(s, {"object": object.union(s.object, {"metadata": {"annotations": {',
        '\t"gatekeeper.sh/mutations": concat(", ", sort({_mutator_strings[i] | some i in s.applied})),',
        '\t"gatekeeper.sh/mutation-id": uuid.rfc4122(lib.describe(s.object)),',
        "}}})})",
        "",
    ]


def _passes(n: int, packages: Sequence[str]) -> list[str]:
    """`_pass(o, ctx)`: each mutator once, in order (`applied`: the positions of those whose setter ran);
    `_iter_<k>(o, ctx, applied)`: pass k, then the next until one changes nothing (`applied`: gathered
    from the passes that changed the object, as Gatekeeper's annotations list them)."""
    if n == 0:  # every mutator left out (schema conflicts)
        return ['_pass(o, _) := {"object": o}', "", '_iter_1(o, _, _) := {"object": o, "iterations": 1}', ""]
    lines = ["# one pass: every mutator in order; the first error stops it", "_pass(o, ctx) := s if {"]
    lines.append(f"\ts_0 := data.{packages[0]}.apply(o, ctx)")
    for i in range(1, n):
        # after an error the rest is skipped: the next mutator sees no object (and does nothing)
        lines.append(
            f'\ts_{i} := {{false: data.{packages[i]}.apply(object.get(s_{i - 1}, "object", {{}}), ctx),'
            f' true: s_{i - 1}}}[is_string(object.get(s_{i - 1}, "error", null))]'
        )
    steps = ", ".join(f"s_{i}" for i in range(n))
    lines += [
        f'\tapplied := [i | some i, step in [{steps}]; object.get(step, "applied", false)]',
        f'\ts := object.union(s_{n - 1}, {{"applied": applied}})',
        "}",
        "",
    ]
    for k in range(1, n + 2):
        lines += [
            f"_iter_{k}(o, ctx, applied) := _settle_{k}(o, _pass(o, ctx), ctx, applied)",
            "",
            f"_settle_{k}(o, s, ctx, applied) := s if s.error",
            "",
            f'else := {{"object": o, "iterations": {k}, "applied": applied}} if s.object == o',
            "",
            f"else := _iter_{k + 1}(s.object, ctx, array.concat(applied, s.applied))",
            "",
        ]
    lines += [
        f'_iter_{n + 2}(o, _, _) := {{"error": sprintf("mutation not converging for %s after {n + 1} iterations",'
        " [lib.describe(o)])}",
        "",
    ]
    return lines


def mutation_modules(
    mutators: Sequence[Mutator],
    excluded: Sequence[str] = (),
    annotate: bool = False,
    replicate_path: str = "kubernetes",
) -> tuple[Module, ...]:
    """The library, a module per mutator and the system module; none without mutators. Mutators in
    a schema conflict are left out, as Gatekeeper leaves them (conflicting() says which and why).
    `replicate_path`: where namespaceSelectors find the replicated Namespaces."""
    if not mutators:
        return ()
    left_out = conflicting(mutators)
    mutators = [m for m in mutators if m.id not in left_out]
    ordered = sorted(mutators, key=lambda m: m.order)
    packages = package_names(ordered)
    modules = [library_module(replicate_path)]
    modules += [mutator_module(m, p) for m, p in zip(ordered, packages, strict=True)]
    modules.append(system_module(ordered, packages, excluded, annotate))
    return tuple(modules)


def decision_rule(name: str) -> list[str]:
    """The admission decision rule of the mutation system: the mutated object and the errors."""
    return [
        "# Gatekeeper's mutators",
        f'{name} := {{"mutated": [x | x := data.{SYSTEM}.mutated], "mutation_errors": [data.{SYSTEM}.errors]}}',
        "",
    ]


def reads_namespaces(mutators: Sequence[Mutator]) -> bool:
    """Whether some mutator's namespaceSelector needs the replicated Namespaces."""
    return any(m.match.get("namespaceSelector") is not None for m in mutators)
