"""Hooks as a service: Rego packages answered over HTTP (`server`, run by `process` for `regokite hooks`).
The controller evaluates its hooks in its own worker processes (`regokite.controllers.hook_workers`)."""
