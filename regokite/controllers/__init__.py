"""Metacontroller-compatible controllers and Watches whose hooks are Rego, grouped by feature.

One subpackage per kind, each with its decisions (pure) and its runner (on `regokite.runtime` and
`regokite.kube`): `composite` (with its rolling updates), `decorator`, `watch`. Beside them, what the
kinds share:

* `schema`, `definitions` -- the definitions files' vocabulary and their one loader; `cluster_definitions`
  reads them from the API server and reports their status.
* `hooks` -- the hook contract (requests, evaluation, output checks); `hook_workers` evaluates hooks in
  worker processes, each call bounded by its timeout.
* `sync` -- one sync, pure: the finalizer step, then the plan of writes; `children` -- the children a sync
  writes (decorate, diff, take over); `failing` -- the SyncFailing condition; `customize` -- the customize
  hook's rules.
* `sync_reconciler` runs one sync on the cluster; `related_resources` runs the customize hook and follows
  what it selects.
* `plan` -- `regokite plan`, offline: the same decisions on files; `process` -- `regokite controller`'s
  process, which wires all of it.

The split between pure modules and those that talk to the API server is by module, listed in
tests/test_layers.py.
"""
