"""The admission server over real HTTPS: answers, refusals, reloads, workers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import threading
import time
from pathlib import Path

import httpx
import pytest
from opa_standin import OpaStandin

from regokite.ops.tls import self_signed
from tests.admission.reviews import REPLICAS, deployment, label_policy, review
from tests.admission.server import admission_server
from tests.waiting import wait_until

LABEL = label_policy("admission.label")


RUNAWAY = """package admission.runaway

# About 10^10 steps on a request labelled spin=yes: never finishes in practice.
deny contains "unreachable" if {
	input.request.object.metadata.labels.spin == "yes"
	some i in numbers.range(1, 100000)
	some j in numbers.range(1, 100000)
	i * j < 0
}
"""


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    root = tmp_path / "policies"
    root.mkdir()
    (root / "replicas.rego").write_text(REPLICAS)
    (root / "label.rego").write_text(LABEL)
    return root


@pytest.fixture(params=["embedded", "opa"])
def server(request: pytest.FixtureRequest, policies: Path, tmp_path: Path):
    """The server on each engine; "opa" evaluates in a sidecar (the REST stand-in) it pushes the policies to."""
    args = ["--max-body-bytes", "200000"]
    with contextlib.ExitStack() as stack:
        if request.param == "opa":
            standin = stack.enter_context(OpaStandin())
            args += ["--engine", "opa", "--opa-url", standin.url]
        yield stack.enter_context(admission_server(policies, tmp_path, *args))


def post(client: httpx.Client, path: str, doc: object) -> httpx.Response:
    return client.post(path, content=json.dumps(doc))


def test_a_review_is_answered_with_its_uid(server) -> None:
    doc = review(deployment(replicas=7))
    with server.client() as c:
        answer = post(c, "/validate", doc).json()
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["response"]["uid"] == doc["request"]["uid"]
    assert answer["response"]["allowed"] is False
    assert "[admission.replicas] replicas 7 is more than 3" in answer["response"]["status"]["message"]


def test_v1beta1_is_answered_in_v1beta1(server) -> None:
    with server.client() as c:
        answer = post(c, "/validate", review(deployment(), api_version="admission.k8s.io/v1beta1")).json()
    assert answer["apiVersion"] == "admission.k8s.io/v1beta1"
    assert answer["response"]["allowed"] is True


def test_mutate_returns_a_json_patch(server) -> None:
    with server.client() as c:
        answer = post(c, "/mutate", review(deployment()))
    body = answer.json()["response"]
    assert body["patchType"] == "JSONPatch"


def test_one_endpoint_per_policy(server) -> None:
    with server.client() as c:
        assert post(c, "/validate/admission.label", review(deployment(replicas=9))).status_code == 404
        assert (
            post(c, "/validate/admission/replicas", review(deployment(replicas=9))).json()["response"]["allowed"]
            is False
        )
        missing = post(c, "/validate/admission.nope", review(deployment()))
    assert missing.status_code == 404
    assert "no validate policy named 'admission.nope'" in missing.json()["error"]


@pytest.mark.parametrize(
    "body",
    [
        os.urandom(2048),
        json.dumps(review(deployment()))[:100].encode(),
        json.dumps({**review(deployment()), "kind": "Pod"}).encode(),
        json.dumps({**review(deployment()), "request": {**review(deployment())["request"], "uid": None}}).encode(),
        b"",
        b"null",
    ],
    ids=["random-bytes", "truncated", "wrong-kind", "missing-uid", "empty", "null"],
)
def test_malformed_bodies_get_a_400_with_a_json_error(server, body: bytes) -> None:
    with server.client() as c:
        answer = c.post("/validate", content=body)
        assert answer.status_code == 400
        assert "not an AdmissionReview" in answer.json()["error"]
        assert c.get("/healthz").status_code == 200
    assert "Traceback" not in server.logs()


def test_an_oversized_body_gets_a_400_without_being_read_whole(server) -> None:
    doc = review(deployment())
    doc["request"]["object"]["metadata"]["annotations"] = {"big": "x" * 300_000}
    with server.client() as c:
        answer = post(c, "/validate", doc)
        assert answer.status_code == 400
        assert "exceeds the limit of 200000 bytes" in answer.json()["error"]

        def chunks():
            for _ in range(50):
                yield b"x" * 10_000

        streamed = c.post("/validate", content=chunks())
        assert streamed.status_code == 400


def test_every_review_gets_one_structured_access_log_line(server) -> None:
    doc = review(deployment(replicas=8))
    with server.client() as c:
        post(c, "/validate", doc)

    def access() -> list[dict]:
        lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
        return [entry for entry in lines if entry.get("uid") == doc["request"]["uid"]]

    wait_until(access, what="the access log line")
    [line] = access()
    assert line["allowed"] is False
    assert line["policies"] == {"admission.replicas": "denied"}


def test_metrics_count_requests_by_policy_and_decision(server) -> None:
    with server.client() as c:
        post(c, "/validate", review(deployment(replicas=9)))
        text = c.get("/metrics").text
    assert 'regokite_admission_policy_decisions_total{decision="denied",policy="admission.replicas"} 1.0' in text
    assert "regokite_admission_request_duration_seconds_bucket" in text
    assert "regokite_policy_reload_healthy 1.0" in text


def test_policy_changes_are_picked_up_and_a_broken_one_keeps_the_last_good_set(server, policies: Path) -> None:
    doc = review(deployment(replicas=3))
    with server.client() as c:
        assert post(c, "/validate", doc).json()["response"]["allowed"] is True
        (policies / "replicas.rego").write_text(REPLICAS.replace("> 3", "> 2"))
        written = (policies / "replicas.rego").stat().st_mtime
        wait_until(lambda: post(c, "/validate", doc).json()["response"]["allowed"] is False)
        wait_until(lambda: c.get("/readyz").json()["reload"]["files_read_at"] >= written)  # read after the write

        (policies / "replicas.rego").write_text("package admission.replicas\n\ndeny contains msg if {\n")
        wait_until(lambda: c.get("/readyz").json()["reload"]["ok"] is False)
        ready = c.get("/readyz")
        assert ready.status_code == 200
        assert "replicas.rego" in ready.json()["reload"]["error"]
        assert post(c, "/validate", doc).json()["response"]["allowed"] is False  # the last good set
        assert "regokite_policy_reload_healthy 0.0" in c.get("/metrics").text

        (policies / "replicas.rego").write_text(REPLICAS)
        wait_until(lambda: c.get("/readyz").json()["reload"]["ok"] is True)
        assert post(c, "/validate", doc).json()["response"]["allowed"] is True


def test_a_rotated_certificate_is_served_without_restart(server, tmp_path: Path) -> None:
    before = ssl.get_server_certificate(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    fresh = self_signed(tmp_path / "rotated", ["localhost", "127.0.0.1", "::1"])
    shutil.copy(fresh.key, server.tls_dir / "tls.key")
    shutil.copy(fresh.cert, server.tls_dir / "tls.crt")
    port = int(server.url.rsplit(":", 1)[1])
    wait_until(lambda: ssl.get_server_certificate(("127.0.0.1", port)) != before)
    assert ssl.get_server_certificate(("127.0.0.1", port)) == fresh.cert.read_text()


def test_a_broken_policy_dir_stops_startup_with_file_and_line(tmp_path: Path) -> None:
    root = tmp_path / "bad"
    root.mkdir()
    (root / "p.rego").write_text("package admission.p\n\ndeny contains x if {\n")
    with pytest.raises(RuntimeError) as err, admission_server(root, tmp_path):
        pass
    assert "p.rego:4" in str(err.value)
    assert "Traceback" not in str(err.value)


def test_two_workers_share_the_port_and_the_metrics(policies: Path, tmp_path: Path) -> None:
    with admission_server(policies, tmp_path, "--workers", "2") as running, running.client() as c:
        for _ in range(20):
            assert post(c, "/validate", review(deployment(replicas=9))).status_code == 200
        with running.client() as other:
            total = 0.0
            for line in other.get("/metrics").text.splitlines():
                if line.startswith('regokite_admission_requests_total{decision="denied",endpoint="validate"}'):
                    total = float(line.split()[-1])
        assert total == 20.0
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=15) == 0


def test_a_worker_stuck_in_a_runaway_policy_is_replaced_and_the_policy_named(policies: Path, tmp_path: Path) -> None:
    (policies / "runaway.rego").write_text(RUNAWAY)
    # a deadline a loaded machine does not pass before the policy starts (0.5 s could); a watchdog (above it)
    # long enough to see the worker stuck before it ends
    with admission_server(policies, tmp_path, "--deadline", "2.5", "--watchdog", "3") as running:
        started = time.monotonic()
        with running.client() as c, pytest.raises(httpx.TransportError):
            post(c, "/validate", review(deployment(labels={"spin": "yes"})))  # the worker dies mid-request
        assert 3 <= time.monotonic() - started < 15
        with running.client() as c:  # a fresh worker answers
            answer = post(c, "/validate", review(deployment(replicas=9))).json()["response"]
            metrics = c.get("/metrics").text
        assert answer["allowed"] is False
        assert 'regokite_admission_worker_restarts_total{reason="stuck"} 1.0' in metrics
        # Stuck again when SIGTERM comes: the worker cannot see it, the watchdog still ends it.
        outcome: list[str] = []
        spinning = threading.Thread(target=lambda: outcome.append(_post(running, deployment(labels={"spin": "yes"}))))
        spinning.start()
        wait_until(running.busy_workers, what="the worker stuck")
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=10) == 0
        spinning.join()
        assert outcome == ["dropped"]
    [first, second] = [json.loads(x) for x in running.logs().splitlines() if "watchdog limit" in x]
    assert first["policy"] == second["policy"] == "admission.runaway"
    assert first["seconds"] >= 3 and second["seconds"] >= 3


def _post(running, obj: dict) -> str:
    with running.client() as c:
        try:
            return str(post(c, "/validate", review(obj)).status_code)
        except httpx.TransportError:
            return "dropped"


def test_a_shutdown_delay_keeps_deciding_after_sigterm_then_stops(policies: Path, tmp_path: Path) -> None:
    """Gatekeeper's --shutdown-delay (bats 'shutdown delay'): after SIGTERM the server still decides for the delay
    (the API server calls a Pod being deleted until its endpoint goes), then exits."""
    with admission_server(policies, tmp_path, "--shutdown-delay", "2") as running, running.client() as c:
        assert c.get("/readyz").status_code == 200
        running.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_until(lambda: c.get("/readyz").status_code == 503, what="/readyz to say the server is shutting down")
        while time.monotonic() - signalled < 1.5:  # each answer a decision: fails when the server has stopped
            assert post(c, "/validate", review(deployment(replicas=9))).json()["response"]["allowed"] is False
        assert running.process.wait(timeout=15) == 0
        assert time.monotonic() - signalled >= 2


def test_a_second_signal_stops_the_server_without_waiting_for_the_delay(policies: Path, tmp_path: Path) -> None:
    with admission_server(policies, tmp_path, "--shutdown-delay", "60") as running, running.client() as c:
        running.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert post(c, "/validate", review(deployment(replicas=9))).json()["response"]["allowed"] is False
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=15) == 0
        assert time.monotonic() - signalled < 30
