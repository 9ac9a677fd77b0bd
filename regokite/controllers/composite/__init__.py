"""CompositeController, as Metacontroller's pkg/controller/composite: `decisions` (the parent's selector,
claiming) and `rolling` (RollingRecreate / RollingInPlace: revisions, the next step), pure; `runner` (the
parent and child informers, one sync per parent) and `rolling_runner` (revisions and rollout steps on the
API server) carry them out. The sync itself is the one decorators share (`controllers.sync`,
`controllers.sync_reconciler`)."""
