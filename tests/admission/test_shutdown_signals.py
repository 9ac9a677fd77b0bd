"""What the supervisor's first SIGTERM tells its children under --shutdown-delay: workers turn not ready
(SIGUSR1), the replica feeder and the bundle downloader, which have no handler for it, are left alone."""

from __future__ import annotations

import subprocess

from regokite.admission.supervisor import DOWNLOADER, FEEDER, Shutdown
from tests.processes import gone
from tests.waiting import wait_until


def test_only_workers_are_told_the_server_is_stopping() -> None:
    children = {slot: subprocess.Popen(["sleep", "60"]) for slot in (0, 1, FEEDER, DOWNLOADER)}
    try:
        shutdown = Shutdown(30.0, {p.pid: slot for slot, p in children.items()})
        shutdown.signalled(15, None)
        assert shutdown.at is not None and not shutdown.stopping  # deciding on through the delay
        for slot in (0, 1):  # `sleep` dies of SIGUSR1, as a worker without its handler would
            wait_until(lambda slot=slot: children[slot].poll() is not None, what=f"worker {slot} signalled")
        assert not gone(children[FEEDER].pid) and not gone(children[DOWNLOADER].pid)
    finally:
        for p in children.values():
            p.kill()
            p.wait()
