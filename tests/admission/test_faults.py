"""Faults an operator meets: a file broken when a worker is replaced, a half-rotated certificate,
a runaway allocation, a removed policy."""

from __future__ import annotations

import json
import shutil
import ssl
import threading
import time
from pathlib import Path

import httpx
import pytest

from regokite.admission.reload import LastGood
from regokite.admission.settings import Snapshot
from regokite.bundle import Bundle, Module
from regokite.ops.tls import self_signed, server_context
from tests.admission.reviews import deployment, review
from tests.admission.server import RunningServer, admission_server
from tests.admission.test_server import RUNAWAY
from tests.waiting import wait_until

REPLICAS = """package admission.replicas

deny contains "too many replicas" if input.request.object.spec.replicas > 3
"""
GREEDY = """package admission.greedy

# Gigabytes on a request labelled grow=yes.
deny contains "unreachable" if {
	input.request.object.metadata.labels.grow == "yes"
	count([i | some i in numbers.range(1, 100000000)]) < 0
}
"""
BROKEN = "package admission.replicas\n\ndeny contains msg if {\n"


def policies(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "policies"
    root.mkdir()
    for name, text in files.items():
        (root / f"{name}.rego").write_text(text)
    return root


def ask(running: RunningServer, obj: dict) -> str:
    """A review on a fresh connection (so each may reach another worker): allowed, denied, or how it failed."""
    with running.client(headers={"connection": "close"}) as c:
        try:
            answer = c.post("/validate", content=json.dumps(review(obj)))
        except httpx.TransportError:
            return "dropped"
    return ("allowed" if answer.json()["response"]["allowed"] else "denied") if answer.status_code == 200 else "error"


def every_worker(running: RunningServer, obj: dict, expected: str, times: int = 8) -> bool:
    return all(ask(running, obj) == expected for _ in range(times))


def ready(running: RunningServer) -> dict:
    with running.client(headers={"connection": "close"}) as c:
        answer = c.get("/readyz")
    assert answer.status_code == 200
    return answer.json()


def metrics(running: RunningServer) -> str:
    with running.client() as c:
        return c.get("/metrics").text


def test_replacements_start_from_the_last_good_set_while_a_file_is_broken(tmp_path: Path) -> None:
    root = policies(tmp_path, replicas=REPLICAS, runaway=RUNAWAY)
    # a watchdog long enough to see both workers stuck at once on a loaded machine, a deadline (below it)
    # that a loaded machine does not pass before the policies start
    args = ("--workers", "2", "--deadline", "4.5", "--watchdog", "5")
    with admission_server(root, tmp_path, *args) as running:
        three = deployment(replicas=3)
        assert ask(running, three) == "allowed"
        (root / "replicas.rego").write_text(REPLICAS.replace("> 3", "> 2"))  # a good change: the last good set
        wait_until(lambda: every_worker(running, three, "denied"))
        (root / "replicas.rego").write_text(BROKEN)
        wait_until(lambda: all(not ready(running)["reload"]["ok"] for _ in range(8)))

        # both workers stuck at once while the file is broken: both replaced
        spinning = [threading.Thread(target=ask, args=(running, deployment(labels={"spin": "yes"}))) for _ in range(2)]
        for stuck, thread in enumerate(spinning, 1):
            thread.start()  # a stuck worker accepts nothing more: the next review goes to the other
            wait_until(lambda n=stuck: len(running.busy_workers()) == n, what=f"{stuck} worker(s) stuck")
        for thread in spinning:
            thread.join(timeout=20)
        wait_until(lambda: 'regokite_admission_worker_restarts_total{reason="stuck"} 2.0' in metrics(running))

        assert every_worker(running, three, "denied")  # the last good set, not the start-up one
        # a replacement reports the broken files too, with file:line, once it has looked at them
        wait_until(lambda: all("replicas.rego:4" in (ready(running)["reload"]["error"] or "") for _ in range(8)))
        assert "admission worker exited" not in running.logs()

        (root / "replicas.rego").write_text(REPLICAS)
        wait_until(lambda: every_worker(running, three, "allowed"))


def test_a_certificate_without_its_key_keeps_the_previous_pair_serving(tmp_path: Path) -> None:
    root = policies(tmp_path, replicas=REPLICAS)
    with admission_server(root, tmp_path, "--workers", "2") as running:
        port = int(running.url.rsplit(":", 1)[1])
        before = ssl.get_server_certificate(("127.0.0.1", port))
        fresh = self_signed(tmp_path / "rotated", ["localhost", "127.0.0.1", "::1"])
        shutil.copy(fresh.cert, running.tls_dir / "tls.crt")  # the certificate first, its key later
        wait_until(lambda: running.logs().count("keeping the previous certificate") >= 2)
        for _ in range(8):
            assert ssl.get_server_certificate(("127.0.0.1", port)) == before
            assert ready(running)["tls"]["ok"] is False
        shutil.copy(fresh.key, running.tls_dir / "tls.key")
        wait_until(
            lambda: all(ssl.get_server_certificate(("127.0.0.1", port)) == fresh.cert.read_text() for _ in range(8))
        )
        verify = ssl.create_default_context(cafile=fresh.ca)
        with httpx.Client(base_url=running.url, verify=verify, headers={"connection": "close"}) as c:
            assert all("tls" not in c.get("/readyz").json() for _ in range(8))


def test_a_worker_over_its_memory_limit_is_replaced_and_its_policy_named(tmp_path: Path) -> None:
    root = policies(tmp_path, replicas=REPLICAS, greedy=GREEDY)
    args = ("--workers", "2", "--worker-memory-limit", "300Mi", "--watchdog", "30", "--deadline", "20")
    with admission_server(root, tmp_path, *args) as running:
        assert ask(running, deployment(labels={"grow": "yes"})) == "dropped"
        assert ask(running, deployment(replicas=9)) == "denied"
        wait_until(lambda: 'regokite_admission_worker_restarts_total{reason="memory"} 1.0' in metrics(running))
    [line] = [json.loads(x) for x in running.logs().splitlines() if "memory limit" in x]
    assert line["policy"] == "admission.greedy"
    assert line["resident_bytes"] > 300 * 2**20


def test_a_deployment_of_100k_containers_is_refused_by_the_watchdog_while_the_other_worker_answers(
    tmp_path: Path,
) -> None:
    """The decided outcome for a review within the body limit that no policy can decide in time (README)."""
    huge = deployment("huge")
    huge["spec"]["template"]["spec"]["containers"] = [{"name": f"c{i}", "image": "nginx:1.25"} for i in range(100_000)]
    bundled = Path(__file__).parents[2] / "policies"
    # A deadline a loaded machine does not pass while it reads and parses the 4 MB body, so the policies start
    # and only the watchdog ends this review (a 0.5 s deadline, passed before the first policy under load,
    # turned it into a denial). The watchdog must exceed the deadline.
    args = ("--workers", "2", "--deadline", "3.5", "--watchdog", "4")
    with admission_server(bundled, tmp_path, *args) as running:
        outcome: list[str] = []
        refused = threading.Thread(target=lambda: outcome.append(ask(running, huge)))
        refused.start()
        probes = []
        while refused.is_alive():
            with running.client(headers={"connection": "close"}) as c:
                probes.append(c.get("/healthz").status_code)
            time.sleep(0.05)
        refused.join()
        assert outcome == ["dropped"]
        assert probes and set(probes) == {200}
        wait_until(lambda: 'regokite_admission_worker_restarts_total{reason="stuck"} 1.0' in metrics(running))
    assert "memory limit" not in running.logs() and "worker exited" not in running.logs()
    [line] = [json.loads(x) for x in running.logs().splitlines() if "watchdog limit" in x]
    assert line["policy"].startswith("admission.")


def test_policies_loaded_counts_the_set_served_now_and_readiness_outlives_a_failed_reload(tmp_path: Path) -> None:
    root = policies(tmp_path, replicas=REPLICAS, other=REPLICAS.replace("replicas", "other"))
    with admission_server(root, tmp_path) as running:
        assert "regokite_policies_loaded 2.0" in metrics(running)
        (root / "other.rego").unlink()
        wait_until(lambda: ready(running)["policies"] == ["admission.replicas"])
        assert "regokite_policies_loaded 1.0" in metrics(running)
        # A reload that fails keeps the last good set serving: still ready, the failure visible.
        (root / "replicas.rego").write_text(BROKEN)
        wait_until(lambda: ready(running)["reload"]["ok"] is False)
        text = metrics(running)
        assert "regokite_policy_reload_healthy 0.0" in text and "regokite_policies_loaded 1.0" in text


def test_a_server_context_needs_a_certificate_and_its_own_key(tmp_path: Path) -> None:
    one = self_signed(tmp_path / "one", ["localhost"])
    other = self_signed(tmp_path / "other", ["localhost"])
    assert server_context(one.cert, one.key)
    with pytest.raises(ssl.SSLError):
        server_context(one.cert, other.key)
    (tmp_path / "half.key").write_bytes(one.key.read_bytes()[:50])
    with pytest.raises(ssl.SSLError):
        server_context(one.cert, tmp_path / "half.key")


def test_last_good_is_the_newest_read_any_worker_loaded(tmp_path: Path) -> None:
    def snapshot(read_at: float, text: str) -> Snapshot:
        return Snapshot(read_at, (("p.rego", len(text), 0),), Bundle((Module("p.rego", text),)))

    last_good = LastGood(tmp_path, snapshot(1.0, "start-up"))
    assert last_good.newest().bundle.modules[0].text == "start-up"
    last_good.save(0, snapshot(3.0, "newest"))
    last_good.save(1, snapshot(2.0, "read earlier, saved later"))
    assert last_good.newest().bundle.modules[0].text == "newest"


@pytest.fixture(autouse=True)
def _no_tracebacks(tmp_path: Path):
    yield
    log = tmp_path / "admission.log"
    if log.exists():
        assert "Traceback" not in log.read_text(errors="replace")
