"""gator Suite files written by the verify tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def write_suite(
    root: Path,
    cases: list[dict[str, Any]],
    *,
    name: str = "test",
    template: str = "template.yaml",
    constraint: str = "constraint.yaml",
    expansion: str | None = None,
) -> Path:
    """`root/suite.yaml`: one test of `template` and `constraint` (and `expansion`) with `cases`."""
    test: dict[str, Any] = {"name": name, "template": template, "constraint": constraint, "cases": cases}
    if expansion is not None:
        test["expansion"] = expansion
    suite = {"apiVersion": "test.gatekeeper.sh/v1alpha1", "kind": "Suite", "tests": [test]}
    (root / "suite.yaml").write_text(yaml.safe_dump(suite))
    return root / "suite.yaml"
