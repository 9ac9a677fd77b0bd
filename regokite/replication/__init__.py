"""Replication of cluster data: the informers that fill `regokite.clusterdata`'s store (`replicate`),
and the feeder process that holds them for an admission server's workers, each mirroring its store
(`replica_feed`)."""
