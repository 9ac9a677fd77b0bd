"""ConstraintTemplates and Constraints read from YAML, with where each came from.

Templates of `templates.gatekeeper.sh` v1, v1beta1 and v1alpha1 carry Rego
either as `targets[].rego` + `libs` or as `targets[].code[]` entries with
`engine: Rego` and `source.rego` / `source.libs` / `source.version`. The
line in the file where each Rego text starts is kept, so a compile error
inside a template is reported at its line in the template file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from regokite import yamldoc
from regokite.engine.extensions.external_data import Provider, ProviderError
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.enforcement import Enforcement, EnforcementError, read_enforcement

TEMPLATE_GROUP = "templates.gatekeeper.sh"
CONSTRAINT_GROUP = "constraints.gatekeeper.sh"
CONFIG_GROUP = "config.gatekeeper.sh"
MUTATION_GROUP = "mutations.gatekeeper.sh"
EXPANSION_GROUP = "expansion.gatekeeper.sh"
PROVIDER_GROUP = "externaldata.gatekeeper.sh"
SYNCSET_GROUP = "syncset.gatekeeper.sh"
ADMISSION_TARGET = "admission.k8s.gatekeeper.sh"


class ResourceError(PolicyLoadError):
    """A template or constraint document that is not of the documented shape."""


@dataclass(frozen=True)
class RegoSource:
    """One Rego text of a template: the main module or a lib."""

    text: str
    file: str
    line: int  # line in `file` where the text's first line is
    role: str  # "rego" or "libs[i]"
    indent: int = 0  # columns of `file` before the text's (a block scalar's indentation)


@dataclass(frozen=True)
class Template:
    name: str
    kind: str
    file: str
    rego: RegoSource | None
    libs: tuple[RegoSource, ...] = ()
    v1: bool = False
    schema: dict[str, Any] | None = None
    engines: tuple[str, ...] = ()  # every engine named under code[], Rego included
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    operations: tuple[str, ...] = ()  # targets[0].operations: what the webhook judges (none: every operation)


@dataclass(frozen=True)
class Constraint:
    kind: str
    name: str
    file: str
    match: dict[str, Any]
    parameters: Any
    enforcement: Enforcement = field(default_factory=Enforcement)
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


def is_template(doc: Any) -> bool:
    return isinstance(doc, dict) and _group(doc) == TEMPLATE_GROUP and doc.get("kind") == "ConstraintTemplate"


def is_constraint(doc: Any) -> bool:
    return isinstance(doc, dict) and _group(doc) == CONSTRAINT_GROUP


def is_config(doc: Any) -> bool:
    return isinstance(doc, dict) and _group(doc) == CONFIG_GROUP and doc.get("kind") == "Config"


def is_provider(doc: Any) -> bool:
    return isinstance(doc, dict) and _group(doc) == PROVIDER_GROUP and doc.get("kind") == "Provider"


def parse_provider(doc: dict[str, Any], file: str) -> Provider:
    """An external data `Provider` (v1beta1 or v1alpha1), checked as Gatekeeper checks it before use."""
    name = _dig(doc, "metadata", "name")
    try:
        return Provider.from_spec(name, doc.get("spec"))
    except ProviderError as exc:
        raise ResourceError(f"{file}: Provider {name or '?'}: {exc}") from None


def is_syncset(doc: Any) -> bool:
    return isinstance(doc, dict) and _group(doc) == SYNCSET_GROUP and doc.get("kind") == "SyncSet"


def parse_sync_only(doc: dict[str, Any], file: str) -> list[tuple[str, str, str]]:
    """A Config's `spec.sync.syncOnly`, or a SyncSet's `spec.gvks`: (group, version, kind) of what
    Gatekeeper replicates (the union of them all)."""
    syncset = is_syncset(doc)
    entries = (_dig(doc, "spec", "gvks") if syncset else _dig(doc, "spec", "sync", "syncOnly")) or []
    where = f"SyncSet {_dig(doc, 'metadata', 'name') or '?'} spec.gvks" if syncset else "Config spec.sync.syncOnly"
    if not isinstance(entries, list):
        raise ResourceError(f"{file}: {where} must be a list")
    found = []
    for i, entry in enumerate(entries):
        gvk = tuple(entry.get(k, "") if isinstance(entry, dict) else None for k in ("group", "version", "kind"))
        if not all(isinstance(v, str) for v in gvk) or not gvk[1] or not gvk[2]:
            raise ResourceError(f"{file}: {where}[{i}] needs version and kind (and group)")
        found.append(gvk)
    return found  # type: ignore[return-value]


CONFIG_PROCESSES = ("*", "audit", "webhook", "sync", "mutation-webhook")


def parse_config_match(doc: dict[str, Any], file: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """A Config's `spec.match`: (excludedNamespaces, processes) entries; errors name the field."""
    entries = _dig(doc, "spec", "match") or []
    if not isinstance(entries, list):
        raise ResourceError(f"{file}: Config spec.match must be a list")
    found = []
    for i, entry in enumerate(entries):
        where = f"{file}: Config spec.match[{i}]"
        namespaces = entry.get("excludedNamespaces") if isinstance(entry, dict) else None
        processes = entry.get("processes") if isinstance(entry, dict) else None
        if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
            raise ResourceError(f"{where}.excludedNamespaces must be a list of strings")
        if not isinstance(processes, list) or not all(p in CONFIG_PROCESSES for p in processes):
            raise ResourceError(f"{where}.processes must list some of {', '.join(CONFIG_PROCESSES)}")
        found.append((tuple(namespaces), tuple(processes)))
    return found


def _group(doc: dict[str, Any]) -> str:
    api_version = doc.get("apiVersion")
    return api_version.partition("/")[0] if isinstance(api_version, str) else ""


def read_documents(path: Path, shown: str) -> list[tuple[Any, yaml.Node | None]]:
    """Every object of a file with its node tree (for line numbers): each YAML document, and each
    item of a `kind: List` (what `kubectl get -o yaml` writes)."""
    try:
        text = path.read_text(encoding="utf-8")
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        docs = list(yamldoc.load_all(text))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ResourceError(f"{shown}: cannot read YAML: {exc}") from None
    found: list[tuple[Any, yaml.Node | None]] = []
    for doc, node in zip(docs, nodes, strict=False):
        if is_list(doc):
            found += [(item, _node_at(node, "items", i)) for i, item in enumerate(doc["items"])]
        else:
            found.append((doc, node))
    return found


def is_list(doc: Any) -> bool:
    """A `v1` List (or any `<Kind>List`) of objects, as kubectl reads one."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("kind"), str)
        and doc["kind"].endswith("List")
        and isinstance(doc.get("items"), list)
    )


def parse_template(doc: dict[str, Any], node: yaml.Node | None, file: str) -> Template:
    """A template from its document; raises ResourceError naming the field."""
    name = _dig(doc, "metadata", "name")
    spec = doc.get("spec")
    where = f"{file}: ConstraintTemplate {name or '?'}"
    if not isinstance(name, str) or not isinstance(spec, dict):
        raise ResourceError(f"{where}: needs metadata.name and spec")
    names = _dig(spec, "crd", "spec", "names")
    kind = names.get("kind") if isinstance(names, dict) else None
    if not isinstance(kind, str) or not kind.isidentifier():
        raise ResourceError(f"{where}: spec.crd.spec.names.kind must be a kind name, got {kind!r}")
    if kind.lower() != name:
        raise ResourceError(
            f"{where}: metadata.name must be the lowercased kind ({kind.lower()}), as Gatekeeper requires"
        )
    schema = _dig(spec, "crd", "spec", "validation", "openAPIV3Schema")
    targets = spec.get("targets")
    if not isinstance(targets, list) or len(targets) != 1 or not isinstance(targets[0], dict):
        raise ResourceError(f"{where}: spec.targets must hold exactly one target")
    target = targets[0]
    if target.get("target") != ADMISSION_TARGET:
        raise ResourceError(f"{where}: target {target.get('target')!r} is not {ADMISSION_TARGET}")
    target_node = _node_at(node, "spec", "targets", 0)
    rego, libs, v1, engines = _target_rego(target, target_node, file, where)
    operations = target.get("operations") or []
    if not isinstance(operations, list) or not all(isinstance(op, str) for op in operations):
        raise ResourceError(f"{where}: spec.targets[0].operations must be a list of operations")
    schema = schema if isinstance(schema, dict) else None
    return Template(name, kind, file, rego, libs, v1, schema, engines, doc, tuple(operations))


def _target_rego(
    target: dict[str, Any], node: yaml.Node | None, file: str, where: str
) -> tuple[RegoSource | None, tuple[RegoSource, ...], bool, tuple[str, ...]]:
    code = target.get("code")
    engines: list[str] = []
    if code is not None:
        if not isinstance(code, list):
            raise ResourceError(f"{where}: spec.targets[0].code must be a list")
        for i, entry in enumerate(code):
            engine = entry.get("engine") if isinstance(entry, dict) else None
            engines.append(str(engine))
            if engine != "Rego":
                continue
            source = entry.get("source")
            if not isinstance(source, dict) or not isinstance(source.get("rego"), str):
                raise ResourceError(f"{where}: spec.targets[0].code[{i}].source.rego must be Rego text")
            version = source.get("version", "v0")
            if version not in ("v0", "v1"):
                raise ResourceError(f"{where}: code[{i}].source.version must be v0 or v1, got {version!r}")
            src_node = _node_at(node, "code", i, "source")
            rego = _source(source["rego"], _node_at(src_node, "rego"), file, "rego")
            libs = _libs(source.get("libs"), _node_at(src_node, "libs"), file, where)
            return rego, libs, version == "v1", tuple(engines)
    if isinstance(target.get("rego"), str):
        rego = _source(target["rego"], _node_at(node, "rego"), file, "rego")
        return rego, _libs(target.get("libs"), _node_at(node, "libs"), file, where), False, ("Rego", *engines)
    return None, (), False, tuple(engines)


def _libs(value: Any, node: yaml.Node | None, file: str, where: str) -> tuple[RegoSource, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ResourceError(f"{where}: libs must be a list of Rego texts")
    return tuple(_source(text, _node_at(node, i), file, f"libs[{i}]") for i, text in enumerate(value))


def _source(text: str, node: yaml.Node | None, file: str, role: str) -> RegoSource:
    """A block scalar's text begins on the line after its `|`; a flow scalar on its own line."""
    if node is None:  # read from the API: lines are the Rego's own
        return RegoSource(text, file, 1, role)
    block = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
    line = node.start_mark.line + (2 if block else 1)
    return RegoSource(text, file, line, role, _indent(node.start_mark.buffer, line) if block else 0)


def _indent(buffer: str | None, line: int) -> int:
    """A block scalar's indentation: that of its first line that is not blank."""
    for text in (buffer or "").split("\n")[line - 1 :]:
        if text.strip():
            return len(text) - len(text.lstrip(" "))
    return 0


def parse_constraint(doc: dict[str, Any], file: str) -> Constraint:
    name = _dig(doc, "metadata", "name")
    kind = doc.get("kind")
    where = f"{file}: {kind} {name or '?'}"
    if not isinstance(name, str) or not isinstance(kind, str):
        raise ResourceError(f"{where}: a constraint needs kind and metadata.name")
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise ResourceError(f"{where}: spec must be an object")
    match = spec.get("match") or {}
    if not isinstance(match, dict):
        raise ResourceError(f"{where}: spec.match must be an object")
    try:
        enforcement = read_enforcement(spec)
    except EnforcementError as exc:
        raise ResourceError(f"{where}: {exc}") from None
    return Constraint(kind, name, file, match, spec.get("parameters", {}), enforcement, doc)


def _dig(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _node_at(node: yaml.Node | None, *path: str | int) -> yaml.Node | None:
    for step in path:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            node = next((v for k, v in node.value if getattr(k, "value", None) == step), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
        else:
            return None
    return node


def may_hold_resources(path: Path) -> bool:
    """Whether a YAML file names Gatekeeper's API groups (cheap: no parsing)."""
    data = path.read_bytes()
    groups = (
        TEMPLATE_GROUP, CONSTRAINT_GROUP, CONFIG_GROUP, MUTATION_GROUP, EXPANSION_GROUP, PROVIDER_GROUP, SYNCSET_GROUP,
    )  # fmt: skip
    return any(group.encode() in data for group in groups)


def gatekeeper_files(roots: Iterable[str | Path]) -> list[Path]:
    """YAML files below `roots` (hidden ones and data files aside) that may hold templates or constraints."""
    found: list[Path] = []
    for root in roots:
        root = Path(root)
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in candidates:
            relative = path.relative_to(root).parts if path != root else (path.name,)
            if any(part.startswith(".") for part in relative) or not path.is_file():
                continue
            if path.suffix in (".yaml", ".yml") and path.name not in ("data.yaml", "data.yml"):
                found.append(path)
    return found
