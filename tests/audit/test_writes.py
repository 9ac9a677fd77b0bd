"""The audit never drops a result: a write that fails, of any error type, stays to retry; metric labels
carry a fixed reason; one log line per outage."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import pytest
import urllib3

from regokite.audit.run import Audit, AuditSettings, Continuous
from regokite.audit.scan import Result, Subject
from regokite.clusterdata.store import ResourceRef
from regokite.kube.client import ERROR_REASONS, ApiError, error_reason
from regokite.ops import audit_metrics

REF = ResourceRef("", "v1", "configmaps", True)


class Flaky:
    """A client whose writes fail as scripted (an exception, or None for a success), then succeed."""

    def __init__(self, *failures: BaseException | None) -> None:
        self.failures = deque(failures)
        self.applied: list[str] = []

    def apply(self, path: str, obj: dict[str, Any], manager: str, *, force: bool = True, parse: bool = True) -> Any:
        failure = self.failures.popleft() if self.failures else None
        if failure is not None:
            raise failure
        self.applied.append(path)
        return obj if parse else None

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        """A create (POST to the collection): recorded as the object's path."""
        return self.apply(f"{path}/{body['metadata']['name']}", body, "")


def connection_refused() -> urllib3.exceptions.MaxRetryError:
    cause = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] refused")
    return urllib3.exceptions.MaxRetryError(None, "/apis/wgpolicyk8s.io", cause)  # type: ignore[arg-type]


def audit_with(client: Flaky, namespaces: list[str]) -> Audit:
    audit = Audit(AuditSettings(policies=[]), client)  # type: ignore[arg-type]
    for ns in namespaces:
        subject = Subject("v1", "ConfigMap", ns, "bad", "u")
        audit.findings[(REF, ns, "bad")] = (subject, (Result("p", "fail", "bad", "deny"),))
    return audit


def failures(reason: str) -> float:
    return audit_metrics.audit_write_failures.labels("report", reason)._value.get()


def test_a_connection_error_leaves_every_report_dirty_and_a_later_write_lands_them() -> None:
    client = Flaky(connection_refused())
    audit = audit_with(client, ["a", "b", "c"])
    before = failures("connection")
    assert audit.write({"a", "b", "c"}) == {"a", "b", "c"}  # the server away: the rest not tried
    assert failures("connection") == before + 1 and client.applied == []
    assert audit.write({"a", "b", "c"}) == set()
    assert [p.rsplit("/", 3)[1] for p in client.applied] == ["a", "b", "c"]


def test_a_refused_report_is_retried_and_the_others_are_written() -> None:
    client = Flaky(None, ApiError(422, "Invalid", {"message": "bad"}, "PATCH x"))
    audit = audit_with(client, ["a", "b", "c"])
    assert audit.write({"a", "b", "c"}) == {"b"}
    assert len(client.applied) == 2


def test_a_missing_report_crd_keeps_every_report_to_write() -> None:
    client = Flaky(ApiError(404, "NotFound", {"message": "the server could not find the requested resource"}, "x"))
    audit = audit_with(client, ["a", "b"])
    assert audit.write({"a", "b"}) == {"a", "b"}


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (connection_refused(), "connection"),
        (urllib3.exceptions.MaxRetryError(None, "/x", urllib3.exceptions.ReadTimeoutError(None, "/x", "t")), "timeout"),  # type: ignore[arg-type]
        (ApiError(503, "Service Unavailable", {}, "x"), "unavailable"),
        (ApiError(500, "Internal", {}, "x"), "server_error"),
        (ApiError(404, "NotFound", {}, "x"), "not_found"),
        (ConnectionResetError("reset by 10.0.0.1:6443"), "connection"),
        (ValueError("a bug"), "other"),
    ],
)
def test_error_reasons_are_a_fixed_set_without_hosts(exc: BaseException, reason: str) -> None:
    assert error_reason(exc) == reason and reason in ERROR_REASONS


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    client = Flaky(*[connection_refused()] * 50)
    audit = audit_with(client, ["a"])
    with caplog.at_level(logging.INFO, logger="regokite.audit"):
        for _ in range(50):
            assert audit.write({"a"}) == {"a"}
        assert audit.write({"a"}) == set()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["audit report and status writes failing; retrying", "audit report and status writes recovered"]
    assert caplog.records[1].failures == 50  # type: ignore[attr-defined]


def test_the_loop_keeps_what_failed_dirty_and_backs_off() -> None:
    client = Flaky(connection_refused(), connection_refused())
    audit = audit_with(client, ["a"])
    audit.settings.write_reports = True
    loop = Continuous(audit)
    loop.constraints_due = False
    audit.write_constraint_status = lambda **_: 0  # type: ignore[method-assign]
    loop.dirty = {"a"}
    loop._flush(100.0)
    assert loop.dirty == {"a"} and loop.retry_at == 100.5
    loop._flush(101.0)
    assert loop.dirty == {"a"} and loop.retry_at == 102.0  # backoff doubles
    loop._flush(103.0)
    assert loop.dirty == set() and loop.backoff == 0.5
    loop._report_event("DELETED", None, {"metadata": {"namespace": "a", "name": "regokite-audit"}})
    loop._report_event("DELETED", None, {"metadata": {"namespace": "gone", "name": "regokite-audit"}})
    loop._flush(104.0)  # the deleted report of a namespace with findings is written again; the other not
    assert client.applied[-1].rsplit("/", 3)[1] == "a" and loop.dirty == set()


def test_urllib3_retry_warnings_are_debug_lines(caplog: pytest.LogCaptureFixture) -> None:
    from regokite.ops.logging import configure

    configure("info", json_lines=True)
    pool = logging.getLogger("urllib3.connectionpool")
    record = pool.makeRecord(pool.name, logging.WARNING, __file__, 1, "Retrying (%r) after %r", ("x", "y"), None)
    assert not pool.filter(record)  # dropped at info
    configure("debug", json_lines=True)
    assert pool.filter(record) and record.levelname == "DEBUG"
    configure("info", json_lines=True)


def test_a_failed_sync_is_counted_by_a_reason_without_host_or_port() -> None:
    from regokite.errors import HookError
    from regokite.runtime.sync_workers import failure_reason

    assert failure_reason(connection_refused()) == "connection"
    assert failure_reason(ApiError(409, "Conflict", {}, "x")) == "conflict"
    assert failure_reason(HookError("c", None, "bad output", "InvalidHookOutput")) == "InvalidHookOutput"
