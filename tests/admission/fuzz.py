"""Seeded hostile AdmissionReviews against a real `regokite admission`, and what must hold.

The classes are those of issue 14 (lone surrogates as escapes and as raw
bytes, integers beyond int64 and beyond 4,300 digits, NaN/Infinity, nesting
past the limit, UTF-16/32 and BOM bodies, odd shapes in the fields the
access log summarises, a client leaving mid-body, names with newlines that a
policy prints) plus random byte and structure mutations of valid reviews.
`run` sends them over HTTPS and checks: every answer a well-formed
AdmissionReview or a 4xx, no 5xx, no Traceback and no raw (non-JSON) line in
the server's log, the same workers before and after (no restarts), and the
workers' RSS after within 20 % of before. Used by tests/admission/test_fuzz.py
(small, in the suite) and `python -m bench.admission_fuzz` (10,000+).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import copy
import json
import random
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from regokite.input_guard import MAX_DEPTH
from tests.admission.reviews import deployment, review
from tests.admission.server import RunningServer, admission_server

ROOT = Path(__file__).resolve().parents[2]

# A policy that prints the object's name (a newline in it must not forge a log line)
# and one that mutates, beside the bundled policies/.
EXTRA = {
    "printer.rego": """package admission.printer

warn contains "printed" if {
	print("name:", input.request.object.metadata.name)
	input.request.object.metadata.labels.print == "yes"
}
""",
    "tagger.rego": """package admission.tagger

patch contains {"op": "add", "path": "/metadata/annotations", "value": {"tagged": "yes"}} if {
	not input.request.object.metadata.annotations
}
""",
}

ENDPOINTS = ("/validate", "/mutate", "/validate/admission.max-replicas", "/mutate/admission.tagger")
WEIRD: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    1.5,
    -0.0,
    1e308,
    "",
    "x\ny",
    "\u2028\u0000",
    "\U0001d11e caf\u00e9",
    [],
    {},
    [[]],
    {"a": {"b": None}},
    list(range(200)),
    "z" * 5000,
)


@dataclass
class Case:
    kind: str
    path: str
    body: bytes
    uid: str | None = None  # the uid an answer must echo, when the body carries a usable one
    disconnect: bool = False  # send the headers and part of the body, then close


def valid_doc(rng: random.Random) -> dict[str, Any]:
    name = rng.choice(["web", "api", "db", "bad\nname", "x" * 60, "caf\u00e9"])
    labels = rng.choice([None, {}, {"app": name[:10]}, {"print": "yes"}, {"owner": "t", "app.kubernetes.io/name": "w"}])
    obj = deployment(name, labels=labels, replicas=rng.choice([1, 3, 9, 0]))
    if rng.random() < 0.3:
        obj["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": rng.random() < 0.5}
    doc = review(obj, operation=rng.choice(["CREATE", "UPDATE"]), old=copy.deepcopy(obj))
    if rng.random() < 0.2:
        doc["apiVersion"] = "admission.k8s.io/v1beta1"
    return doc


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


def put(doc: Any, where: tuple, value: Any) -> Any:
    if not where:
        return value
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    return doc


def splice(doc: dict[str, Any], rng: random.Random, raw: str) -> bytes:
    """The document with the JSON text `raw` at a random place inside request.object."""
    where = rng.choice([p for p in paths(doc) if p[:2] == ("request", "object") and len(p) > 2])
    return dumps(put(doc, where, "@@SPLICE@@")).replace(b'"@@SPLICE@@"', raw.encode(), 1)


def nested(rng: random.Random, depth: int) -> str:
    opens = "".join(rng.choice(["[", '{"k":']) for _ in range(depth))
    return opens + "1" + "".join("]" if c == "[" else "}" for c in reversed(opens.replace('{"k":', "{")))


def uid_of(doc: Any) -> str | None:
    request = doc.get("request") if isinstance(doc, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else None


# ------------------------------------------------------------------- the classes


def surrogate(rng: random.Random, doc: dict) -> Case:
    escape = rng.choice(["\\ud800", "\\udfff", "x\\ud83dy", "\\ude00\\ud83d"])
    if rng.random() < 0.3:  # as an object key
        return Case("surrogate", "", splice(doc, rng, '{"' + escape + '": 1}'))
    return Case("surrogate", "", splice(doc, rng, f'"{escape}"'))


def surrogate_bytes(rng: random.Random, doc: dict) -> Case:
    body = splice(doc, rng, '"@@B@@"').replace(b"@@B@@", rng.choice([b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\xaf"]))
    return Case("surrogate-bytes", "", body)


def big_integer(rng: random.Random, doc: dict) -> Case:
    value = rng.choice([2**63, 2**64 + 5, 2 ** rng.randint(64, 300)]) * rng.choice([1, -1])
    value = value - 1 if value < 0 else value
    return Case("big-integer", "", splice(doc, rng, str(value)))


def huge_digits(rng: random.Random, doc: dict) -> Case:
    digits = rng.randint(4301, 30_000)
    return Case("4300-digits", "", splice(doc, rng, rng.choice(["", "-"]) + "7" * digits))


def non_finite(rng: random.Random, doc: dict) -> Case:
    return Case("non-finite", "", splice(doc, rng, rng.choice(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])))


def too_deep(rng: random.Random, doc: dict) -> Case:
    depth = rng.choice([MAX_DEPTH, MAX_DEPTH + 5, 500, 1000, 5000, rng.randint(100, 50_000)])
    return Case("too-deep", "", splice(doc, rng, nested(rng, depth)))


def deep_within_limit(rng: random.Random, doc: dict) -> Case:
    """Nesting the guard takes (the whole review at most MAX_DEPTH deep), under spec: /mutate must diff it."""
    doc["request"]["object"]["spec"]["deep"] = "@@SPLICE@@"
    body = dumps(doc).replace(b'"@@SPLICE@@"', nested(rng, MAX_DEPTH - 4).encode(), 1)
    return Case("deep-in-limit", rng.choice(["/mutate", "/validate"]), body, uid_of(doc))


def encoding(rng: random.Random, doc: dict) -> Case:
    text = json.dumps(doc)
    codec = rng.choice(["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "bom"])
    body = b"\xef\xbb\xbf" + text.encode() if codec == "bom" else text.encode(codec)
    return Case("encoding", "", body)


def odd_shape(rng: random.Random, doc: dict) -> Case:
    request = doc["request"]
    field_, value = rng.choice(
        [
            (("kind", "group"), rng.choice([5, ["apps"], {"g": 1}, True, None])),
            (("kind", "kind"), rng.choice([5, [], {}])),
            (("userInfo",), rng.choice([["alice"], "alice", 7, None, {"username": ["a"]}])),
            (("object", "metadata"), rng.choice([["web"], 7, "meta", None, True])),
            (("name",), rng.choice([12, ["n"], {"n": 1}])),
            (("namespace",), rng.choice([12, ["n"], {"n": 1}])),
            (("dryRun",), rng.choice(["yes", 1, [], None])),
            (("resource", "group"), rng.choice([5, [], None])),
            (("oldObject",), rng.choice([[1], "x", 5])),
            (("requestKind",), rng.choice([[1], "x"])),
        ]
    )
    put(request, field_, value)
    return Case("odd-shape", "", dumps(doc), uid_of(doc))


def truncated(rng: random.Random, doc: dict) -> Case:
    body = dumps(doc)
    return Case("truncated", "", body[: rng.randrange(len(body))])


def byte_mutation(rng: random.Random, doc: dict) -> Case:
    body = bytearray(dumps(doc))
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(body))
        action = rng.random()
        if action < 0.4:
            body[at] = rng.randrange(256)
        elif action < 0.7:
            body.insert(at, rng.choice(b'{}[]",:\\\x00\xff\xed0-eE.'))
        else:
            del body[at]
    return Case("byte-mutation", "", bytes(body))


def structure_mutation(rng: random.Random, doc: dict) -> Case:
    for _ in range(rng.randint(1, 4)):
        where = rng.choice(list(paths(doc)))
        if where and rng.random() < 0.2:
            parent = doc
            for key in where[:-1]:
                parent = parent[key]
            del parent[where[-1]]
        else:
            doc = put(doc, where, copy.deepcopy(rng.choice(WEIRD)))
    return Case("structure-mutation", "", dumps(doc), uid_of(doc))


def valid(rng: random.Random, doc: dict) -> Case:
    return Case("valid", "", dumps(doc), uid_of(doc))


def disconnect(rng: random.Random, doc: dict) -> Case:
    return Case("disconnect", "", dumps(doc), disconnect=True)


CLASSES: tuple[Callable[[random.Random, dict], Case], ...] = (
    surrogate,
    surrogate_bytes,
    big_integer,
    huge_digits,
    non_finite,
    too_deep,
    deep_within_limit,
    encoding,
    odd_shape,
    truncated,
    byte_mutation,
    structure_mutation,
    valid,
    disconnect,
)


def cases(seed: int, count: int) -> Iterator[Case]:
    """`count` cases, every class in turn, each built from its own seeded draw."""
    rng = random.Random(seed)
    for i in range(count):
        make = CLASSES[i % len(CLASSES)]
        case = make(rng, valid_doc(rng))
        case.kind = make.__name__.replace("_", "-")
        case.path = case.path or rng.choice(ENDPOINTS)
        yield case


# ------------------------------------------------------------------- the run


@dataclass
class Report:
    histogram: collections.Counter = field(default_factory=collections.Counter)  # (class, outcome)
    statuses: collections.Counter = field(default_factory=collections.Counter)
    problems: list[str] = field(default_factory=list)
    rss_before: int = 0
    rss_after: int = 0
    workers_before: list[int] = field(default_factory=list)
    workers_after: list[int] = field(default_factory=list)
    restarts: float = 0.0
    seconds: float = 0.0
    log_lines: int = 0

    def check(self) -> list[str]:
        """Every broken promise, as text; empty when all held."""
        found = list(self.problems)
        if any(not isinstance(code, int) or code >= 500 for code in self.statuses if code != "gone"):
            found.append(f"5xx answers: {dict(self.statuses)}")
        if self.workers_after != self.workers_before or self.restarts:
            found.append(f"workers changed: {self.workers_before} -> {self.workers_after}, restarts {self.restarts}")
        if self.rss_after > self.rss_before * 1.2:
            found.append(f"worker RSS grew more than 20 %: {self.rss_before} -> {self.rss_after} kB")
        return found

    def render(self) -> str:
        lines = [f"{sum(self.statuses.values())} requests in {self.seconds:.1f} s"]
        lines.append("status: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items(), key=str)))
        width = max((len(k) for k, _ in self.histogram), default=10)
        for kind in sorted({k for k, _ in self.histogram}):
            outcomes = sorted((o, n) for (k, o), n in self.histogram.items() if k == kind)
            lines.append(f"  {kind:<{width}}  " + ", ".join(f"{o} {n}" for o, n in outcomes))
        lines.append(f"workers {self.workers_before} -> {self.workers_after}, restarts {self.restarts:g}")
        change = (self.rss_after / self.rss_before - 1) * 100 if self.rss_before else 0.0
        lines.append(f"worker RSS {self.rss_before} -> {self.rss_after} kB ({change:+.1f} %)")
        lines.append(f"server log: {self.log_lines} lines, all JSON, no Traceback" if not self.problems else "")
        return "\n".join(line for line in lines if line)


def outcome(case: Case, answer: httpx.Response) -> tuple[str, str | None]:
    """(outcome label, problem or None) for one answer."""
    if answer.status_code >= 500:
        return f"{answer.status_code}", f"{case.kind} {case.path}: {answer.status_code} {answer.text[:200]}"
    try:
        body = answer.json()
    except ValueError:
        return "not-json", f"{case.kind} {case.path}: {answer.status_code} answer is not JSON: {answer.text[:200]}"
    if answer.status_code != 200:
        if not isinstance(body, dict) or not isinstance(body.get("error"), str):
            return "bad-error", f"{case.kind}: {answer.status_code} without an error message: {body}"
        return f"{answer.status_code} {body.get('reason', '')}".strip(), None
    response = body.get("response") if isinstance(body, dict) else None
    if (
        body.get("kind") != "AdmissionReview"
        or body.get("apiVersion") not in ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
        or not isinstance(response, dict)
        or not isinstance(response.get("allowed"), bool)
        or not isinstance(response.get("uid"), str)
        or (case.uid is not None and response["uid"] != case.uid)
    ):
        return "malformed", f"{case.kind}: malformed AdmissionReview {str(body)[:300]}"
    if "patch" in response:
        patch = json.loads(base64.b64decode(response["patch"]))
        if not isinstance(patch, list) or response.get("patchType") != "JSONPatch":
            return "malformed", f"{case.kind}: bad patch {response}"
    if response["allowed"]:
        return ("patched" if "patch" in response else "allowed"), None
    return f"denied {response.get('status', {}).get('code')}", None


def send_partial(server: RunningServer, case: Case) -> None:
    """Headers and part of the body, then gone: the server must shrug it off."""
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=server.ca)
    head = f"POST {case.path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(case.body)}\r\n\r\n"
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(head.encode() + case.body[: len(case.body) // 2])


def workers(server: RunningServer) -> list[int]:
    pid = server.process.pid
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return sorted(int(p) for p in text.split())


def rss_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def restarts(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("regokite_admission_worker_restarts_total{")
    )


def run(seed: int, count: int, *, workers_n: int = 2, threads: int = 4, warmup: int = 200) -> Report:
    """Start a server on policies/ (+ a printing and a mutating policy), send `count` cases, collect the report."""
    report = Report()
    with tempfile.TemporaryDirectory() as tmp:
        extra = Path(tmp) / "extra"
        extra.mkdir()
        for name, text in EXTRA.items():
            (extra / name).write_text(text)
        roots = [ROOT / "policies" / "admission", ROOT / "policies" / "lib", extra]
        with admission_server(roots, Path(tmp), "--workers", str(workers_n)) as server:
            clients = [server.client() for _ in range(threads)]
            with contextlib.ExitStack() as stack:
                for c in clients:
                    stack.enter_context(c)
                # warm up with valid reviews until every worker has answered, then measure
                rng = random.Random(seed ^ 0x5EED)
                for i in range(warmup):
                    clients[0].post(ENDPOINTS[i % 2], content=dumps(valid_doc(rng)))
                report.workers_before = workers(server)
                report.rss_before = rss_kb(report.workers_before)
                started = time.monotonic()
                with ThreadPoolExecutor(threads) as pool:
                    for kind, status, label, problem in pool.map(
                        lambda pair: _one(server, clients[pair[0] % threads], pair[1]),
                        enumerate(cases(seed, count)),
                    ):
                        report.histogram[(kind, label)] += 1
                        report.statuses[status] += 1
                        if problem:
                            report.problems.append(problem)
                report.seconds = time.monotonic() - started
                # every worker answers after the run, and none was replaced
                for _ in range(4 * workers_n):
                    if clients[0].get("/healthz").status_code != 200:
                        report.problems.append("healthz failed after the run")
                report.restarts = restarts(clients[0])
                report.workers_after = workers(server)
                report.rss_after = rss_kb(report.workers_after)
            time.sleep(0.3)  # let the last log lines land
            report.problems += log_problems(server.logs())
            report.log_lines = len(server.logs().splitlines())
    return report


def _one(server: RunningServer, client: httpx.Client, case: Case) -> tuple[str, int | str, str, str | None]:
    """(class, status code, outcome, problem or None) for one case."""
    if case.disconnect:
        send_partial(server, case)
        return case.kind, "gone", "disconnected", None
    try:
        answer = client.post(case.path, content=case.body, headers={"content-type": "application/json"})
    except httpx.HTTPError as exc:
        return case.kind, "none", "no-answer", f"{case.kind} {case.path}: no answer ({exc!r})"
    label, problem = outcome(case, answer)
    return case.kind, answer.status_code, label, problem


def log_problems(logs: str) -> list[str]:
    found = []
    if "Traceback" in logs:
        found.append("Traceback in the server log: " + logs[logs.index("Traceback") - 300 :][:1500])
    for line in logs.splitlines():
        if line.startswith("caBundle: "):
            continue
        try:
            json.loads(line)
        except ValueError:
            found.append(f"a raw line in the server log: {line[:200]!r}")
            break
    return found
