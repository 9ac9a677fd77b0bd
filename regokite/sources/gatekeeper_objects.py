"""Gatekeeper's objects in a cluster, made into files the admission server serves.

Each pass lists the ConstraintTemplates, compiles each on its own, applies
the Constraint CRD of every template that compiled (and deletes the CRDs of
templates that are gone or broken), writes each template's status, lists
the constraints of every served kind and Gatekeeper's `Config`, and writes
them as YAML into a directory (a pass on every change, seen through watches,
and every interval) that `regokite admission --policies` reloads. A
file is rewritten only when its content changed.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from regokite.errors import PolicyLoadError
from regokite.gatekeeper.compile import compile_template
from regokite.gatekeeper.crds import (
    EXPANSION_PLURAL,
    MANAGED_BY,
    MUTATOR_KINDS,
    config_crd,
    constraint_crd,
    constraint_crd_name,
    constraint_plural,
    expansion_crd,
    mutator_crds,
    mutator_status,
    template_crd,
    template_status,
)
from regokite.gatekeeper.expansion import parse_expansion_template
from regokite.gatekeeper.mutation.conflicts import conflicting
from regokite.gatekeeper.mutation.mutators import Mutator, parse_mutator
from regokite.gatekeeper.resources import (
    CONFIG_GROUP,
    CONSTRAINT_GROUP,
    EXPANSION_GROUP,
    MUTATION_GROUP,
    TEMPLATE_GROUP,
    ResourceError,
    Template,
    parse_template,
)
from regokite.kube.client import ApiError, KubeClient
from regokite.kube.informer import Informer

log = logging.getLogger("regokite.gatekeeper")
MANAGER = "regokite-gatekeeper"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TEMPLATES = f"/apis/{TEMPLATE_GROUP}/v1/constrainttemplates"
CONFIGS_PATH = f"/apis/{CONFIG_GROUP}/v1alpha1"
_SERVER_FIELDS = ("resourceVersion", "uid", "generation", "creationTimestamp", "managedFields")


class GatekeeperSync:
    def __init__(self, client: KubeClient, out: Path, config_namespace: str = "gatekeeper-system") -> None:
        self.client, self.out, self.config_namespace = client, out, config_namespace

    def install(self) -> None:
        """The ConstraintTemplate and Config CRDs, so both can be applied where Gatekeeper is not installed."""
        for crd in (template_crd(), config_crd(), *mutator_crds(), expansion_crd()):
            self.client.apply(f"{CRDS}/{crd['metadata']['name']}", crd, MANAGER)

    def sync_once(self) -> dict[str, str | None]:
        """One pass; returns each template's kind and its error (None when it serves)."""
        outcome: dict[str, str | None] = {}
        served: list[tuple[Template, dict[str, Any]]] = []
        for doc in self.client.get(TEMPLATES).get("items", []):
            name = doc["metadata"]["name"]
            try:
                template = parse_template(doc, None, f"constrainttemplate/{name}")
                compile_template(template)
                self.client.apply(f"{CRDS}/{constraint_crd_name(template.kind)}", constraint_crd(template), MANAGER)
                error = None
                served.append((template, doc))
            except (ResourceError, PolicyLoadError, ApiError) as exc:
                template, error = None, str(exc)
                log.error("constraint template not served", extra={"template": name, "error": error})
            outcome[template.kind if template else name] = error
            status = template_status(doc["metadata"].get("generation"), [error] if error else [])
            if doc.get("status") != status:
                self.client.patch(f"{TEMPLATES}/{name}/status", {"status": status})
        self._drop_crds({t.kind for t, _ in served})
        documents = [_clean(doc) for _, doc in served]
        for template, _ in served:
            documents += [_clean(c) for c in self._constraints(template.kind)]
        documents += [_clean(c) for c in self._configs()]
        documents += self._mutators(outcome)
        documents += [_clean(t) for t in self._expansions()]
        _write(self.out / "gatekeeper.yaml", yaml.safe_dump_all(documents, sort_keys=True))
        return outcome

    def _mutators(self, outcome: dict[str, str | None]) -> list[dict[str, Any]]:
        """Every mutator of the four kinds, its status written (`byPod`, with why it did not load or is
        left out for a schema conflict); all are served, so one that did not load makes the mutation
        webhook refuse (fail closed), and conflicting ones are left out there, as Gatekeeper does."""
        found: list[tuple[str, dict[str, Any], Mutator | None, str | None]] = []
        for kind, (plural, versions) in MUTATOR_KINDS.items():
            for doc in self._list(f"/apis/{MUTATION_GROUP}/{versions[0]}/{plural}"):
                doc = {**doc, "kind": kind}
                try:
                    found.append((plural, doc, parse_mutator(doc, f"{plural}/{doc['metadata']['name']}"), None))
                except PolicyLoadError as exc:
                    found.append((plural, doc, None, str(exc)))
        left_out = conflicting([m for _, _, m, _ in found if m is not None])
        for plural, doc, mutator, error in found:
            error = error or (left_out.get(mutator.id) if mutator is not None else None)
            name = f"{doc['kind']}/{doc['metadata']['name']}"
            path = f"/apis/{MUTATION_GROUP}/{MUTATOR_KINDS[doc['kind']][1][0]}/{plural}/{doc['metadata']['name']}"
            if error:
                log.error("mutator not served", extra={"mutator": name, "error": error})
            outcome[name] = error
            status = mutator_status(doc["metadata"].get("generation"), [error] if error else [])
            if doc.get("status") != status:
                self.client.patch(f"{path}/status", {"status": status})
        return [_clean(doc) for _, doc, _, _ in found]

    def _expansions(self) -> list[dict[str, Any]]:
        found = self._list(f"/apis/{EXPANSION_GROUP}/v1beta1/{EXPANSION_PLURAL}")
        for doc in found:
            try:
                parse_expansion_template(doc, f"{EXPANSION_PLURAL}/{doc['metadata']['name']}")
            except PolicyLoadError as exc:
                log.error("expansion template not served", extra={"error": str(exc)})
        return found

    def _list(self, path: str) -> list[dict[str, Any]]:
        try:
            return self.client.get(path).get("items", [])
        except ApiError as exc:
            if exc.status == 404:  # the CRD is not served yet: next pass
                return []
            raise

    def _constraints(self, kind: str) -> list[dict[str, Any]]:
        try:
            return self.client.get(f"/apis/{CONSTRAINT_GROUP}/v1beta1/{constraint_plural(kind)}").get("items", [])
        except ApiError as exc:
            if exc.status == 404:  # the CRD is not served yet: next pass
                return []
            raise

    def _configs(self) -> list[dict[str, Any]]:
        """Gatekeeper's `Config` (in Gatekeeper's namespace, named `config`): what to replicate
        (`spec.sync.syncOnly`) and the namespaces every constraint skips (`spec.match`)."""
        try:
            found = self.client.get(f"{CONFIGS_PATH}/namespaces/{self.config_namespace}/configs/config")
        except ApiError as exc:
            if exc.status == 404:  # no Config, or Gatekeeper's CRDs not installed
                return []
            raise
        return [found]

    def _drop_crds(self, kinds: set[str]) -> None:
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        for crd in self.client.get(CRDS, labelSelector=selector).get("items", []):
            if crd["spec"]["names"]["kind"] not in kinds:
                log.info("constraint CRD removed with its template", extra={"crd": crd["metadata"]["name"]})
                try:
                    self.client.delete(f"{CRDS}/{crd['metadata']['name']}")
                except ApiError as exc:
                    if exc.status != 404:
                        raise

    def run(self, interval: float, stop: threading.Event | None = None) -> None:
        """Sync whenever a template, a constraint or the Config changes (watches), and every `interval`
        seconds regardless; a failed pass is retried at the next change or interval."""
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
        try:
            while not stop.is_set():
                changed.clear()
                try:
                    for kind, error in self.sync_once().items():
                        if error is None and "/" not in kind:  # its constraints: a change to one syncs too
                            watch(f"{CONSTRAINT_GROUP}/v1beta1", constraint_plural(kind))
                except ApiError as exc:
                    log.error("gatekeeper sync failed; retrying", extra={"error": str(exc)})
                if changed.wait(interval):
                    stop.wait(0.1)  # events come in bursts (kubectl apply -f dir): one pass for the burst
        finally:
            for informer in watched.values():
                informer.stop()


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in doc.get("metadata", {}).items() if k not in _SERVER_FIELDS}
    return {k: v for k, v in {**doc, "metadata": meta}.items() if k != "status"}


def _write(path: Path, text: str) -> None:
    """Replace `path` atomically, and only when the text changed (a reload costs the server)."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    if not path.parent.exists():  # the first pass: the directory appears with its file (a server waits for it)
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        first = Path(tempfile.mkdtemp(dir=path.parent.parent, prefix=f".{path.parent.name}-"))
        first.chmod(0o755)
        (first / path.name).write_text(text, encoding="utf-8")
        first.replace(path.parent)
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".gatekeeper-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; the admission server may run as another user
    os.replace(tmp, path)
