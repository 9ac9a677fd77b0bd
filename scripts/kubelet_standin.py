#!/usr/bin/env python3
"""A kubelet stand-in for the local control plane (test machinery, not product code).

The local cluster has no scheduler and no kubelet, so Pods stay Pending and
Deployments, StatefulSets and Jobs never progress. As KWOK does, this process
pretends to be the nodes: it registers Node objects (Ready, with capacity),
binds each unscheduled Pod to one of them (the scheduler's job), and writes the
Pod status a kubelet would: Running and Ready with container statuses, a pod
IP and conditions; Succeeded after `--complete-after` seconds for Pods whose
restartPolicy is Never or OnFailure; and it removes Pods marked for deletion
(a kubelet deletes them with grace period 0 once their containers stop). It
also lifts `kubernetes.io/pvc-protection` from deleted PVCs no unfinished Pod
mounts, the pvc-protection controller's job, which the control plane leaves out.

Nothing runs: no image is pulled, no container started, no probe, volume,
network or resource limit is honoured; every container "succeeds". For
`kubectl logs`, it answers the API server as a kubelet would (HTTPS on
loopback, the port in each Node's `daemonEndpoints`): a container whose
command is a plain `echo` (`echo ...`, or `sh -c "echo ..."`) logs the line it
would print, `$VAR`, `${VAR}` and `$(VAR)` expanded from its literal `env`;
any other container logs nothing. Polls the
API server (every `--interval` seconds) rather than watching: simple and
robust across API-server restarts; a test waits at most one interval more.

    python3 scripts/kubelet_standin.py --kubeconfig KUBECONFIG [--nodes N]
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import logging
import re
import shlex
import signal
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import config
from kubernetes.client.rest import ApiException

Obj = dict[str, Any]
NODE_LABEL = "regokite.dev/kubelet-standin"
POD_CIDR = ipaddress.ip_network("10.244.0.0/16")
LOG = logging.getLogger("kubelet-standin")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()


class Rest:
    """JSON over the kubernetes client's auth and TLS (no generated models: they drop fields)."""

    def __init__(self, kubeconfig: str) -> None:
        self.api = config.new_client_from_config(kubeconfig)

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **query: Any
    ) -> Obj:
        serialized = self.api.param_serialize(
            method,
            path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self.api.call_api(*serialized, _request_timeout=30)
        data = resp.read()
        if not 200 <= resp.status <= 299:
            raise ApiException(status=resp.status, reason=resp.reason, http_resp=resp) from None
        return json.loads(data) if data else {}


# ------------------------------------------------------------------ pure decisions


def node_object(name: str, ip: str, kubelet_port: int = 0) -> Obj:
    capacity = {"cpu": "32", "memory": "64Gi", "pods": "250", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                NODE_LABEL: "true",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            # No Hostname address: the API server would try it first to reach the "kubelet" (logs).
            "addresses": [{"type": "InternalIP", "address": ip}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet stand-in (nothing runs)",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }
            ],
            "nodeInfo": {"kubeletVersion": "v1.20.2", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def pinned_node(pod: Mapping[str, Any]) -> str | None:
    """The node a Pod's required node affinity names by `metadata.name` (the DaemonSet controller's way)."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and expr.get("operator") == "In" and expr.get("values"):
                return expr["values"][0]
    return None


def choose_node(pod: Mapping[str, Any], nodes: Mapping[str, Mapping[str, str]], load: Mapping[str, int]) -> str | None:
    """A node for an unscheduled Pod: the one it is pinned to, else the least loaded whose
    labels match its nodeSelector; None if none fits (the Pod stays Pending, as it would)."""
    pinned = pinned_node(pod)
    if pinned is not None:
        return pinned if pinned in nodes else None
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    fits = [n for n, labels in nodes.items() if all(labels.get(k) == v for k, v in selector.items())]
    return min(fits, key=lambda n: (load.get(n, 0), n)) if fits else None


def container_status(container: Mapping[str, Any], state: Obj, ready: bool, uid: str) -> Obj:
    return {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": f"standin://{container.get('image', '')}",
        "containerID": f"standin://{uid}/{container['name']}",
        "ready": ready,
        "started": ready,
        "restartCount": 0,
        "state": state,
    }


def condition(kind: str, status: bool, reason: str | None = None) -> Obj:
    out: Obj = {"type": kind, "status": "True" if status else "False", "lastTransitionTime": now()}
    if reason:
        out["reason"] = reason
    return out


def running_status(pod: Mapping[str, Any], host_ip: str, pod_ip: str) -> Obj:
    spec, uid, started = pod.get("spec") or {}, pod["metadata"].get("uid", ""), now()
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}}
    return {
        "phase": "Running",
        "hostIP": host_ip,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": started,
        "qosClass": "BestEffort",
        "conditions": [condition(k, True) for k in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "initContainerStatuses": [container_status(c, done, True, uid) for c in spec.get("initContainers") or []],
        "containerStatuses": [
            container_status(c, {"running": {"startedAt": started}}, True, uid) for c in spec.get("containers") or []
        ],
    }


def succeeded_status(pod: Mapping[str, Any]) -> Obj:
    status, uid, finished = pod.get("status") or {}, pod["metadata"].get("uid", ""), now()
    started = status.get("startTime") or finished
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": finished}}
    return {
        "phase": "Succeeded",
        "conditions": [
            condition("Initialized", True),
            condition("Ready", False, "PodCompleted"),
            condition("ContainersReady", False, "PodCompleted"),
            condition("PodScheduled", True),
        ],
        "containerStatuses": [
            container_status(c, done, False, uid) for c in (pod.get("spec") or {}).get("containers") or []
        ],
    }


_K8S_VAR = re.compile(r"\$\((\w+)\)")  # Kubernetes expands $(VAR) in command and args itself
_SH_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")


def fake_log(container: Mapping[str, Any]) -> str:
    """What a container that only echoes would print; "" for any other (nothing runs)."""
    env = {e["name"]: e.get("value", "") for e in container.get("env") or [] if "name" in e}
    argv = [
        _K8S_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), a)
        for a in [*(container.get("command") or []), *(container.get("args") or [])]
    ]
    if len(argv) == 3 and argv[0] in _SHELLS and argv[1] == "-c":
        script = argv[2].strip()
        if not script.startswith("echo ") or re.search(r"[;&|<>`\\]|\$\(", script):
            return ""
        try:
            words = shlex.split(_SH_VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), script))
        except ValueError:
            return ""
        return " ".join(words[1:]) + "\n"
    if argv and argv[0] in ("echo", "/bin/echo"):
        return " ".join(argv[1:]) + "\n"
    return ""


def runs_to_completion(pod: Mapping[str, Any]) -> bool:
    return (pod.get("spec") or {}).get("restartPolicy") in ("Never", "OnFailure")


# ---------------------------------------------------------------------- the loop


@dataclass
class Standin:
    rest: Rest
    node_names: list[str]
    complete_after: float = 2.0
    interval: float = 0.5
    node_ips: dict[str, str] = field(default_factory=dict)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    next_ip: int = 0
    kubelet_port: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def serve_logs(self) -> None:
        """The kubelet's log endpoint (`/containerLogs/<ns>/<pod>/<container>`), HTTPS on loopback;
        the API server's kubelet client verifies no certificate unless told a CA."""
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from regokite.ops.tls import issue, new_ca

        crt, key = issue(new_ca("kubelet-standin-ca"), ("127.0.0.1",), "kubelet-standin")
        tmp = Path(tempfile.mkdtemp(prefix="kubelet-standin-"))
        (tmp / "tls.crt").write_bytes(crt)
        (tmp / "tls.key").write_bytes(key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
        rest = self.rest

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                body, code = b"not found\n", 404
                if len(parts) == 4 and parts[0] == "containerLogs":
                    try:
                        pod = rest.call("GET", f"/api/v1/namespaces/{parts[1]}/pods/{parts[2]}")
                        spec = pod.get("spec") or {}
                        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                            if c.get("name") == parts[3]:
                                body, code = fake_log(c).encode(), 200
                    except ApiException as e:
                        code = e.status or 500
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                LOG.info("kubelet API: " + format, *args)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self.kubelet_port = server.server_address[1]
        threading.Thread(target=server.serve_forever, name="kubelet-api", daemon=True).start()

    def register_nodes(self) -> None:
        for name in self.node_names:
            ip = "127.0.0.1"  # where the kubelet API (logs) listens, for every Node
            node = node_object(name, ip, self.kubelet_port)
            try:
                self.rest.call("POST", "/api/v1/nodes", node)
                LOG.info("registered node %s", name)
            except ApiException as e:
                if e.status != 409:
                    raise
            self.rest.call(
                "PATCH", f"/api/v1/nodes/{name}/status", {"status": node["status"]}, "application/merge-patch+json"
            )
            # The API server taints a new Node not-ready (TaintNodesByCondition); the node
            # lifecycle controller, not run here, would lift it once the Node reports Ready.
            self.rest.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, "application/merge-patch+json")
            self.node_ips[name] = ip
            self.node_labels[name] = node["metadata"]["labels"]

    def pod_ip(self) -> str:
        self.next_ip += 1
        return str(POD_CIDR[self.next_ip % (POD_CIDR.num_addresses - 2) + 1])

    def step(self) -> None:
        pods = self.rest.call("GET", "/api/v1/pods")["items"]
        load: dict[str, int] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                load[node] = load.get(node, 0) + 1
        for pod in pods:
            try:
                self.handle(pod, load)
            except ApiException as e:
                if e.status not in (404, 409):  # gone or changed meanwhile: the next pass sees it anew
                    LOG.warning("pod %s: %s %s", pod_ref(pod), e.status, e.reason)
        self.release_claims(pods)

    def release_claims(self, pods: Sequence[Mapping[str, Any]]) -> None:
        """Lifts pvc-protection from deleted PVCs no Pod mounts, as its controller would."""
        claims = self.rest.call("GET", "/api/v1/persistentvolumeclaims")["items"]
        for claim in releasable_claims(claims, pods):
            meta = claim["metadata"]
            finalizers = [f for f in meta["finalizers"] if f != PVC_PROTECTION]
            patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
            try:
                self.rest.call(
                    "PATCH",
                    f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}",
                    patch,
                    "application/merge-patch+json",
                )
                LOG.info("pvc %s/%s released", meta["namespace"], meta["name"])
            except ApiException as e:
                if e.status not in (404, 409):
                    LOG.warning("pvc %s/%s: %s %s", meta["namespace"], meta["name"], e.status, e.reason)

    def handle(self, pod: Obj, load: dict[str, int]) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        base = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        node = spec.get("nodeName")
        if meta.get("deletionTimestamp"):
            if node in self.node_ips:
                self.rest.call("DELETE", base, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
                LOG.info("pod %s removed", pod_ref(pod))
            return
        if not node:
            chosen = choose_node(pod, self.node_labels, load)
            if chosen is not None:
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": meta["name"], "uid": meta["uid"]},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": chosen},
                }
                self.rest.call("POST", f"{base}/binding", binding)
                load[chosen] = load.get(chosen, 0) + 1
                LOG.info("pod %s bound to %s", pod_ref(pod), chosen)
            return
        if node not in self.node_ips:
            return
        phase = status.get("phase")
        if phase in (None, "Pending"):
            new = running_status(pod, self.node_ips[node], self.pod_ip())
        elif phase == "Running" and runs_to_completion(pod):
            started = parse_time(status.get("startTime"))
            if started is None or time.time() - started < self.complete_after:
                return
            new = succeeded_status(pod)
        else:
            return
        self.rest.call("PATCH", f"{base}/status", {"status": new}, "application/merge-patch+json")
        LOG.info("pod %s %s", pod_ref(pod), new["phase"])

    def run(self) -> None:
        self.serve_logs()
        self.register_nodes()
        while not self.stop.is_set():
            try:
                self.step()
            except (ApiException, OSError) as e:  # API server restarting: try again next interval
                LOG.warning("pass failed: %s", e)
            self.stop.wait(self.interval)
        for name in self.node_names:  # stopped: its Nodes go too, so nothing counts on them any more
            try:
                self.rest.call("DELETE", f"/api/v1/nodes/{name}")
            except (ApiException, OSError) as e:
                LOG.warning("node %s not deleted: %s", name, e)


PVC_PROTECTION = "kubernetes.io/pvc-protection"


def claims_in_use(pods: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, claim) of every PVC a Pod that has not finished mounts, as pvc-protection counts them."""
    used = set()
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                used.add((pod["metadata"]["namespace"], claim))
    return used


def releasable_claims(claims: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """PVCs being deleted whose pvc-protection finalizer may go: no unfinished Pod mounts them.

    The control plane runs no pvc-protection controller (the garbage collector tests fail beside it), yet the
    API server still adds its finalizer; without this, a deleted PVC would wait for good.
    """
    used = claims_in_use(pods)
    return [
        c
        for c in claims
        if c["metadata"].get("deletionTimestamp")
        and PVC_PROTECTION in (c["metadata"].get("finalizers") or [])
        and (c["metadata"]["namespace"], c["metadata"]["name"]) not in used
    ]


def pod_ref(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, default=1, help="how many Nodes to register (default 1)")
    parser.add_argument("--node-prefix", default="standin-", help="Node names: PREFIX0, PREFIX1, ...")
    parser.add_argument(
        "--complete-after", type=float, default=2.0, help="seconds a Never/OnFailure Pod runs before it Succeeds"
    )
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between passes over the Pods")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    standin = Standin(
        Rest(args.kubeconfig),
        [f"{args.node_prefix}{i}" for i in range(args.nodes)],
        complete_after=args.complete_after,
        interval=args.interval,
    )
    signal.signal(signal.SIGTERM, lambda *_: standin.stop.set())
    standin.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
