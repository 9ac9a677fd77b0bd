"""`regokite check`: manifests through the admission policies offline, with the input as cluster data."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from regokite.cli import main

POLICIES = str(Path(__file__).resolve().parents[1] / "policies")

INGRESSES = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: web}
spec: {rules: [{host: shop.example.com}]}
---
# a comment-only document is skipped
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop-copy}
spec: {rules: [{host: shop.example.com}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: blog, namespace: web, creationTimestamp: 2025-01-01}
spec: {rules: [{host: blog.example.com}]}
"""

RESTRICTED = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: locked, labels: {app.kubernetes.io/name: web, owner: a}}
spec:
  containers:
  - {name: web, image: registry.k8s.io/pause:3.9, resources: {limits: {cpu: 100m, memory: 64Mi}}}
"""

NAMESPACES = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "locked", "labels": {"regokite.io/tier": "restricted"}},
        }
    ],
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", "--policies", POLICIES, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_violation_is_one_line_naming_file_document_and_object(tmp_path: Path, capsys) -> None:
    manifests = tmp_path / "ingresses.yaml"
    manifests.write_text(INGRESSES)
    code, out, _ = run(capsys, "-f", str(manifests), "--namespace", "web")
    assert code == 1
    lines = out.splitlines()
    assert lines[:2] == [
        f'FAIL - {manifests}[0] - Ingress/web/shop - [admission.unique_ingress_host] host "shop.example.com"'
        " is already served by Ingress web/shop-copy: choose another host",
        f'FAIL - {manifests}[2] - Ingress/web/shop-copy - [admission.unique_ingress_host] host "shop.example.com"'
        " is already served by Ingress web/shop: choose another host",
    ]
    assert lines[-1] == "3 objects, 1 allowed, 2 refused (2 failures, 0 warnings)"


def test_clean_input_exits_zero(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.yaml").write_text(INGRESSES.split("---")[0])
    (tmp_path / "notes.txt").write_text("not a manifest")
    code, out, _ = run(capsys, "-f", str(tmp_path))
    assert (code, out.strip()) == (0, "1 objects, 1 allowed, 0 refused (0 failures, 0 warnings)")


def test_data_files_are_cluster_state_read_by_policies(tmp_path: Path, capsys, monkeypatch) -> None:
    existing = tmp_path / "namespaces.json"
    existing.write_text(json.dumps(NAMESPACES))
    monkeypatch.setattr("sys.stdin", io.StringIO(RESTRICTED))
    code, out, _ = run(capsys, "-f", "-", "--data", str(existing), "--format", "json")
    report = json.loads(out)
    assert code == 1
    [pod] = report["objects"]
    assert (pod["file"], pod["document"], pod["kind"], pod["namespace"], pod["name"]) == (
        "<stdin>",
        0,
        "Pod",
        "locked",
        "web",
    )
    assert all(f.startswith("[admission.restricted_namespaces] ") for f in pod["failures"])
    assert len(pod["failures"]) == 2
    assert report["summary"]["refused"] == 1
    monkeypatch.setattr("sys.stdin", io.StringIO(RESTRICTED))
    code, _, _ = run(capsys, "-f", "-")  # without the namespace's labels, nothing says it is restricted
    assert code == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "document 0: not a Kubernetes object (a list)"),
        ("kind: Pod\nmetadata: {name: x}\n", "document 0: not a Kubernetes object (needs apiVersion and kind)"),
        ("---\napiVersion: v1\nkind: Pod\nmetadata: {}\n", "document 0: Pod has no metadata.name"),
        ("a: [\n", "bad.yaml:2:1: not YAML or JSON"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {n: 18446744073709551621}\n",
            "document 0: object.data.n: ",
        ),
    ],
)
def test_bad_input_is_an_error_naming_file_and_document(tmp_path: Path, capsys, text: str, message: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    code, out, err = run(capsys, "-f", str(bad))
    assert code == 2 and out == ""
    assert message in err


HTTP_SEND_POLICY = """\
package admission.lookup

deny contains msg if {
\tinput.request.object.metadata.labels.lookup == "yes"
\tresp := http.send({"method": "GET", "url": "http://127.0.0.1:9/x"})
\tmsg := sprintf("lookup answered %v", [resp.status_code])
}
"""


def test_allow_http_send_lets_a_policy_calling_it_load(tmp_path: Path, capsys) -> None:
    """check takes --allow-http-send as the serving commands do: without it such a policy is refused,
    with it the policy loads (and decides: this Pod asks for no lookup, so nothing is sent)."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "lookup.rego").write_text(HTTP_SEND_POLICY)
    (tmp_path / "pod.yaml").write_text(RESTRICTED)
    argv = ["check", "--policies", str(tmp_path / "policies"), "-f", str(tmp_path / "pod.yaml")]
    assert main(argv) == 2
    assert "--allow-http-send" in capsys.readouterr().err
    assert main([*argv, "--allow-http-send", "127.0.0.1:9"]) == 0
