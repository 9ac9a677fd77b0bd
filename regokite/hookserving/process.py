"""Run `regokite hooks`: the hook server's app, with the cluster data its hooks read.

The app itself (`hookserving/server.py`) decides nothing about the API
server; replicating what the hooks read is runtime work, wired here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.engine import Engine, EngineSettings
from regokite.hookserving.server import Served, create_app, loader
from regokite.kube.client import KubeClient
from regokite.replication.replicate import Replicator, check_access

log = logging.getLogger("regokite.hooks")
REPLICA_MAX_LAG = 0.5  # as the admission server: a changed object shows within this (a new one at once)


def serve_hooks(
    policies: list[str],
    *,
    host: str = "0.0.0.0",
    port: int = 8181,
    engine: EngineSettings | None = None,
    replicate: Sequence[ResourceRef] = (),
    replicate_path: str = "kubernetes",
    kubeconfig: str | None = None,
    reload_interval: float = 1.0,
) -> int:
    """Serve until stopped; the policy files are polled every `reload_interval` seconds (each new
    policy set follows the same cluster data)."""
    import uvicorn

    replica = None
    if replicate:
        client = KubeClient(kubeconfig)
        check_access(client, replicate)
        replica = Replicator(client, ReplicaStore(replicate_path, max_lag=REPLICA_MAX_LAG))
        replica.ensure(replicate)

    def follow(opened: Engine) -> None:
        if replica is not None:
            opened.follow(replica.store)

    load = loader(policies, engine, prepare=follow)
    served = Served(load, policies)
    app = create_app(served, reload_interval, replica)
    log.info("serving hooks", extra={"host": host, "port": port, "packages": sorted(served.current.packages)})
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False)
    return 0
