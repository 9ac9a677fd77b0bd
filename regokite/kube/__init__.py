"""API machinery, the only code that talks to the API server: client, discovery, informers, work queue,
Events, and the actuator. Every write goes through `actuator` (the Lease, written by `runtime.leader` on
its own client, aside). The runtime that runs controllers on it is `regokite.runtime`; replication of
cluster data, `regokite.replication`."""
