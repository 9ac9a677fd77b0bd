"""ConstraintTemplates loaded from YAML: packages kept apart, libs rewritten, errors located."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.admission.policies import load_policy_set
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.compile import compile_template, template_package
from regokite.gatekeeper.constraints import read_resources
from regokite.manifests.workloads import bundle_files

FIXTURES = Path(__file__).parent / "fixtures"


def templates(*dirs: str):
    found, _, problems = read_resources([FIXTURES / d for d in dirs])
    assert problems == []
    return {t.kind: t for t in found}


def test_every_template_shape_is_read() -> None:
    found = templates("library", "broken")
    assert found["K8sRequiredLabels"].rego is not None and not found["K8sRequiredLabels"].v1
    assert found["K8sRequiredLabels"].schema["properties"]["labels"]["type"] == "array"
    assert [lib.role for lib in found["K8sAllowedRepos"].libs] == ["libs[0]"]
    unique = found["K8sUniqueIngressHost"]  # code[] with CEL first, then Rego v1
    assert unique.v1 and unique.engines == ("K8sNativeValidation", "Rego")
    assert found["K8sCelOnly"].rego is None


def test_packages_and_libs_move_under_the_template_kind() -> None:
    compiled = compile_template(templates("library")["K8sAllowedRepos"])
    main, lib = compiled.modules
    assert main.text.startswith(f"package {template_package('K8sAllowedRepos')}\n")
    assert "import data.regokite_gatekeeper.libs.K8sAllowedRepos.lib.containers.all_containers" in main.text
    assert lib.text.startswith("package regokite_gatekeeper.libs.K8sAllowedRepos.lib.containers\n")
    assert main.v0 and lib.v0  # template Rego is v0 unless it says v1


def test_two_templates_with_one_package_do_not_collide() -> None:
    ps = load_policy_set([str(FIXTURES / "library"), str(FIXTURES / "broken")])
    kinds = {p.constraint_kind for p in ps.policies}
    assert {"K8sRequiredLabels", "K8sNoTeam"} <= kinds  # both declare package k8srequiredlabels
    review = {"request": {"object": {"metadata": {"labels": {"team": "x"}}}}}
    assert ps.engine.evaluate("data.regokite_gatekeeper.templates.K8sNoTeam.violation", {"review": review["request"]})
    ps.close()


def test_a_template_that_does_not_compile_is_located_in_its_file_and_spares_the_others() -> None:
    ps = load_policy_set([str(FIXTURES / "library"), str(FIXTURES / "broken")])
    broken = next(p for p in ps.problems if "no_such_function" in p)
    assert broken.startswith(f"{FIXTURES / 'broken' / 'templates.yaml'}:16:18: unknown function no_such_function")
    assert "(in rego, line 4)" in broken
    assert any("k8scelonly has no Rego code (engines: K8sNativeValidation)" in p for p in ps.problems)
    assert any("data.k8srequiredlabels: a template may read only data.lib and data.inventory" in p for p in ps.problems)
    assert ps.get("ns-must-have-owner") is not None and "ns-must-have-owner" not in ps.unavailable
    assert "did not load" in ps.unavailable["broken-everywhere"]
    ps.close()


def test_a_lib_must_declare_a_lib_package(tmp_path: Path) -> None:
    text = (FIXTURES / "library/allowedrepos/template.yaml").read_text().replace("package lib.containers", "package x")
    (tmp_path / "t.yaml").write_text(text)
    found, _, _ = read_resources([tmp_path])
    with pytest.raises(PolicyLoadError, match="a lib's package must start with lib, got 'x'"):
        compile_template(found[0])


def test_a_template_whose_name_is_not_its_kind_is_refused(tmp_path: Path) -> None:
    text = (FIXTURES / "library/requiredlabels/template.yaml").read_text().replace("name: k8srequiredlabels", "name: x")
    (tmp_path / "t.yaml").write_text(text)
    _, _, problems = read_resources([tmp_path])
    assert problems and "metadata.name must be the lowercased kind (k8srequiredlabels)" in problems[0]


def test_generated_manifests_ship_the_template_and_constraint_yaml() -> None:
    shipped = [path for path, _ in bundle_files([str(FIXTURES / "library/requiredlabels")])]
    assert shipped == ["constraint.yaml", "template.yaml"]  # not the suite nor its objects
