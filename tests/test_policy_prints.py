"""print() in a policy becomes one structured log line, never raw text on stderr."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from pathlib import Path

import httpx
import pytest

from regokite.admission.app import ServingState, create_app
from regokite.admission.policies import load_policy_set
from regokite.bundle import load_bundle
from regokite.engine.embedded import EmbeddedEngine
from regokite.ops.logging import ConsoleFormatter, JsonFormatter
from tests.admission.reviews import deployment, review

NOISY = """package admission.noisy

deny contains "no" if {
	print("looking at", input.request.object.metadata.name)
	input.request.object.metadata.name == "bad"
}
"""

FORGED = "web\n" + json.dumps({"level": "info", "logger": "regokite.admission.access", "allowed": True})


@pytest.fixture
def json_log():
    """The root logger writing JSON lines to a buffer, as `regokite admission` does off a terminal."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_handlers, old_level = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    yield buffer
    root.handlers[:] = old_handlers
    root.setLevel(old_level)


def test_a_print_is_one_json_line_with_package_and_location_and_nothing_raw(tmp_path: Path, json_log, capfd) -> None:
    (tmp_path / "noisy.rego").write_text(NOISY)
    engine = EmbeddedEngine(load_bundle([tmp_path]))
    doc = review(deployment(FORGED))
    assert engine.evaluate("data.admission.noisy.deny", doc) == []
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")  # regorus wrote prints to fd 2 itself before
    lines = json_log.getvalue().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["logger"] == "regokite.policy.print" and entry["msg"] == "policy print"
    assert entry["policy"] == "admission.noisy"
    assert entry["location"].endswith("noisy.rego:4")
    assert entry["output"] == f"looking at {FORGED}"


def test_a_print_during_a_review_carries_its_uid(tmp_path: Path, json_log, capfd) -> None:
    (tmp_path / "noisy.rego").write_text(NOISY)
    app = create_app(ServingState(load_policy_set([str(tmp_path)])))
    doc = review(deployment(FORGED))

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            return await client.post("/validate", content=json.dumps(doc))

    assert asyncio.run(post()).json()["response"]["allowed"] is True
    assert capfd.readouterr().err == ""
    entries = [json.loads(line) for line in json_log.getvalue().splitlines()]  # every line is JSON
    prints = [e for e in entries if e["logger"] == "regokite.policy.print"]
    access = [e for e in entries if e["logger"] == "regokite.admission.access"]
    assert len(prints) == 1 and prints[0]["uid"] == doc["request"]["uid"]
    assert len(access) == 1 and access[0]["object"] == FORGED  # the name is kept, escaped inside one line


def test_the_terminal_format_keeps_a_name_with_a_newline_on_one_line() -> None:
    record = logging.makeLogRecord(
        {"name": "regokite.admission.access", "levelname": "INFO", "msg": "review", "object": FORGED, "n": 1}
    )
    text = ConsoleFormatter().format(record)
    assert "\n" not in text
    assert 'object="web\\n{' in text and text.endswith(" n=1")
    multi = logging.makeLogRecord({"name": "x", "levelname": "ERROR", "msg": "bad\n12:00:00 info fake"})
    assert ConsoleFormatter().format(multi).splitlines()[1].startswith("    ")  # continues, indented
