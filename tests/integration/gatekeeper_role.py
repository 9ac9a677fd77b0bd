"""Gatekeeper's role on the session's API server, as `regokite manifests gatekeeper` deploys it: `regokite
gatekeeper` following the cluster through its watches, `regokite admission` serving its directory, and the
webhook configurations that manifest writes (every resource to /validate and /mutate, failurePolicy Ignore,
Gatekeeper's namespace-label webhook failing closed) pointing at that server. For a test module: the
webhooks see every request in the cluster while it runs."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kube
from kubernetes import client

from regokite.gatekeeper.crds import template_crd
from regokite.kube.client import KubeClient
from regokite.manifests.webhooks import WebhookTarget, catch_all_configuration
from regokite.sources.gatekeeper_objects import GatekeeperSync
from tests.admission.reviews import review
from tests.admission.server import RunningServer, admission_server

WEBHOOK_TIMEOUT = 15  # Gatekeeper's chart says 3 s; a loaded test machine compiles a template slower


def kubectl(cluster: kube.Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=120)


@dataclass
class GatekeeperRole:
    cluster: kube.Cluster
    api: client.ApiClient
    syncer: GatekeeperSync
    server: RunningServer
    validating: str  # the webhook configuration's name

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return kubectl(self.cluster, *args, stdin=stdin)

    def apply(self, text: str) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", stdin=text)

    def applied(self, text: str, what: str, timeout: float = 60) -> None:
        """Applied, retried while a constraint's CRD is not served yet (the syncer makes it)."""
        kube.wait_for(lambda: self.apply(text), lambda done: done.returncode == 0, what=what, timeout=timeout)

    def served(self, kind: str, name: str, status: int = 200) -> None:
        """Wait until the server serves constraint `name` (its /validate/<name> answers), or (404) no longer."""
        body = review({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}})
        with self.server.client() as http:
            kube.wait_for(
                lambda: http.post(f"/validate/{name}", json=body).status_code,
                lambda answered: answered == status,
                what=f"the server to {'serve' if status == 200 else 'stop serving'} {kind} {name}",
                timeout=120,
            )

    def caught_up(self) -> bool:
        """Whether the server has loaded what the syncer last wrote (it read its files after every last write)
        and decides (the cluster data its policies read is in)."""
        # directories too: a file removed changes its directory's mtime, not another file's
        written = max((p.stat().st_mtime for p in self.syncer.out.rglob("*")), default=0.0)
        with self.server.client() as http:
            ready = http.get("/readyz")  # 503 while cluster data it needs is not in: it decides nothing then
        reload = ready.json().get("reload") or {}
        read = float(reload.get("files_read_at") or 0)
        return ready.status_code == 200 and bool(reload.get("ok")) and read >= written

    def serves(self, fragment: str, present: bool = True, timeout: float = 120) -> None:
        """Wait until what the syncer wrote holds `fragment` (or, `present` False, no longer does) and the server
        has read it: an object applied (or deleted) is served (or gone) from then on."""

        def written() -> bool:
            texts = (p.read_text(errors="replace") for p in self.syncer.out.rglob("*.yaml"))
            return any(fragment in text for text in texts) == present and self.caught_up()

        kube.wait_for(written, bool, what=f"the server to {'serve' if present else 'drop'} {fragment}", timeout=timeout)

    def enforced(self, kind: str, name: str, operation: str = "webhook") -> bool:
        """Gatekeeper's constraint_enforced / mutator_enforced: the object's `status.byPod` has an entry for
        `operation` at its generation, and (what that means in Gatekeeper: the webhook holds it) the server has
        loaded what the syncer wrote."""
        done = self.kubectl("get", kind, name, "-o", "json")
        if done.returncode != 0:
            return False
        obj = json.loads(done.stdout)
        generation = obj["metadata"].get("generation")
        entries = [
            p
            for p in (obj.get("status") or {}).get("byPod") or []
            if operation in (p.get("operations") or []) and p.get("observedGeneration") == generation
        ]
        return bool(entries) and self.caught_up()

    def wait_enforced(self, kind: str, name: str, operation: str = "webhook", timeout: float = 120) -> None:
        kube.wait_for(
            lambda: self.enforced(kind, name, operation),
            bool,
            what=f"{kind} {name} to be enforced ({operation})",
            timeout=timeout,
        )


@contextlib.contextmanager
def gatekeeper_role(
    cluster: kube.Cluster,
    api: client.ApiClient,
    tmp: Path,
    *admission_args: str,
    config_namespace: str = "gatekeeper-system",
    mutating: bool = False,
) -> Iterator[GatekeeperRole]:
    syncer = GatekeeperSync(KubeClient(cluster.kubeconfig), tmp / "policies", config_namespace)
    syncer.install()
    kube.install_crd(api, template_crd())
    syncer.sync_once()
    stop = threading.Event()
    runner = threading.Thread(target=syncer.run, args=(300.0, stop), daemon=True)  # its watches drive it
    runner.start()
    (tmp / "server").mkdir(exist_ok=True)
    configs: list[tuple[str, str]] = []
    try:
        with admission_server(syncer.out, tmp / "server", *admission_args) as server:
            ca = base64.b64encode(server.ca.read_bytes()).decode()
            target = WebhookTarget(
                kube.unique_name("gk"), "regokite-system", url=server.url, ca_bundle=ca, timeout_seconds=WEBHOOK_TIMEOUT
            )
            validating = catch_all_configuration(target)
            kube.create(api, kube.VALIDATING, validating)
            configs.append((kube.VALIDATING, validating["metadata"]["name"]))
            if mutating:
                hooks = catch_all_configuration(target, "mutate")
                kube.create(api, kube.MUTATING, hooks)
                configs.append((kube.MUTATING, hooks["metadata"]["name"]))
            try:
                yield GatekeeperRole(cluster, api, syncer, server, validating["metadata"]["name"])
            finally:
                for path, name in configs:
                    kube.delete(api, f"{path}/{name}")
    finally:
        stop.set()
        runner.join(10)
        kubectl(cluster, "delete", "constrainttemplates", "--all", "--ignore-not-found")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the constraint CRDs go with their templates
            syncer.sync_once()
            if not syncer.served_kinds:
                break


def items(api: client.ApiClient, path: str, **query: Any) -> list[dict[str, Any]]:
    return kube.get(api, path, **query).get("items", [])
