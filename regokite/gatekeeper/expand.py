"""`regokite expand`: the resources ExpansionTemplates make of workloads, mutated, as `gator expand` prints them.

The files hold the workloads, the ExpansionTemplates, any mutators and the
Namespaces a namespaceSelector needs. Each workload is expanded by the same
generated Rego the admission server evaluates; an expansion that fails
(no source field, a mutator error) fails the command, naming the resource.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from regokite.bundle import Bundle
from regokite.clusterdata.store import guess_resource
from regokite.engine import open_engine
from regokite.errors import RegokiteError
from regokite.gatekeeper.constraints import GatekeeperSources
from regokite.gatekeeper.expansion import PACKAGE, generated_modules, is_expansion_template
from regokite.gatekeeper.mutation.mutators import is_mutator


def expand(sources: GatekeeperSources, objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every expanded, mutated resource of `objects`, in their order; RegokiteError on a failed expansion."""
    if sources.problems:
        raise RegokiteError("\n".join(sources.problems))
    if not sources.expansions:
        return []
    modules = generated_modules(sources.mutators, sources.expansions)
    namespaces = {
        o["metadata"]["name"]: o for o in objects if o.get("kind") == "Namespace" and o.get("apiVersion") == "v1"
    }
    engine = open_engine(Bundle(modules, {"kubernetes": {"namespaces": namespaces}}))
    out: list[dict[str, Any]] = []
    try:
        for obj in objects:
            if is_mutator(obj) or is_expansion_template(obj):
                continue
            results = engine.evaluate(f"data.{PACKAGE}.results", {"request": _request(obj)})
            errors = [r["error"] for r in results if "error" in r]
            if errors:
                name = (obj.get("metadata") or {}).get("name", "")
                raise RegokiteError(f"error expanding resources: error expanding resource {name}: {errors[0]}")
            out += [r["object"] for r in results]
    finally:
        engine.close()
    return out


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
