"""Controller definitions: every kind a `--controllers` file may hold, read once.

Metacontroller's `CompositeController` and `DecoratorController` load
verbatim; regokite's `Watch` sits beside them. A hook either names a Rego
package (`rego: {package: a.b}`) or keeps its Metacontroller webhook pointing
at OPA's data API (`http://opa:8181/v0/data/a/b`), read as the package (or
rule) it names. Every unknown or invalid field is reported with its path,
e.g. `hello.yaml: CompositeController hello: spec.hooks.sync: ...`, never
ignored. `load` reads each file once and dispatches each document by
apiVersion and kind; CustomResourceDefinitions kept beside the definitions
are returned too (they give kinds and plurals without a cluster).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from regokite import yamldoc
from regokite.controllers import schema
from regokite.controllers.decorator.decisions import DecoratorController, parse_decorator
from regokite.controllers.schema import (  # re-exported: the records every definition is made of
    ChildResource,
    DefinitionError,
    Hooks,
    HookTarget,
    ResourceRule,
)
from regokite.controllers.watch import decisions as watch
from regokite.controllers.watch.decisions import Watch
from regokite.errors import show

__all__ = ["ChildResource", "DefinitionError", "HookTarget", "Hooks", "ResourceRule"]

API_GROUP = "metacontroller.k8s.io"
API_VERSION = f"{API_GROUP}/v1alpha1"


@dataclass(frozen=True)
class ParentResource(ResourceRule):
    label_selector: dict[str, Any] | None = None
    ignore_status_changes: bool = False
    revision_history_field_paths: tuple[str, ...] = ("spec",)


@dataclass(frozen=True)
class CompositeController:
    name: str
    parent: ParentResource
    children: tuple[ChildResource, ...]
    hooks: Hooks
    generate_selector: bool = False
    resync_period_seconds: float | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def finalizer(self) -> str:
        """The finalizer kept on parents while a finalize hook has work to do: Metacontroller's name, so a
        parent it left finalizing is finished here, and scripts that wait on it see the same name."""
        return f"metacontroller.io/compositecontroller-{self.name}"

    @property
    def child_annotations(self) -> dict[str, str]:
        return {}

    def child_rule(self, api_version: str, resource: str) -> ChildResource | None:
        return next((c for c in self.children if c.api_version == api_version and c.resource == resource), None)


# ----------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Definitions:
    """What a set of definitions files holds, each kind in file order."""

    controllers: tuple[CompositeController | DecoratorController, ...] = ()
    watches: tuple[Watch, ...] = ()
    crds: tuple[dict[str, Any], ...] = ()  # CustomResourceDefinitions kept beside the definitions

    @property
    def composites(self) -> list[CompositeController]:
        return [d for d in self.controllers if isinstance(d, CompositeController)]

    @property
    def decorators(self) -> list[DecoratorController]:
        return [d for d in self.controllers if isinstance(d, DecoratorController)]


def load(paths: Iterable[str | os.PathLike[str]]) -> Definitions:
    """Every CompositeController, DecoratorController and Watch in `paths` (files with one or more
    YAML documents, or directories), each file read once.

    Documents of other API groups are skipped (CRDs are kept); other Metacontroller and
    regokite.dev kinds are refused, not ignored. Finding nothing at all is an error.
    """
    paths = list(paths)
    problems: list[str] = []
    controllers: list[Any] = []
    watches: list[Watch] = []
    crds: list[dict[str, Any]] = []
    for file in schema.definition_files(paths, problems):
        shown = schema.display_path(file)
        try:
            docs = list(yamldoc.load_all(file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{shown}: {exc}")
            continue
        except yamldoc.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark else shown
            problems.append(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
            continue
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            where = shown if len(docs) == 1 else f"{shown}[{index}]"
            if not isinstance(doc, dict):
                problems.append(f"{where}: expected a Kubernetes object, got {show(doc)}")
            elif watch.is_watch(doc):
                if (w := watch.parse_watch(doc, where, problems)) is not None:
                    watches.append(w)
            elif doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
            elif (d := parse_definition(doc, where, problems)) is not None:
                controllers.append(d)
    _refuse_twice(controllers, problems)
    _refuse_twice(watches, problems)
    if problems:
        raise DefinitionError(problems)
    if not controllers and not watches:
        raise DefinitionError(
            [f"{', '.join(map(str, paths))}: no CompositeController, DecoratorController or Watch found"]
        )
    return Definitions(tuple(controllers), tuple(watches), tuple(crds))


def load_definitions(paths: Iterable[str | os.PathLike[str]]) -> list[CompositeController | DecoratorController]:
    """The Metacontroller definitions in `paths`; refused when there are none."""
    paths = list(paths)
    found = load(paths).controllers
    if not found:
        raise DefinitionError([f"{', '.join(map(str, paths))}: no CompositeController or DecoratorController found"])
    return list(found)


def _refuse_twice(found: Iterable[Any], problems: list[str]) -> None:
    seen: dict[str, str] = {}
    for d in found:
        if d.name in seen:
            problems.append(f"{d.source}: {type(d).__name__} {d.name}: metadata.name: also defined in {seen[d.name]}")
        seen.setdefault(d.name, d.source)


# ----------------------------------------------------------------------- parsing


def parse_definition(doc: dict[str, Any], source: str, problems: list[str]) -> Any:
    """One Metacontroller document -> a definition, or None (problems appended, or not ours)."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or api_version.split("/")[0] != API_GROUP:
        return None  # a CRD or another manifest kept next to the definition
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    c = schema.Checker(f"{source}: {kind} {name or '(unnamed)'}", problems)
    if api_version != API_VERSION:
        c.error("apiVersion", f"must be {API_VERSION}, got {api_version!r}")
    if kind == "DecoratorController":
        return parse_decorator(c, doc, name, source)
    if kind != "CompositeController":
        c.error("kind", f"must be CompositeController or DecoratorController, got {show(kind)}")
        return None
    spec = schema.metacontroller_spec(
        c,
        doc,
        ("parentResource", "childResources", "resyncPeriodSeconds", "generateSelector", "hooks"),
        required=("parentResource",),
    )
    parent = _parent(c, spec.get("parentResource"), "spec.parentResource")
    children = tuple(
        child
        for i, raw in enumerate(c.array(spec.get("childResources"), "spec.childResources"))
        if (child := schema.parse_child(c, raw, f"spec.childResources[{i}]")) is not None
    )
    schema.refuse_duplicates(c, children, "spec.childResources")
    hooks = schema.parse_hooks(c, spec.get("hooks"), "spec.hooks")
    generate = c.boolean(spec.get("generateSelector"), "spec.generateSelector")
    resync = c.number(spec.get("resyncPeriodSeconds"), "spec.resyncPeriodSeconds")
    if not c.ok or parent is None or hooks is None:
        return None
    return CompositeController(
        name=name,
        parent=parent,
        children=children,
        hooks=hooks,
        generate_selector=bool(generate),
        resync_period_seconds=resync or None,
        source=source,
        raw=doc,
    )


def _parent(c: schema.Checker, raw: Any, path: str) -> ParentResource | None:
    rule = schema.parse_rule(c, raw, path, ("labelSelector", "revisionHistory", "ignoreStatusChanges"))
    if rule is None:
        return None
    obj, api_version, resource = rule
    selector = schema.parse_label_selector(c, obj.get("labelSelector"), schema.join(path, "labelSelector"))
    history = c.obj(obj.get("revisionHistory"), schema.join(path, "revisionHistory"), ("fieldPaths",))
    field_paths = tuple(
        p
        for i, p in enumerate(c.array(history.get("fieldPaths"), schema.join(path, "revisionHistory.fieldPaths")))
        if c.string(p, f"{path}.revisionHistory.fieldPaths[{i}]") is not None
    )
    ignore = c.boolean(obj.get("ignoreStatusChanges"), schema.join(path, "ignoreStatusChanges"))
    return ParentResource(
        api_version,
        resource,
        label_selector=selector,
        ignore_status_changes=bool(ignore),
        revision_history_field_paths=field_paths or ("spec",),
    )
