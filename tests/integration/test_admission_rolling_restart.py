"""A rolling update of the admission server behind one address, with the API server sending reviews all along.

The API server calls `regokite admission` at a local address (failurePolicy Fail: a review it cannot get
answered refuses the request with a 500). While threads create ConfigMaps through it, a new server is
started at the same address with a certificate from a new CA (the webhook's caBundle holding the old and
the new CA first, as a certificate rotation does), then the old one gets SIGTERM, as a Deployment's rolling
update does behind a Service. Every request must come back with the policy's own answer: no 5xx, no TLS
error, and answers keep coming after the old server has exited (a dead or dropping server fails the test).
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kube
import pytest
from kube import create, merge_patch
from kubernetes import client

from regokite.ops.tls import self_signed
from tests.admission.server import RunningServer, admission_server
from tests.ports import free_port

POLICY = """package rolling.slow

match := {"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}

# some work in every review, so reviews are in flight when the old server is stopped
work := count([x | some x in numbers.range(1, 20000); x % 7 == 0])

deny contains "rolling: this ConfigMap is refused" if {
	input.request.object.metadata.labels.verdict == "deny"
	work > 0
}
"""
REFUSED = "rolling: this ConfigMap is refused"
HOSTS = ["localhost", "127.0.0.1", "::1"]
# kept-alive connections: the old server has reviews in flight at SIGTERM and gets more on its open
# connections while it drains; churn: a connection ends every 3 reviews, so the API server dials the
# address all along, during the drain too (each dial must reach a server that answers it)
CONNECTIONS = {"kept alive": (), "churn": ("--max-requests-per-connection", "3")}


@dataclass
class Load:
    """Threads creating ConfigMaps (dry run) through the API server; every answer recorded with its time."""

    cluster: kube.Cluster
    namespace: str
    threads: int = 4
    answers: list[tuple[float, str]] = field(default_factory=list)  # (time, allowed | denied)
    errors: list[tuple[float, int, str]] = field(default_factory=list)  # (time, status, message)
    wrong: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    workers: list[threading.Thread] = field(default_factory=list)

    def run(self, index: int) -> None:
        api = self.cluster.api_client()
        path = f"/api/v1/namespaces/{self.namespace}/configmaps"
        for n in range(1_000_000):
            if self.stop.is_set():
                return
            verdict = "deny" if n % 2 else "allow"
            obj = {"metadata": {"name": f"cm-{index}-{n}", "labels": {"verdict": verdict}}}
            try:
                kube.request(api, "POST", path, obj, query={"dryRun": "All"})
                got = "allowed"
            except client.ApiException as exc:
                message = str(json.loads(exc.body or "{}").get("message", exc.body))
                if exc.status != 403 or REFUSED not in message:
                    self.errors.append((time.monotonic(), exc.status, message[:300]))
                    continue
                got = "denied"
            self.answers.append((time.monotonic(), got))
            if got != ("denied" if verdict == "deny" else "allowed"):
                self.wrong.append(f"{obj['metadata']['name']}: {verdict} expected, {got}")

    @contextlib.contextmanager
    def running(self) -> Iterator[Load]:
        self.workers = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(self.threads)]
        for worker in self.workers:
            worker.start()
        try:
            yield self
        finally:
            self.finish()

    def finish(self) -> None:
        """Stop sending; every request sent has its answer recorded."""
        self.stop.set()
        for worker in self.workers:
            worker.join(60)

    def answered_after(self, instant: float) -> int:
        return sum(1 for at, _ in list(self.answers) if at > instant)


def ca_bundle(*cas: Path) -> str:
    return base64.b64encode(b"".join(ca.read_bytes() for ca in cas)).decode()


def trusting(config: dict[str, Any], *cas: Path) -> dict[str, Any]:
    """A merge patch of `config`'s webhook with a caBundle of `cas` (a list is replaced whole)."""
    hook = config["webhooks"][0]
    return {"webhooks": [{**hook, "clientConfig": {**hook["clientConfig"], "caBundle": ca_bundle(*cas)}}]}


def reviews(server: RunningServer, since: int = 0) -> int:
    """Reviews of the policy the server answered (its access log), from byte `since` of its log on."""
    return server.logs()[since:].count('"endpoint": "validate/rolling.slow"')


@pytest.mark.parametrize("connections", list(CONNECTIONS))
def test_a_rolling_restart_with_a_new_ca_loses_no_review(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path, connections: str
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "rolling.rego").write_text(POLICY)
    port = free_port()
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    new_ca = self_signed(tmp_path / "new" / "tls", HOSTS).ca  # the new server's CA, made before it starts
    flags = ("--workers", "2", *CONNECTIONS[connections])
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    with contextlib.ExitStack() as stack:
        old = stack.enter_context(admission_server(policies, tmp_path / "old", *flags, port=port))
        name = f"{kube.unique_name('rolling')}.test.regokite.dev"
        url = f"https://127.0.0.1:{port}/validate/rolling.slow"
        config = kube.webhook_config(
            "ValidatingWebhookConfiguration", name, url, ca_bundle(old.ca), namespace, resource=("", "configmaps")
        )
        create(api, kube.VALIDATING, config)
        stack.callback(kube.delete, api, f"{kube.VALIDATING}/{name}")

        def refused_by_policy() -> bool:
            try:
                create(api, configmaps, {"metadata": {"name": "probe", "labels": {"verdict": "deny"}}})
            except client.ApiException as exc:
                return exc.status == 403 and REFUSED in (exc.body or "")
            return False

        kube.wait_for(refused_by_policy, bool, what="the API server to call the old server", timeout=30)
        apiserver_log = cluster.kubeconfig.parent / "logs" / "kube-apiserver.log"  # the session's control plane
        if not apiserver_log.exists():  # REGOKITE_KUBECONFIG: an API server whose log is elsewhere
            apiserver_log = None
        log_from = len(apiserver_log.read_text(errors="replace")) if apiserver_log is not None else 0
        with Load(cluster, namespace).running() as load:
            time.sleep(1.5)
            merge_patch(api, f"{kube.VALIDATING}/{name}", trusting(config, old.ca, new_ca))
            time.sleep(3)  # the API server reads webhook configurations from a watch: old + new CA in use
            with admission_server(policies, tmp_path / "new", *flags, port=port) as new:
                old_log_at = old.log.stat().st_size
                stopped = time.monotonic()
                old.process.send_signal(signal.SIGTERM)
                exit_code = old.process.wait(timeout=40)
                exited = time.monotonic()
                time.sleep(3)
                merge_patch(api, f"{kube.VALIDATING}/{name}", trusting(config, new.ca))  # the rotation done
                time.sleep(3)
                load.finish()  # before the new server stops
                figures = {
                    "sent": len(load.answers) + len(load.errors),
                    "answered": len(load.answers),
                    "errors": len(load.errors),
                    "old server reviews": reviews(old),
                    "old server reviews after SIGTERM": reviews(old, old_log_at),
                    "new server reviews": reviews(new),
                    "answered after the old server exited": load.answered_after(exited),
                    "old server drain seconds": round(exited - stopped, 2),
                }
    print(figures)
    errors = [(round(at - stopped, 2), status, message) for at, status, message in load.errors]
    assert errors == [], figures
    assert load.wrong == []
    if apiserver_log is not None:  # the API server's own account: each webhook call it could not make, TLS errors
        seen = apiserver_log.read_text(errors="replace")[log_from:].splitlines()
        failed = [line for line in seen if name in line and "failed calling webhook" in line.lower()]
        assert failed == [], failed[:5]
        assert [line for line in seen if "x509" in line or "tls: " in line] == []
    assert exit_code == 0, f"the old server did not exit cleanly on SIGTERM: {exit_code}\n{old.logs()[-3000:]}"
    assert figures["old server reviews"] > 0 and figures["new server reviews"] > 0, figures
    if connections == "kept alive":
        drained = figures["old server reviews after SIGTERM"]
        assert drained > 0, f"no review answered by the old server while it drained: {figures}"
    assert figures["answered after the old server exited"] >= 20, f"few answers once the old server was gone: {figures}"
