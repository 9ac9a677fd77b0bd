"""Gatekeeper's objects applied with kubectl to a real API server that calls regokite as Gatekeeper's role.

One `regokite gatekeeper` (following the cluster through its watches) and one
`regokite admission` on its directory serve the whole module, behind the
ValidatingWebhookConfiguration `regokite manifests gatekeeper` writes (every
resource to /validate, failurePolicy Ignore as Gatekeeper's chart; a longer
timeout than its 3 s, for a loaded test machine).

* 30 gatekeeper-library templates (../shared/upstream), applied one kubectl
  call each and again as one multi-document file, compile in the cluster;
  their sample constraints are served and every case of their gator suites
  is decided by the running server as the suite says. The samples' names
  get a number (`<name>-<n>`): several tests of one template share a name,
  and here all of them serve at once.
* A policy object that would not load is refused by `kubectl apply` with the
  loader's error, and what already serves is untouched: each check of that
  is a request the API server sends to the running server, so a dead server
  fails it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kube
import pytest
import yaml
from gatekeeper_role import GatekeeperRole, gatekeeper_role
from kube import get
from kubernetes import client

from regokite.gatekeeper.verify import review_request
from regokite.sources.gatekeeper_objects import TEMPLATES
from tests.gatekeeper.mutators import assign
from tests.gatekeeper.upstream import gatekeeper_library

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "gatekeeper" / "fixtures"
REQUIRED_LABELS = FIXTURES / "library/requiredlabels/template.yaml"
SELECT = "regokite.dev/gatekeeper-apply"


@pytest.fixture(scope="module")
def gatekeeper(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatekeeperRole]:
    with gatekeeper_role(cluster, api, tmp_path_factory.mktemp("gatekeeper-apply")) as role:
        yield role


# engine differences refused at load (policies/README.md): not served, so not among the 30
ENGINE_DIFFERENCES = ("general/horizontalpodautoscaler", "general/noupdateserviceaccount", "pod-security-policy/users")
LIBRARY_TEMPLATES = 30


@dataclass(frozen=True)
class SampleTest:
    """One test of a library suite: its template, its sample constraint (renamed), its cases."""

    suite: Path
    template: Path
    constraint: dict[str, Any]
    cases: tuple[dict[str, Any], ...]

    @property
    def name(self) -> str:
        return self.constraint["metadata"]["name"]


def library_tests() -> list[SampleTest]:
    """The tests of the first 30 library suites (sorted) whose cases need no inventory or expansion."""
    library = gatekeeper_library() / "library"
    chosen: list[Path] = []
    for suite in sorted(library.rglob("suite.yaml")):
        relative = str(suite.parent.relative_to(library))
        tests = yaml.safe_load(suite.read_text())["tests"]
        plain = all(not t.get("expansion") and not any(c.get("inventory") for c in t.get("cases") or []) for t in tests)
        if plain and relative not in ENGINE_DIFFERENCES:
            chosen.append(suite)
    found = []
    for suite in chosen[:LIBRARY_TEMPLATES]:
        for test in yaml.safe_load(suite.read_text())["tests"]:
            constraint = yaml.safe_load((suite.parent / test["constraint"]).read_text())
            constraint["metadata"]["name"] = f"{constraint['metadata']['name'][:56]}-{len(found)}"
            template = suite.parent / test["template"]
            found.append(SampleTest(suite.parent, template, constraint, tuple(test.get("cases") or ())))
    assert len({t.template for t in found}) == LIBRARY_TEMPLATES
    return found


def decide_cases(gatekeeper: GatekeeperRole, tests: list[SampleTest]) -> list[str]:
    """Every case of `tests` put to its constraint alone (`/validate/<name>`) at the running server; what
    differs from the suite's assertions."""
    wrong = []
    with gatekeeper.server.client() as http:
        for test in tests:
            for case in test.cases:
                obj = next(d for d in yaml.safe_load_all((test.suite / case["object"]).read_text()) if d)
                request = review_request(obj)
                kind = request["kind"]
                request.setdefault("uid", kube.unique_name("uid"))
                request.setdefault("resource", {**kind, "resource": kind.get("kind", "").lower() + "s"})
                body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
                answer = http.post(f"/validate/{test.name}", json=body).json()["response"]
                text = (answer.get("status") or {}).get("message", "") if not answer["allowed"] else ""
                prefix = f"[{test.name}] "
                found = [
                    m[len(prefix) :] for m in [*text.split("\n"), *answer.get("warnings", [])] if m.startswith(prefix)
                ]
                for assertion in case.get("assertions") or []:
                    if not _holds(assertion, found):
                        wrong.append(f"{test.suite.name} {case.get('name')}: {assertion} but {found or answer}")
    return wrong


def _holds(assertion: dict[str, Any], messages: list[str]) -> bool:
    """gator's assertion: `violations` yes, no or a count, of the messages matching `message` (a regex)."""
    pattern = assertion.get("message")
    counted = [m for m in messages if not pattern or re.search(str(pattern), m)]
    expected = assertion.get("violations", "yes")  # a YAML 1.1 reader reads yes and no as booleans
    if expected is True or expected == "yes":
        return bool(counted)
    if expected is False or expected == "no":
        return not counted
    return len(counted) == int(expected)


def serve_samples(gatekeeper: GatekeeperRole, tests: list[SampleTest]) -> None:
    """Every template compiled in the cluster (its status), every sample constraint served."""
    names = sorted({yaml.safe_load(t.template.read_text())["metadata"]["name"] for t in tests})
    for name in names:
        kube.wait_for(
            lambda name=name: get(gatekeeper.api, f"{TEMPLATES}/{name}").get("status") or {},
            lambda status: status.get("created") is True,
            what=f"template {name} to compile in the cluster",
            timeout=120,
        )
    gatekeeper.applied(yaml.safe_dump_all([t.constraint for t in tests]), "every sample constraint's CRD to be served")
    for test in tests:
        gatekeeper.served(test.constraint["kind"], test.name)


def remove_templates(gatekeeper: GatekeeperRole, tests: list[SampleTest]) -> None:
    """Every template deleted; their CRDs and constraints go, and the server stops serving them."""
    assert gatekeeper.kubectl("delete", "constrainttemplates", "--all").returncode == 0
    for test in tests:
        gatekeeper.served(test.constraint["kind"], test.name, status=404)


@pytest.mark.parametrize("one_file", [False, True], ids=["one at a time", "as one file"])
def test_library_templates_applied_serve_their_samples(gatekeeper: GatekeeperRole, one_file: bool) -> None:
    tests = library_tests()
    templates = sorted({t.template for t in tests})
    if one_file:
        applied = [gatekeeper.apply("\n---\n".join(t.read_text() for t in templates))]
    else:
        applied = [gatekeeper.kubectl("apply", "-f", str(t)) for t in templates]
    assert [a.stderr for a in applied if a.returncode != 0] == []
    try:
        serve_samples(gatekeeper, tests)
        assert decide_cases(gatekeeper, tests) == []
    finally:
        remove_templates(gatekeeper, tests)


def constraint(name: str, label: str, **parameters: object) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": "K8sRequiredLabels",
            "metadata": {"name": name},
            "spec": {
                "match": {
                    "kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}],
                    "labelSelector": {"matchLabels": {SELECT: label}},
                },
                "parameters": parameters or {"labels": [{"key": "owner"}]},
            },
        }
    )


def test_what_would_not_load_is_refused_at_apply_and_what_serves_is_untouched(gatekeeper: GatekeeperRole) -> None:
    label = kube.unique_name("gk")
    name = f"{label}-owner"
    assert gatekeeper.apply(REQUIRED_LABELS.read_text()).returncode == 0
    gatekeeper.applied(constraint(name, label), "the constraint CRD to be served")
    gatekeeper.served("K8sRequiredLabels", name)
    refusal = f'[{name}] you must provide labels: {{"owner"}}'

    def still_serving() -> None:
        """A Namespace without the label is refused by the API server, with the constraint's message: the
        running server decided it, with the template and constraint as they were."""

        def namespace() -> str:
            meta = {"name": kube.unique_name("ns"), "labels": {SELECT: label}}
            return yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})

        done = kube.wait_for(
            lambda: gatekeeper.apply(namespace()),
            lambda d: d.returncode != 0,
            what="the Namespace to be refused",
            timeout=60,
        )
        assert refusal in done.stderr, done.stderr

    try:
        still_serving()
        template_before = get(gatekeeper.api, f"{TEMPLATES}/k8srequiredlabels")

        # a new template whose Rego does not compile
        broken = next(d for d in yaml.safe_load_all((FIXTURES / "broken/templates.yaml").read_text()) if d)
        refused = gatekeeper.apply(yaml.safe_dump(broken))
        assert refused.returncode != 0 and "denied the request" in refused.stderr, refused.stderr
        assert "constrainttemplate/k8sbroken:4:10: unknown function no_such_function" in refused.stderr
        assert not kube.exists(gatekeeper.api, f"{TEMPLATES}/k8sbroken")

        # an edit of the serving template that does not compile: refused, the template as it was
        edit = REQUIRED_LABELS.read_text().replace("count(missing) > 0", "count(missing) > 0 +")
        refused = gatekeeper.apply(edit)
        assert refused.returncode != 0 and "constrainttemplate/k8srequiredlabels:" in refused.stderr, refused.stderr
        after = get(gatekeeper.api, f"{TEMPLATES}/k8srequiredlabels")
        assert after["metadata"]["generation"] == template_before["metadata"]["generation"]

        # a constraint whose parameter fails the schema: the API server refuses it (its CRD has the schema);
        # kubectl's own check of the published schema is off, or it may refuse first, in its words
        refused = gatekeeper.kubectl(
            "apply", "--validate=false", "-f", "-", stdin=constraint(name, label, labels="owner")
        )
        assert refused.returncode != 0, refused.stderr
        assert (
            'spec.parameters.labels: Invalid value: "string": spec.parameters.labels in body must be of type array'
            in refused.stderr
        )
        # one the schema takes but Gatekeeper refuses (In without values): regokite's webhook refuses it
        bad = yaml.safe_load(constraint(name, label))
        bad["spec"]["match"]["labelSelector"] = {"matchExpressions": [{"key": SELECT, "operator": "In"}]}
        refused = gatekeeper.apply(yaml.safe_dump(bad))
        assert refused.returncode != 0, refused.stderr
        assert "invalid Constraint: spec.match.labelSelector.matchExpressions[0].values: Required" in refused.stderr
        served = get(gatekeeper.api, f"/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels/{name}")
        assert served["spec"]["match"]["labelSelector"] == {"matchLabels": {SELECT: label}}

        # a mutator that does not parse
        refused = gatekeeper.apply(yaml.safe_dump(assign(kube.unique_name("a"), "spec.[bad", {"value": "None"})))
        assert refused.returncode != 0 and "denied the request" in refused.stderr, refused.stderr
        still_serving()
    finally:
        gatekeeper.kubectl("delete", "k8srequiredlabels", name, "--ignore-not-found")
        for ns in client.CoreV1Api(gatekeeper.api).list_namespace(label_selector=f"{SELECT}={label}").items:
            with contextlib.suppress(client.ApiException):
                kube.delete(gatekeeper.api, f"/api/v1/namespaces/{ns.metadata.name}")
