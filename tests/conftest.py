"""Shared fixtures: the OPA REST stand-in, and engines of either kind.

`make_engine(bundle)` builds the engine named by `engine_kind`, which is
parametrised over both kinds, so a test that uses it runs once against the
embedded engine and once against a sidecar OPA (the stand-in in
tests/opa_standin.py, over real HTTP) and must get the same answers from both.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from agreement import AGREEMENT
from opa_standin import OpaStandin

from regokite.bundle import Bundle
from regokite.engine import Engine, EngineSettings, open_engine

ENGINE_KINDS = ("embedded", "opa")

# regorus engines are pinned to the thread that made them, and pyo3 refuses
# to drop one on another thread. A test holding `pytest.raises(...) as caught`
# makes a reference cycle through its own frame and the traceback's frames,
# which hold the engine that failed; left to the automatic collector, such a
# cycle may be freed on an HTTP server's handler thread. So automatic
# collection is off for the session and garbage is collected on the main
# thread only: after each test the young generations (what the test made: a
# full collection there walked every object the session's fixtures hold, about
# half a second a test, half of CI's time), after each module all of it.
# Freezing what the imports allocated keeps the full collections short.
gc.freeze()
gc.disable()


@pytest.fixture(autouse=True)
def _collect_garbage_on_the_main_thread() -> Iterator[None]:
    yield
    gc.collect(1)


@pytest.fixture(autouse=True, scope="module")
def _collect_all_garbage_on_the_main_thread() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture(scope="session")
def opa_standin() -> Iterator[OpaStandin]:
    """One stand-in for the session; tests that restart or stop it use their own."""
    with OpaStandin() as standin:
        yield standin


@pytest.fixture(params=ENGINE_KINDS)
def engine_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_engine(engine_kind: str, request: pytest.FixtureRequest) -> Iterator[Callable[[Bundle], Engine]]:
    """Build an `engine_kind` engine for a bundle; closed when the test ends.

    For "opa" the session's stand-in starts the test empty. Like a real
    sidecar it holds one bundle at a time: a second engine in the same test
    replaces the first one's modules.
    """
    engines: list[Engine] = []
    standin: OpaStandin | None = None
    if engine_kind == "opa":
        standin = request.getfixturevalue("opa_standin")
        standin.clear()

    def make(bundle: Bundle, *, strict_builtin_errors: bool = False) -> Engine:
        settings = EngineSettings(engine_kind) if standin is None else EngineSettings(engine_kind, standin.url)
        engine = open_engine(bundle, replace(settings, strict_builtin_errors=strict_builtin_errors))
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()
    engines.clear()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in AGREEMENT:
        terminalreporter.write_line(line)
