"""Controller runners: carry out the decisions of `regokite.controllers` against the API server.

Each runner pairs informers and a `runtime.manager.Manager` with one kind of controller:
`sync_reconciler` runs one sync plan (shared by composites and decorators), `composite_runner`,
`decorator_runner` and `watch_runner` run each kind, `related_resources` and `rolling_updates`
add customize-hook related objects and rolling child updates. Writes go through `kube.actuator`.
"""
