"""Fault drills on a private control plane, as an operator would try them (issue 27).

    python3 -m bench.fault_drills [--parents 100] [--only NAME ...]

Each drill breaks something and measures, from the moment it is repaired, how long until the
cluster is right again, how many objects were lost, and how many writes were duplicated or
spurious. The controller drills count writes from the API server's audit log (every create it
answered 201, to a POST or to an apply, and every delete), not only from the final state: a child
created, deleted and created again is a duplicate even if the end looks right.

* broken-template: a ConstraintTemplate edit that does not compile (`regokite gatekeeper`);
  recovered: the edit fixed until its status is clean; lost: constraints and CRDs gone.
* audit-restart: the API server killed as `regokite audit` starts (history compacted);
  recovered: API server up until every report is right; lost: reports still wrong after 30 s.
* audit-crd: the PolicyReport CRD deleted (every report with it) and re-created.
* stale-parent: the controller stopped, the API server killed, 20 parents and their Pods deleted,
  the API server killed again and started with etcd compacted (the parent version unserved until
  the Pods' informer has relisted), the controller resumed; spurious: Pods created for the deleted
  parents (audit log); the note gives the stale-cache GETs that prevented them.
* apiserver-restart: the API server killed while N parents are being created (controller under
  load), back after 2 s with history compacted; recovered: up until every parent converged.
* sigkill: the controller SIGKILLed mid-convergence of N parents and started again.
  For both: lost: wanted ConfigMaps missing at the end; duplicated: ConfigMaps created more than
  once (audit log); spurious: ConfigMaps created that no parent wants, or deleted by anyone but
  the garbage collector (audit log; at least the extra ones at the end). The audit log can miss a
  write the API server stored as it was killed (its audit event dies with it): the note counts
  wanted ConfigMaps present but never audited as created, and gives the stale-cache GETs (parent
  confirmations) and their mean time.
* etcd-freeze, etcd-kill: etcd frozen (SIGSTOP) or killed and restarted 10 s later under
  admission load (a policy reading replicated Namespaces); lost: reviews not answered 200 during
  the outage; recovered: etcd back until a Namespace created then is in admission's data.

Timings vary several-fold on a shared machine; counts do not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests" / "integration")]

import controlplane  # noqa: E402
import kube  # noqa: E402
import yaml  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from bench.controller_converge import fanout_plane, make_namespace, parent  # noqa: E402
from tests.controllers.fanout import CHILDREN, STATUS  # noqa: E402
from tests.controllers.process import ControllerProcess  # noqa: E402
from tests.processes import REGOKITE  # noqa: E402

Api = Any


@dataclass
class Outcome:
    drill: str
    recovered: float | None  # seconds from repair to right; None: not applicable
    lost: int
    spurious: int
    note: str = ""
    duplicated: int = 0


def until(check: Callable[[], bool], timeout: float) -> float | None:
    """Seconds until `check` holds (errors count as not yet), None after `timeout`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        with contextlib.suppress(Exception):
            if check():
                return time.monotonic() - t0
        time.sleep(0.1)
    return None


# -- gatekeeper


def broken_template(cp: Any, api: Api, tmp: Path) -> Outcome:
    from regokite.gatekeeper.crds import template_crd
    from regokite.kube.client import KubeClient
    from regokite.sources.gatekeeper_objects import TEMPLATES, GatekeeperSync, served_documents

    fixture = ROOT / "tests/gatekeeper/fixtures/library/requiredlabels/template.yaml"
    template = yaml.safe_load(fixture.read_text())
    syncer = GatekeeperSync(KubeClient(cp.kubeconfig), tmp / "gatekeeper")
    syncer.install()
    kube.install_crd(api, template_crd())
    kube.apply(api, f"{TEMPLATES}/k8srequiredlabels", template, "drill", force=True)
    syncer.sync_once()
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/k8srequiredlabels.constraints.gatekeeper.sh"
    kube.wait_for_condition(api, crd, "Established", timeout=60)
    constraints = "/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels"
    body = {"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "K8sRequiredLabels",
            "metadata": {"name": "owner"}, "spec": {"parameters": {"labels": [{"key": "owner"}]}}}  # fmt: skip
    kube.wait_for(lambda: kube.apply(api, f"{constraints}/owner", body, "drill", force=True), what="constraint")
    syncer.sync_once()
    rego = template["spec"]["targets"][0]["rego"]
    template["spec"]["targets"][0]["rego"] = rego.replace("count(missing) > 0", "count(missing) > 0 +")
    kube.apply(api, f"{TEMPLATES}/k8srequiredlabels", template, "drill", force=True)
    syncer.sync_once()
    lost = sum(not kube.exists(api, p) for p in (crd, f"{constraints}/owner"))
    served = "K8sRequiredLabels" in str(served_documents(syncer.out))
    template["spec"]["targets"][0]["rego"] = rego
    kube.apply(api, f"{TEMPLATES}/k8srequiredlabels", template, "drill", force=True)
    t0 = time.monotonic()
    syncer.sync_once()
    clean = until(lambda: not kube.get(api, f"{TEMPLATES}/k8srequiredlabels")["status"]["byPod"][0].get("errors"), 30)
    kube.delete(api, f"{TEMPLATES}/k8srequiredlabels")
    syncer.sync_once()
    note = "last good Rego served" if served else "template no longer served"
    return Outcome("broken-template", None if clean is None else time.monotonic() - t0, lost, 0, note)


# -- audit

DRILL_POLICY = """package admission.drill

match := {"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}

deny contains msg if {
\tinput.request.object.metadata.labels.drill == "bad"
\tmsg := sprintf("ConfigMap %s is bad", [input.request.object.metadata.name])
}
"""


def bad_namespaces(api: Api, count: int, prefix: str) -> list[str]:
    from regokite.audit.crds import report_crds

    for crd in report_crds():
        kube.install_crd(api, crd)
    names = [kube.unique_name(prefix) for _ in range(count)]
    for ns in names:
        kube.create(api, "/api/v1/namespaces", {"metadata": {"name": ns}})
        bad = {"metadata": {"name": "bad", "labels": {"drill": "bad"}}, "data": {"k": "v"}}
        kube.create(api, f"/api/v1/namespaces/{ns}/configmaps", bad)
    return names


def wrong_reports(api: Api, namespaces: list[str]) -> int:
    wrong = 0
    for ns in namespaces:
        try:
            report = kube.get(api, f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports/regokite-audit")
        except ApiException:
            wrong += 1
            continue
        found = [(r["policy"], r["result"], r["resources"][0]["name"]) for r in report.get("results", [])]
        wrong += found != [("admission.drill", "fail", "bad")]
    return wrong


def audit_process(cp: Any, tmp: Path, log: Path) -> subprocess.Popen[bytes]:
    policies = tmp / "audit-policies"
    policies.mkdir(exist_ok=True)
    (policies / "drill.rego").write_text(DRILL_POLICY)
    cmd = [*REGOKITE, "audit", "--policies", str(policies), "--kubeconfig", str(cp.kubeconfig)]
    with log.open("wb") as sink:
        return subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def audit_drills(cp: Any, api: Api, tmp: Path) -> list[Outcome]:
    from regokite.audit.crds import report_crds

    namespaces = bad_namespaces(api, 12, "drill")
    log = tmp / "audit.log"
    holder: dict[str, subprocess.Popen[bytes]] = {}

    def start_during_outage() -> None:
        holder["proc"] = audit_process(cp, tmp, log)
        kube.compact_etcd(cp.etcd_url)
        until(lambda: holder["proc"].poll() is not None or "failing; retrying" in log.read_text(), 60)

    controlplane.restart_apiserver(cp, 0.5, start_during_outage)
    proc = holder["proc"]
    try:
        first = until(lambda: proc.poll() is None and wrong_reports(api, namespaces) == 0, 30)
        lost = wrong_reports(api, namespaces)
        outcomes = [Outcome("audit-restart", first, lost, 0, "" if proc.poll() is None else "the audit exited")]
        name = "policyreports.wgpolicyk8s.io"
        crd = next(c for c in report_crds() if c["metadata"]["name"] == name)
        kube.uninstall_crd(api, name)
        kube.wait_for_deletion(api, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", timeout=120)
        kube.install_crd(api, crd)
        again = until(lambda: proc.poll() is None and wrong_reports(api, namespaces) == 0, 30)
        outcomes.append(Outcome("audit-crd", again, wrong_reports(api, namespaces), 0))
        return outcomes
    finally:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


# -- controllers


def metric(ctl: ControllerProcess, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels` (0 when none)."""
    total = 0.0
    for line in ctl.metrics().splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def confirmations(ctl: ControllerProcess) -> str:
    """The stale-cache GETs a controller made (parents confirmed before a create) and their cost."""
    gets = metric(ctl, "regokite_controller_parent_confirmations_total")
    seconds = metric(ctl, "regokite_controller_parent_confirmation_seconds_sum")
    syncs = metric(ctl, "regokite_controller_reconcile_duration_seconds_count")
    sync_seconds = metric(ctl, "regokite_controller_reconcile_duration_seconds_sum")
    gone = metric(ctl, "regokite_controller_parent_confirmations_total", result="gone")
    mean = f"{1000 * seconds / gets:.1f} ms each" if gets else "-"
    per_sync = f"{1000 * sync_seconds / syncs:.1f} ms" if syncs else "-"
    return f"{gets:g} stale-cache GETs ({gone:g} gone), {mean}; {syncs:g} syncs, mean {per_sync}"


def created(cp: Any, since: int, resource: str, namespace: str) -> Counter[str]:
    """Objects of `resource` in `namespace` the API server created after its `since`-th audited write
    (201 to a POST or to an apply), by name, with how many times each."""
    return Counter(
        e["objectRef"].get("name", "")
        for e in controlplane.audit_writes(cp)[since:]
        if e["objectRef"].get("resource") == resource
        and e["objectRef"].get("namespace") == namespace
        and (e.get("responseStatus") or {}).get("code") == 201
    )


def deleted_by_clients(cp: Any, since: int, resource: str, namespace: str) -> int:
    """Deletes of `resource` in `namespace` the API server answered 200, but for the garbage collector's."""
    return sum(
        1
        for e in controlplane.audit_writes(cp)[since:]
        if e["verb"] == "delete"
        and e["objectRef"].get("resource") == resource
        and e["objectRef"].get("namespace") == namespace
        and (e.get("responseStatus") or {}).get("code") == 200
        and e["user"]["username"] != controlplane.KCM_USER
    )


def stale_parent(cp: Any, api: Api) -> Outcome:
    example = ROOT / "policies/controllers/hello_world"
    crd = yaml.safe_load((example / "crd.yaml").read_text())
    (v1,) = crd["spec"]["versions"]
    crd["spec"]["versions"] = [v1, {**v1, "name": "v1alpha1", "storage": False}]
    kube.install_crd(api, crd)
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    parents, pods = "/apis/example.com/{}/namespaces/default/helloworlds", "/api/v1/namespaces/default/pods"
    names = [f"gone-{i}" for i in range(20)]

    def served(on: bool) -> None:
        patch = [{"op": "replace", "path": "/spec/versions/0/served", "value": on}]
        kube.request(api, "PATCH", crd_path, patch, content_type="application/json-patch+json")

    with ControllerProcess(cp.kubeconfig, policies=[example], controllers=[example / "controller.yaml"],
                           log_level="info") as ctl:  # fmt: skip
        for name in names:
            kube.create(api, parents.format("v1"), {"apiVersion": "example.com/v1", "kind": "HelloWorld",
                                                   "metadata": {"name": name}, "spec": {}})  # fmt: skip
        until(lambda: all(kube.exists(api, f"{pods}/{n}") for n in names), 60)
        assert ctl.proc is not None
        ctl.proc.send_signal(signal.SIGSTOP)
        try:
            controlplane.restart_apiserver(cp, 0.0)  # the controller's watches die with nothing buffered for it
            since = len(controlplane.audit_writes(cp))
            served(False)  # the parent informer held back after the resume: its relists fail
            for name in names:
                kube.delete(api, f"{parents.format('v1alpha1')}/{name}")
                with contextlib.suppress(ApiException):
                    kube.delete(api, f"{pods}/{name}")
            controlplane.restart_apiserver(cp, 1.0, lambda: kube.compact_etcd(cp.etcd_url))
        finally:
            ctl.proc.send_signal(signal.SIGCONT)
        # the Pods' informer relists and re-queues the deleted parents, still in the parent cache
        until(lambda: sum(created(cp, since, "pods", "default")[n] for n in names)
              + metric(ctl, "regokite_controller_parent_confirmations_total") >= len(names), 60)  # fmt: skip
        served(True)
        t0 = time.monotonic()
        ok = until(lambda: kube.get(api, parents.format("v1"))["items"] == [] and ctl.readiness()["ready"], 60)
        spurious = sum(created(cp, since, "pods", "default")[n] for n in names)
        note = f"Pods created for deleted parents (audit log); {confirmations(ctl)}"
    return Outcome("stale-parent", None if ok is None else time.monotonic() - t0, 0, spurious, note)


def fanout_state(api: Api, ns: str, n: int) -> tuple[int, int]:
    """(children missing, children beyond 3 per parent) in `ns`."""
    cms = kube.get(api, f"/api/v1/namespaces/{ns}/configmaps")["items"]
    per: dict[str, int] = {}
    for c in cms:
        for ref in c["metadata"].get("ownerReferences") or []:
            per[ref["name"]] = per.get(ref["name"], 0) + 1
    missing = sum(max(0, 3 - per.get(f"p{i}", 0)) for i in range(n))
    return missing, sum(max(0, k - 3) for k in per.values())


def converged(api: Api, ns: str, n: int) -> bool:
    ps = kube.get(api, f"/apis/example.com/v1/namespaces/{ns}/fanouts")["items"]
    done = sum(1 for p in ps if (p.get("status") or {}).get("configMaps") == 3)
    return done == n and fanout_state(api, ns, n) == (0, 0)


def create_parents(api: Api, ns: str, n: int) -> None:
    """Create p0..p{n-1}, retrying each through an outage."""
    for i in range(n):
        while True:
            try:
                kube.create(api, f"/apis/example.com/v1/namespaces/{ns}/fanouts", parent(ns, f"p{i}"))
                break
            except ApiException as exc:
                if exc.status == 409:
                    break
                time.sleep(0.2)
            except Exception:
                time.sleep(0.2)


def under_load(cp: Any, api: Api, tmp: Path, n: int, drill: str) -> Outcome:
    ns = drill
    make_namespace(api, ns)
    since = len(controlplane.audit_writes(cp))
    args = {"policies": [tmp / "policies"], "controllers": [tmp / "controller.yaml"], "namespace": ns, "workers": 8}
    ctl = ControllerProcess(cp.kubeconfig, **args, log_level="info").__enter__()
    try:
        creator = threading.Thread(target=create_parents, args=(api, ns, n), daemon=True)
        creator.start()
        time.sleep(1.0)  # mid-convergence
        if drill == "apiserver-restart":
            controlplane.restart_apiserver(cp, 2.0, lambda: kube.compact_etcd(cp.etcd_url))
        else:
            assert ctl.proc is not None
            ctl.proc.send_signal(signal.SIGKILL)
            ctl.proc.wait()
            ctl = ControllerProcess(cp.kubeconfig, **args, log_level="info").__enter__()
        t0 = time.monotonic()
        creator.join(120)
        ok = until(lambda: converged(api, ns, n), 120)
        recovered = None if ok is None else time.monotonic() - t0
        wanted = {f"p{i}-{j}" for i in range(n) for j in range(3)}
        made = created(cp, since, "configmaps", ns)
        duplicated = sum(count - 1 for name, count in made.items() if name in wanted)
        spurious = sum(made[name] for name in set(made) - wanted - {"kube-root-ca.crt"})
        spurious += deleted_by_clients(cp, since, "configmaps", ns)
        missing, extra = fanout_state(api, ns, n)
        # a write in flight when the API server is killed can be stored without its audit event
        unaudited = len(wanted - set(made)) - missing
        note = f"{n} parents x 3; final state: {extra} extra; {unaudited} creates unaudited; {confirmations(ctl)}"
        return Outcome(drill, recovered, missing, max(spurious, extra), note, duplicated)
    finally:
        ctl.stop()


def etcd_outage(cp: Any, api: Api, tmp: Path, kill: bool) -> Outcome:
    """Admission under load while etcd is frozen (SIGSTOP) or killed, for 10 s; then etcd back."""
    import httpx

    from tests.admission.reviews import deployment, review
    from tests.admission.server import admission_server

    name = "etcd-kill" if kill else "etcd-freeze"
    policies, run = tmp / f"{name}-policies", tmp / f"{name}-run"
    policies.mkdir()
    run.mkdir()
    (policies / "reads.rego").write_text(
        'package admission.reads\n\nmatch := {"rules": [{"apiGroups": ["apps"], "resources": ["deployments"]}]}\n\n'
        'replicate := {"cluster": ["v1/namespaces"]}\n\n'
        'deny contains "no such namespace" if not data.kubernetes.namespaces[input.request.namespace]\n'
    )

    def reviewed(namespace: str) -> dict:
        body = review(deployment("web"))
        body["request"]["namespace"] = namespace
        return body

    answered = failed = 0
    with admission_server(policies, run, "--kubeconfig", str(cp.kubeconfig)) as server, server.client() as http:

        def load() -> None:
            nonlocal answered, failed
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                try:
                    ok = http.post("/validate", json=reviewed("default")).json()["response"]["allowed"]
                    answered += ok
                    failed += not ok
                except (httpx.HTTPError, KeyError, ValueError):
                    failed += 1

        if kill:
            controlplane.restart(cp, "etcd", 0.0, load)  # killed, 10 s of reviews, started again
        else:
            cp.procs["etcd"].send_signal(signal.SIGSTOP)
            try:
                load()
            finally:
                cp.procs["etcd"].send_signal(signal.SIGCONT)
        back = time.monotonic()
        fresh = kube.unique_name("after")

        def allowed_in_new_namespace() -> bool:
            with contextlib.suppress(ApiException):
                make_namespace(api, fresh)
            return http.post("/validate", json=reviewed(fresh)).json()["response"]["allowed"]

        ok = until(allowed_in_new_namespace, 120)
    note = f"{answered} reviews answered with the last data in 10 s; recovered: a new Namespace replicated"
    return Outcome(name, None if ok is None else time.monotonic() - back, failed, 0, note)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parents", type=int, default=100)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="regokite-drills-") as name:
        tmp = Path(name)
        with fanout_plane(tmp, CHILDREN + STATUS, audit=True) as (cp, api):
            drills: dict[str, Callable[[], list[Outcome]]] = {
                "broken-template": lambda: [broken_template(cp, api, tmp)],
                "audit": lambda: audit_drills(cp, api, tmp),
                "stale-parent": lambda: [stale_parent(cp, api)],
                "apiserver-restart": lambda: [under_load(cp, api, tmp, args.parents, "apiserver-restart")],
                "sigkill": lambda: [under_load(cp, api, tmp, args.parents, "sigkill")],
                "etcd-freeze": lambda: [etcd_outage(cp, api, tmp, kill=False)],
                "etcd-kill": lambda: [etcd_outage(cp, api, tmp, kill=True)],
            }
            for key, drill in drills.items():
                if args.only and key not in args.only:
                    continue
                try:
                    outcomes += drill()
                except Exception as exc:  # a drill that breaks is a row, not the end of the table
                    outcomes.append(Outcome(key, None, -1, -1, f"drill failed: {type(exc).__name__}: {exc}"[:120], -1))
    print(f"{'drill':<18} {'recovered in':>13} {'lost':>5} {'duplicated':>10} {'spurious':>9}  note")
    for o in outcomes:
        rec = "-" if o.recovered is None else f"{o.recovered:9.1f} s"
        print(f"{o.drill:<18} {rec:>13} {o.lost:>5} {o.duplicated:>10} {o.spurious:>9}  {o.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
