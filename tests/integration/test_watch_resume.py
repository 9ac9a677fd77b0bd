"""An informer resumed from a resourceVersion its API server has not reached misses nothing (issue 27).

etcd restored from a backup takes the server's history back: a watch resumed from the informer's
resourceVersion is answered 200 and then nothing (no event, no bookmark, no 410) while the server
drops every change up to that version as older than the watch. Here on the real API server: a cold
copy of etcd's data, 60 ConfigMaps made, then etcd restored from the copy and both restarted. The
informer must relist (the 60 gone, a ConfigMap made after the restore present); before the fix it
resumed from its resourceVersion and never saw either.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import controlplane
import kube

from regokite.kube.client import KubeClient
from regokite.kube.informer import Informer

CMS = "/api/v1/namespaces/default/configmaps"


def names(informer: Informer) -> set[str]:
    return {o["metadata"]["name"] for o in informer.list("default")}


def test_a_watch_resumed_after_etcd_went_back_to_a_backup_relists(private_plane, tmp_path: Path) -> None:
    cp = private_plane
    data = cp.state_dir / "etcd"
    backup = tmp_path / "etcd-backup"
    controlplane.restart(cp, "etcd", while_down=lambda: shutil.copytree(data, backup))  # a cold backup
    kube.wait_for(lambda: controlplane.ready(cp), what="the API server back on etcd")
    cluster = kube.Cluster.of(cp)
    informer = Informer(KubeClient(cp.kubeconfig), "v1", "configmaps", namespace="default", watch_timeout=60)
    informer.start()
    try:
        assert informer.synced.wait(30)
        made = {f"before-restore-{i}" for i in range(60)}
        with cluster.api_client() as api:
            for name in sorted(made):
                kube.create(api, CMS, {"metadata": {"name": name}})
            kube.wait_for(lambda: names(informer) >= made, what="the informer to see the 60 ConfigMaps")
            ahead = int(informer.resource_version or 0)

            def restore() -> None:
                shutil.rmtree(data)
                shutil.copytree(backup, data)

            controlplane.restart(cp, "kube-apiserver", while_down=lambda: controlplane.restart(cp, "etcd", 0, restore))
            current = int(kube.get(api, CMS)["metadata"]["resourceVersion"])
            assert current < ahead - 30, "the restore did not take the server's history back"
            kube.create(api, CMS, {"metadata": {"name": "after-restore"}})
            kube.wait_for(
                lambda: names(informer),
                lambda seen: "after-restore" in seen and not seen & made,
                what="the informer to relist: the ConfigMap made after the restore in, the 60 restored away out",
                timeout=60,
            )
    finally:
        informer.stop()
    assert informer.relists >= 2
