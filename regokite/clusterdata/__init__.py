"""Cluster data: replicated Kubernetes objects that policies read from `data`.

One store of objects (`store`), filled by informers (`regokite.replication.replicate`) on a
server or from the input files by `regokite check`, read by every engine in
kube-mgmt's layout: `data.<root>.<resource>.<namespace>.<name>`, cluster-scoped
resources without `<namespace>`.
"""
