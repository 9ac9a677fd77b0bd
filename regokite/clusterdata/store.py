"""The replicated objects in kube-mgmt's layout, and the log engines follow.

The document is updated in place, one object per change, never rebuilt.
Engines keep their own copy (regorus values, or a sidecar OPA's store) and
catch up on the changes since the generation they last applied, in one batch
before their next evaluation; a follower too far behind the bounded log
reloads the whole document.

`ReplicaStore` holds the objects as Python values; `TextReplicaStore` holds
each object as its JSON text (the admission server's feeder and its workers'
mirrors): about a fifth of the memory, and an engine loads the texts joined
into one document. (Gatekeeper's `data.inventory` parses each text once
per load to place it, and drops the parse.)
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from regokite import input_guard
from regokite.errors import RegokiteError

Obj = dict[str, Any]
Path = tuple[str, ...]  # below the root: (resource, namespace, name) or (resource, name)


class ReplicationError(RegokiteError):
    """A resource to replicate that is not of the form [GROUP/]VERSION/RESOURCE."""


@dataclass(frozen=True, order=True)
class ResourceRef:
    """A resource to replicate: `[GROUP/]VERSION/RESOURCE`, namespaced or cluster-scoped."""

    group: str
    version: str
    resource: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}/{self.resource}"


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def parse_resource(text: str, *, namespaced: bool) -> ResourceRef:
    """`v1/configmaps`, `networking.k8s.io/v1/ingresses` (kube-mgmt's flag syntax)."""
    parts = text.strip().split("/")
    if len(parts) == 2:
        parts.insert(0, "")
    if len(parts) != 3 or not all(_NAME.match(p) for p in parts[1:]) or (parts[0] and not _NAME.match(parts[0])):
        raise ReplicationError(f"{text!r} is not [GROUP/]VERSION/RESOURCE (e.g. v1/namespaces, apps/v1/deployments)")
    return ResourceRef(parts[0], parts[1], parts[2], namespaced)


# Kinds of the built-in APIs that have no namespace; anything else is namespaced
# (there is no discovery offline): `regokite check` gives it --namespace when it names none.
CLUSTER_KINDS = frozenset(
    {
        "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "ComponentStatus",
        "CSIDriver", "CSINode", "CustomResourceDefinition", "FlowSchema", "IngressClass",
        "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume", "PriorityClass",
        "PriorityLevelConfiguration", "RuntimeClass", "StorageClass", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration", "VolumeAttachment",
    }
)  # fmt: skip


def guess_resource(kind: str) -> str:
    """The plural resource of a kind without asking discovery, as kubectl's
    `UnsafeGuessKindToResource` does: for offline checks only."""
    lower = kind.lower()
    if not lower:
        return lower
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


@dataclass(frozen=True)
class Change:
    """One edit of the document: `value` None removes `path`; `created` says the path was absent."""

    path: Path
    value: Any
    created: bool


def replica_root(path: str) -> Path:
    """Where `--replicate-path` puts replicated objects in data (`a/b` or `a.b`: data.a.b)."""
    root = tuple(p for p in path.replace(".", "/").split("/") if p)
    if not root:
        raise ReplicationError("the replication path must not be empty")
    return root


class ReplicaStore:
    """Replicated objects under `root`, with a bounded log of changes by generation.

    Thread-safe: informer threads write, evaluation threads read under `lock`.
    `max_lag` is how long (seconds) a follower may keep answering on the
    replica as it was, rather than pay for a whole reload on every change:
    the bound on how late a change or removal may show, beside the watch's own delay.
    """

    holds_text = False  # objects held as Python values (TextReplicaStore: as their JSON text)

    def __init__(self, root: str = "kubernetes", *, log_size: int = 10_000, max_lag: float = 0.0) -> None:
        self.root: Path = replica_root(root)
        self.max_lag = max_lag
        self.lock = threading.Lock()
        self.document: dict[str, Any] = {}
        self.generation = 0
        self._log: deque[tuple[int, Change]] = deque(maxlen=log_size)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def declare(self, resource: str) -> None:
        """Make `data.<root>.<resource>` exist (empty) before the first object arrives."""
        with self.lock:
            if resource not in self.document:
                self._record(Change((resource,), {}, True))
                self.document[resource] = {}

    def put(self, resource: str, obj: Obj, *, namespaced: bool) -> None:
        """Add or replace `obj`; input_guard.InputRejected (and the store unchanged)
        for a value no engine may hold, naming where it would have gone."""
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            return
        namespace = meta.get("namespace") or ""
        where = ".".join(("data", *self.root, resource, *((namespace,) if namespaced else ()), name))
        input_guard.check(obj, root=where)
        held = self._hold(obj)
        with self.lock:
            tree = self.document.get(resource)
            if tree is None:
                self._record(Change((resource,), {}, True))
                tree = self.document[resource] = {}
            if namespaced:
                bucket = tree.get(namespace)
                if bucket is None:
                    # the namespace is new: one change adding it whole, so a
                    # follower's store never needs a missing parent
                    self._record(Change((resource, namespace), {name: held}, True))
                    tree[namespace] = {name: held}
                    self._count += 1
                    return
                path: Path = (resource, namespace, name)
            else:
                bucket, path = tree, (resource, name)
            previous = bucket.get(name)
            if previous is not None and self._same(previous, held):
                return  # the same state again (an informer's relist, a seed): no change
            created = previous is None
            self._count += created
            bucket[name] = held
            self._record(Change(path, held, created))

    def remove(self, resource: str, namespace: str, name: str, *, namespaced: bool) -> None:
        with self.lock:
            tree = self.document.get(resource) or {}
            bucket = tree.get(namespace) if namespaced else tree
            if not bucket or name not in bucket:
                return
            del bucket[name]
            self._count -= 1
            if namespaced and not bucket:
                del tree[namespace]
                self._record(Change((resource, namespace), None, False))
            else:
                self._record(Change((resource, namespace, name) if namespaced else (resource, name), None, False))

    def _record(self, change: Change) -> None:
        self.generation += 1
        self._log.append((self.generation, change))

    def changes_since(self, generation: int) -> list[Change] | None:
        """The changes after `generation`, oldest first; None when the log no longer reaches back."""
        with self.lock:
            if generation == self.generation:
                return []
            if not self._log or self._log[0][0] > generation + 1:
                return None
            behind = self.generation - generation  # generations are consecutive: the log's last entries
            return [c for _, c in itertools.islice(reversed(self._log), behind)][::-1]

    # -- a mirror: a copy in another process, fed by the changes of this one (controller hook workers)

    def apply(self, changes: Iterable[Change]) -> None:
        """Make the same edits another store made (its `changes_since`), in order."""
        with self.lock:
            for change in changes:
                *parents, last = change.path
                node = self.document
                for key in parents:
                    node = node.setdefault(key, {})
                if change.value is None:
                    node.pop(last, None)
                else:
                    node[last] = change.value
                self._record(change)

    def replace(self, document: dict[str, Any]) -> None:
        """Hold `document` whole: followers reload (the log no longer reaches back to them)."""
        with self.lock:
            self.document = document
            self._log.clear()
            self.generation += 1

    def pieces(self, size: int) -> tuple[int, Iterator[dict[str, Any]]]:
        """The whole document (below the root) as documents whose merge is it, each of about `size`
        bytes of objects or fewer, and the generation they hold: for a load in steps, between which
        the store may change (its dicts are copied under the lock, down to the objects).

        A text store splits a namespace's objects by their texts' length; a store of Python values
        keeps each namespace (or cluster-scoped object) whole, counted 1 KiB an entry.
        """
        with self.lock:
            snapshot = {
                resource: {key: dict(node) if isinstance(node, dict) else node for key, node in tree.items()}
                for resource, tree in self.document.items()
            }
            generation = self.generation
        return generation, _split(snapshot, size, self.holds_text)

    def text_bytes(self) -> int:
        """The length of the objects' JSON texts held (0 for a store of Python values)."""
        return 0

    def rooted(self, value: Any, path: Path = ()) -> dict[str, Any]:
        """`value` placed at `<root>/<path>` as a nested document."""
        for key in reversed(self.root + path):
            value = {key: value}
        return value

    def full(self, apply: Callable[[dict[str, Any]], None]) -> int:
        """Call `apply` with the whole document (below the root), holding the lock; the generation it holds."""
        with self.lock:
            apply(self.document)
            return self.generation

    def object_at(self, resource: str, *keys: str) -> Any:
        """The object at `resource/[namespace/]name` as Python values, or None."""
        with self.lock:
            node: Any = self.document.get(resource)
            for key in keys:
                node = node.get(key) if isinstance(node, dict) else None
        return self._read(node) if node is not None else None

    # -- what objects are held as: the Python values here, JSON text in TextReplicaStore

    def _hold(self, obj: Obj) -> Any:
        return obj

    def _same(self, previous: Any, held: Any) -> bool:
        return _version(previous) == _version(held) is not None

    def _read(self, held: Any) -> Any:
        return held

    def loadable(self, document: dict[str, Any]) -> dict[str, Any] | str:
        """`document` (parts of this store's, e.g. `rooted`) as an engine takes it: Python values
        for `add_data`, or JSON text (a `str`) for `add_data_json`."""
        return document

    def dumps(self, value: Any) -> str:
        """A document, or a change's value, as JSON text."""
        return json.dumps(value, separators=(",", ":"), allow_nan=False, default=jsonable)

    def json_patch(self, changes: Iterable[Change]) -> str:
        """Changes as RFC 6902 operations relative to the root (OPA's `PATCH /v1/data/<root>`), as JSON text."""
        ops = []
        for change in changes:
            pointer = json.dumps("/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in change.path))
            if change.value is None:
                ops.append(f'{{"op":"remove","path":{pointer}}}')
            else:
                ops.append(f'{{"op":"add","path":{pointer},"value":{self.dumps(change.value)}}}')
        return "[" + ",".join(ops) + "]"


class TextReplicaStore(ReplicaStore):
    """A ReplicaStore holding each object as its JSON text (compact, ASCII): the same layout, changes and
    log, with a `str` where the other holds an object's dict.

    The admission server's feeder fills one and each worker mirrors it: a
    worker keeps no Python copy of the objects, and its engine loads the
    texts joined (`loadable`). A relisted object whose text is unchanged
    is no change.
    """

    holds_text = True

    def _hold(self, obj: Obj) -> str:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False, default=jsonable)

    def _same(self, previous: Any, held: Any) -> bool:
        return previous == held

    def _read(self, held: Any) -> Any:
        return _decoded(held)

    def loadable(self, document: dict[str, Any]) -> str:
        return self.dumps(document)

    def text_bytes(self) -> int:
        with self.lock:
            return sum(_length(tree) for tree in self.document.values())

    def dumps(self, value: Any) -> str:
        """Dicts written as JSON, with each object's text (a `str` leaf) placed as it is."""
        parts: list[str] = []
        _join(value, parts)
        return "".join(parts)


def _length(node: Any) -> int:
    return len(node) if isinstance(node, str) else sum(_length(value) for value in node.values())


def _split(snapshot: dict[str, Any], size: int, text: bool) -> Iterator[dict[str, Any]]:
    """`ReplicaStore.pieces` of a copied document: pieces of at most about `size` bytes, at least one."""
    piece: dict[str, Any] = {}
    filled = 0
    for resource, tree in snapshot.items():
        placed = piece.setdefault(resource, {})  # a resource without objects is still in data
        for key, node in tree.items():
            if text and isinstance(node, dict):  # a namespace's objects, as texts: split between them
                for name, obj in node.items():
                    placed.setdefault(key, {})[name] = obj
                    filled += len(obj)
                    if filled >= size:
                        yield piece
                        piece, filled = {}, 0
                        placed = piece.setdefault(resource, {})
                continue
            placed[key] = node
            filled += len(node) if text else 1024 * (len(node) if isinstance(node, dict) else 1)
            if filled >= size:
                yield piece
                piece, filled = {}, 0
                placed = piece.setdefault(resource, {})
    yield piece  # the last, or the only one: an empty document still places the root


def _join(node: Any, parts: list[str]) -> None:
    """`node` (dicts down to JSON text leaves) as JSON, appended to `parts` without copying the leaves."""
    if isinstance(node, str):
        parts.append(node)
        return
    parts.append("{")
    for i, (key, value) in enumerate(node.items()):
        parts.append(f"{',' if i else ''}{_encode_key(key)}:")
        _join(value, parts)
    parts.append("}")


_encode_key = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _decoded(node: Any) -> Any:
    """A node of a TextReplicaStore's document as Python values."""
    if isinstance(node, str):
        return json.loads(node)
    return {key: _decoded(value) for key, value in node.items()}


def jsonable(value: Any) -> Any:
    """A set (a YAML `!!set` read by `regokite check`; the input guard lets sets through) as JSON's list."""
    if isinstance(value, set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _version(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def creations(changes: Iterable[Change]) -> dict[str, Any]:
    """Changes that only add paths, merged into one document to add (below the root)."""
    merged: dict[str, Any] = {}
    for change in changes:
        node = merged
        for key in change.path[:-1]:
            node = node.setdefault(key, {})
        last = change.path[-1]
        if isinstance(change.value, dict) and isinstance(node.get(last), dict):
            node[last].update(change.value)
        else:
            node[last] = dict(change.value) if len(change.path) < 3 and isinstance(change.value, dict) else change.value
    return merged


def store_of(objects: Iterable[Obj], root: str = "kubernetes") -> ReplicaStore:
    """A store of the given objects, resources guessed from kinds, scope from `metadata.namespace`
    (for offline checks: the other objects of the same input)."""
    store = ReplicaStore(root)
    for obj in objects:
        kind = obj.get("kind")
        if not isinstance(kind, str) or not isinstance(obj.get("metadata"), dict):
            continue
        store.put(guess_resource(kind), obj, namespaced=bool(obj["metadata"].get("namespace")))
    return store


def check_replica_root(bundle_data: dict[str, Any], store: ReplicaStore) -> None:
    """Refuse a bundle whose own data sits where replicated objects go: one would hide the other."""
    node: Any = bundle_data
    for depth, key in enumerate(store.root, 1):
        if not isinstance(node, dict) or key not in node:
            return
        node = node[key]
        if not isinstance(node, dict) or depth == len(store.root):
            where = "data." + ".".join(store.root[:depth])
            raise ReplicationError(f"the policies' own data defines {where}, where replicated objects go")


def encode_changes(changes: Iterable[Change]) -> list[list[Any]]:
    """Changes as JSON-able rows, for a mirror in another process."""
    return [[list(c.path), c.value, c.created] for c in changes]


def decode_changes(rows: Iterable[list[Any]]) -> list[Change]:
    return [Change(tuple(path), value, created) for path, value, created in rows]
