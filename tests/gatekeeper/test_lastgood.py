"""The last good version of each Gatekeeper object serves while an edit of it is refused."""

from __future__ import annotations

from regokite.gatekeeper import lastgood
from tests.gatekeeper.mutators import pod_assign


def _constraint(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": "K8sRequiredLabels",
        "metadata": {"name": name},
        "spec": {"match": {"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}]}, **spec},
    }


def test_a_refused_edit_serves_the_last_good_version_and_a_deletion_forgets_it() -> None:
    good: dict[str, dict] = {}
    check = lambda doc: doc.get("error")  # noqa: E731
    first = lastgood.pick({"a": {"v": 1}, "b": {"v": 1, "error": "bad"}}, check, good)
    assert first.served == {"a": {"v": 1}} and first.errors == {"b": "bad"} and not first.kept
    second = lastgood.pick({"a": {"v": 2, "error": "broken edit"}}, check, good)
    assert second.served == {"a": {"v": 1}} and second.kept == {"a"} and second.errors == {"a": "broken edit"}
    third = lastgood.pick({"a": {"v": 3}}, check, good)
    assert third.served == {"a": {"v": 3}} and good == {"a": {"v": 3}}
    assert lastgood.pick({}, check, good).served == {} and good == {}  # deleted: nothing of it serves


def test_a_constraint_is_refused_for_its_match_or_its_action() -> None:
    assert lastgood.constraint_error(_constraint("ok")) is None
    bad_match = _constraint("m")
    bad_match["spec"]["match"]["scope"] = "Everywhere"
    assert "spec.match.scope" in (lastgood.constraint_error(bad_match) or "")
    assert "enforcementAction" in (lastgood.constraint_error(_constraint("e", enforcementAction="block")) or "")


def test_a_config_is_refused_for_its_sync_or_its_match() -> None:
    config = {"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config", "metadata": {"name": "config"}}
    assert (
        lastgood.config_error({**config, "spec": {"sync": {"syncOnly": [{"version": "v1", "kind": "Namespace"}]}}})
        is None
    )
    assert "syncOnly[0]" in (lastgood.config_error({**config, "spec": {"sync": {"syncOnly": [{"kind": "X"}]}}}) or "")
    assert "spec.match[0]" in (lastgood.config_error({**config, "spec": {"match": [{"processes": ["*"]}]}}) or "")


def test_a_constraint_crd_goes_only_with_its_template() -> None:
    crds = [{"metadata": {"name": f"{k.lower()}.constraints.gatekeeper.sh"}, "spec": {"names": {"kind": k}}}
            for k in ("K8sRequiredLabels", "K8sGone")]  # fmt: skip
    assert lastgood.stale_constraint_crds(crds, {"k8srequiredlabels"}) == ["k8sgone.constraints.gatekeeper.sh"]


def test_seeded_from_the_file_last_written() -> None:
    template = {"apiVersion": "templates.gatekeeper.sh/v1", "kind": "ConstraintTemplate", "metadata": {"name": "t"}}
    config = {"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config", "metadata": {"name": "config"}}
    seeded = lastgood.LastGood.of([template, _constraint("c"), config, None, {"kind": "Other"}])
    assert seeded.templates == {"t": template} and seeded.configs == {"config": config}
    assert list(seeded.constraints) == [("K8sRequiredLabels", "c")]


def test_a_mutator_edit_that_does_not_load_serves_its_last_good_version_a_new_one_is_not_served() -> None:
    assert lastgood.mutator_error(pod_assign("a", "spec.dnsPolicy")) is None
    assert "location" in (lastgood.mutator_error(pod_assign("a", "spec..dnsPolicy")) or "")
    good: dict = {}
    lastgood.pick({("Assign", "a"): pod_assign("a", "spec.dnsPolicy")}, lastgood.mutator_error, good)
    current = {("Assign", "a"): pod_assign("a", "spec..dnsPolicy"), ("Assign", "b"): pod_assign("b", "spec..x")}
    picked = lastgood.pick(current, lastgood.mutator_error, good)
    assert picked.served == {("Assign", "a"): pod_assign("a", "spec.dnsPolicy")} and picked.kept == {("Assign", "a")}
    assert set(picked.errors) == {("Assign", "a"), ("Assign", "b")}


def test_mutators_are_seeded_from_the_file_last_written_but_not_those_that_never_loaded() -> None:
    seeded = lastgood.LastGood.of([pod_assign("a", "spec.dnsPolicy"), pod_assign("b", "spec..x")])
    assert list(seeded.mutators) == [("Assign", "a")]  # an earlier version wrote both
