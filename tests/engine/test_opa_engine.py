"""The sidecar engine's own concerns: reaching OPA, keeping it loaded, its errors.

Each test gets its own stand-in (tests/opa_standin.py), since several stop or
restart it. The stand-in proves the REST wiring, not OPA's semantics.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import urllib3
from opa_standin import MSG_COMPILE_MODULE, OpaError, OpaStandin

from regokite.bundle import Bundle, Module
from regokite.engine import UNDEFINED, EngineSettings, open_engine
from regokite.engine.opa import MARKER_PATH, OpaEngine, policy_id
from regokite.engine.query_plan import QueryPlan, data_api_path
from regokite.errors import EngineUnavailable, EvaluationError, Location, PolicyLoadError
from tests.ports import free_port

ADMISSION = """\
package admission.images

import rego.v1

deny contains msg if {
	some c in input.request.object.spec.containers
	not startswith(c.image, data.registries.allowed)
	msg := sprintf("%s: image %s is not allowed", [c.name, c.image])
}

patch := [{"op": "add", "path": "/metadata/labels/checked", "value": "true"}] if input.mutate
"""

LIB = """\
package lib.text

import rego.v1

shout(s) := upper(s)
"""

USES_LIB = """\
package uses

import rego.v1

loud := data.lib.text.shout(input.word)
"""

REVIEW = {
    "request": {
        "object": {
            "spec": {"containers": [{"name": "app", "image": "evil.io/app:1"}]},
        }
    }
}


def bundle_of(*modules: tuple[str, str], data: dict | None = None, v0: bool = False) -> Bundle:
    return Bundle(tuple(Module(p, t, v0=v0) for p, t in modules), data or {})


ADMISSION_BUNDLE = bundle_of(
    ("policies/admission/images.rego", ADMISSION),
    data={"registries": {"allowed": "registry.example/"}},
)


@pytest.fixture
def standin() -> Iterator[OpaStandin]:
    with OpaStandin() as s:
        yield s


@pytest.fixture
def engine(standin: OpaStandin) -> Iterator[OpaEngine]:
    e = OpaEngine(ADMISSION_BUNDLE, standin.url)
    yield e
    e.close()


DENIED = ["app: image evil.io/app:1 is not allowed"]


# ---------------------------------------------------------------------- reaching OPA


def test_unreachable_opa_is_a_one_line_engine_unavailable():
    port = free_port()
    with pytest.raises(EngineUnavailable) as caught:
        OpaEngine(ADMISSION_BUNDLE, f"http://127.0.0.1:{port}")
    assert str(caught.value) == f"OPA at http://127.0.0.1:{port} unreachable: connection refused"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_open_engine_builds_the_sidecar_engine_for_opa(standin):
    engine = open_engine(ADMISSION_BUNDLE, EngineSettings("opa", standin.url))
    try:
        assert isinstance(engine, OpaEngine) and engine.name == "opa"
        assert engine.evaluate("admission/images/deny", REVIEW) == DENIED
    finally:
        engine.close()


def test_opa_going_down_is_engine_unavailable_and_coming_back_needs_nothing(standin, engine):
    assert engine.evaluate("data.admission.images.deny", REVIEW) == DENIED
    standin.stop()
    with pytest.raises(EngineUnavailable, match=r"unreachable: connection refused$"):
        engine.evaluate("data.admission.images.deny", REVIEW)
    standin.start()  # same port, state kept: a network blip, not a restart
    assert engine.evaluate("data.admission.images.deny", REVIEW) == DENIED


def test_slow_opa_is_engine_unavailable_after_the_timeout(standin):
    engine = OpaEngine(ADMISSION_BUNDLE, standin.url, timeout=0.2)
    try:
        standin.delay = 0.5
        with pytest.raises(EngineUnavailable, match=r"unreachable: no answer within 0.2s$"):
            engine.evaluate("data.admission.images.deny", REVIEW)
    finally:
        standin.delay = 0
        engine.close()


def test_evaluations_reuse_kept_alive_connections(standin, engine):
    for _ in range(50):
        engine.evaluate("data.admission.images.deny", REVIEW)
    # one connection for evaluations, one for the push (opa-python-client)
    assert standin.connections <= 2


def test_concurrent_evaluations_from_many_threads_all_agree(standin, engine):
    answers: list = []
    errors: list = []

    def work() -> None:
        try:
            for i in range(40):
                mutate = i % 2 == 0
                answers.append(
                    (
                        engine.evaluate("data.admission.images.deny", REVIEW),
                        engine.evaluate("data.admission.images.patch", {**REVIEW, "mutate": mutate}),
                        mutate,
                    )
                )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(answers) == 8 * 40
    for deny, patch, mutate in answers:
        assert deny == DENIED
        assert (patch is not UNDEFINED) is mutate


def test_url_must_be_http_without_a_path():
    with pytest.raises(ValueError):
        OpaEngine(ADMISSION_BUNDLE, "127.0.0.1:8181")
    with pytest.raises(ValueError):
        OpaEngine(ADMISSION_BUNDLE, "http://127.0.0.1:8181/v1/data")


# ---------------------------------------------------------------------- keeping OPA loaded


def test_restarted_opa_gets_the_bundle_pushed_again_before_answering(standin, engine):
    assert engine.evaluate("data.admission.images.deny", REVIEW) == DENIED
    standin.restart()  # OPA restarted: every policy and document gone
    assert standin.policies == {}
    # Without the re-push this would be undefined: "no deny", an admission that fails open.
    assert engine.evaluate("data.admission.images.deny", REVIEW) == DENIED
    assert set(standin.policies) == {"regokite/policies/admission/images.rego"}
    assert standin.data["registries"] == {"allowed": "registry.example/"}


def test_restarted_opa_is_repaired_for_queries_and_bound_inputs_too(standin, engine):
    standin.restart()
    assert engine.query("x := data.registries.allowed")[0]["bindings"] == {"x": "registry.example/"}
    standin.restart()
    assert engine.bind(REVIEW).evaluate("admission.images.deny") == DENIED


def test_legitimately_undefined_answer_costs_one_marker_read_and_no_push(standin, engine):
    standin.requests.clear()
    assert engine.evaluate("data.admission.images.patch", REVIEW) is UNDEFINED
    assert list(standin.requests) == [
        "POST /v1/data/admission/images/patch?strict-builtin-errors=true",
        "GET /v1/data/system/regokite",
    ]


def test_bound_input_verifies_opa_once_however_many_answers_are_undefined(standin, engine):
    bound = engine.bind(REVIEW)
    standin.requests.clear()
    for _ in range(3):
        assert bound.evaluate("data.admission.images.patch") is UNDEFINED
    assert [r.split("?")[0] for r in standin.requests] == [
        "POST /v1/data/admission/images/patch",
        "GET /v1/data/system/regokite",
        "POST /v1/data/admission/images/patch",
        "POST /v1/data/admission/images/patch",
    ]


def test_bound_input_made_before_a_restart_still_gets_the_bundle_back(standin, engine):
    bound = engine.bind(REVIEW)
    standin.restart()
    assert bound.evaluate("data.admission.images.patch") is UNDEFINED
    assert bound.evaluate("data.admission.images.deny") == DENIED


def test_ensure_loaded_pushes_again_only_after_a_restart(standin, engine):
    assert engine.ensure_loaded() is False
    standin.restart()
    assert engine.ensure_loaded() is True
    assert set(standin.policies) == {"regokite/policies/admission/images.rego"}
    assert engine.ensure_loaded() is False


def test_marker_records_what_was_pushed(standin, engine):
    marker = standin.data[MARKER_PATH[0]][MARKER_PATH[1]]
    assert marker["policies"] == ["regokite/policies/admission/images.rego"]
    assert marker["data"] == ["registries"]
    assert len(marker["digest"]) == 64


def test_concurrent_undefined_answers_after_a_restart_push_once(standin, engine):
    standin.restart()
    standin.requests.clear()
    barrier = threading.Barrier(6)
    answers: list[Any] = []

    def work() -> None:
        barrier.wait()
        answers.append(engine.evaluate("data.admission.images.deny", REVIEW))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [DENIED] * 6  # an answer from before another thread's push is asked again
    pushes = [r for r in standin.requests if r.startswith("PUT /v1/policies/")]
    assert pushes == ["PUT /v1/policies/regokite/policies/admission/images.rego"]


def test_removed_modules_are_deleted_from_opa_and_foreign_ones_kept(standin):
    standin.put_policy("someone/else.rego", "package someone.else\n\nx := 1\n")
    first = OpaEngine(
        bundle_of(("policies/a.rego", "package a\n\nx := 1\n"), ("policies/b.rego", LIB)),
        standin.url,
    )
    first.close()
    assert set(standin.policies) == {
        "someone/else.rego",
        "regokite/policies/a.rego",
        "regokite/policies/b.rego",
    }
    second = OpaEngine(bundle_of(("policies/a.rego", "package a\n\nx := 2\n")), standin.url)
    try:
        assert set(standin.policies) == {"someone/else.rego", "regokite/policies/a.rego"}
        assert second.evaluate("data.a.x") == 2
        assert second.evaluate("data.lib.text") is UNDEFINED
    finally:
        second.close()


def test_removed_top_level_documents_are_deleted_and_foreign_ones_kept(standin):
    standin.put_data(["elsewhere"], {"kept": True})
    OpaEngine(bundle_of(data={"old": 1, "both": {"v": 1}}), standin.url).close()
    OpaEngine(bundle_of(data={"both": {"v": 2}, "new": [1]}), standin.url).close()
    data = standin.data
    assert "old" not in data
    assert data["both"] == {"v": 2} and data["new"] == [1]
    assert data["elsewhere"] == {"kept": True}


def test_renamed_module_with_a_default_rule_does_not_clash_with_its_old_name(standin):
    policy = "package gate\n\nimport rego.v1\n\ndefault allow := false\n"
    OpaEngine(bundle_of(("policies/old_name.rego", policy)), standin.url).close()
    engine = OpaEngine(bundle_of(("policies/new_name.rego", policy)), standin.url)
    try:
        assert set(standin.policies) == {"regokite/policies/new_name.rego"}
        assert engine.evaluate("data.gate.allow") is False
    finally:
        engine.close()


def test_a_module_may_call_a_function_from_one_pushed_after_it(standin, monkeypatch):
    # OPA type-checks every PUT against the modules it already has, so a module
    # calling a function that is not there yet is refused; regorus (inside the
    # stand-in) only notices at evaluation, so simulate OPA's check here.
    real_put = standin.put_policy

    def opa_like_put(pid: str, raw: str) -> dict:
        if "data.lib.text.shout" in raw and not any("lib.text" in r for r in standin.policies.values()):
            error = {
                "code": "rego_type_error",
                "message": "undefined function data.lib.text.shout",
                "location": {"file": pid, "row": 5, "col": 8},
            }
            raise OpaError(400, "invalid_parameter", MSG_COMPILE_MODULE, [error])
        return real_put(pid, raw)

    monkeypatch.setattr(standin, "put_policy", opa_like_put)
    # "policies/a_uses.rego" sorts (and is pushed) before "policies/z_lib.rego"
    bundle = bundle_of(("policies/a_uses.rego", USES_LIB), ("policies/z_lib.rego", LIB))
    engine = OpaEngine(bundle, standin.url)
    try:
        assert engine.evaluate("data.uses.loud", {"word": "hi"}) == "HI"
    finally:
        engine.close()


def test_modules_outside_the_bundle_dir_get_clean_policy_ids():
    assert policy_id("policies/a/b.rego") == "regokite/policies/a/b.rego"
    assert policy_id("/tmp/x/p.rego") == "regokite/tmp/x/p.rego"
    assert policy_id("C:\\pol\\p.rego") == "regokite/C:/pol/p.rego"


def test_module_path_with_odd_characters_survives_the_round_trip(standin):
    engine = OpaEngine(bundle_of(("policies/my policy#1?.rego", "package odd\n\nx := 1\n")), standin.url)
    try:
        assert set(standin.policies) == {"regokite/policies/my policy#1?.rego"}
        assert engine.evaluate("data.odd.x") == 1
    finally:
        engine.close()


# ---------------------------------------------------------------------- OPA's errors


def test_syntax_error_body_becomes_a_policy_load_error_naming_the_module_path(standin):
    broken = "package broken\n\nimport rego.v1\n\nallow if {\n\tinput.x ==\n}\n"
    with pytest.raises(PolicyLoadError) as caught:
        OpaEngine(bundle_of(("policies/broken.rego", broken)), standin.url)
    error = caught.value
    assert error.location == Location("policies/broken.rego", 7, 1)
    assert error.source_line == "}"
    assert "regokite/" not in str(error)


def test_v0_bundle_needs_a_sidecar_started_with_v0_compatible(standin):
    v0 = 'package legacy\n\ndeny[msg] {\n\tmsg := "no"\n}\n'
    with pytest.raises(PolicyLoadError) as caught:
        OpaEngine(bundle_of(("policies/legacy.rego", v0), v0=True), standin.url)
    assert caught.value.location == Location("policies/legacy.rego", 3, 11)
    assert "run the OPA sidecar with --v0-compatible" in caught.value.message


def test_v0_compatible_sidecar_serves_a_v0_bundle():
    v0 = 'package legacy\n\ndeny[msg] {\n\tinput.bad\n\tmsg := "no"\n}\n'
    with OpaStandin(v0_compatible=True) as standin:
        engine = OpaEngine(bundle_of(("policies/legacy.rego", v0), v0=True), standin.url)
        try:
            assert engine.evaluate("data.legacy.deny", {"bad": True}) == ["no"]
            assert engine.evaluate("data.legacy.deny", {"bad": False}) == []
        finally:
            engine.close()


def test_runtime_error_body_becomes_an_evaluation_error_naming_the_module_path(standin):
    policy = "package math\n\nimport rego.v1\n\nratio := input.n / input.d\n"
    engine = OpaEngine(bundle_of(("policies/math.rego", policy)), standin.url)
    try:
        with pytest.raises(EvaluationError) as caught:
            engine.evaluate("data.math.ratio", {"n": 1, "d": 0})
    finally:
        engine.close()
    assert caught.value.query == "data.math.ratio"
    assert caught.value.location is not None
    assert (caught.value.location.file, caught.value.location.line) == ("policies/math.rego", 5)


def test_data_api_is_asked_for_strict_builtin_errors(standin, engine):
    # like the embedded engine, a failing builtin is an error, not undefined
    standin.requests.clear()
    engine.evaluate("data.admission.images.deny", REVIEW)
    assert list(standin.requests) == ["POST /v1/data/admission/images/deny?strict-builtin-errors=true"]


def _serve(status: int, body: bytes, content_type: str = "application/json"):
    class Fixed(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
            head += f"Content-Length: {len(body)}\r\n\r\n"
            self.wfile.write(head.encode() + body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Fixed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_answer_that_is_not_from_opa_is_engine_unavailable():
    server = _serve(502, b"<html>Bad Gateway</html>", "text/html")
    try:
        with pytest.raises(EngineUnavailable, match=r"answered HTTP 502, not an OPA response"):
            OpaEngine(ADMISSION_BUNDLE, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


def test_unauthorized_answer_is_engine_unavailable_with_opa_message():
    body = json.dumps({"code": "unauthorized", "message": "request rejected by administrative policy"})
    server = _serve(401, body.encode())
    try:
        with pytest.raises(EngineUnavailable) as caught:
            OpaEngine(ADMISSION_BUNDLE, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert "unauthorized: request rejected by administrative policy" in str(caught.value)


def test_error_in_a_query_maps_back_to_the_callers_columns(engine):
    # `__regokite_e1__ := ` and a check are inserted into the query OPA sees;
    # the location must still point into the query as the caller wrote it.
    with pytest.raises(EvaluationError) as caught:
        engine.query("data.registries.allowed; x := zz + 1")
    assert caught.value.location == Location("<query.rego>", 1, 31)


def test_false_expression_in_a_longer_query_fails_its_row_as_in_opa(engine):
    assert engine.query("x := 1; x > 1") == []
    lone = engine.query("1 > 2")  # like `opa eval`, a lone expression reports false
    assert [e["value"] for e in lone[0]["expressions"]] == [False]


# ---------------------------------------------------------------------- query plans


def test_plan_captures_values_and_leaves_declarations_alone():
    plan = QueryPlan.build('x := 1; data.a[k]; not data.b; count(x) > 0; s = "a;b"')
    assert plan.text == (
        "x := 1; __regokite_e1__ := data.a[k]; __regokite_e1__ != false; not data.b; "
        '__regokite_e3__ := count(x) > 0; __regokite_e3__ != false; s = "a;b"'
    )
    assert [e.capture for e in plan.exprs] == [None, "__regokite_e1__", None, "__regokite_e3__", None]


def test_plan_keeps_with_modifiers_outside_the_reported_text():
    plan = QueryPlan.build('data.a.b with input as {"x": 1} with data.c as 2')
    assert plan.exprs[0].text == "data.a.b"
    assert plan.text.startswith("__regokite_e0__ := data.a.b with input as")
    assert plan.ref_path is None


def test_plan_reads_multi_line_expressions_and_skips_comments():
    plan = QueryPlan.build("x := [\n  1, # one\n  2\n]\n# a comment line\ny := x[_] +\n  1")
    assert [(e.text.split()[0], e.row, e.col) for e in plan.exprs] == [("x", 1, 1), ("y", 6, 1)]


def test_plan_sends_plain_refs_to_the_data_api():
    assert QueryPlan.build("  data.a.b  ").ref_path == "a/b"
    assert QueryPlan.build('data.a["b c"]').ref_path == "a/b%20c"
    assert QueryPlan.build("data.a[x]").ref_path is None
    assert QueryPlan.build("data.a.b", null_input=True).ref_path is None


def test_plan_with_null_input_adds_with_input_as_null():
    plan = QueryPlan.build("x := input; y := input with input as 1", null_input=True)
    assert plan.text == "x := input with input as null; y := input with input as 1"


def test_plan_maps_columns_back_past_every_insertion():
    plan = QueryPlan.build("data.a; data.b")
    sent = plan.text
    assert sent == (
        "__regokite_e0__ := data.a; __regokite_e0__ != false; __regokite_e1__ := data.b; __regokite_e1__ != false"
    )
    assert plan.original_col(1, sent.index("data.b") + 1) == len("data.a; ") + 1
    assert plan.original_col(1, sent.index("__regokite_e1__ :=") + 1) == len("data.a; ") + 1


@pytest.mark.parametrize(
    ("ref", "path"),
    [
        ("data", ""),
        ("data.a.b", "a/b"),
        ('data.a["x/y"]', "a/x%2Fy"),
        ('data.a["0"]', None),  # OPA would read a number
        ("data.a[0]", None),
        ("data.a[x]", None),
        ("input.a", None),
    ],
)
def test_data_api_path_quotes_segments_and_refuses_what_opa_would_misread(ref, path):
    assert data_api_path(ref) == path


# ---------------------------------------------------------------------- the stand-in


def test_standin_answers_with_opa_status_codes_and_bodies(standin):
    pool = urllib3.HTTPConnectionPool("127.0.0.1", standin.port)

    def call(method: str, target: str, body: object = None, raw: bytes | None = None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        answer = pool.urlopen(method, target, body=data)
        text = answer.data.decode()
        try:
            return answer.status, json.loads(text)
        except ValueError:
            return answer.status, text

    assert call("GET", "/health") == (200, {})
    assert call("PUT", "/v1/data/x", {"a": 1}) == (204, "")
    assert call("POST", "/v1/data/x/a", {"input": {}}) == (200, {"result": 1})
    assert call("POST", "/v1/data/x/nope", {"input": {}}) == (200, {})
    assert call("POST", "/v1/data/x/a", {}) == (
        200,
        {"result": 1, "warning": {"code": "api_usage_warning", "message": "'input' key missing from the request"}},
    )
    assert call("POST", "/v0/data/x/a", raw=b"{}") == (200, 1)
    assert call("POST", "/v0/data/x/nope", raw=b"{}") == (
        404,
        {"code": "undefined_document", "message": "document missing: data.x.nope"},
    )
    assert call("DELETE", "/v1/data/x/nope") == (
        404,
        {"code": "resource_not_found", "message": "storage_not_found_error: /x/nope: document does not exist"},
    )
    assert call("PATCH", "/v1/data/x", [{"op": "add", "path": "b", "value": 2}]) == (204, "")
    assert call("GET", "/v1/data/x") == (200, {"result": {"a": 1, "b": 2}})
    status, body = call("PUT", "/v1/policies/p/bad.rego", raw=b"package p\n\nx := \n")
    assert status == 400
    assert body["code"] == "invalid_parameter"
    assert body["message"] == "error(s) occurred while compiling module(s)"
    assert body["errors"][0]["location"]["file"] == "p/bad.rego"
    assert {"row", "col"} <= body["errors"][0]["location"].keys()
    assert call("PUT", "/v1/policies/p/ok.rego", raw=b"package p\n\nimport rego.v1\n\nr if input.r\n") == (200, {})
    assert call("POST", "/v0/data/p/r", raw=b"{}") == (
        404,
        {"code": "undefined_document", "message": "document undefined: data.p.r"},
    )
    status, body = call("GET", "/v1/policies")
    assert status == 200 and [p["id"] for p in body["result"]] == ["p/ok.rego"]
    assert call("GET", "/v1/policies/")[0] == 404  # OPA's router: an empty policy id
    assert call("GET", "/v1/policies/nope") == (
        404,
        {"code": "resource_not_found", "message": 'storage_not_found_error: policy id "nope"'},
    )
    assert call("POST", "/v1/query", {"query": "x := data.x.a"}) == (200, {"result": [{"x": 1}]})
    assert call("POST", "/v1/query", {"query": "data.x.a"}) == (200, {"result": [{}]})
    assert call("POST", "/v1/query", {"query": "data.x.nope"}) == (200, {})
    status, body = call("POST", "/v1/query", {"query": "x := 1 +"})
    assert status == 400 and body["message"] == "error(s) occurred while parsing query"
    assert call("PUT", "/v1/policies/p/ok.rego", raw=b"package p\n\nratio := 1 / 0\n")[0] == 200
    # a builtin error: undefined by OPA's default, an internal error with ?strict-builtin-errors
    assert call("POST", "/v1/data/p/ratio", {"input": {}}) == (200, {})
    status, body = call("POST", "/v1/data/p/ratio?strict-builtin-errors=true", {"input": {}})
    assert status == 500
    assert body["code"] == "internal_error"
    assert body["message"] == "error(s) occurred while evaluating query"
    assert body["errors"][0]["location"]["file"] == "p/ok.rego"
    assert call("DELETE", "/v1/policies/p/ok.rego") == (200, {})
    assert call("POST", "/v1/policies")[0] == 405
    assert call("GET", "/nowhere") == (404, "404 page not found\n")
