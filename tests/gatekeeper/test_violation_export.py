"""Gatekeeper's violation export (--enable-violation-export, disk driver): each line as its ExportMsg
marshals, and each audit run's file as its driver writes, publishes and retires it."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from regokite.audit.export import DiskExport
from regokite.audit.run import Audit, AuditSettings
from regokite.audit.scan import Subject, audit_object
from regokite.errors import RegokiteError
from regokite.gatekeeper.violations import Violation, audit_id_of, export_line
from tests.gatekeeper.test_violation_logs import NAMESPACES, namespace, policies  # noqa: F401  (the fixture)

ID = "2026-12-06T17:00:00Z"


def violation(**changes: Any) -> Violation:
    fields: dict[str, Any] = {
        "constraint_kind": "K8sRequiredLabels",
        "constraint_name": "all-must-have-owner",
        "action": "deny",
        "message": "you must <provide> & labels",
        "resource_group": "",
        "resource_version": "v1",
        "resource_kind": "Namespace",
        "resource_namespace": "",
        "resource_name": "team-a",
        "details": {"missing": ["owner"], "a": 1},
        "constraint_annotations": (("z.example/b", "1"), ("a.example/a", "2")),
        "resource_labels": (("tier", "web"),),
    }
    return Violation(**{**fields, **changes})


def test_a_line_is_gatekeepers_export_msg_byte_for_byte() -> None:
    """Go's encoding/json: fields in the struct's order, empty ones left out (omitempty), map keys
    sorted, <, > and & escaped."""
    assert export_line(violation(), ID) == (
        '{"id":"2026-12-06T17:00:00Z","details":{"a":1,"missing":["owner"]},"eventType":"violation_audited",'
        '"group":"constraints.gatekeeper.sh","version":"v1beta1","kind":"K8sRequiredLabels",'
        '"name":"all-must-have-owner","message":"you must \\u003cprovide\\u003e \\u0026 labels",'
        '"enforcementAction":"deny","constraintAnnotations":{"a.example/a":"2","z.example/b":"1"},'
        '"resourceAPIVersion":"v1","resourceKind":"Namespace","resourceName":"team-a","resourceLabels":{"tier":"web"}}'
    )


def test_a_scoped_namespaced_violation_without_details_labels_or_annotations() -> None:
    line = json.loads(
        export_line(
            violation(
                action="scoped",
                scoped_actions=("deny", "warn"),
                resource_group="apps",
                resource_kind="Deployment",
                resource_namespace="nginx",
                details=None,
                constraint_annotations=None,
                resource_labels=(),
            ),
            ID,
        )
    )
    assert line["enforcementAction"] == "scoped" and line["enforcementActions"] == ["deny", "warn"]
    assert line["resourceGroup"] == "apps" and line["resourceNamespace"] == "nginx"
    assert not {"details", "constraintAnnotations", "resourceLabels", "namespace"} & set(line)


def test_a_run_is_published_whole_under_its_id(tmp_path: Path) -> None:
    export = DiskExport(str(tmp_path / "topics"), "audit-channel", 3)
    published = export.write_run(ID, [violation(), violation(resource_name="team-b")])
    assert published == tmp_path / "topics" / "audit-channel" / "2026-12-06T17_00_00Z.log"
    assert sorted(p.name for p in published.parent.iterdir()) == [published.name]  # no .txt left behind
    lines = [json.loads(line) for line in published.read_text().splitlines()]
    assert lines[0] == {"id": ID, "message": "audit is started"}
    assert lines[-1] == {"id": ID, "message": "audit is completed"}
    assert [v["resourceName"] for v in lines[1:-1]] == ["team-a", "team-b"]
    assert published.stat().st_mode & 0o777 == 0o666


def test_the_newest_runs_are_kept_and_admission_segments_left_alone(tmp_path: Path) -> None:
    export = DiskExport(str(tmp_path), "ch", 2)
    export.directory.mkdir()
    admission = export.directory / "admission-20261206-abc.log"
    admission.write_text("{}\n")
    os.utime(admission, (1, 1))
    for i, second in enumerate(("01", "02", "03")):
        published = export.write_run(f"2026-12-06T17:00:{second}Z", [violation()])
        os.utime(published, (1000 + i, 1000 + i))
    export.write_run("2026-12-06T17:00:04Z", [])
    names = sorted(p.name for p in export.directory.iterdir())
    assert names == ["2026-12-06T17_00_03Z.log", "2026-12-06T17_00_04Z.log", admission.name]


@pytest.mark.parametrize(
    ("path", "channel", "kept"),
    [("a/../b", "ch", 3), ("/", "ch", 3), ("/tmp/x", "a/b", 3), ("/tmp/x", "ch", 6), ("/tmp/x", "ch", -1)],
)
def test_a_connection_config_the_disk_driver_refuses_is_refused(path: str, channel: str, kept: int) -> None:
    with pytest.raises(RegokiteError):
        DiskExport(path, channel, kept)


def test_the_exported_violations_match_the_constraint_status(
    policies,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """bats' export_violation case in small: the lines with the status' auditTimestamp as id, eventType
    violation_audited and the constraint's name number its totalViolations (info lines logged, as served)."""
    caplog.set_level(logging.INFO, "regokite.audit")
    settings = AuditSettings(policies=[], export=DiskExport(str(tmp_path), "audit-channel", 3))
    audit = Audit(settings, client=None)  # type: ignore[arg-type]
    audit.policy_set = policies
    for name in ("team-a", "team-b"):
        obj = namespace(name, {"tier": "web"})
        audit.findings[(NAMESPACES, "", name)] = (Subject.of(obj), audit_object(policies, obj, NAMESPACES))
    written: dict[str, dict[str, Any]] = {}
    audit._put_constraint_status = lambda _t, name, status: written.__setitem__(name, status)  # type: ignore[method-assign]
    started = time.time() - 3  # the status is written seconds after the pass started
    audit.audit_started(started)
    audit.report_violations(started)
    audit.write_constraint_status()
    [(name, status)] = written.items()
    assert status["auditTimestamp"] == audit_id_of(started) and status["totalViolations"] == 2
    [published] = (tmp_path / "audit-channel").iterdir()
    lines = [json.loads(line) for line in published.read_text().splitlines()]
    matching = [v for v in lines if v["id"] == status["auditTimestamp"] and v.get("eventType") == "violation_audited"]
    assert [v["name"] for v in matching] == [name, name]
    assert any(r.getMessage() == "exported audit violations" for r in caplog.records)
