"""The examples of Gatekeeper's gator docs (website/docs/gator.md) that run offline, on regokite's commands.

Blocks are found by what they hold, read where they lie. `gator policy` (a
catalog fetched over the network), `gator sync test` and `gator bench` have no
regokite command: they are no case here (see /work/notes/gk-files.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from regokite.gatekeeper.verify import run_suite
from tests.gatekeeper.gatekeeper_upstream.harness import gatekeeper, judge, regokite

ROOT = Path(__file__).resolve().parents[3]


def blocks() -> list[tuple[int, str]]:
    """(offset, text) of every fenced block of gator.md."""
    text = (gatekeeper() / "website/docs/gator.md").read_text(encoding="utf-8")
    return [(m.start(), m.group(1)) for m in re.finditer(r"^```[a-z]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)]


def after(heading: str, count: int) -> list[str]:
    """The `count` blocks that follow `heading` in gator.md."""
    text = (gatekeeper() / "website/docs/gator.md").read_text(encoding="utf-8")
    start = text.index(heading)
    return [b for offset, b in blocks() if offset > start][:count]


def holding(*needles: str) -> str:
    return next(b for _, b in blocks() if all(n in b for n in needles))


def subset(small: Any, big: Any) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and subset(v, big[k]) for k, v in small.items())
    return small == big


def test_expand_non_default_namespace_example(tmp_path: Path) -> None:
    def run() -> str | None:
        manifest, output, error = after("#### Non default namespace example", 3)
        (tmp_path / "manifest.yaml").write_text(manifest, encoding="utf-8")
        done = regokite("expand", "--filename=manifest.yaml", cwd=tmp_path)
        if done.returncode != 0 or not subset(yaml.safe_load(output), yaml.safe_load(done.stdout)):
            return f"with the Namespace: exit {done.returncode}: {done.stdout}{done.stderr}"
        without = "\n---\n".join(d for d in manifest.split("\n---\n") if "kind: Namespace" not in d)
        (tmp_path / "manifest.yaml").write_text(without, encoding="utf-8")
        done = regokite("expand", "--filename=manifest.yaml", cwd=tmp_path)
        if done.returncode != 1 or done.stderr.strip() != error.strip():
            return f"without the Namespace: exit {done.returncode}: {done.stderr}"
        return None

    judge("docs-examples/gator.md non default namespace example", run)


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE"])
def test_verify_userinfo_example(operation: str, tmp_path: Path) -> None:
    """The example's constraint is `constraints.gatekeeper.sh/v1`, a version gator's constraint framework
    refuses (it takes v1beta1 and v1alpha1): as written the test fails with that error, as gator's;
    with v1beta1 it passes."""

    def verify(constraint: str) -> list[str]:
        review, template, _ = holding("kind: AdmissionReview", "kind: ValidateUserInfo").split("\n---\n")
        if operation == "DELETE":
            review = holding("kind: AdmissionReview", 'operation: "DELETE"')
        for name, text in (("admission-review.yaml", review), ("template.yaml", template),
                           ("constraint.yaml", constraint), ("suite.yaml", holding("name: userinfo"))):  # fmt: skip
            (tmp_path / name).write_text(text, encoding="utf-8")
        result = run_suite(tmp_path / "suite.yaml")
        failed = [c.error or t.error for t in result.children for c in t.children or [t] if c.error or t.error]
        return (
            [str(f) for f in failed]
            + ([result.error] if result.error else [])
            + ([] if result.children else ["no test"])
        )

    def run() -> str | None:
        constraint = holding("kind: AdmissionReview", "kind: ValidateUserInfo").split("\n---\n")[2]
        as_written = verify(constraint)
        if not (len(as_written) == 1 and 'unsupported version "v1"' in as_written[0]):
            return f"as written: {as_written}"
        fixed = verify(constraint.replace("constraints.gatekeeper.sh/v1\n", "constraints.gatekeeper.sh/v1beta1\n"))
        return "; ".join(fixed) or None

    judge(f"docs-examples/gator.md UserInfo AdmissionReview ({operation})", run)
