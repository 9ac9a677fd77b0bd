"""`regokite check`: the admission policies on manifests, offline, as the server would decide.

Each object of the input becomes a CREATE AdmissionReview and goes through
the server's own decision code (`admission.decide`: `match`, enforcement,
failure policy): mutating policies and Gatekeeper's mutators first, then the
validating policies on the mutated object, as the API server calls them.
Gatekeeper's constraints are judged as gator judges them (its enforcement
point `gator.gatekeeper.sh`: scoped actions for gator, every operation, no
Config exclusions), or at another point (`--enforcement-point`): the
webhook's replays what the admission server would decide.
Policies that read cluster data see the input's other objects, and the
objects of `--data` files, in kube-mgmt's layout, as the server's replicated
data would hold them once applied.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from regokite import input_guard
from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet
from regokite.admission.review import creation_review
from regokite.clusterdata.store import CLUSTER_KINDS, ReplicaStore, guess_resource
from regokite.errors import RegokiteError

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class _Loader(yaml.SafeLoader):
    """YAML as the API server reads it: a date stays a string (PyYAML would make a `date`)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass
class Manifest:
    """One object of the input, where it came from, and how it was decided."""

    source: str
    document: int  # 0-based index of the YAML document in its file, empty ones counted
    object: dict[str, Any]
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    mutated: dict[str, Any] | None = None  # the object as the mutating policies left it, when they changed it
    details: list[dict[str, Any]] = field(default_factory=list)  # constraints' violations that carry details
    # violations under an action that neither refuses nor warns (dryrun, or one only gator reads), each
    # `[policy] message (action)`: gator test prints every violation, and fails only on deny
    reported: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.object["kind"]

    @property
    def namespace(self) -> str:
        return self.object["metadata"].get("namespace") or ""

    @property
    def name(self) -> str:
        return self.object["metadata"].get("name") or self.object["metadata"].get("generateName") or ""

    def ref(self) -> str:
        return "/".join(p for p in (self.kind, self.namespace, self.name) if p)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.source,
            "document": self.document,
            "apiVersion": self.object.get("apiVersion", ""),
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "allowed": not self.failures,
            "failures": self.failures,
            "warnings": self.warnings,
            **({"mutated": self.mutated} if self.mutated is not None else {}),
            **({"details": self.details} if self.details else {}),
            **({"reported": self.reported} if self.reported else {}),
        }


def read_manifests(sources: Sequence[str], namespace: str | None) -> list[Manifest]:
    """Every object in `sources` (files, directories of *.yaml/*.yml/*.json, `-` for stdin).

    A document that is not a Kubernetes object is an error naming file and
    document; `kind: List` (as `kubectl get -o yaml` prints) stands for its items.
    """
    found: list[Manifest] = []
    for name, text in _texts(sources):
        for index, doc in enumerate(_documents(name, text)):
            if doc is None:  # an empty or comment-only document
                continue
            for obj in _items(doc, f"{name}: document {index}"):
                try:
                    input_guard.check(obj, root="object")
                except input_guard.InputRejected as exc:
                    raise RegokiteError(f"{name}: document {index}: {exc}") from None
                found.append(Manifest(name, index, _namespaced(obj, namespace)))
    return found


def _texts(sources: Sequence[str]) -> Iterator[tuple[str, str]]:
    for source in sources:
        if source == "-":
            yield "<stdin>", sys.stdin.read()
            continue
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        elif path.is_file() and path.suffix not in MANIFEST_SUFFIXES:  # gator's rule and words
            raise RegokiteError(f'path "{source}" must be of extensions: [{" ".join(MANIFEST_SUFFIXES)}]')
        elif path.is_file():
            files = [path]
        else:
            raise RegokiteError(f"{source}: no such file or directory")
        for file in files:
            try:
                yield str(file), file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise RegokiteError(f"{file}: cannot read: {exc}") from None


def _documents(name: str, text: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise RegokiteError(f"{where}: not YAML or JSON: {getattr(exc, 'problem', exc)}") from None


def _items(doc: Any, where: str) -> Iterator[dict[str, Any]]:
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        for i, item in enumerate(doc["items"]):
            yield from _items(item, f"{where} items[{i}]")
        return
    if not isinstance(doc, dict):
        raise RegokiteError(f"{where}: not a Kubernetes object (a {type(doc).__name__})")
    meta = doc.get("metadata")
    if not isinstance(doc.get("kind"), str) or not isinstance(doc.get("apiVersion"), str):
        raise RegokiteError(f"{where}: not a Kubernetes object (needs apiVersion and kind)")
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        raise RegokiteError(f"{where}: {doc['kind']} has no metadata.name")
    yield doc


def _namespaced(obj: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """The object as the API server would store it: namespaced kinds get `namespace` when they name none
    (None: as written)."""
    meta = obj["metadata"]
    if namespace is None or obj["kind"] in CLUSTER_KINDS or meta.get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "namespace": namespace}}


def check(
    policy_set: PolicySet, manifests: Sequence[Manifest], existing: Iterable[Manifest] = (), process: str = "gator"
) -> None:
    """Decide every manifest; each sees the others and `existing` as replicated data, not itself.
    `process` is the Gatekeeper process judging them (gator's point, or the webhook's or audit's)."""
    store = ReplicaStore()
    for m in (*existing, *manifests):
        _put(store, m)
    policy_set.follow(store)
    for i, manifest in enumerate(manifests):
        _remove(store, manifest)  # not created yet: a CREATE never finds itself in the cluster
        try:
            group, _, version = manifest.object["apiVersion"].rpartition("/")
            resource = (group, version, guess_resource(manifest.kind))
            review = creation_review(manifest.object, resource, f"check-{i}", process=process)
            mutation = decide(policy_set, review, mode="mutate").verdict
            if mutation.allowed and mutation.patch:  # mutating webhooks run before validating ones
                manifest.mutated = jsonpatch.apply_patch(manifest.object, mutation.patch)
                review = creation_review(manifest.mutated, resource, f"check-{i}", process=process)
            decision = decide(policy_set, review, mode="validate")
            verdict = decision.verdict
            manifest.details = [
                {"policy": o.policy, "msg": message, "details": details}
                for o in decision.outcomes
                for message, details in zip(o.messages, o.details, strict=False)
                if details is not None
            ]
            manifest.reported = [
                f"[{o.policy}] {m} ({o.action})"
                for o in decision.outcomes
                if o.decision == "dryrun"
                for m in o.messages
            ]
            if not mutation.allowed:  # a policy with deny and patch answers in both modes: once each
                verdict.allowed = False
                verdict.messages = _once([*mutation.messages, *verdict.messages])
            verdict.warnings = _once([*mutation.warnings, *verdict.warnings])
        finally:
            _put(store, manifest)
        manifest.failures = [] if verdict.allowed else verdict.messages
        manifest.warnings = verdict.warnings


def _once(messages: list[str]) -> list[str]:
    return list(dict.fromkeys(messages))


def _put(store: ReplicaStore, m: Manifest) -> None:
    store.put(guess_resource(m.kind), m.object, namespaced=bool(m.namespace))


def _remove(store: ReplicaStore, m: Manifest) -> None:
    store.remove(guess_resource(m.kind), m.namespace, m.name, namespaced=bool(m.namespace))


def render_pretty(manifests: Sequence[Manifest]) -> str:
    """conftest-like: one line per failure, warning or reported violation, then a summary."""
    lines = []
    for m in manifests:
        where = f"{m.source}[{m.document}] - {m.ref()}"
        lines += [f"FAIL - {where} - {msg}" for msg in m.failures]
        lines += [f"WARN - {where} - {msg}" for msg in m.warnings]
        lines += [f"NOTE - {where} - {msg}" for msg in m.reported]
    failures = sum(len(m.failures) for m in manifests)
    warnings = sum(len(m.warnings) for m in manifests)
    refused = sum(1 for m in manifests if m.failures)
    lines.append(
        f"{len(manifests)} objects, {len(manifests) - refused} allowed, {refused} refused"
        f" ({failures} failures, {warnings} warnings)"
    )
    return "\n".join(lines)


def render_json(manifests: Sequence[Manifest]) -> str:
    return json.dumps(_report(manifests), indent=2)


def render_yaml(manifests: Sequence[Manifest]) -> str:
    """The JSON report as YAML (gator test's `-o yaml`)."""
    return yaml.safe_dump(_report(manifests), sort_keys=False, allow_unicode=True, width=1_000_000)


def _report(manifests: Sequence[Manifest]) -> dict[str, Any]:
    return {
        "objects": [m.as_dict() for m in manifests],
        "summary": {
            "objects": len(manifests),
            "refused": sum(1 for m in manifests if m.failures),
            "failures": sum(len(m.failures) for m in manifests),
            "warnings": sum(len(m.warnings) for m in manifests),
        },
    }
