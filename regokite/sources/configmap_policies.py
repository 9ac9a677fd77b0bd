"""Policies and data from ConfigMaps, as kube-mgmt loads them, made into files regokite serves.

kube-mgmt (OPA's sidecar) loads every ConfigMap labelled
`openpolicyagent.org/policy=rego` (each key a Rego module, id
`<namespace>/<name>/<key>`) or `openpolicyagent.org/data=opa` (each key a
JSON document at `data.<namespace>.<name>.<key>`) in the namespaces it is given
(`*`: all), and says on each ConfigMap whether it loaded, in the annotation
`openpolicyagent.org/kube-mgmt-status`: `{"status":"ok"}` or
`{"status":"error","error":...}`. `ConfigMapSync` does the same for regokite:
it follows those ConfigMaps with watches and writes them as a policy
directory (`<out>/<namespace>/<name>/<key>`, data as
`<out>/<namespace>/<name>/<key>/data.json`) that `regokite admission`,
`controller` and `hooks` serve with `--policies <out>` and reload when it
changes, keeping their last good set.

Before a ConfigMap's new content is written, the whole set is compiled with
it, as OPA compiles a module it is given with the others: a ConfigMap that
does not parse or compile gets the error (file:line, the file naming
namespace, ConfigMap and key) and its last good content stays served, as
OPA keeps a module whose replacement it refused; the others are unaffected.
A restart keeps that: what the previous run wrote to the directory is the
last good content it starts from.

`followed_in_process` runs the same sync on a thread of a server
(`--policy-namespaces` of `admission`, `controller`, `hooks`, `audit`), into a
private directory the server adds to its `--policies` and reloads like any other;
in a directory that outlives the process (`--policy-namespaces-dir`, an emptyDir
in a pod) a restart keeps each refused ConfigMap's last good content, as
`regokite gatekeeper` keeps its last good versions in the file it wrote.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regokite.engine import EngineSettings, open_engine
from regokite.errors import RegokiteError
from regokite.kube.client import ApiError, KubeClient
from regokite.kube.informer import Informer
from regokite.sources.written_files import write_files

log = logging.getLogger("regokite.configmaps")
POLICY_LABEL = ("openpolicyagent.org/policy", "rego")
DATA_LABEL = ("openpolicyagent.org/data", "opa")
STATUS_ANNOTATION = "openpolicyagent.org/kube-mgmt-status"
SHOWN_AS = "configmap"  # errors name a ConfigMap's key as configmap/<namespace>/<name>/<key>

Files = dict[str, str]  # path below the output directory -> text


@dataclass(frozen=True)
class Source:
    """One labelled ConfigMap: what it holds, as files."""

    namespace: str
    name: str
    files: Files
    annotations: Mapping[str, str]

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"


def source_of(cm: Mapping[str, Any]) -> tuple[Source | None, str | None]:
    """The ConfigMap as files, or why it cannot be (data that is not a JSON object)."""
    meta = cm.get("metadata") or {}
    labels = meta.get("labels") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    is_data = labels.get(DATA_LABEL[0]) == DATA_LABEL[1]
    is_policy = not is_data and labels.get(POLICY_LABEL[0]) == POLICY_LABEL[1]  # kube-mgmt: data wins
    if not (is_data or is_policy):
        return None, None
    files: Files = {}
    for key, text in sorted((cm.get("data") or {}).items()):
        if is_policy:
            files[f"{ns}/{name}/{key if key.endswith('.rego') else key + '.rego'}"] = text
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            return None, f"{SHOWN_AS}/{ns}/{name}/{key}: invalid JSON: {exc}"
        if not isinstance(value, dict):
            return None, f"{SHOWN_AS}/{ns}/{name}/{key}: a data key must hold a JSON object"
        files[f"{ns}/{name}/{key}/data.json"] = json.dumps(value, sort_keys=True)
    return Source(ns, name, files, meta.get("annotations") or {}), None


def written(out: Path) -> dict[str, Files]:
    """What a previous run wrote to `out`, by ConfigMap id (`<namespace>/<name>/...`): a ConfigMap found
    broken after a restart keeps serving the content served before it, as within one run."""
    found: dict[str, Files] = {}
    if not out.is_dir():
        return found
    for path in sorted(out.rglob("*")):
        parts = path.relative_to(out).parts
        if len(parts) < 3 or not path.is_file() or any(p.startswith(".") for p in parts):
            continue
        try:
            found.setdefault(f"{parts[0]}/{parts[1]}", {})["/".join(parts)] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return found


def status_annotation(error: str | None) -> str:
    """kube-mgmt's annotation value (compact JSON, as Go's encoder writes it)."""
    status = {"status": "ok"} if error is None else {"status": "error", "error": error}
    return json.dumps(status, separators=(",", ":"))


def load_error(sources: Mapping[str, Files], engine: EngineSettings) -> str | None:
    """Why the files of `sources` (by ConfigMap id) do not load together (None: they do), files named
    configmap/...: the check of every pass, and of a ConfigMap being applied (`refusal`)."""
    with tempfile.TemporaryDirectory(prefix="regokite-configmaps-") as tmp:
        staging = Path(tmp) / SHOWN_AS
        for files in sources.values():
            for path, text in files.items():
                (staging / path).parent.mkdir(parents=True, exist_ok=True)
                (staging / path).write_text(text, encoding="utf-8")
        if not staging.exists():
            return None
        try:
            checked = open_engine(engine.load([staging]).without_tests(), engine)
            checked.close()
        except RegokiteError as exc:
            return str(exc).replace(f"{tmp}/", "")
        return None


def refusal(cm: Mapping[str, Any], good: Mapping[str, Files], engine: EngineSettings) -> str | None:
    """Why a sync would refuse this ConfigMap, were it applied beside the `good` ones (`written`: what a sync
    serves now), None when it would load or is not a policy or data ConfigMap: the same parse and compile."""
    source, error = source_of(cm)
    if error is not None or source is None:
        return error
    candidate = {i: files for i, files in good.items() if i != source.id}
    candidate[source.id] = source.files
    return load_error(candidate, engine.checking())


class ConfigMapSync:
    """Follows the labelled ConfigMaps of `namespaces` (`*`: all) and keeps `out` equal to what loads."""

    def __init__(
        self, client: KubeClient, out: Path, namespaces: Sequence[str], engine: EngineSettings | None = None
    ) -> None:
        """`engine`: what the policies are served with (how they parse, which builtins they may call);
        each set is checked with the embedded engine so built."""
        self.client, self.out = client, out
        self.engine = (engine or EngineSettings()).checking()
        scopes = [None] if "*" in namespaces else sorted(set(namespaces))
        self.informers = [
            Informer(client, "v1", "configmaps", namespace=ns, label_selector=f"{key}={value}")
            for ns in scopes
            for key, value in (POLICY_LABEL, DATA_LABEL)
        ]
        self.good = written(out)  # ConfigMap id -> the files last written for it (a restart keeps them)
        self.errors: dict[str, str] = {}
        self.changed = threading.Event()
        for informer in self.informers:
            informer.add_handler(lambda *_: self.changed.set())

    def start(self, timeout: float = 60.0) -> None:
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            if not informer.synced.wait(timeout):
                raise RegokiteError(f"could not list ConfigMaps ({informer.name}) within {timeout:g}s")

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def run(self, stop: threading.Event) -> None:
        """Sync on start and after every change, until `stop`."""
        self.changed.set()
        while not stop.is_set():
            if self.changed.wait(0.5):
                self.changed.clear()
                try:
                    self.sync_now()
                except Exception as exc:  # the API server away (any error type), a full disk: retried
                    log.error("ConfigMap policies not synced; retrying", extra={"error": str(exc)[:500]})
                    self.changed.set()
                    stop.wait(1.0)

    def sync_now(self) -> dict[str, str | None]:
        """A pass over the ConfigMaps the watches hold now."""
        return self.sync(self._configmaps())

    def _configmaps(self) -> list[dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}
        for informer in self.informers:
            for cm in informer.list():
                meta = cm["metadata"]
                seen[f"{meta.get('namespace')}/{meta['name']}"] = cm
        return [seen[k] for k in sorted(seen)]

    def sync(self, configmaps: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
        """One pass over the current ConfigMaps: each one's outcome (None: it serves)."""
        sources: dict[str, Source] = {}
        errors: dict[str, str] = {}
        for cm in configmaps:
            source, error = source_of(cm)
            meta = cm["metadata"]
            ident = f"{meta.get('namespace')}/{meta['name']}"
            if error is not None:
                errors[ident] = error
            if source is not None:
                sources[ident] = source
            elif error is not None:
                sources[ident] = Source(meta.get("namespace", ""), meta["name"], {}, meta.get("annotations") or {})
        candidate = {i: s.files for i, s in sources.items() if i not in errors}
        accepted = self._compile(candidate, errors)
        for ident in errors:  # refused now: its last good content keeps serving
            if ident in self.good:
                accepted[ident] = self.good[ident]
        self._write({path: text for files in accepted.values() for path, text in files.items()})
        self.good = {i: f for i, f in accepted.items() if i in sources}
        outcome = {i: errors.get(i) for i in sources}
        for ident, error in outcome.items():
            self._annotate(sources[ident], error)
        for ident in sorted(set(self.errors) - set(errors)):
            log.info("ConfigMap loads again", extra={"configmap": ident})
        for ident, error in errors.items():
            if self.errors.get(ident) != error:
                log.error("ConfigMap not loaded: its last good content keeps serving",
                          extra={"configmap": ident, "error": error})  # fmt: skip
        self.errors = errors
        return outcome

    def _compile(self, candidate: dict[str, Files], errors: dict[str, str]) -> dict[str, Files]:
        """`candidate` less the ConfigMaps that break the set (recorded in `errors`), one at a time."""
        while True:
            problem = self._load(candidate)
            if problem is None:
                return dict(candidate)
            culprit = next((i for i in candidate if f"{SHOWN_AS}/{i}/" in problem), None)
            if culprit is None:  # not one ConfigMap's fault: nothing new is taken
                for ident in candidate:
                    if candidate[ident] != self.good.get(ident):
                        errors[ident] = problem
                kept = {i: f for i, f in self.good.items() if i in candidate}
                return kept if self._load(kept) is None else {}
            errors[culprit] = problem
            candidate = {i: f for i, f in candidate.items() if i != culprit}
            if culprit in self.good:
                candidate[culprit] = self.good[culprit]

    def _load(self, sources: dict[str, Files]) -> str | None:
        return load_error(sources, self.engine)

    def _write(self, files: Files) -> None:
        """Make `out` hold exactly `files`: before the first pass, a server given `--policies out`
        does not start (fail closed), and it never sees part of the first set."""
        write_files(self.out, files)

    def _annotate(self, source: Source, error: str | None) -> None:
        value = status_annotation(error)
        if source.annotations.get(STATUS_ANNOTATION) == value:
            return
        path = f"/api/v1/namespaces/{source.namespace}/configmaps/{source.name}"
        try:
            self.client.patch(path, {"metadata": {"annotations": {STATUS_ANNOTATION: value}}})
        except ApiError as exc:
            if exc.status != 404:
                log.error("could not write the ConfigMap's status", extra={"configmap": source.id, "error": str(exc)})


@contextlib.contextmanager
def followed_in_process(
    client: KubeClient,
    namespaces: Sequence[str],
    engine: EngineSettings | None = None,
    *,
    timeout: float = 60.0,
    directory: Path | None = None,
) -> Iterator[Path]:
    """The labelled ConfigMaps of `namespaces` as a private policy directory, kept current by a
    thread until the block ends. The first pass is made before it yields, so a server started on the
    directory serves every ConfigMap already in the cluster from its first decision (a definition
    whose hook package is in a ConfigMap not loaded yet is refused, then started once it loads).
    `directory` (kept; default a temporary one, removed at the end) holds what an earlier run wrote:
    the last good content of a ConfigMap refused now is served from it."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="regokite-configmaps-")))
        sync = ConfigMapSync(client, directory / SHOWN_AS, namespaces, engine)
        if sync.good:
            log.info("ConfigMap policies last written found", extra={"configmaps": sorted(sync.good)})
        stop = threading.Event()
        sync.start(timeout)
        try:
            for ident, error in sync.sync_now().items():
                log.info("ConfigMap policies loaded" if error is None else "ConfigMap policies refused",
                         extra={"configmap": ident, **({"error": error} if error else {})})  # fmt: skip
            thread = threading.Thread(target=sync.run, args=(stop,), name="configmaps", daemon=True)
            thread.start()
            yield sync.out
        finally:
            stop.set()
            sync.stop()


def split_namespaces(values: Iterable[str]) -> list[str]:
    """`--policy-namespaces` values (repeatable, each comma-separated) as a list of namespaces or `*`."""
    return [n.strip() for value in values for n in value.split(",") if n.strip()]
