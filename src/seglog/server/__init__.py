"""seglog as a network server: Pulsar's binary protocol (and, later, its admin REST API), so Pulsar's own
clients produce to a seglog data directory (docs/SERVER.md).

Layer: beside the in-process API (log, topic, producer, consumer), above admin; built on the Broker's
services, never on the in-process classes. `protocol/` is pure (frames, commands, batches, message ids);
`connection.py` is a client connection's state on asyncio; `service.py` maps commands to the Broker;
`errors.py` maps seglog's exceptions to Pulsar's error codes; `app.py` runs `seglog serve`."""

from seglog.server.app import ServeOptions, run, serve

__all__ = ["ServeOptions", "run", "serve"]
