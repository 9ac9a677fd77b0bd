"""The only code that talks to the API server: client, discovery, informers, work queue,
leader election, and the runtime that carries out the decisions of `regokite.controllers`.
Every write goes through `actuator` (the Lease, written by `leader` on its own client, aside)."""
