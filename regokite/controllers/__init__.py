"""Metacontroller-compatible controllers and Watches whose hooks are Rego: the decisions.

No API-server I/O happens here (`regokite.runners` run these decisions over
`regokite.kube`); the definitions loader and `plan` read files.

* `schema` — the parsing vocabulary every definitions file shares.
* `definitions` — one loader: CompositeControllers, DecoratorControllers, Watches (and CRDs beside them).
* `hooks` — the hook contract: requests, evaluation, output checks.
* `sync` — one sync, shared by composites and decorators: the finalizer step, then the plan of writes.
* `composite`, `decorator`, `customize`, `rolling`, `watch` — what is particular to each.
"""
