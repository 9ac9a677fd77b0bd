"""A local Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager).

Integration tests need a real API server (resourceVersions, watches, server-side
apply, status subresources, ownerReference GC, admission webhooks), and the only
source available here is Debian: ``etcd-server`` and the ``kubernetes`` source
package (v1.20.2), built with Debian's Go. This module builds those binaries once
(cached under ``~/.cache/regokite``) and starts/stops hermetic instances on random
loopback ports, for ``scripts/cluster`` and the pytest fixtures alike.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

K8S_VERSION = "1.20.2"
CACHE_DIR = Path(os.environ.get("REGOKITE_CACHE", Path.home() / ".cache" / "regokite"))
BIN_DIR = CACHE_DIR / "bin" / f"kubernetes-{K8S_VERSION}"
BUILD_DIR = CACHE_DIR / "build"
BINARIES = ("kube-apiserver", "kube-controller-manager")
ETCD = Path("/usr/bin/etcd")

RUNTIME_PACKAGES = ("etcd-server",)
BUILD_PACKAGES = ("dpkg-dev", "golang-go", "rsync", "make", "golang-github-modern-go-reflect2-dev")
DEB_SRC_FILE = Path("/etc/apt/sources.list.d/regokite-deb-src.sources")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
REFLECT2_DEBIAN = Path("/usr/share/gocode/src/github.com/modern-go/reflect2")
READY_STAMP = ".regokite-source-ready"
MIN_FREE_BYTES = 5 << 30  # unpacked source ~0.8 GB + go build cache ~1.4 GB + binaries


class ControlPlaneError(RuntimeError):
    """A build or start failed; the message carries the relevant log lines."""


def log(msg: str) -> None:
    """Progress goes to stderr so `cluster env` output stays eval-able."""
    print(f"[controlplane] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- apt


def _missing_packages(packages: Sequence[str]) -> list[str]:
    missing = []
    for pkg in packages:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(pkg)
    return missing


_apt_updated = False


def _apt_update() -> None:
    global _apt_updated
    if not _apt_updated:
        log("apt-get update")
        _run(["apt-get", "update", "-q"])
        _apt_updated = True


def ensure_packages(packages: Sequence[str]) -> None:
    """Install missing Debian packages non-interactively (CI starts from bare bookworm)."""
    missing = _missing_packages(packages)
    if not missing:
        return
    if os.geteuid() != 0:
        raise ControlPlaneError(f"missing packages {missing}; run as root or apt-get install them")
    _apt_update()
    log(f"apt-get install {' '.join(missing)}")
    _run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )


def _debian_mirror() -> str:
    """The mirror of the existing bookworm `main` entry, so deb-src matches deb."""
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        if f == DEB_SRC_FILE:
            continue
        for stanza in f.read_text().split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                key, sep, value = line.partition(":")
                if sep and not line.lstrip().startswith("#"):
                    fields[key.strip()] = value.strip()
            if "bookworm" in fields.get("Suites", "").split() and "deb" in fields.get("Types", "").split():
                return fields.get("URIs", DEFAULT_MIRROR).split()[0]
    return DEFAULT_MIRROR


def ensure_deb_src() -> None:
    """`apt-get source` needs a deb-src entry, which the base image lacks."""
    global _apt_updated
    if DEB_SRC_FILE.exists():
        return
    DEB_SRC_FILE.write_text(
        "Types: deb-src\n"
        f"URIs: {_debian_mirror()}\n"
        "Suites: bookworm\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    _apt_updated = False


# ------------------------------------------------------------------------- build


def _run(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    logfile: Path | None = None,
) -> None:
    """Run a command, streaming output; on failure raise with its last lines."""
    tail: list[str] = []
    started = last_output = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        # `go build` of kube-apiserver is silent for minutes; show it is alive.
        while not done.wait(15):
            if time.monotonic() - last_output >= 30:
                log(f"... still running: {' '.join(cmd)} ({time.monotonic() - started:.0f}s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    with subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        out = logfile.open("a") if logfile else None
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                last_output = time.monotonic()
                sys.stderr.write("    " + line)
                tail = [*tail[-39:], line]
                if out:
                    out.write(line)
        finally:
            done.set()
            if out:
                out.close()
    if proc.returncode != 0:
        raise ControlPlaneError(f"{' '.join(cmd)} exited {proc.returncode}:\n" + "".join(tail))


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive flock, so concurrent `cluster up`s or test sessions don't race."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def binaries_cached() -> bool:
    return all((BIN_DIR / b).is_file() for b in BINARIES)


def binary(name: str) -> Path:
    return BIN_DIR / name


def build(*, keep_source: bool = False) -> Path:
    """Build kube-apiserver and kube-controller-manager once; return the bin dir.

    The finished binaries appear under BIN_DIR only by an atomic rename, so an
    interrupted build never looks cached.
    """
    if binaries_cached() and not _missing_packages(RUNTIME_PACKAGES):
        return BIN_DIR
    # One builder (and one apt-get) at a time across concurrent sessions.
    with locked(CACHE_DIR / "build.lock"):
        ensure_packages(RUNTIME_PACKAGES)
        if binaries_cached():
            return BIN_DIR
        return _build(keep_source)


def _build(keep_source: bool) -> Path:
    t0 = time.monotonic()
    ensure_deb_src()
    ensure_packages(BUILD_PACKAGES)
    if not (DEB_SRC_FILE.exists() and _apt_updated):
        # A deb-src entry written by an earlier run may not be indexed yet.
        _apt_update()

    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(BUILD_DIR).free
    if free < MIN_FREE_BYTES and not _ready_source():
        raise ControlPlaneError(
            f"building needs ~{MIN_FREE_BYTES >> 30} GB free under {BUILD_DIR}, "
            f"only {free >> 30} GB left (set REGOKITE_CACHE elsewhere)"
        )
    src = _ready_source() or _fetch_source()
    gopath = src / ".go"
    link = gopath / "src" / "k8s.io" / "kubernetes"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(src)
    env = {
        **os.environ,
        "GOPATH": str(gopath),
        "CGO_ENABLED": "0",
        "GOFLAGS": "",
    }
    for name in BINARIES:
        log(f"building {name} (several minutes; output streams below)")
        _run(["make", f"WHAT=cmd/{name}"], cwd=link, env=env, logfile=BUILD_DIR / "build.log")

    out = src / "_output" / "bin"
    if not out.is_dir():
        out = src / "_output" / "local" / "bin" / "linux" / "amd64"
    BIN_DIR.parent.mkdir(parents=True, exist_ok=True)
    for leftover in BIN_DIR.parent.glob(f".{BIN_DIR.name}.*"):  # from a build killed mid-copy
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{BIN_DIR.name}.", dir=BIN_DIR.parent))
    tmp.chmod(0o755)
    for name in BINARIES:
        shutil.copy2(out / name, tmp / name)
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(BIN_DIR)
    tmp.rename(BIN_DIR)
    log(f"built {', '.join(BINARIES)} in {time.monotonic() - t0:.0f}s -> {BIN_DIR}")
    if not keep_source:
        shutil.rmtree(BUILD_DIR, ignore_errors=True)
    return BIN_DIR


def _ready_source() -> Path | None:
    """A source tree from an interrupted earlier build, if it was fully unpacked and patched;
    make and go resume incrementally from there."""
    for p in BUILD_DIR.glob("kubernetes-*"):
        if (p / READY_STAMP).exists():
            log(f"resuming with unpacked source {p}")
            return p
    return None


def _fetch_source() -> Path:
    """Unpack Debian's source from scratch (a half-unpacked tree is never trusted)."""
    for stale in BUILD_DIR.glob("kubernetes*"):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    log("apt-get source kubernetes")
    _run(["apt-get", "source", "-q", "kubernetes"], cwd=BUILD_DIR)
    found = [p for p in BUILD_DIR.glob("kubernetes-*") if p.is_dir()]
    if len(found) != 1:
        raise ControlPlaneError(f"apt-get source kubernetes left {found} in {BUILD_DIR}")
    src = found[0]
    m = re.search(r"really(\d+\.\d+\.\d+)", src.name)
    if not m or m.group(1) != K8S_VERSION:
        raise ControlPlaneError(f"expected kubernetes {K8S_VERSION}, got {src.name}")
    _patch_reflect2(src)
    (src / READY_STAMP).touch()
    return src


def _patch_reflect2(src: Path) -> None:
    """reflect2 1.0.1 segfaults under Go >= 1.18 (mapiterinit); use Debian's 1.0.2."""
    vendored = src / "vendor" / "github.com" / "modern-go" / "reflect2"
    if not REFLECT2_DEBIAN.is_dir():
        raise ControlPlaneError(f"{REFLECT2_DEBIAN} missing (golang-github-modern-go-reflect2-dev)")
    shutil.rmtree(vendored, ignore_errors=True)
    shutil.copytree(REFLECT2_DEBIAN, vendored, symlinks=False)
    log(f"replaced vendored reflect2 with {REFLECT2_DEBIAN}")


# ------------------------------------------------------------------------- start


SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
ADMIN_USER = "regokite-admin"
KCM_USER = "system:kube-controller-manager"
# Controllers the tests rely on: GC (ownerReferences), namespace deletion, default
# service accounts; workload controllers so policies' Deployment/Job children behave.
KCM_CONTROLLERS = (
    "garbagecollector,namespace,serviceaccount,serviceaccount-token,root-ca-cert-publisher,"
    "deployment,replicaset,statefulset,daemonset,job,cronjob,endpoint,endpointslice"
)


@dataclass
class ControlPlane:
    """A running control plane: where it listens and how to authenticate to it."""

    state_dir: Path
    server: str
    ca_file: Path
    token: str
    kubeconfig: Path
    etcd_url: str
    pids: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log of writes (started with `audit=True`): one JSON event a line."""
        return self.log_dir / "audit.log"

    def env(self) -> dict[str, str]:
        """Environment for child processes (kubectl, regokite) to reach this cluster."""
        return {"KUBECONFIG": str(self.kubeconfig)}

    def to_json(self) -> str:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "procs"}
        return json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in d.items()})

    @classmethod
    def from_json(cls, text: str) -> ControlPlane:
        d = json.loads(text)
        for k in ("state_dir", "ca_file", "kubeconfig"):
            d[k] = Path(d[k])
        return cls(**d)

    def stop(self, timeout: float = 15.0) -> None:
        stop(self, timeout=timeout)


def free_port() -> int:
    """A port the kernel just handed out; a tiny race remains, start() retries on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent() -> None:
    """Children of a test session die with it, even if pytest is SIGKILLed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _spawn(name: str, argv: Sequence[str], log_dir: Path, *, tie_to_parent: bool) -> subprocess.Popen[bytes]:
    out = (log_dir / f"{name}.log").open("ab")
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent if tie_to_parent else None,
        )
    finally:
        out.close()


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _get(url: str, ctx: ssl.SSLContext | None = None, token: str | None = None) -> str:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
        return resp.read().decode()


def _wait_http(
    what: str,
    url: str,
    proc: subprocess.Popen[bytes],
    logfile: Path,
    timeout: float,
    ctx: ssl.SSLContext | None = None,
    token: str | None = None,
    healthy: Callable[[str], bool] = lambda body: body.strip() == "ok",
) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ControlPlaneError(
                f"{what} exited with {proc.returncode} during startup; last log lines ({logfile}):\n{log_tail(logfile)}"
            )
        try:
            body = _get(url, ctx, token)
            if healthy(body):
                return
            last = body.strip()[-500:]
        except (OSError, urllib.error.URLError) as e:
            last = str(e)
        time.sleep(0.1)
    raise ControlPlaneError(
        f"{what} not ready at {url} after {timeout:.0f}s (last error: {last}); last log lines "
        f"({logfile}):\n{log_tail(logfile)}"
    )


def _write_pki(pki: Path) -> None:
    # Imported here so `cluster build` runs on a bare Python without `cryptography`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from regokite.ops.tls import issue, new_ca, new_key, pem, private_pem, public_pem

    pki.mkdir(parents=True, exist_ok=True)
    ca = new_ca("regokite-test-ca")
    (pki / "ca.crt").write_bytes(pem(ca[0]))
    crt, key = issue(
        ca,
        (
            "127.0.0.1",
            "::1",
            SERVICE_IP,
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        "kube-apiserver",
    )
    (pki / "apiserver.crt").write_bytes(crt)
    (pki / "apiserver.key").write_bytes(key)
    (pki / "apiserver.key").chmod(0o600)
    sa = new_key()
    (pki / "sa.key").write_bytes(private_pem(sa))
    (pki / "sa.key").chmod(0o600)
    (pki / "sa.pub").write_bytes(public_pem(sa))


def write_kubeconfig(path: Path, server: str, ca_file: Path, token: str, user: str) -> None:
    """Self-contained (CA embedded), so the file can be copied or mounted elsewhere."""
    ca_data = base64.b64encode(ca_file.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "regokite",
                "cluster": {"server": server, "certificate-authority-data": ca_data},
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "regokite", "context": {"cluster": "regokite", "user": user}}],
        "current-context": "regokite",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is valid YAML
    path.chmod(0o600)


def start(
    state_dir: Path,
    *,
    tie_to_parent: bool = True,
    timeout: float = 90.0,
    extra_apiserver_args: Sequence[str] = (),
    audit: bool = False,
) -> ControlPlane:
    """Start etcd, kube-apiserver and kube-controller-manager on random loopback ports.

    Everything (data, certs, logs, kubeconfig) lives in `state_dir`, so instances
    are hermetic and several can run at once. Builds the binaries first if needed.
    Retries with fresh ports if one was taken between choosing and binding it.
    With `audit`, the API server logs every write it answers to `cp.audit_log`
    (`audit_writes` reads it): what a client wrote, counted by the server.
    """
    build()
    for attempt in range(3):
        try:
            args = [*extra_apiserver_args, *(_audit_args(state_dir.resolve()) if audit else ())]
            return _start_once(state_dir, tie_to_parent, timeout, args)
        except ControlPlaneError as e:
            if "address already in use" not in str(e) or attempt == 2:
                raise
            log("port collision, retrying with new ports")
    raise AssertionError("unreachable")


def _start_once(
    state_dir: Path, tie_to_parent: bool, timeout: float, extra_apiserver_args: Sequence[str]
) -> ControlPlane:
    state_dir = state_dir.resolve()
    if state_dir.exists():
        shutil.rmtree(state_dir)
    logs, pki, data = state_dir / "logs", state_dir / "pki", state_dir / "etcd"
    for d in (logs, pki):
        d.mkdir(parents=True)
    if _audit_args(state_dir)[0] in extra_apiserver_args:
        (state_dir / "audit-policy.yaml").write_text(AUDIT_POLICY)
    data.mkdir(mode=0o700)
    _write_pki(pki)
    admin_token, kcm_token = secrets.token_hex(16), secrets.token_hex(16)
    tokens = state_dir / "tokens.csv"
    tokens.write_text(
        f'{admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
        # KCM without per-controller service accounts acts with its own identity;
        # GC must be able to delete any kind, so it gets full access too.
        f'{kcm_token},{KCM_USER},{KCM_USER},"system:masters"\n'
    )
    tokens.chmod(0o600)

    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    server = f"https://127.0.0.1:{api_port}"
    cp = ControlPlane(
        state_dir=state_dir,
        server=server,
        ca_file=pki / "ca.crt",
        token=admin_token,
        kubeconfig=state_dir / "kubeconfig",
        etcd_url=etcd_url,
    )
    try:
        t0 = time.monotonic()
        cp.procs["etcd"] = _spawn(
            "etcd",
            [
                str(ETCD),
                "--name=regokite",
                f"--data-dir={data}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=regokite=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",  # test data; fsync dominates start and write latency
                # A single member elects itself after one election timeout (default 1 s).
                "--heartbeat-interval=10",
                "--election-timeout=100",
                "--log-level=warn",
                "--logger=zap",
            ],
            logs,
            tie_to_parent=tie_to_parent,
        )
        _wait_http(
            "etcd",
            f"{etcd_url}/health",
            cp.procs["etcd"],
            logs / "etcd.log",
            timeout,
            healthy=lambda body: json.loads(body).get("health") == "true",
        )

        cp.procs["kube-apiserver"] = _spawn(
            "kube-apiserver",
            [
                str(binary("kube-apiserver")),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--insecure-port=0",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # A loopback address must not be published as the `kubernetes` endpoint.
                "--endpoint-reconciler-type=none",
                # as kubeadm clusters: privileged Pods are the admission policies' to refuse
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
                *extra_apiserver_args,
            ],
            logs,
            tie_to_parent=tie_to_parent,
        )
        t_etcd = time.monotonic()
        ctx = ssl.create_default_context(cafile=str(cp.ca_file))
        _wait_http(
            "kube-apiserver",
            f"{server}/readyz",
            cp.procs["kube-apiserver"],
            logs / "kube-apiserver.log",
            timeout,
            ctx,
            admin_token,
        )
        t_api = time.monotonic()
        write_kubeconfig(cp.kubeconfig, server, cp.ca_file, admin_token, ADMIN_USER)
        kcm_kubeconfig = state_dir / "kube-controller-manager.kubeconfig"
        write_kubeconfig(kcm_kubeconfig, server, cp.ca_file, kcm_token, KCM_USER)
        cp.procs["kube-controller-manager"] = _spawn(
            "kube-controller-manager",
            [
                str(binary("kube-controller-manager")),
                f"--kubeconfig={kcm_kubeconfig}",
                f"--controllers={KCM_CONTROLLERS}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={cp.ca_file}",
                "--leader-elect=false",
                "--port=0",
                "--secure-port=0",
                "--v=1",
            ],
            logs,
            tie_to_parent=tie_to_parent,
        )
        _wait_controllers(cp, ctx, timeout)
        cp.pids = {name: p.pid for name, p in cp.procs.items()}
        (state_dir / "state.json").write_text(cp.to_json())
        t_end = time.monotonic()
        log(
            f"control plane ready at {server} in {t_end - t0:.1f}s (etcd {t_etcd - t0:.1f}s, "
            f"kube-apiserver {t_api - t_etcd:.1f}s, kube-controller-manager {t_end - t_api:.1f}s)"
        )
        return cp
    except BaseException:
        _terminate(list(cp.procs.values()), 5.0)
        raise


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
"""


def _audit_args(state_dir: Path) -> list[str]:
    """kube-apiserver's flags for an audit log of writes (the policy is written when the flags are used)."""
    policy = state_dir / "audit-policy.yaml"
    return [f"--audit-policy-file={policy}", f"--audit-log-path={state_dir / 'logs' / 'audit.log'}"]


def audit_writes(cp: ControlPlane) -> list[dict]:
    """The writes the API server answered (ResponseComplete audit events), oldest first; [] without audit."""
    if not cp.audit_log.exists():
        return []
    events = []
    for line in cp.audit_log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("stage") == "ResponseComplete":
                events.append(event)
    return events


def restart(
    cp: ControlPlane,
    name: str,
    down: float = 0.0,
    while_down: Callable[[], object] | None = None,
    timeout: float = 90.0,
) -> None:
    """Kill `name` (SIGKILL: no drain, connections reset), run `while_down`, wait `down` seconds, start it
    again with the same command line (same port, same data) and wait until it is ready (etcd healthy,
    or the API server ready)."""
    proc = cp.procs[name]
    argv = list(proc.args)  # type: ignore[arg-type]
    proc.kill()
    proc.wait(15)
    if while_down:
        while_down()
    time.sleep(down)
    cp.procs[name] = _spawn(name, argv, cp.log_dir, tie_to_parent=True)
    cp.pids[name] = cp.procs[name].pid
    deadline = time.monotonic() + timeout
    while not (_etcd_healthy(cp) if name == "etcd" else ready(cp)):
        if cp.procs[name].poll() is not None or time.monotonic() > deadline:
            raise ControlPlaneError(f"{name} did not come back:\n{log_tail(cp.log_dir / f'{name}.log')}")
        time.sleep(0.1)


def _etcd_healthy(cp: ControlPlane) -> bool:
    try:
        return json.loads(_get(f"{cp.etcd_url}/health")).get("health") == "true"
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _wait_controllers(cp: ControlPlane, ctx: ssl.SSLContext, timeout: float) -> None:
    """KCM has no port here; its serviceaccount controller creating `default` proves it runs."""
    proc, logfile = cp.procs["kube-controller-manager"], cp.log_dir / "kube-controller-manager.log"
    url = f"{cp.server}/api/v1/namespaces/default/serviceaccounts/default"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ControlPlaneError(
                f"kube-controller-manager exited with {proc.returncode} during startup; last "
                f"log lines ({logfile}):\n{log_tail(logfile)}"
            )
        with contextlib.suppress(OSError, urllib.error.URLError):
            _get(url, ctx, cp.token)
            return
        time.sleep(0.1)
    raise ControlPlaneError(
        f"kube-controller-manager did not create serviceaccount default/default within "
        f"{timeout:.0f}s; last log lines ({logfile}):\n{log_tail(logfile)}"
    )


KUBELET_STANDIN = "kubelet-standin"


def start_kubelet_standin(
    cp: ControlPlane, nodes: int, *, tie_to_parent: bool = True, complete_after: float = 2.0
) -> subprocess.Popen[bytes]:
    """Start scripts/kubelet_standin.py for `cp` (its log beside the others); recorded in
    state.json so `stop` ends it first. Its argv names the state dir (the kubeconfig), which
    is how `stop` recognises it after a restart of this process."""
    proc = _spawn(
        KUBELET_STANDIN,
        [
            sys.executable,
            str(Path(__file__).resolve().with_name("kubelet_standin.py")),
            f"--kubeconfig={cp.kubeconfig}",
            f"--nodes={nodes}",
            f"--complete-after={complete_after}",
        ],
        cp.log_dir,
        tie_to_parent=tie_to_parent,
    )
    cp.procs[KUBELET_STANDIN] = proc
    cp.pids[KUBELET_STANDIN] = proc.pid
    (cp.state_dir / "state.json").write_text(cp.to_json())
    return proc


# -------------------------------------------------------------------------- stop


def _terminate(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _is_ours(pid: int, state_dir: Path) -> bool:
    """Guard against pid reuse: only signal processes whose argv names our state dir."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(state_dir) in cmdline


def stop(cp: ControlPlane, timeout: float = 15.0) -> None:
    """Stop in dependency order (kubelet stand-in, KCM, apiserver, etcd): SIGTERM, then SIGKILL on timeout."""
    order = (KUBELET_STANDIN, "kube-controller-manager", "kube-apiserver", "etcd")
    if cp.procs:
        _terminate([cp.procs[n] for n in order if n in cp.procs], timeout)
        return
    for name in order:  # a handle loaded from state.json: not our children
        pid = cp.pids.get(name)
        if pid is None or not _is_ours(pid, cp.state_dir):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _is_ours(pid, cp.state_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_ours(pid, cp.state_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def load(state_dir: Path) -> ControlPlane | None:
    try:
        return ControlPlane.from_json((state_dir / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError, TypeError, KeyError):
        return None


def running(cp: ControlPlane) -> dict[str, bool]:
    return {name: _is_ours(pid, cp.state_dir) for name, pid in cp.pids.items()}


def restart_apiserver(
    cp: ControlPlane, down_seconds: float, while_down: Callable[[], object] | None = None, timeout: float = 60.0
) -> None:
    """Kill kube-apiserver (abrupt: connections reset, no graceful drain of watches), run `while_down`
    (compact etcd's history, start a client into the outage), then start it again on the same port and
    etcd and wait until it is ready. The fault drills and the restart tests share it."""
    restart(cp, "kube-apiserver", down_seconds, while_down, timeout)


def ready(cp: ControlPlane) -> bool:
    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    try:
        return _get(f"{cp.server}/readyz", ctx, cp.token).strip() == "ok"
    except (OSError, urllib.error.URLError):
        return False
