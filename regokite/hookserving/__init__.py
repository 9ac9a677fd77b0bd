"""Hooks as a service: Rego packages answered over HTTP (`server`, run by `process` for
`regokite hooks`) and in worker processes with per-call timeouts (`workers`, used by the controller)."""
