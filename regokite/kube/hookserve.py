"""Run `regokite hooks`: the hook server's app, with the cluster data its hooks read.

The app itself (`controllers/hookserver.py`) decides nothing about the API
server; replicating what the hooks read is runtime work, wired here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from regokite import outline
from regokite.bundle import load_bundle
from regokite.clusterdata.replicate import Replicator, check_access
from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.controllers.hookserver import create_app
from regokite.engine import open_engine
from regokite.engine.extensions import ExtensionOptions
from regokite.kube.client import KubeClient

log = logging.getLogger("regokite.hooks")
REPLICA_MAX_LAG = 0.5  # as the admission server: a changed object shows within this (a new one at once)


def serve_hooks(
    policies: list[str],
    *,
    host: str = "0.0.0.0",
    port: int = 8181,
    engine: str = "embedded",
    opa_url: str | None = None,
    v0_compatible: bool = False,
    options: ExtensionOptions | None = None,
    replicate: Sequence[ResourceRef] = (),
    replicate_path: str = "kubernetes",
    kubeconfig: str | None = None,
) -> int:
    import uvicorn

    bundle = load_bundle(policies, v0_compatible=v0_compatible).without_tests()
    packages = outline.packages(outline.outline(bundle.modules))
    evaluator = open_engine(bundle, engine, opa_url=opa_url, options=options)
    replica = None
    if replicate:
        client = KubeClient(kubeconfig)
        check_access(client, replicate)
        replica = Replicator(client, ReplicaStore(replicate_path, max_lag=REPLICA_MAX_LAG))
        replica.ensure(replicate)
        evaluator.follow(replica.store)
    app = create_app(evaluator, packages, replica)
    log.info("serving hooks", extra={"host": host, "port": port, "packages": sorted(packages)})
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False)
    return 0
