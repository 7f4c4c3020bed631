"""pulsar-admin's semantics without a protocol: tenants, namespaces, topics and their policies, stats and
metrics, for the in-process API, the command line and (later) the REST server alike."""
