"""Prometheus metrics of the controller runtime (served on `--metrics-port`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from regokite.ops import builtin_error_metrics  # noqa: F401  (this server counts them too)
from regokite.ops.metrics import LATENCY_BUCKETS

RECONCILE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

queue_depth = Gauge("regokite_controller_queue_depth", "Parents waiting in the work queue.", ["controller"])
reconcile_duration = Histogram(
    "regokite_controller_reconcile_duration_seconds",
    "Time to sync one parent: read caches, evaluate, write.",
    ["controller"],
    buckets=RECONCILE_BUCKETS,
)
reconcile_errors = Counter(
    "regokite_controller_reconcile_errors_total",
    "Syncs that failed, by reason (InvalidHookOutput, PolicyError, ApiError, ...).",
    ["controller", "reason"],
)
reconciles = Counter("regokite_controller_reconciles_total", "Syncs completed.", ["controller", "result"])
applies = Counter(
    "regokite_controller_writes_total",
    "Writes to children and parents, by verb (create, update, recreate, delete, adopt, release, status, ...).",
    ["controller", "kind", "verb"],
)
evaluation_latency = Histogram(
    "regokite_controller_policy_evaluation_duration_seconds",
    "Time to evaluate one hook for one parent.",
    ["controller", "package"],
    buckets=LATENCY_BUCKETS,
)
related_events = Counter(
    "regokite_controller_related_events_total",
    "Changes to related objects (the customize hook's), by outcome: requeued parents, or ignored (none relate it).",
    ["controller", "result"],
)
watch_errors = Counter("regokite_controller_watch_errors_total", "Watches that failed and were retried.", ["resource"])
informer_objects = Gauge("regokite_controller_informer_objects", "Objects in an informer's cache.", ["informer"])
leader = Gauge("regokite_leader", "1 while this replica holds the leader Lease (always 1 without --leader-elect).")
watch_events = Counter(
    "regokite_watch_events_total",
    "Watch events delivered to a policy, by watch and event (ADDED, MODIFIED, DELETED, RESYNC).",
    ["watch", "event"],
)
stale_writes = Counter(
    "regokite_watch_stale_decisions_total",
    "Watch decisions dropped because the object changed after the event (a newer event follows).",
    ["watch"],
)
hook_worker_restarts = Counter(
    "regokite_controller_hook_worker_restarts_total",
    "Hook evaluation processes replaced, by reason (stuck: past a hook's timeout; exited).",
    ["reason"],
)
definitions_reloads = Counter(
    "regokite_controller_definitions_reloads_total",
    "Restarts of the controllers for changed definitions on the API server or policy files (--watch-definitions).",
)
definitions_reload_errors = Counter(
    "regokite_controller_definitions_reload_errors_total",
    "New policies or definitions that did not load: the last good set kept running (--watch-definitions).",
)
shard_members = Gauge("regokite_shard_members", "Members in the shard view this replica acts on (--shards).")
shard_owned = Gauge(
    "regokite_shard_owned_objects", "Objects the controllers act on that this replica's shard view gives it (--shards)."
)
shard_view_changes = Counter("regokite_shard_view_changes_total", "Membership views this replica moved to (--shards).")
shard_handovers = Counter(
    "regokite_shard_handovers_total",
    "Objects that came to this replica (in) or went to another (out) at view changes (--shards).",
    ["direction"],
)
stale_retries = Counter(
    "regokite_controller_stale_retries_total",
    "Status writes that met a newer version of the object than the sync read (409): written again over the"
    " object read afresh, the hook not asked again (retried), left to the next sync since the object kept"
    " changing or is a decorator's target (left), or not, since it was gone or replaced (gone).",
    ["controller", "result"],
)
parent_confirmations = Counter(
    "regokite_controller_parent_confirmations_total",
    "Objects confirmed with a GET before children were created for them, because a cache read had missed"
    " events since its last list; result: current, or gone (nothing created).",
    ["controller", "result"],
)
parent_confirmation_seconds = Histogram(
    "regokite_controller_parent_confirmation_seconds",
    "Time of the GET confirming an object before children are created for it (parent_confirmations_total):"
    " what a sync pays while a cache read may have missed events.",
    ["controller"],
    buckets=LATENCY_BUCKETS,
)
