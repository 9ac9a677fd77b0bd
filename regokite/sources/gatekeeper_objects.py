"""Gatekeeper's objects in a cluster, made into files the admission server serves.

Each pass lists the ConstraintTemplates, compiles each on its own, applies
the Constraint CRD of every template that compiled, writes each template's
status, lists the constraints of every served kind and Gatekeeper's
`Config`, and writes them as YAML into a directory (a pass on every change,
seen through watches, and every interval) that `regokite admission
--policies` reloads: one file per object, below `gatekeeper/` (the
object's API group, kind, namespace and name), so no two objects share a
file. A file is rewritten only when its content changed.

Bad input loses nothing (`regokite.gatekeeper.lastgood`): a template edit
that does not compile, a constraint or Config that does not parse, a mutator
that does not load, is refused in its status and its last good version keeps
serving (a new one that never loaded is not served); a constraint
CRD is deleted only when its template is; a kind not served for a moment
(the API server restarting) keeps the constraints last listed.

Gatekeeper's `SyncSet`s and the external data `Provider`s are written too, each Provider with its status
(`active`, or the error that keeps it out).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from regokite.bundle import DATA_FILES
from regokite.errors import PolicyLoadError, RegokiteError
from regokite.gatekeeper.compile import compile_template
from regokite.gatekeeper.constraint_schema import ConstraintSchema
from regokite.gatekeeper.crds import (
    EXPANSION_PLURAL,
    MANAGED_BY,
    MUTATOR_KINDS,
    POD_ID,
    config_crd,
    constraint_crd,
    constraint_crd_name,
    constraint_plural,
    constraint_pod_status,
    expansion_crd,
    expansion_status,
    mutator_crds,
    mutator_status,
    provider_crd,
    provider_status,
    syncset_crd,
    template_crd,
    template_status,
    with_pod_entry,
)
from regokite.gatekeeper.expansion import CYCLE, in_cycles, parse_expansion_template
from regokite.gatekeeper.lastgood import (
    LastGood,
    config_error,
    constraint_error,
    mutator_error,
    pick,
    stale_constraint_crds,
)
from regokite.gatekeeper.mutation.conflicts import conflicting
from regokite.gatekeeper.mutation.mutators import parse_mutator
from regokite.gatekeeper.resources import (
    CONFIG_GROUP,
    CONSTRAINT_GROUP,
    EXPANSION_GROUP,
    MUTATION_GROUP,
    PROVIDER_GROUP,
    SYNCSET_GROUP,
    TEMPLATE_GROUP,
    ResourceError,
    parse_provider,
    parse_template,
)
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError, KubeClient
from regokite.kube.informer import Informer
from regokite.resources import ChildType
from regokite.sources.written_files import write_files

log = logging.getLogger("regokite.gatekeeper")
MANAGER = "regokite-gatekeeper"
SYNC_CONTROLLER = "gatekeeper"  # the `controller` label of this process's writes (regokite_controller_writes_total)
CONFIG_TYPE = ChildType(f"{CONFIG_GROUP}/v1alpha1", "configs", "Config", True, True)
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TEMPLATES = f"/apis/{TEMPLATE_GROUP}/v1/constrainttemplates"
CONFIGS_PATH = f"/apis/{CONFIG_GROUP}/v1alpha1"
DIRECTORY = "gatekeeper"  # below --out: one file per object served
OLD_FILE = "gatekeeper.yaml"  # where versions before one file per object wrote them all
PROVIDERS = f"/apis/{PROVIDER_GROUP}/v1beta1/providers"
SYNCSETS = f"/apis/{SYNCSET_GROUP}/v1alpha1/syncsets"
# what the API server sets that the files leave out (a mutator's generation stays: its annotations name it)
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "managedFields")


class GatekeeperSync:
    def __init__(self, client: KubeClient, out: Path, config_namespace: str = "gatekeeper-system") -> None:
        self.client, self.out, self.config_namespace = client, out, config_namespace
        self.actuator = Actuator(client, MANAGER)
        self.good = LastGood.of(served_documents(out))  # a restart serves what was served before it
        self.listed: dict[str, list[dict[str, Any]]] = {}  # constraints by kind, as last listed
        self.listed_configs: list[dict[str, Any]] = []
        self.listed_paths: dict[str, list[dict[str, Any]]] = {}  # mutators, expansions: as last listed
        self.served_kinds: set[str] = set()
        self.compiled: dict[str, tuple[str, str | None]] = {}  # template name -> (what compiled, its error)
        self._statuses: list[Callable[[], None]] | None = None  # a pass's status writes, after its files

    def install(self) -> None:
        """Gatekeeper's CRDs (templates, Config, mutators, ExpansionTemplate, Provider, SyncSet), so they can
        be applied where Gatekeeper is not installed."""
        for crd in (template_crd(), config_crd(), *mutator_crds(), expansion_crd(), provider_crd(), syncset_crd()):
            self.client.apply(f"{CRDS}/{crd['metadata']['name']}", crd, MANAGER)

    def sync_once(self) -> dict[str, str | None]:
        """One pass; returns each template's kind (its name when refused) and its error (None when it serves).
        A refused edit of a template that served keeps its last good version, its CRD and its constraints.
        The statuses are written after the files: an object whose status says it is enforced is in them."""
        self._statuses = []
        try:
            return self._pass()
        finally:
            statuses, self._statuses = self._statuses, None
            for write in statuses or ():
                write()

    def _pass(self) -> dict[str, str | None]:
        current = {d["metadata"]["name"]: d for d in self.client.get(TEMPLATES).get("items", [])}
        self.compiled = {name: known for name, known in self.compiled.items() if name in current}
        templates = pick(current, self._template_error, self.good.templates)
        outcome: dict[str, str | None] = {}
        for name, doc in current.items():
            error = templates.errors.get(name)
            outcome[doc["spec"]["crd"]["spec"]["names"]["kind"] if error is None else name] = error
            if error is not None:
                log.error("constraint template not served" + (": its last good version serves" if name in
                          templates.kept else ""), extra={"template": name, "error": error})  # fmt: skip
            status = template_status(doc["metadata"].get("generation"), [error] if error else [],
                                     created=name in templates.served)  # fmt: skip
            self._write_status(f"{TEMPLATES}/{name}/status", doc, status)
        self._drop_crds(set(current))
        kinds = {d["spec"]["crd"]["spec"]["names"]["kind"] for d in templates.served.values()}
        documents = [_clean(doc) for _, doc in sorted(templates.served.items())]
        documents += self._constraint_documents(kinds, _constraint_schemas(templates.served.values()))
        documents += self._config_documents()
        documents += self._mutators(outcome)
        documents += [_clean(t) for t in self._expansions()]
        documents += [_clean(p) for p in self._providers()]
        documents += [_clean(s) for s in self._list(SYNCSETS)]
        files = {object_file(doc): yaml.safe_dump(doc, sort_keys=True) for doc in documents}
        write_files(self.out / DIRECTORY, files, removed_last=TEMPLATE_GROUP)
        (self.out / OLD_FILE).unlink(missing_ok=True)  # served from the files above now
        self.served_kinds = kinds
        return outcome

    def _mutators(self, outcome: dict[str, str | None]) -> list[dict[str, Any]]:
        """Every mutator of the four kinds that loads, or (an edit that does not) its last good version;
        one that never loaded is not served. Each gets its status (`byPod`: why it did not load, or why
        it is left out for a schema conflict, which the mutation webhook does, as Gatekeeper's)."""
        current: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, (plural, versions) in MUTATOR_KINDS.items():
            for doc in self._list(f"/apis/{MUTATION_GROUP}/{versions[0]}/{plural}"):
                current[(kind, doc["metadata"]["name"])] = {**doc, "kind": kind}
        mutators = pick(current, mutator_error, self.good.mutators)
        served = {key: parse_mutator(doc, f"{key[0].lower()}/{key[1]}") for key, doc in mutators.served.items()}
        left_out = conflicting(list(served.values()))
        for key, doc in current.items():
            error = mutators.errors.get(key) or (left_out.get(served[key].id) if key in served else None)
            name = f"{key[0]}/{key[1]}"
            if error:
                log.error("mutator not served" + (": its last good version serves" if key in mutators.kept else ""),
                          extra={"mutator": name, "error": error})  # fmt: skip
            outcome[name] = error
            plural, versions = MUTATOR_KINDS[key[0]]
            conflict = key not in mutators.errors and key in served and served[key].id in left_out
            status = mutator_status(doc["metadata"].get("generation"), [error] if error else [],
                                    enforced=key in served and served[key].id not in left_out,
                                    error_type="ErrConflictingSchema" if conflict else "ingest_error")  # fmt: skip
            self._write_status(f"/apis/{MUTATION_GROUP}/{versions[0]}/{plural}/{key[1]}/status", doc, status)
        return [_clean(doc) for key, doc in mutators.served.items()]

    def _expansions(self) -> list[dict[str, Any]]:
        """Every ExpansionTemplate, each with its status as Gatekeeper's expansion controller writes it:
        why it does not load, or (every template of a cycle) that it forms an expansion cycle."""
        found = self._list(f"/apis/{EXPANSION_GROUP}/v1beta1/{EXPANSION_PLURAL}")
        parsed, errors = [], {}
        for doc in found:
            name = doc["metadata"]["name"]
            try:
                parsed.append(parse_expansion_template(doc, f"{EXPANSION_PLURAL}/{name}"))
            except PolicyLoadError as exc:
                errors[name] = str(exc)
                log.error("expansion template not served", extra={"error": str(exc)})
        errors |= dict.fromkeys(in_cycles(parsed), CYCLE)
        for doc in found:
            name = doc["metadata"]["name"]
            status = expansion_status(doc["metadata"], errors.get(name))
            self._write_status(f"/apis/{EXPANSION_GROUP}/v1beta1/{EXPANSION_PLURAL}/{name}/status", doc, status)
        return found

    def _list(self, path: str) -> list[dict[str, Any]]:
        """The objects at `path`; while the kind is not served (its CRD not installed yet, or the API server
        restarting) those last listed there: an outage is not a deletion."""
        try:
            items = self.client.get(path).get("items", [])
        except ApiError as exc:
            if exc.status == 404:
                return self.listed_paths.get(path, [])
            raise
        self.listed_paths[path] = items
        return items

    def _template_error(self, doc: dict[str, Any]) -> str | None:
        """Why a template cannot serve as it is now (None: it compiled and its constraint CRD is applied).
        A template is compiled again only when it changed (every pass applies its CRD: one deleted by
        hand comes back)."""
        name = doc["metadata"]["name"]
        fingerprint = json.dumps([doc.get("apiVersion"), doc.get("spec")], sort_keys=True)
        try:
            template = parse_template(doc, None, f"constrainttemplate/{name}")
            known = self.compiled.get(name)
            if known is None or known[0] != fingerprint:
                self.compiled[name] = (fingerprint, None)
                try:
                    compile_template(template)
                except PolicyLoadError as exc:
                    self.compiled[name] = (fingerprint, str(exc))
            error = self.compiled[name][1]
            if error is not None:
                return error
            self.client.apply(f"{CRDS}/{constraint_crd_name(template.kind)}", constraint_crd(template), MANAGER)
        except (ResourceError, PolicyLoadError, ApiError) as exc:
            return str(exc)
        return None

    def _constraint_documents(self, kinds: set[str], schemas: Mapping[str, ConstraintSchema]) -> list[dict[str, Any]]:
        """Every constraint of the served kinds: as it is, or (an edit refused; `schemas`, by kind, check
        its fields and parameters) as last served."""
        current: dict[tuple[str, str], dict[str, Any]] = {}
        for kind in sorted(kinds):
            for doc in self._constraints(kind):
                current[(kind, doc["metadata"]["name"])] = doc
        self.listed = {k: v for k, v in self.listed.items() if k in kinds}
        constraints = pick(current, lambda doc: constraint_error(doc, schemas), self.good.constraints)
        for (kind, name), doc in current.items():
            error = constraints.errors.get((kind, name))
            if error is not None:
                log.error("constraint not served", extra={"constraint": f"{kind}/{name}", "error": error,
                          "last_good_serves": (kind, name) in constraints.kept})  # fmt: skip
            t = ChildType(f"{CONSTRAINT_GROUP}/v1beta1", constraint_plural(kind), kind, False, True)
            self._write_pod_status(t, doc, error, enforced=(kind, name) in constraints.served)
        return [_clean(doc) for _, doc in sorted(constraints.served.items())]

    def _constraints(self, kind: str) -> list[dict[str, Any]]:
        """The constraints of `kind`; while the kind is not served (its CRD being created, or the API server
        restarting and not serving custom resources yet) those last listed: an outage is not a deletion."""
        try:
            items = self.client.get(f"/apis/{CONSTRAINT_GROUP}/v1beta1/{constraint_plural(kind)}").get("items", [])
        except ApiError as exc:
            if exc.status != 404:
                raise
            return self.listed.get(kind, [])
        self.listed[kind] = items
        return items

    def _config_documents(self) -> list[dict[str, Any]]:
        """Gatekeeper's `Config` (in Gatekeeper's namespace, named `config`): what to replicate
        (`spec.sync.syncOnly`) and the namespaces every constraint skips (`spec.match`). Listed, so a
        404 means the kind is not served (the last listing stands) and an empty list means no Config."""
        try:
            listing = self.client.get(f"{CONFIGS_PATH}/namespaces/{self.config_namespace}/configs")
            self.listed_configs = [c for c in listing.get("items", []) if c["metadata"]["name"] == "config"]
        except ApiError as exc:
            if exc.status != 404:
                raise
        current = {c["metadata"]["name"]: c for c in self.listed_configs}
        configs = pick(current, config_error, self.good.configs)
        for name, doc in current.items():
            error = configs.errors.get(name)
            if error is not None:
                log.error(
                    "Gatekeeper Config not served", extra={"error": error, "last_good_serves": name in configs.kept}
                )
            self._write_pod_status(CONFIG_TYPE, doc, error, enforced=name in configs.served)
        return [_clean(doc) for doc in configs.served.values()]

    def _write_pod_status(self, t: ChildType, doc: dict[str, Any], error: str | None, *, enforced: bool) -> None:
        if self._statuses is not None:  # in a pass: once its files are written
            self._statuses.append(lambda: self._write_pod_status_now(t, doc, error, enforced=enforced))
        else:
            self._write_pod_status_now(t, doc, error, enforced=enforced)

    def _write_pod_status_now(self, t: ChildType, doc: dict[str, Any], error: str | None, *, enforced: bool) -> None:
        """This process's `status.byPod` entry of a constraint or Config, as Gatekeeper's webhook pod
        writes its own for every one (`enforced`: whether a version of it serves; `errors`: why an
        edit was refused), when it changes. Other entries (the audit's) are kept: the list is written
        only over the version read (Actuator.update_status, as the audit's entry is). One not written
        is logged and written on the next pass."""

        def change(current: Mapping[str, Any]) -> dict[str, Any] | None:
            entry = constraint_pod_status(current["metadata"].get("generation"), error, enforced=enforced)
            by_pod = (current.get("status") or {}).get("byPod") or []
            if [p for p in by_pod if isinstance(p, dict) and p.get("id") == POD_ID] == [entry]:
                return None
            return {"byPod": with_pod_entry(by_pod, entry)}

        try:
            self.actuator.update_status(t, doc, change, controller=SYNC_CONTROLLER)
        except ApiError as exc:
            if exc.status not in (404, 409):  # deleted meanwhile; changed under each write (logged there)
                where = self.actuator.path(t, doc["metadata"].get("namespace"), doc["metadata"]["name"], "status")
                log.warning("status not written; next pass", extra={"path": where, "error": str(exc)[:500]})

    def _write_status(self, path: str, doc: dict[str, Any], status: dict[str, Any]) -> None:
        if self._statuses is not None:  # in a pass: once its files are written
            self._statuses.append(lambda: self._write_status_now(path, doc, status))
        else:
            self._write_status_now(path, doc, status)

    def _write_status_now(self, path: str, doc: dict[str, Any], status: dict[str, Any]) -> None:
        """A status write, when it changes; one that fails is logged and written again on the next pass."""
        if doc.get("status") == status:
            return
        try:
            self.client.patch(path, {"status": status})
        except ApiError as exc:
            if exc.status != 404:  # deleted meanwhile
                log.warning("status not written; next pass", extra={"path": path, "error": str(exc)[:500]})

    def _providers(self) -> list[dict[str, Any]]:
        """External data Providers that Gatekeeper would accept; each gets its status (errors, `active`)."""
        accepted = []
        for doc in self._list(PROVIDERS):
            name = doc["metadata"]["name"]
            error = None
            try:
                parse_provider(doc, f"provider/{name}")
                accepted.append(doc)
            except ResourceError as exc:
                error = str(exc)
                log.error("external data provider not served", extra={"provider": name, "error": error})
            self._write_status(
                f"{PROVIDERS}/{name}/status", doc, provider_status(doc["metadata"].get("generation"), error)
            )
        return accepted

    def _drop_crds(self, templates: set[str]) -> None:
        """Delete the constraint CRDs whose template was deleted, and only those."""
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        for name in stale_constraint_crds(self.client.get(CRDS, labelSelector=selector).get("items", []), templates):
            log.info("constraint CRD removed with its template", extra={"crd": name})
            try:
                self.client.delete(f"{CRDS}/{name}")
            except ApiError as exc:
                if exc.status != 404:
                    raise

    def run(self, interval: float, stop: threading.Event | None = None) -> None:
        """Sync whenever a template, a constraint or the Config changes (watches), and every `interval`
        seconds regardless; a failed pass (of any cause) is logged and retried at the next change or interval."""
        stop = stop or threading.Event()
        changed = threading.Event()
        watched: dict[str, Informer] = {}

        def watch(api_version: str, resource: str, namespace: str | None = None) -> None:
            key = f"{api_version}/{resource}"
            if key in watched:
                return
            informer = Informer(self.client, api_version, resource, namespace=namespace)
            informer.add_handler(lambda *_: changed.set())
            watched[key] = informer
            informer.start()

        watch(f"{TEMPLATE_GROUP}/v1", "constrainttemplates")
        watch(f"{CONFIG_GROUP}/v1alpha1", "configs", self.config_namespace)
        for plural, versions in MUTATOR_KINDS.values():
            watch(f"{MUTATION_GROUP}/{versions[0]}", plural)
        watch(f"{EXPANSION_GROUP}/v1beta1", EXPANSION_PLURAL)
        watch(f"{PROVIDER_GROUP}/v1beta1", "providers")
        watch(f"{SYNCSET_GROUP}/v1alpha1", "syncsets")
        fixed = set(watched)
        try:
            while not stop.is_set():
                changed.clear()
                try:
                    self.sync_once()
                except Exception as exc:  # the API server away, a bug: the next pass retries
                    log.error("gatekeeper sync failed; retrying", extra={"error": str(exc)[:500],
                              "error_type": type(exc).__name__})  # fmt: skip
                wanted = {f"{CONSTRAINT_GROUP}/v1beta1/{constraint_plural(k)}" for k in self.served_kinds}
                for key in set(watched) - fixed - wanted:  # its template deleted: its watch too
                    watched.pop(key).stop()
                for kind in self.served_kinds:  # its constraints: a change to one syncs too
                    watch(f"{CONSTRAINT_GROUP}/v1beta1", constraint_plural(kind))
                if _wait_for_change(changed, stop, interval):
                    stop.wait(0.1)  # events come in bursts (kubectl apply -f dir): one pass for the burst
        finally:
            for informer in watched.values():
                informer.stop()


def served_documents(out: Path) -> list[Any]:
    """The documents a previous run wrote below `out` (none when missing or unreadable)."""
    files = [*sorted((out / DIRECTORY).rglob("*.yaml")), out / OLD_FILE]
    found: list[Any] = []
    for path in files:
        try:
            found += yaml.safe_load_all(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
    return found


def object_file(doc: dict[str, Any]) -> str:
    """An object's file below the directory: `<group>/<kind>/[<namespace>/]<name>.yaml` (an object named
    `data` in `data.object.yaml`: a `data.yaml` is a data document to the policy loader)."""
    meta = doc.get("metadata") or {}
    group = str(doc.get("apiVersion", "")).rpartition("/")[0] or "core"
    name = f"{meta.get('name')}.yaml"
    name = "data.object.yaml" if name in DATA_FILES else name
    return "/".join([group, str(doc.get("kind")), *filter(None, [meta.get("namespace")]), name])


def _constraint_schemas(templates: Iterable[dict[str, Any]]) -> dict[str, ConstraintSchema]:
    """The constraints' schema of each template served, by kind (one a file of an earlier version kept
    and that no longer makes a schema checks nothing: the API server checked its constraints)."""
    found = {}
    for doc in templates:
        try:
            schema = ConstraintSchema.of(parse_template(doc, None, f"constrainttemplate/{doc['metadata']['name']}"))
        except RegokiteError:
            continue
        found[schema.kind] = schema
    return found


def _wait_for_change(changed: threading.Event, stop: threading.Event, interval: float) -> bool:
    """Wait for a change, `interval` seconds at most, but no longer than a stop (the watches end with it)."""
    deadline = time.monotonic() + interval
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if changed.wait(min(left, 0.5)):
            return True
    return False


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in doc.get("metadata", {}).items() if k not in _SERVER_FIELDS}
    return {k: v for k, v in {**doc, "metadata": meta}.items() if k != "status"}
