"""OPA's bundles as OPA serves them: its configuration file (`config`), bundle archives and their
signatures (`archive`, `signing`), the bundle service's polling (`download`), activation, persistence
and status (`plugin`)."""
