"""Templates share files: every generated module has an identity of its own, not its file's.

Gatekeeper-library templates that need the OPA-compatibility rewrites (`not`,
arithmetic, routed builtins such as `count` and `to_number`, units) are put in
one YAML file, as `kubectl get constrainttemplates -o yaml` or a hand-made
bundle holds them; each still loads and decides every case of its gator suite.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from regokite import yamldoc
from regokite.admission.policies import load_policy_set
from regokite.check import Manifest, check
from regokite.gatekeeper.compile import template_modules
from regokite.gatekeeper.constraints import read_sources
from tests.gatekeeper.template_text import template_yaml
from tests.gatekeeper.upstream import gatekeeper_library

# each needs a rewrite: count / to_number / units (routed builtins), arithmetic, `not`
REWRITTEN = ("containerlimits", "containerresourceratios", "replicalimits", "requiredlabels", "allowedrepos",
             "httpsonly", "disallowedtags", "requiredprobes")  # fmt: skip


def suites() -> list[Path]:
    return [gatekeeper_library() / "library" / "general" / name / "suite.yaml" for name in REWRITTEN]


def one_template_file(tmp_path: Path, *, as_list: bool = False) -> Path:
    texts = [(s.parent / "template.yaml").read_text(encoding="utf-8") for s in suites()]
    out = tmp_path / "policies"
    out.mkdir()
    if as_list:
        items = [yamldoc.load(t) for t in texts]
        (out / "templates.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    else:
        (out / "templates.yaml").write_text("\n---\n".join(texts))
    return out


def expected(suite: Path) -> list[tuple[Path, Path, list[dict[str, Any]]]]:
    """(constraint, object, assertions) of every case of a gator suite whose object is not an
    AdmissionReview (`check` makes CREATE reviews of objects)."""
    doc = yamldoc.load(suite.read_text(encoding="utf-8"))
    cases = [(test, case) for test in doc["tests"] for case in test["cases"]]
    return [
        (suite.parent / test["constraint"], suite.parent / case["object"], case.get("assertions") or [])
        for test, case in cases
        if yamldoc.load((suite.parent / case["object"]).read_text(encoding="utf-8")).get("kind") != "AdmissionReview"
    ]


def counted(messages: list[str], constraint: str, assertion: dict[str, Any]) -> bool:
    mine = [m for m in messages if m.startswith(f"[{constraint}] ")]
    pattern = assertion.get("message")
    hits = [m for m in mine if pattern is None or re.search(pattern, m)]
    want = assertion.get("violations", "yes")
    if want in (True, "yes", False, "no"):  # YAML 1.1 reads yes and no as booleans
        return bool(hits) == (want in (True, "yes"))
    return len(hits) == want


@pytest.mark.parametrize("as_list", [False, True], ids=["multi-document", "kind-list"])
def test_templates_needing_rewrites_load_and_decide_from_one_file(tmp_path: Path, as_list: bool) -> None:
    templates = one_template_file(tmp_path, as_list=as_list)
    sources = read_sources([templates])
    assert not sources.problems
    assert len(sources.templates) == len(REWRITTEN)
    cases = [c for s in suites() for c in expected(s)]
    failing = []
    for i, constraint in enumerate(sorted({c for c, _, _ in cases})):
        own = tmp_path / f"constraint-{i}"
        own.mkdir()
        (own / "constraint.yaml").write_text(constraint.read_text(encoding="utf-8"))
        name = yamldoc.load(constraint.read_text(encoding="utf-8"))["metadata"]["name"]
        ps = load_policy_set([str(templates), str(own)])
        try:
            for obj, assertions in [(o, a) for c, o, a in cases if c == constraint]:
                manifest = Manifest(str(obj), 0, yamldoc.load(obj.read_text(encoding="utf-8")))
                check(ps, [manifest])
                for assertion in assertions:
                    if not counted(manifest.failures + manifest.warnings, name, assertion):
                        failing.append((obj.relative_to(gatekeeper_library()).as_posix(), assertion, manifest.failures))
        finally:
            ps.close()
    assert not failing, "\n".join(map(str, failing))
    assert len(cases) > 30


def test_each_module_has_an_identity_of_its_own_whatever_file_holds_it(tmp_path: Path) -> None:
    sources = read_sources([one_template_file(tmp_path)])
    paths = [m.path for t in sources.templates for m in template_modules(t)]
    assert len(set(paths)) == len(paths)
    assert not any("templates.yaml" in p for p in paths)


BOOM = (
    template_yaml(
        "K8sBoom",
        """\
package k8sboom

violation[{"msg": msg}] {
  msg := sprintf("n %v", [n])
}

n = input.review.object.metadata.name
n = "other"
""",
    )
    + """\
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sBoom
metadata:
  name: boom
"""
)


def test_an_evaluation_error_names_the_place_in_the_template_file(tmp_path: Path) -> None:
    texts = [(s.parent / "template.yaml").read_text(encoding="utf-8") for s in suites()[:2]]
    (tmp_path / "templates.yaml").write_text("\n---\n".join([*texts, BOOM]))
    ps = load_policy_set([str(tmp_path)])
    try:
        manifest = Manifest("pod.yaml", 0, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "abc"}})
        check(ps, [manifest])
    finally:
        ps.close()
    lines = sum(t.count("\n") + 1 for t in texts) + len(texts)  # each "---" separator adds a line
    (failure,) = manifest.failures
    # a rule conflict (a builtin's error would be undefined), a violation carrying the error as Gatekeeper's
    # driver makes it: the second `n =` on line 20 of the template's document, column 9 of the file
    assert failure.startswith(f"[boom] {tmp_path / 'templates.yaml'}:{lines + 20}:9: rule conflicts"), failure
