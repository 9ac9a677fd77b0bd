"""Run the audit against a cluster: once (paged lists), or continuously from informers.

Continuous mode is event-driven: each informer event queues its object's key
and one thread (engines are pinned to their thread) re-audits the latest
state; every queued key is audited once however many events it had. A full
pass runs on start and whenever the policy files change. Reports of changed
namespaces are written in batches, through the actuator (server-side apply,
so in place).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from regokite.admission.policies import PolicySet, load_policy_set
from regokite.audit import reports
from regokite.audit.export import DiskExport
from regokite.audit.scan import Obj, Results, Subject, audit_object, audited_resources, violations
from regokite.bundle import fingerprint
from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.engine import UNDEFINED, Capability, EngineSettings, builtin_errors
from regokite.errors import RegokiteError
from regokite.gatekeeper.crds import AUDIT_POD_ID, constraint_plural, constraint_pod_status, with_pod_entry
from regokite.gatekeeper.resources import CONSTRAINT_GROUP
from regokite.gatekeeper.status import DEFAULT_VIOLATIONS_LIMIT, constraint_statuses, same_findings
from regokite.gatekeeper.violations import (
    AuditedConstraint,
    Violation,
    audit_id_of,
    audit_violations,
    constraint_audited,
    event,
    go_duration,
)
from regokite.kube.actuator import Actuator
from regokite.kube.client import OUTAGE_REASONS, ApiError, KubeClient, error_reason, resource_path
from regokite.kube.discovery import Discovery, DiscoveryError
from regokite.kube.informer import Informer
from regokite.ops import audit_metrics as metrics
from regokite.ops import builtin_error_metrics
from regokite.ops.logging import NAMED_FIELDS
from regokite.ops.outage import Outage
from regokite.replication.replicate import Replicator, check_access
from regokite.resources import ChildType

builtin_errors.listen(builtin_error_metrics.count)  # this server's /metrics counts its undefined calls

log = logging.getLogger("regokite.audit")
FIELD_MANAGER = "regokite-audit"
REPORT_TYPES = {
    True: ChildType(reports.API_VERSION, "policyreports", "PolicyReport", True),
    False: ChildType(reports.API_VERSION, "clusterpolicyreports", "ClusterPolicyReport", False),
}
Key = tuple[ResourceRef, str, str]  # (resource, namespace, name)
RETRY_MIN, RETRY_MAX = 0.5, 4.0  # a failed write is retried after this backoff: within 4 s of recovery
ONCE_WRITE_TIMEOUT = 120.0
AUDIT_REPORTS = "app.kubernetes.io/component=audit"
AUDIT = ("audit",)  # the operations of the audit's constraint status entry


@dataclass
class AuditSettings:
    policies: list[str]
    kubeconfig: str | None = None
    engine: EngineSettings = field(default_factory=EngineSettings)  # external_data's cache lives across reloads
    write_reports: bool = True
    replicate_path: str = "kubernetes"
    reload_interval: float = 1.0
    flush_interval: float = 0.5  # how often changed namespaces' reports are written
    page_size: int = 500  # Gatekeeper's --audit-chunk-size: objects a list call returns; 0: unpaged
    interval: float = 60.0  # Gatekeeper's --audit-interval (continuous mode): a full pass this often; 0: none
    jobs: int = 1  # --once: processes deciding pages (embedded engine)
    constraint_violations_limit: int = DEFAULT_VIOLATIONS_LIMIT  # Gatekeeper's --constraint-violations-limit
    extra: dict[str, Any] = field(default_factory=dict)
    emit_audit_events: bool = False  # Gatekeeper's --emit-audit-events: an Event per constraint violation
    events_namespace: str = "gatekeeper-system"  # where they go, unless events_involved_namespace
    events_involved_namespace: bool = False
    export: DiskExport | None = None  # Gatekeeper's --enable-violation-export, disk driver: each run's violations


class Audit:
    """The policies, their replicated data, and the findings by object."""

    def __init__(self, settings: AuditSettings, client: KubeClient) -> None:
        self.settings = settings
        self.client = client
        self.actuator = Actuator(client, FIELD_MANAGER)
        self.replica: Replicator | None = None
        self.policy_set: PolicySet | None = None
        self.resources: list[ResourceRef] = []
        self.skipped: list[str] = []
        self.findings: dict[Key, tuple[Subject, Results]] = {}  # objects with findings only
        self.covered = 0
        self.discovery = Discovery(client)
        self.constraint_status: dict[str, dict[str, Any]] = {}  # as last written, by constraint name
        self.outage = Outage(log, "audit report and status writes")
        self.started: float | None = None  # the last pass's start: its audit id, the status' auditTimestamp

    def load(self) -> None:
        """(Re)load the policies: a failure keeps the last good set (and is raised on the first load)."""
        policy_set = load_policy_set(
            self.settings.policies, self.settings.engine, replicate_path=self.settings.replicate_path
        )
        every: list[tuple[str, str, ResourceRef]] | None = None

        def every_kind() -> list[tuple[str, str, ResourceRef]]:  # discovered once a load, when a constraint asks
            nonlocal every
            every = self._every_kind() if every is None else every
            return every

        candidates, skipped = audited_resources(policy_set, self._preferred_version, self._resolve_kind, every_kind)
        resources = [r for r in candidates if self._served(r)]
        check_access(self.client, resources)
        if policy_set.replicate:
            if self.replica is None:
                self.replica = Replicator(self.client, ReplicaStore(self.settings.replicate_path))
            self.replica.exclude(policy_set.sync_excluded)
            self.replica.ensure(policy_set.replicate)
        if self.replica is not None:
            policy_set.follow(self.replica.store)
            while not self.replica.wait_ready(5.0):
                log.info("waiting for replicated data", extra={"pending": self.replica.pending()})
        old, self.policy_set = self.policy_set, policy_set
        if old is not None:
            old.close()
        self.resources, self.skipped = resources, skipped
        for reason in skipped:
            log.warning("not audited", extra={"reason": reason})

    def _preferred_version(self, group: str) -> str:
        if not group:
            return "v1"
        return self.client.get(f"/apis/{group}")["preferredVersion"]["version"]

    def _resolve_kind(self, group: str, kind: str) -> ResourceRef | None:
        """A constraint's kind as the resource to list (the group's preferred version); None when not served."""
        try:
            version = self._preferred_version(group)
            t = self.discovery.resolve_kind(f"{group}/{version}" if group else version, kind)
        except (ApiError, DiscoveryError):
            return None
        return ResourceRef(group, version, t.resource, t.namespaced)

    def _every_kind(self) -> list[tuple[str, str, ResourceRef]]:
        """Every resource the API server lists (its group's preferred version; no subresources)."""
        found = []
        groups = [("", "v1", "/api/v1")]
        for g in self.client.get("/apis").get("groups", []):
            version = g["preferredVersion"]["version"]
            groups.append((g["name"], version, f"/apis/{g['name']}/{version}"))
        for group, version, path in groups:
            try:
                listing = self.client.get(path)
            except ApiError:
                continue  # a group whose server is down (an aggregated API): the others are audited
            for r in listing.get("resources", []):
                if "/" not in r["name"] and "list" in r.get("verbs", []):
                    found.append((group, r["kind"], ResourceRef(group, version, r["name"], r.get("namespaced", True))))
        return found

    def _served(self, ref: ResourceRef) -> bool:
        """Whether the API server serves `ref` (a rule's groups and resources combine freely)."""
        try:
            listing = self.client.get(resource_path(ref.api_version, "").rstrip("/"))
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == ref.resource for r in listing.get("resources", []))

    def audit(self, key: Key, obj: Obj | None) -> str | None:
        """Record `obj`'s findings (None: it is gone); the namespace whose report changed, if any."""
        assert self.policy_set is not None
        results = audit_object(self.policy_set, obj, key[0]) if obj is not None else ()
        before = self.findings.get(key)
        if results:
            self.findings[key] = (Subject.of(obj), results)  # type: ignore[arg-type]
        else:
            self.findings.pop(key, None)
        if (before[1] if before else ()) != results:
            return key[1]
        return None

    def report_namespaces(self) -> set[str]:
        return {key[1] for key in self.findings}

    def write(self, namespaces: set[str], exists: Callable[[str], bool] = lambda _ns: True) -> set[str]:
        """Apply the report of each of `namespaces` (an empty one when its findings are gone); returns
        those not written, to retry. Any error type is a failed write, never the end of the audit; once
        the server itself fails (no connection, a timeout, 5xx) the rest are not tried this time. A
        report `exists` says is missing is created (POST), not applied: an apply would re-create the
        reports a CRD deletion is removing, and hold that deletion up."""
        if not self.settings.write_reports:
            return set()
        grouped = reports.by_namespace({s: r for s, r in self.findings.values()})
        now = int(time.time())
        ordered = sorted(namespaces)
        failed: set[str] = set()
        for i, ns in enumerate(ordered):
            report = reports.report(ns, grouped.get(ns, []), now)
            try:
                self._put_report(REPORT_TYPES[bool(ns)], report, exists(ns))
            except Exception as exc:  # a connection error is not an ApiError: any failure is retried
                reason = error_reason(exc)
                metrics.audit_write_failures.labels("report", reason).inc()
                self.outage.failed(exc, reason, namespace=ns)
                failed.add(ns)
                if reason in OUTAGE_REASONS or reason == "not_found":  # the server, or the report CRD, away
                    failed.update(ordered[i + 1 :])
                    break
        if ordered and not failed:
            self.outage.recovered(written=len(ordered))
        metrics.audit_pending_writes.labels("report").set(len(failed))
        return failed

    def _put_report(self, t: ChildType, report: dict[str, Any], exists: bool) -> None:
        if not exists:
            try:
                self.actuator.create(t, report, controller="audit")
                return
            except ApiError as exc:
                if exc.status != 409:  # already there after all: applied below
                    raise
        self.actuator.apply(t, report, controller="audit")

    def write_constraint_status(self, *, changed_only: bool = False) -> int:
        """Each constraint's status as Gatekeeper's audit writes it (`changed_only`: skip those whose
        violations are as last written); returns how many failed (not recorded, so retried). A 404 (a
        constraint only in files, not in the cluster) is skipped until the next full write."""
        assert self.policy_set is not None
        kinds = {p.name: p.constraint_kind for p in self.policy_set.policies if p.constraint_kind}
        # as Gatekeeper: auditTimestamp is the audit's id (its start), the id its log lines and export carry
        started = None if self.started is None else dt.datetime.fromtimestamp(self.started, dt.UTC)
        limit = self.settings.constraint_violations_limit
        statuses = constraint_statuses(kinds, self.findings.values(), limit=limit, now=started)
        failed = 0
        for name, status in statuses.items():
            if changed_only and same_findings(self.constraint_status.get(name), status):
                continue
            kind = kinds[name]
            t = ChildType(f"{CONSTRAINT_GROUP}/v1beta1", constraint_plural(kind), kind, False, True)
            try:
                self._put_constraint_status(t, name, status)
            except ApiError as exc:
                if exc.status == 404:
                    continue
                failed += self._status_failed(exc, name)
                continue
            except Exception as exc:  # any error type: retried
                failed += self._status_failed(exc, name)
                continue
            self.constraint_status[name] = status
        metrics.audit_pending_writes.labels("constraint_status").set(failed)
        return failed

    def _put_constraint_status(self, t: ChildType, name: str, status: dict[str, Any]) -> None:
        """The audit's fields of a constraint's status and the audit's own `byPod` entry (as Gatekeeper's
        audit pod reports each constraint it holds: `enforced`, the generation seen, `operations`),
        written over the version read so the webhook side's entry is kept (Actuator.update_status)."""
        assert self.policy_set is not None
        enforced = name not in self.policy_set.unavailable

        def change(current: Mapping[str, Any]) -> dict[str, Any]:
            generation = current["metadata"].get("generation")
            entry = constraint_pod_status(generation, None, enforced=enforced, pod_id=AUDIT_POD_ID, operations=AUDIT)
            return {**status, "byPod": with_pod_entry((current.get("status") or {}).get("byPod"), entry)}

        self.actuator.update_status(t, {"metadata": {"name": name}}, change, controller="audit", read_first=True)

    def _status_failed(self, exc: Exception, name: str) -> int:
        reason = error_reason(exc)
        metrics.audit_write_failures.labels("constraint_status", reason).inc()
        self.outage.failed(exc, reason, constraint=name)
        self.constraint_status.pop(name, None)  # not as last written: the next changed-only write retries it
        return 1

    def audit_started(self, started: float) -> None:
        """Gatekeeper's first line of a pass; every line of the pass carries its `audit_id`."""
        self.started = started
        fields = {"event_type": "audit_started", "semantic": True, "process": "audit", "audit_id": audit_id_of(started)}
        log.info("auditing constraints and violations", extra={NAMED_FIELDS: fields})

    def report_violations(self, started: float) -> None:
        """Gatekeeper's audit log lines after a pass (violation_audited per violation, constraint_audited
        per constraint with violations, audit_finished), its metrics and, with emit_audit_events, an
        AuditViolation Event per violation."""
        assert self.policy_set is not None
        audit_id = audit_id_of(started)
        constraints = {
            p.name: AuditedConstraint(p.constraint_kind, p.enforcement, p.constraint_annotations)
            for p in self.policy_set.policies
            if p.constraint_kind
        }
        found = audit_violations(constraints, self.findings.values())
        for violations_of in found.values():
            for v in violations_of:
                log.info(v.message, extra={NAMED_FIELDS: {**v.fields("audit"), "audit_id": audit_id}})
                if self.settings.emit_audit_events:
                    where = self.settings.events_namespace, self.settings.events_involved_namespace
                    self.actuator.record_event(event(v, "audit", *where, audit_id))
        self._export(audit_id, [v for name in sorted(found) for v in found[name]])
        for name, c in sorted(constraints.items()):
            if found[name]:  # as Gatekeeper: only constraints with violations get the line
                fields = constraint_audited(c.kind, name, found[name][0].action, len(found[name]), audit_id)
                log.info("audit results for constraint", extra={NAMED_FIELDS: fields})
        took = time.time() - started
        by_action = {"deny": 0, "dryrun": 0, "warn": 0}
        for v in (v for violations_of in found.values() for v in violations_of):
            by_action[v.action] = by_action.get(v.action, 0) + 1
        for action, count in by_action.items():
            metrics.gatekeeper_violations.labels(action).set(count)
        metrics.gatekeeper_audit_last_run_time.set(started)
        metrics.gatekeeper_audit_last_run_end_time.set(time.time())
        metrics.gatekeeper_audit_duration.observe(took)
        fields = {"event_type": "audit_finished", "semantic": True, "process": "audit", "audit_id": audit_id}
        log.info("auditing is complete", extra={NAMED_FIELDS: {**fields, "duration": go_duration(took)}})

    def _export(self, audit_id: str, found: list[Violation]) -> None:
        """With --enable-violation-export, the run's file as Gatekeeper's disk driver writes it; a failed
        write is logged and counted (as Gatekeeper's publish errors), never the end of the audit."""
        if self.settings.export is None:
            return
        try:
            written = self.settings.export.write_run(audit_id, found)
        except OSError as exc:
            metrics.audit_export_failures.labels(type(exc).__name__).inc()
            log.error("failed to export audit violations", extra={"error": str(exc), "audit_id": audit_id})
            return
        log.info("exported audit violations", extra={"file": str(written), "violations": len(found)})

    def existing_reports(self) -> set[str]:
        """Namespaces that hold a regokite audit report now ("" for the cluster one)."""
        found = set()
        for namespaced, t in REPORT_TYPES.items():
            path = resource_path(t.api_version, t.resource)
            try:
                listing = self.client.get(path, labelSelector=AUDIT_REPORTS)
            except ApiError as exc:
                if exc.status == 404:
                    raise RegokiteError(
                        f"{t.resource}.{reports.API_VERSION} is not served: install the PolicyReport CRDs"
                        " (`regokite manifests audit` prints them),"
                        " or pass --no-reports (with --once: leave out --reports)"
                    ) from None
                raise
            for item in listing.get("items", []):
                if item["metadata"]["name"] == reports.REPORT_NAME:
                    found.add(item["metadata"].get("namespace", "") if namespaced else "")
        return found

    def update_metrics(self) -> None:
        metrics.audit_violations.clear()
        for (policy, enforcement), count in violations(r for _, r in self.findings.values()).items():
            metrics.audit_violations.labels(policy, enforcement).set(count)
        metrics.audit_objects.set(self.covered)


def paged(client: KubeClient, ref: ResourceRef, limit: int) -> Iterator[list[Obj]]:
    """Every object of `ref`, `limit` at a time (Gatekeeper's --audit-chunk-size): one page in memory;
    0 lists them all at once."""
    cont: str | None = None
    while True:
        try:
            page = client.get(resource_path(ref.api_version, ref.resource), limit=limit or None, **{"continue": cont})
        except ApiError as exc:
            cont = _resumed(exc, ref) if cont else None
            if cont is None:
                raise
            continue
        kind = (page.get("kind") or "").removesuffix("List")
        items = page.get("items") or []
        for obj in items:
            obj.setdefault("apiVersion", ref.api_version)
            obj.setdefault("kind", kind)
            (obj.get("metadata") or {}).pop("managedFields", None)
        yield items
        cont = page["metadata"].get("continue")
        if not cont:
            return


def _resumed(exc: ApiError, ref: ResourceRef) -> str | None:
    """The token to go on with when a continue token expired (410: etcd compacted past its version while
    the pages before it were decided): the API server's answer carries one that lists the rest at the
    current version, so every object is still audited (one changed meanwhile as it is now), as client-go's
    pager would rather restart; None for any other error."""
    token = (exc.body.get("metadata") or {}).get("continue") if isinstance(exc.body, dict) else None
    if exc.status != 410 or not token:
        return None
    log.warning("list continue token expired: the rest listed at the current version", extra={"resource": str(ref)})
    return token


def run_once(audit: Audit) -> None:
    """One pass over every audited object, then every report written (stale ones emptied).

    With `settings.jobs` > 1 (embedded engine) pages are decided in forked
    processes: regorus holds the GIL, so using more cores takes processes.
    """
    started = time.time()
    audit.audit_started(started)
    audit.load()
    metrics.audit_passes.inc()
    pages = ((ref, page) for ref in audit.resources for page in paged(audit.client, ref, audit.settings.page_size))
    covered = 0
    if audit.settings.jobs > 1 and Capability.IN_PROCESS in audit.settings.engine.capabilities:
        for found, count in _in_processes(audit, pages):
            audit.findings.update((key, (subject, results)) for key, subject, results in found)
            covered += count
    else:
        for ref, page in pages:
            for obj in page:
                audit.audit(_key(ref, obj), obj)
            covered += len(page)
    audit.covered = covered
    audit.update_metrics()
    audit.report_violations(started)
    if audit.settings.write_reports:
        _write_all(audit, audit.report_namespaces() | audit.existing_reports())
    _stop_replica(audit)


def _write_all(audit: Audit, namespaces: set[str], timeout: float = ONCE_WRITE_TIMEOUT) -> None:
    """Every report and constraint status written, retried with backoff; what is still not written
    after `timeout` seconds is an error (the one-shot audit must not report success without it)."""
    deadline = time.monotonic() + timeout
    backoff = RETRY_MIN
    pending, changed_only = namespaces, False
    while True:
        pending = audit.write(pending)
        failed = audit.write_constraint_status(changed_only=changed_only)
        changed_only = True
        if not pending and not failed:
            return
        if time.monotonic() + backoff > deadline:
            raise RegokiteError(f"audit results not written within {timeout:g}s: reports of {len(pending)} "
                                f"namespace(s) and {failed} constraint status(es)")  # fmt: skip
        time.sleep(backoff)
        backoff = min(backoff * 2, RETRY_MAX)


def _key(ref: ResourceRef, obj: Obj) -> Key:
    meta = obj["metadata"]
    return ref, meta.get("namespace") or "", meta["name"]


Found = list[tuple[Key, Subject, Results]]
_FORKED: Audit | None = None  # what a forked job process inherited


def _in_processes(audit: Audit, pages: Iterator[tuple[ResourceRef, list[Obj]]]) -> Iterator[tuple[Found, int]]:
    """Each page's findings and size, decided by `jobs` forked processes."""
    global _FORKED
    assert audit.policy_set is not None
    audit.policy_set.engine.bind(UNDEFINED)  # this thread's engine caught up with the replica before the fork
    _FORKED = audit
    failed: list[Exception] = []

    def listed() -> Iterator[tuple[ResourceRef, list[Obj]]]:
        """The pages, a list call's error kept here: the pool would hand it to a worker to raise, and a
        worker that cannot unpickle it dies, leaving the pass waiting for that page for ever."""
        try:
            yield from pages
        except Exception as exc:
            failed.append(exc)

    try:
        with multiprocessing.get_context("fork").Pool(audit.settings.jobs, initializer=_after_fork) as pool:
            yield from pool.imap(_decide_page, listed())
    finally:
        _FORKED = None
    if failed:
        raise failed[0]


def _after_fork() -> None:
    """A forked process has no other threads: locks they held are fresh ones here."""
    assert _FORKED is not None
    if _FORKED.replica is not None:
        _FORKED.replica.store.lock = threading.Lock()


def _decide_page(job: tuple[ResourceRef, list[Obj]]) -> tuple[Found, int]:
    assert _FORKED is not None and _FORKED.policy_set is not None
    ref, page = job
    found = []
    for obj in page:
        results = audit_object(_FORKED.policy_set, obj, ref)
        if results:
            found.append((_key(ref, obj), Subject.of(obj), results))
    return found, len(page)


def render(audit: Audit, fmt: str) -> str:
    """The findings for CI: one line per finding (pretty) or the whole set (json)."""
    rows = [(subject, r) for subject, results in audit.findings.values() for r in results]
    rows.sort(key=lambda row: (row[0].namespace, row[0].kind, row[0].name, row[1].policy, row[1].message))
    if fmt == "json":
        counts = violations(r for _, r in audit.findings.values())
        return json.dumps(
            {
                "objects": audit.covered,
                "results": [{"resource": s.reference(), **dataclasses.asdict(r)} for s, r in rows],
                "violations": [{"policy": p, "enforcement": e, "count": n} for (p, e), n in sorted(counts.items())],
                "not_audited": audit.skipped,
            },
            indent=2,
        )
    lines = []
    for subject, r in rows:
        where = "/".join(x for x in (subject.kind, subject.namespace, subject.name) if x)
        lines.append(f"{r.result.upper()} - {where} - [{r.policy}] {r.message}")
    lines += [f"NOT AUDITED - {reason}" for reason in audit.skipped]
    lines.append(f"{audit.covered} objects, {len(audit.findings)} with findings ({len(rows)} results)")
    return "\n".join(lines)


def _stop_replica(audit: Audit) -> None:
    if audit.replica is not None:
        audit.replica.stop()


class Continuous:
    """Informers on every audited resource; one thread audits what changed and writes reports.

    A write that fails (any error type: 503 while the API server starts, 404 while the report CRD is
    missing, a timeout, no connection) leaves its namespace dirty, retried with backoff (at most
    RETRY_MAX seconds apart) until it lands; a report deleted under the audit (its CRD deleted and
    re-created) is written again. Nothing that fails ends the loop."""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit
        self.informers: dict[ResourceRef, Informer] = {}
        self.report_informers: list[Informer] = []
        self.pending: set[Key] = set()
        self.deleted_reports: set[str] = set()  # namespaces whose report was deleted (not by us)
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.dirty: set[str] = set()  # namespaces whose report is not written as the findings are
        self.constraints_due = True  # every constraint's status after a full pass, then those that change
        self.pass_started = time.time()  # the current full pass's start: its audit_id
        self.status_failed = 0
        self.retry_at = 0.0
        self.backoff = RETRY_MIN
        self.outage = Outage(log, "audit loop")
        self.started = threading.Event()  # the first pass is queued: /readyz answers 200
        self.reload_error: str | None = None  # the last policy reload refused (the last good set audits)
        self.loop_at: float | None = None  # monotonic time the loop last went round

    def _watch(self, refs: list[ResourceRef]) -> None:
        for ref in refs:
            if ref in self.informers:
                continue
            page_size = self.audit.settings.page_size
            informer = Informer(self.audit.client, ref.api_version, ref.resource, page_size=page_size)
            informer.add_handler(lambda _e, new, old, ref=ref: self._queue(ref, new or old))
            self.informers[ref] = informer
            informer.start()
        for ref in refs:
            self.informers[ref].synced.wait()

    def _watch_reports(self) -> None:
        """Follow the audit's own reports: one deleted (by hand, or with its CRD) is written again."""
        for t in REPORT_TYPES.values():
            informer = Informer(self.audit.client, t.api_version, t.resource, label_selector=AUDIT_REPORTS)
            informer.add_handler(self._report_event)
            self.report_informers.append(informer)
            informer.start()

    def _report_event(self, event: str, _new: Obj | None, old: Obj | None) -> None:
        if event != "DELETED" or old is None:
            return
        with self.lock:
            self.deleted_reports.add((old.get("metadata") or {}).get("namespace") or "")
        self.wake.set()

    def _queue(self, ref: ResourceRef, obj: Obj | None) -> None:
        if obj is None:
            return
        meta = obj.get("metadata") or {}
        with self.lock:
            self.pending.add((ref, meta.get("namespace") or "", meta.get("name", "")))
        self.wake.set()

    def full_pass(self) -> set[str]:
        """Queue every audited object (its audit_started line logged); forget findings on resources no
        longer audited. The pass ends at the next flush, which logs its results and writes every
        constraint's status."""
        metrics.audit_passes.inc()
        self.pass_started = time.time()
        self.audit.audit_started(self.pass_started)
        self.constraints_due = True
        audited = set(self.audit.resources)
        dropped = {k for k in self.audit.findings if k[0] not in audited}
        for k in dropped:
            del self.audit.findings[k]
        with self.lock:
            for ref in self.audit.resources:
                self.pending |= {(ref, *_name_of(o)) for o in self.informers[ref].list()}
        return {k[1] for k in dropped}

    def _start(self) -> None:
        """Load, list, queue the first pass. The API server away is waited out; a policy that does not
        load, or report CRDs not installed, is an error (fail closed, loudly)."""
        backoff = RETRY_MIN
        while True:
            try:
                self.audit.load()
                self._watch(self.audit.resources)
                self.dirty |= self.full_pass()
                if self.audit.settings.write_reports:
                    self.dirty |= self.audit.existing_reports()
                    self._watch_reports()
                return
            except Exception as exc:
                if isinstance(exc, RegokiteError) and not isinstance(exc, ApiError):
                    raise
                self.outage.failed(exc, error_reason(exc))
                if self.stop.wait(backoff):
                    return
                backoff = min(backoff * 2, RETRY_MAX)

    def run(self) -> int:
        audit = self.audit
        self._start()
        self.started.set()
        files = fingerprint(audit.settings.policies)
        checked = flushed = timed = time.monotonic()
        log.info("auditing", extra={"resources": [str(r) for r in audit.resources]})
        while not self.stop.is_set():
            self.wake.wait(min(audit.settings.flush_interval, audit.settings.reload_interval))
            self.wake.clear()
            now = self.loop_at = time.monotonic()
            try:
                if audit.settings.interval and now - timed >= audit.settings.interval:
                    timed = now  # Gatekeeper's periodic audit: a verdict that reads other objects is redone
                    self.full_pass()
                self._audit_pending()
                if now - flushed >= audit.settings.flush_interval and now >= self.retry_at:
                    flushed = now
                    self._flush(now)
                if now - checked >= audit.settings.reload_interval:
                    checked = now
                    current = fingerprint(audit.settings.policies)
                    if current != files and self._reload():
                        files = current
                self.outage.recovered()
            except Exception as exc:  # a bug or an error type not foreseen: logged, retried, never the end
                self.outage.failed(exc, error_reason(exc))
                self.retry_at = now + self._next_backoff()
        _stop_replica(audit)
        for informer in [*self.informers.values(), *self.report_informers]:
            informer.stop()
        return 0

    def _audit_pending(self) -> None:
        audit = self.audit
        with self.lock:
            batch, self.pending = self.pending, set()
        audited = set(audit.resources)
        for key in batch:
            if key[0] not in audited:  # a resource no policy names any more
                continue
            changed = audit.audit(key, self.informers[key[0]].get(key[1] or None, key[2]))
            if changed is not None:
                self.dirty.add(changed)
        if batch:
            audit.covered = sum(len(self.informers[r]) for r in audit.resources)
            audit.update_metrics()

    def _flush(self, now: float) -> None:
        """Write what is dirty; what fails stays dirty and is tried again after the backoff."""
        with self.lock:
            deleted, self.deleted_reports = self.deleted_reports, set()
        self.dirty |= deleted & self.audit.report_namespaces()  # a deleted empty report needs no rewrite
        if not (self.dirty or self.constraints_due or self.status_failed):
            return
        if self.constraints_due:  # a full pass is in: Gatekeeper's per-audit log lines and Events
            self.audit.report_violations(self.pass_started)
        self.dirty = self.audit.write(self.dirty, self._report_exists)
        if self.audit.settings.write_reports:
            self.status_failed = self.audit.write_constraint_status(changed_only=not self.constraints_due)
        self.constraints_due = False
        if self.dirty or self.status_failed:
            self.retry_at = now + self._next_backoff()
        else:
            self.backoff = RETRY_MIN

    def _report_exists(self, namespace: str) -> bool:
        """Whether the audit's report of `namespace` is in its report informer's cache."""
        informer = self.report_informers[0 if namespace else 1] if self.report_informers else None
        return informer is not None and informer.get(namespace or None, reports.REPORT_NAME) is not None

    def _next_backoff(self) -> float:
        wait, self.backoff = self.backoff, min(self.backoff * 2, RETRY_MAX)
        return wait

    def _reload(self) -> bool:
        """Load the changed policies (False: refused, or the API server away; tried again)."""
        try:
            self.audit.load()
        except Exception as exc:
            log.error("policy reload failed; auditing with the last good set", extra={"error": str(exc)[:2000]})
            self.reload_error = str(exc)[:2000]
            return isinstance(exc, RegokiteError) and not isinstance(exc, ApiError)  # a bad policy: until it changes
        self.reload_error = None
        log.info("policies reloaded: full pass", extra={"resources": [str(r) for r in self.audit.resources]})
        self._watch(self.audit.resources)
        self.dirty |= self.audit.report_namespaces() | self.full_pass()
        return True


def _name_of(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name", "")
