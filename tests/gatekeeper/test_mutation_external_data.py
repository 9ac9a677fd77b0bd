"""externalData in Assign and AssignMetadata: placeholders resolved through a Provider, as Gatekeeper.

Gatekeeper's own material: test/externaldata/dummy-provider's mutators
(valid.yaml, invalid_assign.yaml, invalid_assignmetadata.yaml,
schema_conflict.yaml) against a provider answering as its dummy provider does
(tests/gatekeeper/signature_provider.py with `dummy`), over HTTPS on loopback:
nothing is mocked between the mutators' Rego and the provider.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonpatch
import pytest
import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from regokite.engine import EngineSettings
from regokite.gatekeeper.constraints import read_sources
from tests.admission.reviews import review
from tests.gatekeeper.mutators import assign
from tests.gatekeeper.signature_provider import SignatureProvider
from tests.gatekeeper.test_enforcement_points import gatekeeper

PROVIDER = "dummy-provider"


def mutations(name: str) -> Path:
    return gatekeeper() / "test/externaldata/dummy-provider/mutation" / name


@pytest.fixture
def dummy(tmp_path: Path):
    (tmp_path / "provider").mkdir()
    with SignatureProvider(tmp_path / "provider", dummy=True).running() as sp:
        yield sp


def policies(root: Path, provider: SignatureProvider, *files: Path, extra: str = "") -> PolicySet:
    root.mkdir(exist_ok=True)
    for f in files:
        shutil.copy(f, root / f.name)
    (root / "provider.yaml").write_text(provider.provider_yaml(PROVIDER))
    if extra:
        (root / "extra.yaml").write_text(extra)
    return load_policy_set([str(root)])


def pod(*images: str) -> dict:
    """What `kubectl run nginx --image=nginx` sends, as kubernetes-admin."""
    containers = [{"name": f"c{i}" if i else "nginx", "image": image} for i, image in enumerate(images)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"run": "nginx"}},
        "spec": {"containers": containers},
    }


def mutate(ps: PolicySet, obj: dict):
    request = review(obj)
    request["request"]["userInfo"]["username"] = "kubernetes-admin"
    verdict = decide(ps, parse_review(json.dumps(request).encode()), mode="mutate").verdict
    mutated = jsonpatch.apply_patch(obj, verdict.patch) if verdict.allowed else None
    return verdict, mutated


def test_gatekeepers_valid_mutators_resolve_through_the_provider(tmp_path: Path, dummy: SignatureProvider) -> None:
    """bats "gatekeeper external data validation and mutation test": the annotation from the user's
    name, each container's image from its current one, the sidecar's too (added by an earlier Assign)."""
    ps = policies(tmp_path / "p", dummy, mutations("valid.yaml"))
    verdict, mutated = mutate(ps, pod("nginx"))
    assert verdict.allowed, verdict.messages
    assert mutated["metadata"]["annotations"]["external-data-username"] == "kubernetes-admin_valid"
    assert [c["image"] for c in mutated["spec"]["containers"]] == ["nginx_valid", "busybox_valid"]
    # each provider is asked once, for its keys (Gatekeeper's mutation path: no response cache)
    keys = sorted(k for r in dummy.requests for k in r["request"]["keys"])
    assert keys == ["busybox", "kubernetes-admin", "nginx"]
    ps.close()


def test_an_item_error_or_a_system_error_refuses_in_gatekeepers_words(tmp_path: Path, dummy: SignatureProvider) -> None:
    ps = policies(tmp_path / "p", dummy, mutations("valid.yaml"))
    verdict, _ = mutate(ps, pod("error_busybox"))
    assert not verdict.allowed and verdict.code == 500
    assert (
        "failed to resolve external data placeholders: failed to retrieve external data item from provider"
        " dummy-provider: error_busybox_invalid" in verdict.messages[0]
    )
    verdict, _ = mutate(ps, pod("busybox:latest_systemError"))
    assert (
        "failed to resolve external data placeholders: failed to validate external data response from provider"
        " dummy-provider: non-empty system error: testing system error" in verdict.messages[0]
    )
    ps.close()


def image_assign(policy: str, default: str = "") -> str:
    external = {"provider": PROVIDER, "failurePolicy": policy, **({"default": default} if default else {})}
    return yaml.safe_dump(
        assign("images", "spec.containers[name: *].image", {"externalData": external}, version="v1beta1")
    )


@pytest.mark.parametrize(
    ("policy", "default", "image"),
    [("Ignore", "", "error_busybox"), ("UseDefault", "busybox:latest", "busybox:latest")],
)
def test_the_failure_policy_decides_on_an_error(
    tmp_path: Path, dummy: SignatureProvider, policy: str, default: str, image: str
) -> None:
    """Ignore keeps the value that was there, UseDefault puts the default; the others resolve."""
    ps = policies(tmp_path / "p", dummy, extra=image_assign(policy, default))
    verdict, mutated = mutate(ps, pod("error_busybox", "nginx"))
    assert verdict.allowed, verdict.messages
    assert [c["image"] for c in mutated["spec"]["containers"]] == [image, "nginx_valid"]
    ps.close()


def test_a_provider_not_served_or_not_idempotent_fails_the_mutation(tmp_path: Path) -> None:
    (tmp_path / "provider").mkdir()
    with SignatureProvider(tmp_path / "provider", dummy=True, idempotent=False).running() as sp:
        ps = policies(tmp_path / "p", sp, extra=image_assign("Fail"))
        verdict, _ = mutate(ps, pod("nginx"))
        ps.close()
    assert (
        "failed to validate external data response from provider dummy-provider: non-idempotent response"
        in verdict.messages[0]
    )
    (tmp_path / "p" / "provider.yaml").unlink()
    ps = load_policy_set([str(tmp_path / "p")])
    verdict, _ = mutate(ps, pod("nginx"))
    ps.close()
    assert "failed to find external data provider dummy-provider in responses" in verdict.messages[0]


def test_gatekeepers_invalid_mutators_are_refused_with_its_reasons() -> None:
    """bats: the invalid AssignMetadata and Assign files, two mutators each."""
    problems = "\n".join(read_sources([mutations("invalid_assignmetadata.yaml")]).broken_mutators)
    assert "only username data source is supported for assignmetadata assignmetadata-annotate-owner-invalid" in problems
    assert "invalid location for assignmetadata" in problems
    problems = "\n".join(read_sources([mutations("invalid_assign.yaml")]).broken_mutators)
    assert "`default` must not be empty when `failurePolicy` is set to `UseDefault`" in problems
    assert "cannot assign external data response to a list" in problems


def test_a_mutator_going_past_an_external_data_string_is_a_schema_conflict(
    tmp_path: Path, dummy: SignatureProvider
) -> None:
    """bats: schema_conflict.yaml goes below b-assign-image's image: both are left out, Gatekeeper's message."""
    ps = policies(tmp_path / "p", dummy, mutations("valid.yaml"), mutations("schema_conflict.yaml"))
    assert any(
        p.endswith(
            "the following mutators have conflicting schemas: [Assign.mutations.gatekeeper.sh /b-assign-image,"
            "Assign.mutations.gatekeeper.sh /schema-conflict]"
        )
        for p in ps.problems
    )
    ps.close()


def test_a_sidecar_opa_cannot_serve_them(tmp_path: Path, dummy: SignatureProvider) -> None:
    from regokite.admission.policies import served_mutators

    (tmp_path / "p").mkdir()
    shutil.copy(mutations("valid.yaml"), tmp_path / "p" / "valid.yaml")
    served = served_mutators(read_sources([tmp_path / "p"]), EngineSettings(kind="opa"))
    assert [m.name for m in served.mutators] == ["a-sidecar-injection"]
    assert all("embedded engine only" in b for b in served.broken_mutators) and len(served.broken_mutators) == 2


def test_the_librarys_external_data_rules_agree_with_opa() -> None:
    """Placeholders set, found and resolved by the library, from regorus and OPA 1.20.2 alike."""
    from opa_oracle import OracleEngine

    from regokite.bundle import Bundle, Module
    from regokite.engine import open_engine
    from regokite.gatekeeper.mutation.library import PLACEHOLDER, library_module

    p = {PLACEHOLDER: {"provider": "x", "failurePolicy": "Fail", "default": "", "valueAtLocation": ""}}
    probe = Module(
        "<probe>.rego",
        "package probe\n\nimport data.regokite_gatekeeper.mutation.lib\n\n"
        f'set := lib.placeholder_field({{"image": "nginx"}}, "image", {json.dumps(p)})\n\n'
        'bad := lib.placeholder_field({"image": 1}, "image", {})\n\n'
        'found := lib.placeholders({"spec": {"containers": [set.value]}})\n\n'
        'answers := {"items": {"nginx": {"value": "nginx_valid", "error": ""},'
        ' "e": {"value": null, "error": "e_x"}}}\n\n'
        "values := [lib.external_value(q, answers) | some [_, q] in found]\n\n"
        'failed := lib.external_value(object.union(found[0][1], {"valueAtLocation": "e"}), answers)\n\n'
        'number := lib.external_value(found[0][1], {"items": {"nginx": {"value": 1, "error": ""}}})\n\n'
        'errors := [lib.aggregate(["a"]), lib.aggregate(["a", "a"]), lib.aggregate(["a", "b", "a"])]\n',
    )
    bundle = Bundle((library_module(), probe))
    answers = []
    for engine in (open_engine(bundle), OracleEngine(bundle)):
        answers.append(engine.evaluate("data.probe"))
        engine.close()
    assert answers[0] == answers[1]
    got = answers[0]
    assert got["set"]["value"]["image"][PLACEHOLDER]["valueAtLocation"] == "nginx"
    assert got["bad"] == {"error": "value assigned to external data placeholder is not a string, got 1 (int64)"}
    assert got["found"][0][0] == ["spec", "containers", 0, "image"] and got["values"] == [{"value": "nginx_valid"}]
    assert got["failed"] == {"error": "failed to retrieve external data item from provider x: e_x"}
    assert got["number"] == {
        "error": "failed to convert external data item value from provider x to string, got type float64"
    }
    assert got["errors"] == ["a", "a", "[a, b]"]
