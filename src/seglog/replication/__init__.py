"""Geo-replication between seglog clusters, as Pulsar's (docs/REPLICATION.md): replicators that forward each
topic partition's messages to the other clusters of its replication set over Pulsar's binary protocol.

It runs inside `seglog serve` (server.app's Extension, given by the CLI) and sits above the server: it uses
the server's protocol codec, and the server knows nothing of it."""
