"""The controller runtime on the API machinery (`regokite.kube`), as controller-runtime's pkg/manager,
pkg/reconcile and pkg/leaderelection: the manager wiring informers, queues and worker threads
(`sync_workers`) around reconcilers (`reconcile`), leader election (`leader`), shards (`shards`) and the
caches that hold only a replica's share (`shard_cache`), and the health endpoint (`health`)."""
