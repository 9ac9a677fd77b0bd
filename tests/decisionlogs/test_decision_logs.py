"""Decision logs as OPA writes them: gzip'd batches to a decision log service (a local HTTP sink here),
masking and dropping through system.log.mask / system.log.drop, a bounded buffer that drops and counts,
retries after a failed upload, and one event per admission review."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from regokite.admission.app import ServingState, create_app
from regokite.admission.policies import load_policy_set
from regokite.bundle import Bundle, Module
from regokite.bundles.config import ConfigError, parse_config
from regokite.decisionlogs import config as dl_config
from regokite.decisionlogs.events import event, masked, timestamp
from regokite.decisionlogs.logger import DecisionLogger
from regokite.engine import open_engine
from tests.admission.reviews import REPLICAS, deployment, review
from tests.admission.server import admission_server
from tests.decisionlogs.sink import Sink

SYSTEM_LOG = """package system.log

drop if input.input.request.object.kind == "Secret"

mask contains "/input/request/object/data"

mask contains {"op": "upsert", "path": "/input/request/userInfo/username", "value": "***"}

mask contains "/input/not/there"
"""


@pytest.fixture
def sink() -> Iterator[Sink]:
    running = Sink()
    yield running
    running.close()


def configured(url: str, **reporting: object) -> dl_config.DecisionLogConfig:
    document = {
        "services": {"logs": {"url": url}},
        "labels": {"app": "regokite-test"},
        "decision_logs": {"service": "logs", "reporting": {"min_delay_seconds": 0.05, "max_delay_seconds": 0.1,
                                                           **reporting}},
    }  # fmt: skip
    parsed = parse_config(document)
    return dl_config.parse(parsed.decision_logs, parsed.services, parsed.labels)


def an_event(n: int, kind: str = "Pod") -> dict:
    reviewed = review({"apiVersion": "v1", "kind": kind, "metadata": {"name": f"o{n}"}, "data": {"k": "secret"}})
    return event("regokite/admission/validate", reviewed, {"allowed": True, "policies": []}, labels={"app": "t"})


def test_config_reads_opas_keys_and_defaults_and_refuses_others_by_name() -> None:
    parsed = parse_config({"services": {"s": {"url": "http://x"}}, "decision_logs": {"console": True}})
    config = dl_config.parse(parsed.decision_logs, parsed.services)
    assert config.service is None and config.console
    assert (config.upload_size_limit_bytes, config.min_delay_seconds, config.max_delay_seconds) == (32768, 300, 600)
    assert (config.buffer_type, config.buffer_size_limit_bytes) == ("size", 0)  # OPA's default: no limit
    assert (config.mask_decision, config.drop_decision, config.resource) == ("system/log/mask", "system/log/drop",
                                                                            "/logs")  # fmt: skip
    only = dl_config.parse({}, parsed.services)
    assert only.service is not None and only.service.url == "http://x"  # the only service, as OPA
    for section, message in (
        ({"plugin": "x"}, "decision_logs.plugin: not supported"),
        (
            {"reporting": {"buffer_type": "event", "buffer_size_limit_bytes": 1}},
            "decision_logs.reporting.buffer_size_limit_bytes: not supported for the event buffer type",
        ),
        (
            {"reporting": {"buffer_size_limit_events": 5}},
            "decision_logs.reporting.buffer_size_limit_events: not supported for the size buffer type",
        ),
        ({"reporting": {"buffer_type": "ring"}}, "buffer_type: expected size or event"),
        ({"reporting": {"buffer_size_limit_bytes": 0}}, "buffer_size_limit_bytes: expected a positive number"),
        ({"bogus": 1}, "decision_logs.bogus: unknown key"),
        ({"service": "nope"}, "no service named 'nope'"),
        ({"reporting": {"min_delay_seconds": 5, "max_delay_seconds": 1}}, "must not be less"),
    ):
        with pytest.raises(ConfigError, match=message):
            dl_config.parse(section, parsed.services)


def test_mask_erases_and_upserts_listing_what_it_did_and_skips_missing_paths() -> None:
    entry = an_event(1)
    out = masked(entry, ["/input/request/object/data", "/input/nothing",
                         {"op": "upsert", "path": "/input/request/userInfo/username", "value": "***"}])  # fmt: skip
    assert "data" not in out["input"]["request"]["object"]
    assert out["input"]["request"]["userInfo"]["username"] == "***"
    assert out["erased"] == ["/input/request/object/data"] and out["masked"] == ["/input/request/userInfo/username"]
    assert entry["input"]["request"]["object"]["data"] == {"k": "secret"}  # the caller's event is untouched
    assert timestamp(1_700_000_000_123_000_000) == "2023-11-14T22:13:20.123Z"


def test_batches_reach_the_service_gzipped_within_the_limit_masked_and_dropped(sink: Sink) -> None:
    engine = open_engine(Bundle((Module("system.rego", SYSTEM_LOG),)))
    logger = DecisionLogger(configured(sink.url, upload_size_limit_bytes=1500), lambda: engine)
    for n in range(60):
        logger.record(an_event(n, "Secret" if n % 3 == 0 else "Pod"))
    logger.close()
    got = sink.events()
    assert len(sink.batches) > 1  # the size limit split them
    for headers, body in sink.batches:
        assert headers["Content-Encoding"] == "gzip" and headers["Content-Type"] == "application/json"
        assert len(body) <= 1500
    assert sorted(e["input"]["request"]["object"]["metadata"]["name"] for e in got) == sorted(
        f"o{n}" for n in range(60) if n % 3
    )
    assert all("data" not in e["input"]["request"]["object"] for e in got)
    assert {e["input"]["request"]["userInfo"]["username"] for e in got} == {"***"}
    assert all(e["erased"] == ["/input/request/object/data"] for e in got)
    assert logger.dropped["policy"] == 20
    assert {"labels", "decision_id", "path", "input", "result", "timestamp", "metrics"} <= set(got[0])


def test_the_buffer_stays_bounded_under_a_10x_burst_and_counts_what_it_drops() -> None:
    down = Sink()
    down.close()  # nothing listens: every upload fails
    logger = DecisionLogger(configured(down.url, buffer_type="event", buffer_size_limit_events=100), lambda: None)
    started = time.perf_counter()
    for n in range(1000):
        logger.record(an_event(n))
    per_record = (time.perf_counter() - started) / 1000
    assert per_record < 0.005  # never waits on the service
    time.sleep(0.3)  # uploads fail meanwhile and the events go back, within the bound
    assert len(logger._buffer) <= 100
    assert logger.dropped["buffer"] >= 900
    logger.close()


def test_the_size_buffer_holds_at_most_its_bytes_of_events_and_counts_what_it_drops() -> None:
    """OPA's default buffer type: bounded by `buffer_size_limit_bytes` (here of the events' JSON)."""
    down = Sink()
    down.close()
    size = len(json.dumps(an_event(0), separators=(",", ":")))
    logger = DecisionLogger(configured(down.url, buffer_size_limit_bytes=100 * size), lambda: None)
    for n in range(1000):
        logger.record(an_event(n))
    time.sleep(0.3)  # uploads fail meanwhile and the events go back, within the bound
    logger.close()  # its last upload fails too: the events stay, and the thread is gone
    held = logger._buffer.take()
    assert 90 <= len(held) <= 100
    assert sum(len(json.dumps(e, separators=(",", ":"))) for e in held) <= 100 * size
    assert logger.dropped["buffer"] >= 900
    assert held[-1]["input"]["request"]["object"]["metadata"]["name"] == "o999"  # the oldest went


def test_a_failed_upload_is_retried_and_nothing_is_lost() -> None:
    flaky = Sink(failures=2)
    try:
        logger = DecisionLogger(configured(flaky.url), lambda: None)
        for n in range(5):
            logger.record(an_event(n))
        deadline = time.monotonic() + 10
        while len(flaky.events()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        logger.close()
        assert flaky.attempts >= 3
        assert sorted(e["decision_id"] for e in flaky.events()) == sorted(set(e["decision_id"] for e in flaky.events()))
        assert len(flaky.events()) == 5
    finally:
        flaky.close()


def test_each_review_is_one_event_with_each_policys_result(tmp_path, sink: Sink) -> None:
    (tmp_path / "replicas.rego").write_text(REPLICAS)
    state = ServingState(load_policy_set([str(tmp_path)]))
    state.decision_log = DecisionLogger(configured(sink.url), lambda: state.policy_set.engine)
    app = create_app(state)

    async def post(body: dict) -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.post("/validate", json=body)

    denied = review(deployment("big", replicas=5))
    assert asyncio.run(post(denied)).json()["response"]["allowed"] is False
    asyncio.run(post(review(deployment("small", replicas=1))))
    state.decision_log.close()
    first, second = sink.events()
    assert first["path"] == "regokite/admission/validate"
    assert first["input"] == denied and first["labels"] == {"app": "regokite-test"}
    assert first["result"]["allowed"] is False
    assert first["result"]["policies"] == [
        {"policy": "admission.replicas", "decision": "denied", "messages": ["replicas 5 is more than 3"],
         "action": "deny"}
    ]  # fmt: skip
    assert second["result"]["allowed"] is True and first["decision_id"] != second["decision_id"]


def test_the_admission_server_logs_each_review_to_the_configured_service(tmp_path, sink: Sink) -> None:
    """The server with OPA's configuration file: its worker uploads, masks with the served system.log."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "replicas.rego").write_text(REPLICAS)
    (policies / "system.rego").write_text(SYSTEM_LOG)
    config = tmp_path / "opa-config.yaml"
    config.write_text(
        f"services:\n  logs:\n    url: {sink.url}\nlabels:\n  cluster: test\n"
        "decision_logs:\n  reporting:\n    min_delay_seconds: 0.1\n    max_delay_seconds: 0.2\n"
    )
    sent = review(deployment("big", replicas=5))
    with admission_server(policies, tmp_path, "--config-file", str(config)) as running, running.client() as client:
        assert client.post("/validate", json=sent).json()["response"]["allowed"] is False
        deadline = time.monotonic() + 20
        while not sink.events() and time.monotonic() < deadline:
            time.sleep(0.1)
    (logged,) = sink.events()
    assert logged["labels"] == {"cluster": "test"} and logged["input"]["request"]["uid"] == sent["request"]["uid"]
    assert logged["input"]["request"]["userInfo"]["username"] == "***"
    assert logged["masked"] == ["/input/request/userInfo/username"]
    assert [p["policy"] for p in logged["result"]["policies"]] == ["admission.replicas"]


def test_console_writes_each_event_as_a_log_line(caplog) -> None:
    document = parse_config({"decision_logs": {"console": True, "reporting": {"min_delay_seconds": 0.05,
                                                                              "max_delay_seconds": 0.1}}})  # fmt: skip
    logger = DecisionLogger(dl_config.parse(document.decision_logs, document.services), lambda: None)
    sent = [an_event(n) for n in range(3)]
    with caplog.at_level("INFO", logger="regokite.decisions"):
        for entry in sent:
            logger.record(entry)
        logger.close()
    lines = [r for r in caplog.records if r.name == "regokite.decisions"]
    assert [r.getMessage() for r in lines] == ["Decision Log"] * 3
    assert [r.decision["decision_id"] for r in lines] == [e["decision_id"] for e in sent]
