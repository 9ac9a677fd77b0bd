"""Gatekeeper's bats cases (test/bats/test.bats) that run on a real API server, with regokite in Gatekeeper's
role, in tests/integration/test_gatekeeper_bats.py: the offline harness skips them (it runs no API server),
that module runs each, and its test_every_bats_case_is_run_or_listed holds its cases to these names."""

from __future__ import annotations

RUN_BY = "tests/integration/test_gatekeeper_bats.py"

CASES = frozenset({
    "gatekeeper-controller-manager is running", "gatekeeper-audit is running", "namespace label webhook is serving",
    "constrainttemplates crd is established", "mutation crds are established", "waiting for validating webhook",
    "gatekeeper mutation test", "applying sync config", "create basic resources",
    "no ignore label unless namespace is exempt test", "gatekeeper ns ignore label can be patched",
    "required labels warn and dryrun test", "container limits test", "deployment test",
    "waiting for namespaces to be synced using metrics endpoint", "unique labels test", "required labels audit test",
    "emit events test", "config namespace exclusion test (exact match)",
    "config namespace exclusion test (prefix match)", "config namespace exclusion test (suffix match)",
    "disable http.send", "external data provider crd is established", "rego v1 tests",
    "gatekeeper external data validation and mutation test", "namespace object access - Rego engine test",
    "constraint template operations test", "gatekeeper expansion test", "shutdown delay",
    "gatekeeper export_violation test",
})  # fmt: skip
