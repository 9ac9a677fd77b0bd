"""Start-up: every definitions file read once, every hook checked against the policies before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.controllers.hooks import HookError
from regokite.kube.serve import load_hooks

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"


def test_definitions_and_watches_load_together_with_their_hooks_resolved() -> None:
    loaded, engine, hooks = load_hooks(
        [str(ROOT / "policies")], [str(HELLO), str(ROOT / "policies" / "watches")], v0_compatible=False
    )
    try:
        assert [d.name for d in loaded.composites] == ["hello-controller"]
        assert {w.name for w in loaded.watches} >= {"deployment-scaler", "namespace-defaults"}
        sync, finalize, customize = hooks["hello-controller"]
        assert sync.package == "controllers.hello_world" and finalize is None and customize is None
    finally:
        engine.close()


def test_a_hook_naming_no_loaded_package_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "empty.rego").write_text("package other\n\nx := 1\n")
    with pytest.raises(HookError, match="no such package or rule"):
        load_hooks([str(tmp_path)], [str(HELLO)], v0_compatible=False)
