"""The shipped Rego passes its own tests under `regokite test`, as it would under `opa test`.

`policies/` and the examples keep Kubernetes manifests beside their Rego, so they are tested as bundles
(`regokite test --bundle`, `opa test --bundle`): as plain files every manifest would be data.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from regokite import yamldoc
from regokite.engine import EngineSettings
from regokite.testing import Outcome, run_tests
from tests.opa_oracle import OracleEngine

ROOT = Path(__file__).resolve().parents[1]
THIRDPARTY = ROOT / "tests" / "fixtures" / "thirdparty"
METACONTROLLER_EXAMPLES = ROOT / "examples" / "metacontroller"


def assert_all_pass(paths: list[Path], **kw: Any) -> None:
    results = run_tests([str(p) for p in paths], **kw)
    assert results, f"no tests found under {paths}"
    bad = [
        f"{r.ref}: {r.outcome.value} {r.error or ''} ({r.file}:{r.line})"
        for r in results
        if r.outcome in (Outcome.FAIL, Outcome.ERROR)
    ]
    assert not bad, "\n".join(bad)


def test_every_policy_in_policies_passes_its_tests() -> None:
    assert_all_pass([ROOT / "policies"], as_bundle=True)


@pytest.mark.parametrize("example", sorted(p.name for p in METACONTROLLER_EXAMPLES.iterdir() if p.is_dir()))
def test_every_ported_metacontroller_example_passes_its_tests(example: str) -> None:
    assert_all_pass([METACONTROLLER_EXAMPLES / example], as_bundle=True)


@pytest.mark.parametrize("example", sorted(p.name for p in METACONTROLLER_EXAMPLES.iterdir() if p.is_dir()))
def test_every_ported_metacontroller_example_passes_its_tests_under_real_opa(example: str) -> None:
    """The same tests on OPA's own engine: a port written to regorus' reading only (an argument
    named `data`, `not f(x)` with `x` undefined) would differ from OPA in a sidecar."""
    assert_all_pass([METACONTROLLER_EXAMPLES / example], as_bundle=True, engine_for=OracleEngine)


@pytest.mark.parametrize("example", sorted(p.name for p in METACONTROLLER_EXAMPLES.iterdir() if p.is_dir()))
def test_every_ported_example_ships_each_policy_its_hooks_name(example: str) -> None:
    """The ConfigMap holds every policy of manifest/ (no test), and each `rego` hook of the
    definitions names a package one of them declares."""
    manifest = METACONTROLLER_EXAMPLES / example / "manifest"
    kustomization = yamldoc.load((manifest / "kustomization.yaml").read_text())
    shipped = {f for g in kustomization["configMapGenerator"] for f in g["files"]}
    policies = {p.name for p in manifest.glob("*.rego") if not p.name.endswith("_test.rego")}
    assert shipped == policies
    for generator in kustomization["configMapGenerator"]:  # its own options, or the kustomization's
        options = generator.get("options") or kustomization.get("generatorOptions")
        assert options == {"disableNameSuffixHash": True, "labels": {"openpolicyagent.org/policy": "rego"}}
    packages = {re.search(r"^package (\S+)", (manifest / p).read_text(), re.M)[1] for p in policies}
    named = {
        hook["rego"]["package"]
        for f in kustomization.get("resources", [])
        for doc in yamldoc.load_all((manifest / f).read_text())
        if doc and doc.get("kind") in ("CompositeController", "DecoratorController")
        for hook in doc["spec"]["hooks"].values()
    }
    assert named <= packages


@pytest.mark.parametrize(
    "bundle", sorted(p.name for p in THIRDPARTY.iterdir() if p.is_dir()) if THIRDPARTY.exists() else []
)
def test_third_party_style_bundles_pass_their_own_tests(bundle: str) -> None:
    assert_all_pass([THIRDPARTY / bundle], engine=EngineSettings(v0_compatible=bundle in ("v0", "system_main")))
