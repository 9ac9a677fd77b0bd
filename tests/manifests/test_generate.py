"""`regokite manifests`: complete, restricted, and consistent with what the policies declare."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from regokite.errors import RegokiteError
from regokite.manifests import generate, workloads

ROOT = Path(__file__).resolve().parents[2]
# The admission policies and their helpers (policies/ also holds controller and watch packages).
ADMISSION_ROOTS = [str(ROOT / "policies" / "admission"), str(ROOT / "policies" / "lib")]
POLICIES = ROOT / "policies"
HELLO = POLICIES / "controllers" / "hello_world"


def by_kind(objects: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objects}


def admission(**kw) -> list[dict]:
    return generate.admission_manifests(generate.AdmissionOptions(policies=ADMISSION_ROOTS, **kw))


def controller(**kw) -> list[dict]:
    opts = generate.ControllerOptions(policies=[str(HELLO)], controllers=[str(HELLO)], **kw)
    return generate.controller_manifests(opts)


def pod_spec(objects: list[dict]) -> dict:
    return by_kind(objects)["Deployment"]["spec"]["template"]["spec"]


def test_every_container_is_restricted() -> None:
    for objects in (admission(), admission(engine="opa"), controller(), controller(engine="opa")):
        spec = pod_spec(objects)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert c["resources"]["requests"] and c["resources"]["limits"]
            assert c["livenessProbe"] and c["readinessProbe"]
        mounts = {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert "/tmp" in mounts  # the only writable place


def test_the_policies_configmap_rebuilds_the_directory_tree() -> None:
    objects = admission()
    cm = by_kind(objects)["ConfigMap"]
    assert all(re.fullmatch(r"[-._a-zA-Z0-9]+", k) for k in cm["data"])
    volume = next(v for v in pod_spec(objects)["volumes"] if v["name"] == "policies")
    paths = {i["path"]: cm["data"][i["key"]] for i in volume["configMap"]["items"]}
    expected = workloads.bundle_files(ADMISSION_ROOTS)
    assert paths == dict(expected)
    assert "0/required_labels/required_labels.rego" in paths and "1/kubernetes.rego" in paths
    assert not any(p.endswith("_test.rego") for p in paths)


def test_admission_without_cluster_data_has_no_api_access() -> None:
    roots = [str(ROOT / "policies" / "admission" / "max_replicas"), str(ROOT / "policies" / "lib")]
    objects = generate.admission_manifests(generate.AdmissionOptions(policies=roots))
    kinds = [o["kind"] for o in objects]
    assert "ClusterRole" not in kinds and "Role" not in kinds
    assert by_kind(objects)["ServiceAccount"]["automountServiceAccountToken"] is False
    assert pod_spec(objects)["automountServiceAccountToken"] is False


def test_admission_reads_exactly_what_policies_declare_and_flags_add() -> None:
    objects = admission(replicate=["apps/v1/deployments"], replicate_cluster=["v1/nodes"])
    found = by_kind(objects)
    assert found["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces", "nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
    ]
    assert found["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "regokite-admission", "namespace": "regokite-system"}
    ]
    assert found["ServiceAccount"]["automountServiceAccountToken"] is True
    assert pod_spec(objects)["automountServiceAccountToken"] is True
    args = pod_spec(objects)["containers"][0]["args"]
    assert "--replicate" in args and args[args.index("--replicate") + 1] == "apps/v1/deployments"
    assert args[args.index("--replicate-cluster") + 1] == "v1/nodes"
    assert "Role" not in found


def test_admission_has_a_webhook_per_policy_with_a_placeholder_ca() -> None:
    objects = admission()
    kinds = [o["kind"] for o in objects]
    assert by_kind(objects)["PodDisruptionBudget"]["apiVersion"] == "policy/v1"
    validating = by_kind(objects)["ValidatingWebhookConfiguration"]
    for hook in validating["webhooks"]:
        assert hook["clientConfig"]["service"]["name"] == "regokite-admission"
        assert b"placeholder" in base64.b64decode(hook["clientConfig"]["caBundle"])
        assert hook["sideEffects"] == "None" and hook["timeoutSeconds"] == 5
    assert "MutatingWebhookConfiguration" in kinds


def test_cert_manager_injects_the_ca_instead_of_a_placeholder() -> None:
    objects = admission(cert_manager=True)
    found = by_kind(objects)
    cert = found["Certificate"]
    assert cert["spec"]["secretName"] == "regokite-admission-tls"
    assert "regokite-admission.regokite-system.svc" in cert["spec"]["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        config = found[kind]
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "regokite-system/regokite-admission"
        }
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])


def test_the_sidecar_overlay_runs_opa_on_loopback_and_regokite_pushes_to_it() -> None:
    spec = pod_spec(admission(engine="opa"))
    regokite, opa = spec["containers"]
    assert regokite["args"][regokite["args"].index("--engine") + 1] == "opa"
    assert regokite["args"][regokite["args"].index("--opa-url") + 1] == "http://127.0.0.1:8181"
    assert "--addr=127.0.0.1:8181" in opa["args"]
    assert "--v0-compatible" not in opa["args"]
    assert opa["livenessProbe"]["httpGet"]["path"] == "/health"
    assert "--v0-compatible" in workloads.opa_container(v0_compatible=True)["args"]
    assert "--v0-compatible" in generate._engine_args(generate.Common(engine="opa", v0_compatible=True))


def test_controller_runs_two_leader_elected_replicas_with_metrics_probes() -> None:
    objects = controller()
    deployment = by_kind(objects)["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    c = pod_spec(objects)["containers"][0]
    assert "--leader-elect" in c["args"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "PodDisruptionBudget" in by_kind(objects)
    assert "CustomResourceDefinition" in by_kind(objects)
    single = controller(leader_elect=False)
    assert by_kind(single)["Deployment"]["spec"]["replicas"] == 1
    assert "PodDisruptionBudget" not in by_kind(single)
    assert not any(o["kind"] == "Role" for o in single)


def test_controller_shards_every_replica_with_its_own_lease_rights() -> None:
    objects = controller(shards=True, replicas=3, name="fleet")
    assert by_kind(objects)["Deployment"]["spec"]["replicas"] == 3
    args = pod_spec(objects)["containers"][0]["args"]
    assert "--shards" in args and "--leader-elect" not in args
    assert args[args.index("--leader-election-name") + 1] == "fleet"  # the membership Leases' prefix
    env = {e["name"] for e in pod_spec(objects)["containers"][0]["env"]}
    assert {"POD_NAME", "POD_NAMESPACE"} <= env  # the identity and the Leases' namespace
    role = next(o for o in objects if o["kind"] == "Role")
    leases = [r for r in role["rules"] if r["resources"] == ["leases"]]
    assert leases == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    assert "PodDisruptionBudget" in by_kind(objects)


def test_yaml_output_loads_back_and_keeps_rego_readable() -> None:
    objects = admission()
    text = generate.to_yaml(objects, "header")
    assert text.startswith("# header\n")
    assert list(yaml.safe_load_all(text)) == objects
    rego = [k for o in objects if o["kind"] == "ConfigMap" for k in o.get("data") or {} if k.endswith(".rego")]
    assert rego  # the policies ship in a ConfigMap
    for key in rego:  # each a literal block: its lines as written, tabs and all, not one escaped string
        assert re.search(rf"^  {re.escape(key)}: \|[-+]?$", text, re.MULTILINE), key
    assert "\t" in text and "\\t" not in text and "\\n" not in text
    assert "&id" not in text


def test_the_command_prints_multi_document_yaml() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "regokite.cli",
            "manifests",
            "controller",
            "--policies",
            str(HELLO),
            "--controllers",
            str(HELLO),
            "--watch-namespace",
            "team-a",
            "--no-crds",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs if d["kind"] in ("Role", "ClusterRole")] == ["Role", "Role"]
    args = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--namespace") + 1] == "team-a"


def test_watches_get_their_resource_and_the_writes_named_for_their_policies() -> None:
    watches = POLICIES / "watches"
    opts = generate.ControllerOptions(
        policies=[str(watches)], controllers=[str(watches)], writes=["v1/resourcequotas", "v1/limitranges"]
    )
    objects = generate.controller_manifests(opts)
    rules = {
        (group, resource): set(rule["verbs"])
        for rule in by_kind(objects)["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert rules[("apps", "deployments")] == {"get", "list", "watch", "patch", "update"}
    assert rules[("", "namespaces")] == {"get", "list", "watch", "patch", "update"}
    assert {"create", "delete"} <= rules[("", "resourcequotas")]
    assert ("", "secrets") not in rules
    definitions = next(
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-definitions")
    )
    text = next(iter(definitions["data"].values()))
    assert "kind: Watch" in text and "name: deployment-scaler" in text


def test_a_controller_replicating_data_may_read_exactly_that_cluster_wide() -> None:
    objects = controller(replicate=["v1/configmaps"], replicate_cluster=["v1/namespaces"], watch_namespace="team")
    reads = [
        r
        for o in objects
        if o["kind"] == "ClusterRole"
        for r in o["rules"]
        if "configmaps" in r["resources"] or "namespaces" in r["resources"]
    ]
    assert {res for r in reads for res in r["resources"]} >= {"configmaps", "namespaces"}
    assert all(r["verbs"] == ["get", "list", "watch"] for r in reads)
    args = pod_spec(objects)["containers"][0]["args"]
    assert args[args.index("--replicate") + 1] == "v1/configmaps"
    assert args[args.index("--replicate-cluster") + 1] == "v1/namespaces"


def test_a_controller_running_the_clusters_definitions_may_read_them_and_write_their_status() -> None:
    opts = generate.ControllerOptions(policies=[str(HELLO)], watch_definitions=True, writes=["v1/pods"])
    objects = generate.controller_manifests(opts)
    rules = [r for o in objects if o["kind"] == "ClusterRole" for r in o["rules"]]
    granted = {(g, res): set(r["verbs"]) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    for plural in ("compositecontrollers", "decoratorcontrollers"):
        assert {"get", "list", "watch"} <= granted[("metacontroller.k8s.io", plural)]
        assert {"update", "patch"} <= granted[("metacontroller.k8s.io", f"{plural}/status")]
    args = pod_spec(objects)["containers"][0]["args"]
    assert "--watch-definitions" in args and "--controllers" not in args


def test_a_controller_following_configmap_policies_may_read_them_and_write_their_status_there() -> None:
    opts = generate.ControllerOptions(watch_definitions=True, policy_namespaces=["metacontroller", "team-a"])
    objects = generate.controller_manifests(opts)
    roles = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role" and "configmaps" in str(o)}
    assert sorted(roles) == ["metacontroller", "team-a"]
    for role in roles.values():
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}
        ]
    bound = {(o["metadata"]["namespace"], o["subjects"][0]["name"]) for o in objects if o["kind"] == "RoleBinding"}
    assert ("team-a", "regokite-controller") in bound
    args = pod_spec(objects)["containers"][0]["args"]
    assert args[:5] == ["controller", "--policy-namespaces", "metacontroller", "--policy-namespaces", "team-a"]
    assert args[5:7] == ["--policy-namespaces-dir", "/tmp/configmap-policies"]  # the emptyDir: kept on restarts
    assert "--policies" not in args and not any(
        o["kind"] == "ConfigMap" and "policies" in o["metadata"]["name"] for o in objects
    )

    everywhere = generate.controller_manifests(
        generate.ControllerOptions(watch_definitions=True, policy_namespaces=["*"])
    )
    [cluster_role] = [
        o for o in everywhere if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-policy-configmaps")
    ]
    assert cluster_role["rules"][0]["resources"] == ["configmaps"]


@pytest.mark.parametrize(
    "argv",
    [
        ["admission", "--policies", "policies/admission", "--policies", "policies/lib", "--replicate", "v1/services"],
        ["audit", "--policies", "policies/admission", "--policies", "policies/lib"],
        [
            "controller",
            "--policies",
            str(HELLO),
            "--controllers",
            str(HELLO / "controller.yaml"),
            "--replicate",
            "v1/configmaps",
        ],
        ["controller", "--policies", str(HELLO), "--writes", "v1/pods"],
        ["controller", "--policy-namespaces", "metacontroller", "--watch-definitions"],
        ["gatekeeper", "--replicate-cluster", "v1/namespaces"],
    ],
    ids=["admission", "audit", "controller", "controller-from-the-cluster", "controller-configmaps", "gatekeeper"],
)
def test_every_kind_of_manifests_is_printed_from_the_command_line(argv: list[str], capsys) -> None:
    from regokite.cli import main

    assert main(["manifests", *argv]) == 0
    assert "kind: Deployment" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--replicas", "--workers"])
def test_the_audit_manifests_refuse_replicas_and_workers_they_would_ignore(flag: str, capsys) -> None:
    """The audit runs one replica (one writer per report): a count asked for is refused, not dropped."""
    from regokite.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["manifests", "audit", "--policies", "policies/admission", flag, "3"])
    assert exited.value.code == 2
    assert f"unrecognized arguments: {flag} 3" in capsys.readouterr().err


def test_gatekeeper_runs_the_syncer_beside_the_server_with_one_webhook_for_everything() -> None:
    objects = generate.gatekeeper_manifests(generate.GatekeeperOptions(replicate_cluster=["v1/namespaces"]))
    spec = pod_spec(objects)
    syncer, server = spec["containers"]
    assert syncer["args"][:3] == ["gatekeeper", "--out", generate.GATEKEEPER_DIR]
    assert server["args"][:4] == ["admission", "--policies", generate.GATEKEEPER_DIR, "--shutdown-delay=10"]
    assert {m["name"] for m in syncer["volumeMounts"]} & {m["name"] for m in server["volumeMounts"]} >= {"gatekeeper"}
    [config] = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    hook, label = config["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == "/validate" and hook["failurePolicy"] == "Ignore"
    [rule] = hook["rules"]
    assert rule["operations"] == ["CREATE", "UPDATE"] and rule["apiGroups"] == ["*"]
    assert rule["resources"][0] == "*" and "pods/exec" in rule["resources"]  # `*` names no subresource
    # Gatekeeper's namespace-label webhook, failing closed
    assert label["clientConfig"]["service"]["path"] == "/v1/admitlabel" and label["failurePolicy"] == "Fail"
    assert label["rules"][0]["resources"] == ["namespaces"]
    # the chart's mutatingWebhookFailurePolicy (as its validatingWebhookFailurePolicy: Ignore; CheckIgnore: Fail)
    [mutating] = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    assert [(h["clientConfig"]["service"]["path"], h["failurePolicy"]) for h in mutating["webhooks"]] == [
        ("/mutate", "Ignore")
    ]
    rules = [r for o in objects if o["kind"] == "ClusterRole" for r in o["rules"]]
    assert {"apiGroups": ["constraints.gatekeeper.sh"], "resources": ["*"], "verbs": ["get", "list", "watch"]} in rules
    with pytest.raises(RegokiteError, match="embedded engine"):
        generate.gatekeeper_manifests(generate.GatekeeperOptions(engine="opa"))


def test_gatekeeper_webhook_validates_delete_and_connect_and_passes_the_exempt_namespaces_on() -> None:
    from regokite.cli import main

    objects = generate.gatekeeper_manifests(
        generate.GatekeeperOptions(operations=("CREATE", "UPDATE", "DELETE", "CONNECT"), exempt_namespaces=(
            "kube-system", "team-*", "*-sandbox")),
    )  # fmt: skip
    [config] = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    assert config["webhooks"][0]["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE", "CONNECT"]
    server = pod_spec(objects)["containers"][1]
    assert {
        "--exempt-namespace=kube-system",
        "--exempt-namespace-prefix=team-",
        "--exempt-namespace-suffix=-sandbox",
    } <= set(server["args"])
    assert main(["manifests", "gatekeeper", "--operation", "DELETE", "--exempt-namespace-prefix", "t-"]) == 0


def test_policy_sources_are_checked_at_apply_only_when_asked() -> None:
    """--policy-namespaces: the server follows those ConfigMaps (and may read and annotate them) and a webhook
    refuses at apply a policy or data ConfigMap there that would not load, selected by its label only (failing
    closed for those alone); --check-definitions: the same for controller definitions."""
    assert not any(o["metadata"]["name"].endswith("policy-sources") for o in admission())
    objects = admission(policy_namespaces=["team-a", "team-b"], check_definitions=True)
    [sources] = [o for o in objects if o["metadata"]["name"] == "regokite-policy-sources"]
    hooks = {h["name"].split(".")[0]: h for h in sources["webhooks"]}
    assert sorted(hooks) == ["data-configmaps", "definitions", "policy-configmaps"]
    assert hooks["policy-configmaps"]["objectSelector"] == {"matchLabels": {"openpolicyagent.org/policy": "rego"}}
    assert hooks["data-configmaps"]["objectSelector"] == {"matchLabels": {"openpolicyagent.org/data": "opa"}}
    for name in ("policy-configmaps", "data-configmaps"):
        assert hooks[name]["rules"][0]["resources"] == ["configmaps"]
        selected = hooks[name]["namespaceSelector"]["matchExpressions"]
        assert {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]} in selected
    assert [r["resources"] for r in hooks["definitions"]["rules"]] == [
        ["compositecontrollers", "decoratorcontrollers"],
        ["watches"],
    ]
    assert {h["failurePolicy"] for h in hooks.values()} == {"Fail"}
    assert {h["clientConfig"]["service"]["path"] for h in hooks.values()} == {"/v1/admitsource"}
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--policy-namespaces") + 1] == "team-a"
    roles = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("policy-configmaps")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    only_definitions = admission(check_definitions=True)
    [sources] = [o for o in only_definitions if o["metadata"]["name"] == "regokite-policy-sources"]
    assert [h["name"] for h in sources["webhooks"]] == ["definitions.regokite.regokite.dev"]
