"""The webhook side's `status.byPod` entry of a constraint: written through the actuator's shared-status
write, as the audit's entry is, so both give up the same way, loudly."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from regokite.gatekeeper.crds import AUDIT_POD_ID, POD_ID
from regokite.resources import ChildType
from regokite.sources.gatekeeper_objects import GatekeeperSync
from tests.kube_api.fake import FakeKube

CONSTRAINTS = "/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels"
T = ChildType("constraints.gatekeeper.sh/v1beta1", "k8srequiredlabels", "K8sRequiredLabels", False, True)


def listed(kube: FakeKube) -> dict:
    kube.serve("constraints.gatekeeper.sh/v1beta1", "k8srequiredlabels", "K8sRequiredLabels", namespaced=False)
    doc = kube.put(CONSTRAINTS, {"kind": "K8sRequiredLabels", "metadata": {"name": "c", "generation": 1}})
    kube.patch(f"{CONSTRAINTS}/c/status", {"status": {"byPod": [{"id": AUDIT_POD_ID}]}})  # since the list
    return doc


def test_the_entry_is_written_over_the_version_read_again_and_the_audit_s_kept(tmp_path: Path) -> None:
    kube = FakeKube()
    doc = listed(kube)
    GatekeeperSync(kube, tmp_path)._write_pod_status(T, doc, None, enforced=True)  # type: ignore[arg-type]
    by_pod = kube.stored(f"{CONSTRAINTS}/c")["status"]["byPod"]
    assert sorted(p["id"] for p in by_pod) == [POD_ID, AUDIT_POD_ID]
    assert next(p for p in by_pod if p["id"] == POD_ID)["enforced"] is True


@pytest.mark.parametrize("then", ["409 again", "read again fails"])
def test_an_entry_not_written_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture, then: str) -> None:
    """Before, a failed read after a conflict ended the write without a word."""
    kube = FakeKube()
    doc = listed(kube)
    if then == "409 again":
        kube.fail("PATCH", f"{CONSTRAINTS}/c/status", 409, after=1)  # the first meets the audit's write
        kube.fail("PATCH", f"{CONSTRAINTS}/c/status", 409)
    else:
        kube.fail("GET", f"{CONSTRAINTS}/c", 503, "etcd away")
    with caplog.at_level(logging.WARNING):
        GatekeeperSync(kube, tmp_path)._write_pod_status(T, doc, None, enforced=True)  # type: ignore[arg-type]
    assert [p["id"] for p in kube.stored(f"{CONSTRAINTS}/c")["status"]["byPod"]] == [AUDIT_POD_ID]
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(m.startswith("status not written") for m in messages), messages
