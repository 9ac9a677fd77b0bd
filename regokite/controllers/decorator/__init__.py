"""DecoratorController, as Metacontroller's pkg/controller/decorator: `decisions` (the definition, which
targets a rule selects, the hook's labels, annotations and attachments), pure; `runner` (one reconciler
per target resource) carries them out through the sync composites share (`controllers.sync`,
`controllers.sync_reconciler`)."""
