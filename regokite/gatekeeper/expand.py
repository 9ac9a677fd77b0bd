"""`regokite expand`: the resources ExpansionTemplates make of workloads, mutated, as `gator expand` prints them.

The files hold the workloads, the ExpansionTemplates, any mutators and the
Namespaces a namespaceSelector needs. Each workload is expanded by the same
generated Rego the admission server evaluates; an expansion that fails
(no source field, a mutator error) fails the command, naming the resource.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from regokite.bundle import Bundle
from regokite.clusterdata.store import guess_resource
from regokite.engine import Engine, open_engine
from regokite.errors import RegokiteError
from regokite.gatekeeper.constraints import GatekeeperSources
from regokite.gatekeeper.expansion import (
    PACKAGE,
    ExpansionError,
    generated_modules,
    is_expansion_template,
    refuse_cycles,
)
from regokite.gatekeeper.inventory import namespaces
from regokite.gatekeeper.mutation.mutators import is_mutator


def expand(sources: GatekeeperSources, objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every expanded, mutated resource of `objects`, in gator's order (name, apiVersion and kind joined,
    descending); RegokiteError on a failed expansion."""
    if sources.problems:
        raise RegokiteError("\n".join(sources.problems))
    if not sources.expansions:
        return []
    try:
        refuse_cycles(sources.expansions)
    except ExpansionError as exc:
        raise RegokiteError(f"error expanding resources: {exc}") from None
    modules = generated_modules(sources.mutators, sources.expansions)
    given = namespaces(objects)
    engine = open_engine(Bundle(modules, {"kubernetes": {"namespaces": given}}))
    out: list[dict[str, Any]] = []
    try:
        for obj in objects:
            if is_mutator(obj) or is_expansion_template(obj):
                continue
            try:
                results = expand_resource(engine, _request(obj), given)
            except ExpansionFailed as exc:
                raise RegokiteError(f"error expanding resources: {exc}") from None
            out += [r["object"] for r in results]
    finally:
        engine.close()
    return sorted(out, key=_order, reverse=True)


class ExpansionFailed(RegokiteError):
    """A resource gator could not expand, in its words."""


def expand_resource(engine: Engine, request: dict[str, Any], namespaces: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The resultants of the request's object as gator expands it: the object mutated first as an
    Original resource, then expanded level by level; ExpansionFailed says why not. `namespaces`: the
    Namespaces gator was given (gator_input)."""
    name = (request.get("object") or {}).get("metadata", {}).get("name", "")
    base = engine.evaluate(f"data.{PACKAGE}.base", gator_input(request, namespaces))
    if "error" in base:
        raise ExpansionFailed(f"error mutating base resource {name}: {base['error']}")
    mutated = gator_input({**request, "object": base["object"]}, namespaces)
    errors = engine.evaluate(f"data.{PACKAGE}.errors", mutated)
    if errors:
        raise ExpansionFailed(f"error expanding resource {name}: {errors[0]}")
    return engine.evaluate(f"data.{PACKAGE}.results", mutated)


def _request(obj: dict[str, Any]) -> dict[str, Any]:
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    meta = obj.get("metadata") or {}
    return {
        "kind": {"group": group, "version": version, "kind": obj.get("kind", "")},
        "resource": {"group": group, "version": version, "resource": guess_resource(str(obj.get("kind", "")))},
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace") or "",
        "operation": "CREATE",
        "object": obj,
    }


def _order(resource: dict[str, Any]) -> str:
    return (
        str((resource.get("metadata") or {}).get("name", "")) + str(resource.get("apiVersion")) + str(resource["kind"])
    )


def render(resources: Sequence[dict[str, Any]], form: str) -> str:
    """The text gator expand prints: each resource as YAML (2-space, keys sorted) or as JSON indented by 4
    (`<` `>` `&` escaped as Go's encoder does), joined by `---` lines."""
    if form == "json":
        texts = [_go_json(json.dumps(r, indent=4, sort_keys=True, ensure_ascii=False)) for r in resources]
    else:
        texts = [yaml.dump(r, Dumper=_GoYAML, sort_keys=True, allow_unicode=True) for r in resources]
    return "---\n".join(texts)


class _GoYAML(yaml.SafeDumper):
    """PyYAML's output in the style of Go's yaml.v2: a string that cannot be plain is double-quoted."""

    def choose_scalar_style(self) -> str:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def _go_json(text: str) -> str:
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def gator_input(request: dict[str, Any], namespaces: Mapping[str, Any]) -> dict[str, Any]:
    """The expansion's input as gator's expander sees a workload: a Namespace is known (an empty one)
    when the workload names none, names `default`, or names one of the input's Namespaces."""
    ns = request.get("namespace") or ""
    return {"request": request, "namespace_known": ns in ("", "default") or ns in namespaces}
