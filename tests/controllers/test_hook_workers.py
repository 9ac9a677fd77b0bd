"""Hook evaluation in worker processes: same answers as in process, a runaway call bounded by its hook's
timeout without stopping the other workers, a fresh worker in its place, and a policy set swapped whole."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from regokite import outline
from regokite.bundle import Bundle, load_bundle
from regokite.controllers.hook_workers import HookWorkers, usable_cpus
from regokite.controllers.hooks import LocalHooks, ResolvedHook, resolve_hook
from regokite.controllers.schema import HookTarget
from regokite.engine import open_engine
from regokite.errors import HookError, RegokiteError
from tests.processes import kill_and_wait

GREETING = """package hooks.greet

status := {"greeting": sprintf("%s, %s", [data.hooks.word, input.parent.spec.who])}

# a conflict: an evaluation error (a builtin's error would be undefined, as in OPA)
bad := 1 if input.parent.spec.who == "zero"

bad := 2 if input.parent.spec.who == "zero"
"""
RUNAWAY = """package hooks.runaway

status := {"n": count([x | some x in numbers.range(1, 1e10)])}
"""


def bundle(tmp_path: Path, word: str = "Hello", extra: str = "") -> Bundle:
    (tmp_path / "hooks").mkdir(parents=True, exist_ok=True)
    (tmp_path / "hooks" / "greet.rego").write_text(GREETING + extra)
    (tmp_path / "hooks" / "runaway.rego").write_text(RUNAWAY)
    (tmp_path / "hooks" / "data.json").write_text(f'{{"word": "{word}"}}')
    return load_bundle([str(tmp_path)])


def hook(b: Bundle, package: str, timeout: float = 10.0) -> ResolvedHook:
    packages = outline.packages(outline.outline(b.modules))
    return resolve_hook(HookTarget(package, timeout=timeout), packages, ("status", "bad"))


def request(who: str) -> dict:
    return {"parent": {"spec": {"who": who}}, "children": {}}


@pytest.fixture
def workers(tmp_path: Path):
    pool = HookWorkers(bundle(tmp_path), processes=2)
    yield pool
    pool.close()


def test_workers_answer_as_the_engine_in_process_does(workers: HookWorkers) -> None:
    greet = hook(workers.bundle, "hooks.greet")
    local = LocalHooks(open_engine(workers.bundle))
    assert workers.evaluate(greet, request("Ada")) == local.evaluate(greet, request("Ada"))
    assert workers.evaluate(greet, request("Ada")) == {"status": {"greeting": "Hello, Ada"}}


def test_a_policy_error_comes_back_named_and_the_worker_goes_on(workers: HookWorkers) -> None:
    greet = hook(workers.bundle, "hooks.greet")
    with pytest.raises(HookError, match=r"hooks\.greet") as info:
        workers.evaluate(greet, request("zero"))
    assert info.value.reason == "PolicyError"
    for _ in range(3):  # every worker still answers
        assert workers.evaluate(greet, request("Bo"))["status"] == {"greeting": "Hello, Bo"}


def test_a_runaway_call_fails_alone_at_its_timeout_and_its_worker_is_replaced(workers: HookWorkers) -> None:
    # a timeout far above a call's round trip on a loaded machine: the other process answers well within it
    runaway = hook(workers.bundle, "hooks.runaway", timeout=3)
    greet = hook(workers.bundle, "hooks.greet")
    failure: list[HookError] = []

    def stuck() -> None:
        try:
            workers.evaluate(runaway, request("x"))
        except HookError as exc:
            failure.append(exc)

    caller = threading.Thread(target=stuck)
    caller.start()
    answered = workers.evaluate(greet, request("Cy"))  # the other process answers meanwhile
    assert caller.is_alive() and answered == {"status": {"greeting": "Hello, Cy"}}
    caller.join(30)
    [exc] = failure
    assert exc.reason == "HookTimeout"
    assert "hooks.runaway" in str(exc) and "timeout of 3s" in str(exc)
    both = [threading.Thread(target=workers.evaluate, args=(greet, request("Di"))) for _ in range(2)]
    for t in both:
        t.start()
    for t in both:
        t.join(30)
    assert workers.evaluate(greet, request("Di")) == {"status": {"greeting": "Hello, Di"}}


def test_a_worker_that_died_while_idle_is_replaced_without_failing_the_call(workers: HookWorkers) -> None:
    greet = hook(workers.bundle, "hooks.greet")
    kill_and_wait(workers.pids())
    assert workers.evaluate(greet, request("Ed")) == {"status": {"greeting": "Hello, Ed"}}


def test_reload_swaps_the_policy_set_whole_and_a_bad_one_keeps_the_last_good(
    workers: HookWorkers, tmp_path: Path
) -> None:
    greet = hook(workers.bundle, "hooks.greet")
    workers.reload(bundle(tmp_path / "v2", word="Howdy"))
    assert workers.evaluate(greet, request("Fay")) == {"status": {"greeting": "Howdy, Fay"}}
    broken = bundle(tmp_path / "v3", word="Bye", extra="\nx := no_such_function(1)\n")
    with pytest.raises(RegokiteError, match="no_such_function"):
        workers.reload(broken)
    assert workers.evaluate(greet, request("Fay")) == {"status": {"greeting": "Howdy, Fay"}}
    assert workers.bundle is not broken


def test_the_default_number_of_processes_counts_a_container_cpu_limit(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    limit = tmp_path / "cpu.max"
    limit.write_text("max 100000\n")
    assert usable_cpus(limit) == cores
    limit.write_text("50000 100000\n")  # half a core
    assert usable_cpus(limit) == 1
    assert usable_cpus(tmp_path / "absent") == cores
