"""Helpers for tests that talk to a real API server (no mocks).

Plain dicts over the `kubernetes` ApiClient (`_preload_content=False`): the generated
model classes are slow and lossy for custom resources, and tests want to see exactly
what the server sent. Importable by any test module (controllers, admission server).
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from pprint import pformat
from typing import TYPE_CHECKING, Any, TypeVar

from kubernetes import client, config
from kubernetes.client.rest import ApiException

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from regokite import crd  # noqa: E402
from regokite.ops import tls  # noqa: E402
from tests.http_replies import reply as send_reply  # noqa: E402

if TYPE_CHECKING:
    from regokite.manifests.webhooks import WebhookTarget

T = TypeVar("T")
Obj = dict[str, Any]
TEST_NAMESPACE_LABEL = "regokite.dev/test-namespace"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


# ------------------------------------------------------------------- cluster access


@dataclass
class Cluster:
    """How a test reaches the API server; also what a regokite subprocess needs."""

    kubeconfig: Path
    server: str
    ca_file: Path | None
    token: str | None
    etcd_url: str | None = None  # None for an external cluster (REGOKITE_KUBECONFIG)

    @classmethod
    def of(cls, cp: Any) -> Cluster:
        """How to reach a control plane of scripts/controlplane.py (the session's or a test's private one)."""
        return cls(cp.kubeconfig, cp.server, cp.ca_file, cp.token, cp.etcd_url)

    def api_client(self) -> client.ApiClient:
        """A new ApiClient; each has its own connection pool, so threads may own one."""
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        return client.ApiClient(cfg)

    def env(self) -> dict[str, str]:
        """Environment for a subprocess (regokite, kubectl) to reach this cluster."""
        return {"KUBECONFIG": str(self.kubeconfig)}

    def ca_pem(self) -> bytes:
        """The API server's CA, e.g. for a client that takes a CA bundle, not a kubeconfig."""
        return self.ca_file.read_bytes() if self.ca_file else b""


def cluster_from_kubeconfig(path: Path) -> Cluster:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    token = (cfg.api_key.get("authorization") or "").removeprefix("Bearer ") or None
    return Cluster(
        kubeconfig=path,
        server=cfg.host,
        ca_file=Path(cfg.ssl_ca_cert) if cfg.ssl_ca_cert else None,
        token=token,
    )


# ------------------------------------------------------------------------ raw REST


def _raw(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float | None = None,
) -> Any:
    """Send one request through the client's auth and TLS; return the urllib3 response.

    Raises ApiException on a non-2xx status (with the server's Status body).
    """
    serialized = api.param_serialize(
        method.upper(),
        path,
        query_params=[(k, v) for k, v in query or [] if v is not None],
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(*serialized, _request_timeout=timeout)
    if not 200 <= resp.status <= 299:
        text = resp.read().decode(errors="replace")
        raise ApiException.from_response(http_resp=resp, body=text, data=None)
    return resp


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, Any] | None = None,
    content_type: str = "application/json",
) -> Obj:
    """One REST call, JSON in and out; raises ApiException on a non-2xx status."""
    resp = _raw(
        api,
        method,
        path,
        query=list((query or {}).items()),
        body=body,
        content_type=content_type,
        timeout=30,
    )
    data = resp.read()
    return json.loads(data) if data else {}


def get(api: client.ApiClient, path: str, **query: Any) -> Obj:
    return request(api, "GET", path, query=query)


def create(api: client.ApiClient, path: str, obj: Obj) -> Obj:
    return request(api, "POST", path, obj)


def delete(api: client.ApiClient, path: str, **query: Any) -> Obj:
    return request(api, "DELETE", path, query=query)


def apply(api: client.ApiClient, path: str, obj: Obj, manager: str, force: bool = False) -> Obj:
    """Server-side apply; `path` names the object (…/configmaps/NAME)."""
    return request(
        api,
        "PATCH",
        path,
        json.dumps(obj),
        query={"fieldManager": manager, "force": "true" if force else None},
        content_type="application/apply-patch+yaml",
    )


def merge_patch(api: client.ApiClient, path: str, patch: Obj) -> Obj:
    return request(api, "PATCH", path, patch, content_type="application/merge-patch+json")


def exists(api: client.ApiClient, path: str) -> bool:
    try:
        get(api, path)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def watch(
    api: client.ApiClient,
    path: str,
    *,
    resource_version: str | None = None,
    timeout_seconds: int = 10,
    **query: Any,
) -> Iterator[Obj]:
    """Raw watch events as dicts, ERROR events included (the client's Watch retries 410s)."""
    resp = _raw(
        api,
        "GET",
        path,
        query=[
            ("watch", "true"),
            ("timeoutSeconds", timeout_seconds),
            ("resourceVersion", resource_version),
            *query.items(),
        ],
        timeout=timeout_seconds + 10,
    )
    try:
        buf = b""
        for chunk in resp.response.stream(4096):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
    finally:
        resp.response.close()  # a half-read watch must not go back to the pool


def list_and_watch_requests(server: str, token: str, ca_file: Path, resource: str) -> dict[str, float]:
    """The API server's own count of LIST requests on `resource` so far (each page one) and of its
    open WATCHes on it, from its /metrics."""
    url = f"{server}/metrics"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(ca_file)), timeout=30) as r:
        text = r.read().decode()
    found = {"LIST": 0.0, "WATCH": 0.0}
    for line in text.splitlines():
        if f'resource="{resource}"' not in line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0]
        if name == "apiserver_request_total" and 'verb="LIST"' in line:
            found["LIST"] += float(line.rsplit(" ", 1)[1])
        elif name == "apiserver_longrunning_gauge" and 'verb="WATCH"' in line:
            found["WATCH"] += float(line.rsplit(" ", 1)[1])
    return found


def compact_etcd(etcd_url: str) -> int:
    """Compact etcd's history up to its current revision (etcd v3 JSON gateway); return it.

    kube-apiserver only compacts every 5 minutes; tests that need history to be gone
    do it themselves.
    """

    def post(path: str, body: Obj) -> Obj:
        req = urllib.request.Request(
            etcd_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.load(resp)

    revision = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


# -------------------------------------------------------------------------- waiting


class WaitTimeout(AssertionError):
    """A wait ran out; says what was awaited and the last state seen."""


def wait_for(
    probe: Callable[[], T],
    until: Callable[[T], bool] = bool,
    *,
    what: str,
    timeout: float = 30.0,
    interval: float = 0.2,
) -> T:
    """Poll `probe` until `until(result)`; return that result.

    An exception from `probe` counts as "not yet" (e.g. 404 before creation) and is
    reported as the last state if time runs out.
    """
    deadline = time.monotonic() + timeout
    last: Any = "(never probed)"
    while True:
        try:
            last = probe()
            if until(last):
                return last
        except ApiException as e:
            last = f"ApiException {e.status} {e.reason}: {(e.body or '')[:500]}"
        except Exception as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; last seen:\n{pformat(last)}")
        time.sleep(interval)


def condition(obj: Obj, type_: str) -> Obj | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def has_condition(type_: str, status: str = "True") -> Callable[[Obj], bool]:
    def check(obj: Obj) -> bool:
        c = condition(obj, type_)
        return c is not None and c.get("status") == status

    return check


def wait_for_condition(
    api: client.ApiClient, path: str, type_: str, status: str = "True", timeout: float = 30.0
) -> Obj:
    return wait_for(
        lambda: get(api, path),
        has_condition(type_, status),
        what=f"condition {type_}={status} on {path}",
        timeout=timeout,
    )


def wait_for_deletion(api: client.ApiClient, path: str, timeout: float = 30.0) -> None:
    wait_for(lambda: not exists(api, path), what=f"{path} to be gone (404)", timeout=timeout)


# ----------------------------------------------------------------------------- CRDs


def crd_manifest(
    group: str,
    kind: str,
    *,
    plural: str | None = None,
    version: str = "v1",
    scope: str = "Namespaced",
    schema: Obj | None = None,
    status_subresource: bool = True,
) -> Obj:
    """A minimal CRD; the default schema keeps any fields, status has its own subresource."""
    plural = plural or kind.lower() + "s"
    schema = schema or {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    ver: Obj = {"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if status_subresource:
        ver["subresources"] = {"status": {}}
    return crd.document(group, crd.spec_names(kind, plural), scope, [ver])


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def install_crd(api: client.ApiClient, crd: Obj, timeout: float = 30.0) -> Obj:
    """Apply a CRD and wait until it is Established and its resource is being served."""
    name = crd["metadata"]["name"]
    apply(api, f"{CRD_PATH}/{name}", crd, manager="regokite-tests", force=True)
    established = wait_for_condition(api, f"{CRD_PATH}/{name}", "Established", timeout=timeout)
    group = crd["spec"]["group"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
    plural = crd["spec"]["names"]["plural"]
    wait_for(
        lambda: get(api, f"/apis/{group}/{version}"),
        lambda d: any(r["name"] == plural for r in d.get("resources", [])),
        what=f"{group}/{version} discovery to list {plural}",
        timeout=timeout,
    )
    return established


def uninstall_crd(api: client.ApiClient, name: str, wait: bool = False) -> None:
    try:
        delete(api, f"{CRD_PATH}/{name}")
    except ApiException as e:
        if e.status != 404:
            raise
    if wait:
        wait_for_deletion(api, f"{CRD_PATH}/{name}")


def helloworlds(namespace: str) -> str:
    """The path of `namespace`'s HelloWorlds: Metacontroller's hello_world CRD (the hello_crd fixture)."""
    return f"/apis/example.com/v1/namespaces/{namespace}/helloworlds"


def hello_world(name: str, who: str = "Ada", **metadata: Any) -> Obj:
    """A HelloWorld greeting `who`; `metadata`: the rest of its metadata (namespace, labels)."""
    return {
        "apiVersion": "example.com/v1",
        "kind": "HelloWorld",
        "metadata": {"name": name, **metadata},
        "spec": {"who": who},
    }


def unique_name(prefix: str = "t") -> str:
    """DNS-1123 names that never collide across tests or reruns against one cluster."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ HTTPS test server


@dataclass
class HttpsJsonServer:
    """A threaded HTTPS server answering POSTed JSON by calling `handler(path, body)`.

    Serves a cert for 127.0.0.1 from its own CA (`ca_pem`, for a webhook's caBundle)
    and records every request in `requests`, so tests can assert the API server
    called it and with what.
    """

    handler: Callable[[str, Obj], Obj]
    requests: list[tuple[str, Obj]] = field(default_factory=list)
    ca_pem: bytes = b""
    port: int = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_bundle(self) -> str:
        """base64 of the CA, as `clientConfig.caBundle` wants it."""
        return base64.b64encode(self.ca_pem).decode()

    def __enter__(self) -> HttpsJsonServer:
        ca = tls.new_ca("regokite-test-webhook-ca")
        self.ca_pem = tls.pem(ca[0])
        crt, key = tls.issue(ca, ("127.0.0.1", "localhost"), "webhook")
        self._tmp = tempfile.TemporaryDirectory(prefix="regokite-webhook-")
        crt_file, key_file = Path(self._tmp.name, "tls.crt"), Path(self._tmp.name, "tls.key")
        crt_file.write_bytes(crt)
        key_file.write_bytes(key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt_file, key_file)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.requests.append((self.path, body))
                try:
                    reply, status = json.dumps(outer.handler(self.path, body)).encode(), 200
                except Exception as e:  # surface handler bugs as 500 + message
                    reply, status = str(e).encode(), 500
                send_reply(self, status, reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._tmp.cleanup()


def admission_response(review: Obj, allowed: bool, message: str = "", code: int = 403) -> Obj:
    """An AdmissionReview v1 reply to `review`."""
    response: Obj = {"uid": review["request"]["uid"], "allowed": allowed}
    if not allowed:
        response["status"] = {"code": code, "message": message}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def webhook_config(
    kind: str,
    name: str,
    url: str,
    ca: str,
    namespace: str,
    *,
    resource: tuple[str, str] = ("apps", "deployments"),
    review_versions: tuple[str, ...] = ("v1",),
) -> Obj:
    """A (Validating|Mutating)WebhookConfiguration of one webhook at `url` (trusting `ca`, base64 PEM) for
    CREATE and UPDATE of `resource` (group, plural; version v1) in the test's `namespace` only, failing closed."""
    group, plural = resource
    rule = {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": [plural]}
    webhook = {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [rule],
        "namespaceSelector": {"matchLabels": {TEST_NAMESPACE_LABEL: namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": list(review_versions),
        "timeoutSeconds": 5,
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [webhook],
    }


def admission_target(server: Any, name: str | None = None) -> WebhookTarget:
    """Where the API server calls a test's admission server (tests/admission/server.py's RunningServer), trusting
    its CA, as `regokite manifests` would name it (a unique name unless given)."""
    from regokite.manifests.webhooks import WebhookTarget

    ca = base64.b64encode(server.ca.read_bytes()).decode()
    return WebhookTarget(name or unique_name("rk"), "regokite-system", url=server.url, ca_bundle=ca)


def register_webhooks(api: client.ApiClient, path: str, config: Obj, selector: dict[str, str]) -> str:
    """Create a webhook configuration (at `path`: VALIDATING or MUTATING) whose every webhook sees only objects
    labelled `selector` (the test's own); returns its path, to delete afterwards."""
    for hook in config["webhooks"]:
        hook["objectSelector"] = {"matchLabels": selector}
    create(api, path, config)
    return f"{path}/{config['metadata']['name']}"


def register_policy_webhooks(api: client.ApiClient, policies: Path, server: Any, selector: dict[str, str]) -> str:
    """The ValidatingWebhookConfiguration `regokite manifests` makes of the policies under `policies`, calling
    `server` for objects labelled `selector` only; returns its path, to delete afterwards."""
    from regokite.admission.policies import load_policy_set
    from regokite.manifests.webhooks import webhook_configurations

    policy_set = load_policy_set([str(policies)])
    try:
        (config,) = webhook_configurations(list(policy_set.policies), admission_target(server))
    finally:
        policy_set.close()
    return register_webhooks(api, VALIDATING, config, selector)
