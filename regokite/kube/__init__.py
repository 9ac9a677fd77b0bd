"""API machinery, the only code that talks to the API server: client, discovery, informers, work queue,
leader election, shards, the manager that runs reconcilers, the replication of cluster data
(`replicate`), and the actuator. Every write goes through `actuator` (the Lease, written by `leader`
on its own client, aside)."""
