"""OPA's bundles as OPA serves them: its configuration file (`config`), bundle archives and their
signatures (`archive`, `signing`), the bundle service's polling (`download`; OCI registries: `oci`),
activation, persistence and status (`plugin`), and what a server serves of them (`served`)."""
