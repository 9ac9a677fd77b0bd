"""The worker's reloader when the files change under it: `regokite gatekeeper` writes one file per object and
removes a file when its object goes, so a read can list a file that is gone by the time it is opened."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from regokite.admission import reload
from regokite.admission.app import ServingState
from regokite.admission.reload import Reloader, ReplicaLoader
from regokite.admission.settings import AdmissionSettings

POLICY = """package admission.replicas

deny contains "too many replicas" if input.request.object.spec.replicas > 3
"""


def test_a_file_gone_while_read_is_read_again_and_reloading_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the reader's FileNotFoundError ended the reloader's task, and the worker served its last set for
    good (the Gatekeeper objects deleted after it were still enforced)."""
    settings = AdmissionSettings(policies=[str(tmp_path)], local=True)
    first = settings.read()
    state = ServingState(settings.build(first))
    reloader = Reloader(
        settings, state, first, ssl.create_default_context(), (), lambda _snapshot: None, ReplicaLoader(state, print)
    )
    (tmp_path / "replicas.rego").write_text(POLICY)
    real = reload.read_sources

    def gone(roots: object) -> object:
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "constraint.yaml"))

    monkeypatch.setattr(reload, "read_sources", gone)
    asyncio.run(reloader.check())
    assert [p.name for p in state.policy_set.policies] == []  # the set read half-way is not served
    monkeypatch.setattr(reload, "read_sources", real)
    asyncio.run(reloader.check())  # the files did not change since: read again all the same
    assert [p.name for p in state.policy_set.policies] == ["admission.replicas"]
