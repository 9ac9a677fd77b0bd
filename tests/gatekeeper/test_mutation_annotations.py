"""`--mutation-annotations`: a mutated object records its mutators, as Gatekeeper's flag has it.

Gatekeeper's bats "gatekeeper mutation test" (run with the flag): the ConfigMap
labelled by `k8sownerlabel` carries `gatekeeper.sh/mutations:
AssignMetadata//k8sownerlabel:1` and a 36-character `gatekeeper.sh/mutation-id`;
the Service whose externalIPs `k8sexternalip` empties carries
`Assign//k8sexternalip:1`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonpatch
import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from tests.admission.reviews import review
from tests.gatekeeper.mutators import assign
from tests.gatekeeper.test_enforcement_points import bats, one

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def policies(root: Path, *names: str, annotate: bool = True) -> PolicySet:
    for name in names:
        doc = one(bats(f"mutations/{name}")[0])
        doc["metadata"]["generation"] = 2  # as the API server sets it on a second apply
        (root / name).write_text(yaml.safe_dump(doc))
    return load_policy_set([str(root)], mutation_annotations=annotate)


def mutated(ps: PolicySet, obj: dict) -> dict:
    obj["metadata"].setdefault("namespace", "default")  # as kubectl apply sends it
    request = review(obj)
    verdict = decide(ps, parse_review(json.dumps(request).encode()), mode="mutate").verdict
    assert verdict.allowed, verdict.messages
    return jsonpatch.apply_patch(request["request"]["object"], verdict.patch)


def annotations(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


def service() -> dict:
    doc = one(bats("mutations/mutate_svc.yaml")[0])
    doc["kind"] = "Service"
    return doc


def test_a_mutated_object_records_its_mutators_and_a_mutation_id(tmp_path: Path) -> None:
    ps = policies(tmp_path, "k8sownerlabel_assignmetadata.yaml", "k8sexternalip_assign.yaml")
    cm = mutated(ps, one(bats("mutations/mutate_cm.yaml")[0]))
    assert cm["metadata"]["labels"]["owner"] == "gatekeeper"
    assert annotations(cm)["gatekeeper.sh/mutations"] == "AssignMetadata//k8sownerlabel:2"
    assert UUID.match(annotations(cm)["gatekeeper.sh/mutation-id"])
    svc = mutated(ps, service())
    assert svc["spec"]["externalIPs"] == []
    assert annotations(svc)["gatekeeper.sh/mutations"] == "Assign//k8sexternalip:2"
    ps.close()


def test_an_object_no_mutator_changes_is_not_annotated(tmp_path: Path) -> None:
    ps = policies(tmp_path, "k8sownerlabel_assignmetadata.yaml")
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}}
    assert annotations(mutated(ps, plain)) == {}
    ps.close()


def test_without_the_flag_nothing_is_annotated(tmp_path: Path) -> None:
    ps = policies(tmp_path, "k8sownerlabel_assignmetadata.yaml", annotate=False)
    cm = mutated(ps, one(bats("mutations/mutate_cm.yaml")[0]))
    assert cm["metadata"]["labels"]["owner"] == "gatekeeper" and annotations(cm) == {}
    ps.close()


def test_the_list_names_each_mutator_once_sorted(tmp_path: Path) -> None:
    """Two mutators, one applied again in a later pass: each named once, sorted, as Gatekeeper's set."""
    ps = policies(tmp_path, "k8sownerlabel_assignmetadata.yaml", "k8sexternalip_assign.yaml")
    extra = assign(
        "a-cm-data",
        "data.checked",
        {"value": "yes"},
        apply_to={"groups": [""], "kinds": ["ConfigMap"], "versions": ["v1"]},
    )
    extra["metadata"]["generation"] = 3
    (tmp_path / "extra.yaml").write_text(yaml.safe_dump(extra))
    ps.close()
    ps = load_policy_set([str(tmp_path)], mutation_annotations=True)
    cm = mutated(ps, one(bats("mutations/mutate_cm.yaml")[0]))
    assert annotations(cm)["gatekeeper.sh/mutations"] == "Assign//a-cm-data:3, AssignMetadata//k8sownerlabel:2"
    ps.close()


def test_the_flag_is_regokite_admissions_and_checks(tmp_path: Path, capsys) -> None:
    from regokite.cli import build_parser, main

    args = build_parser().parse_args(["admission", "--policies", "p", "--self-signed", "--mutation-annotations"])
    assert args.mutation_annotations is True
    shutil.copy(bats("mutations/k8sownerlabel_assignmetadata.yaml")[0], tmp_path / "mutator.yaml")
    cm = tmp_path / "input" / "cm.yaml"
    cm.parent.mkdir()
    shutil.copy(bats("mutations/mutate_cm.yaml")[0], cm)
    assert main(["check", "--policies", str(tmp_path / "mutator.yaml"), "-f", str(cm), "--mutation-annotations"]) == 0


def test_the_annotations_are_the_same_from_opa() -> None:
    """The generated Rego, evaluated by OPA 1.20.2: the same object but for the UUID."""
    from opa_oracle import OracleEngine

    from regokite.bundle import Bundle
    from regokite.engine import open_engine
    from regokite.gatekeeper.mutation.compile import SYSTEM, mutation_modules
    from regokite.gatekeeper.mutation.mutators import parse_mutator

    docs = [one(bats(f"mutations/{n}")[0]) for n in ("k8sownerlabel_assignmetadata.yaml", "k8sexternalip_assign.yaml")]
    bundle = Bundle(mutation_modules([parse_mutator(d, "m.yaml") for d in docs], annotate=True))
    cm = one(bats("mutations/mutate_cm.yaml")[0])
    cm["metadata"]["namespace"] = "default"
    request = {"request": {"operation": "CREATE", "kind": {"group": ""}, "namespace": "default", "object": cm}}
    answers = []
    for engine in (open_engine(bundle), OracleEngine(bundle)):
        result = engine.evaluate(f"data.{SYSTEM}.result", request)
        engine.close()
        assert UUID.match(result["object"]["metadata"]["annotations"].pop("gatekeeper.sh/mutation-id"))
        answers.append(result)
    assert answers[0] == answers[1]
    assert answers[0]["object"]["metadata"]["annotations"] == {
        "gatekeeper.sh/mutations": "AssignMetadata//k8sownerlabel:1"  # no generation in the file: 1
    }
