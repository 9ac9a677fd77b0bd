"""Decision logs as OPA writes them: OPA's `decision_logs` configuration, the events, masking and dropping
through `system.log.mask` / `system.log.drop`, and a logger that buffers (bounded, dropping and counting
rather than blocking a review) and reports to the console and to a decision log service."""
