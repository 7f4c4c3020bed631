"""seglog as a network server: Pulsar's binary protocol (and, later, its admin REST API), so Pulsar's own
clients produce to a seglog data directory (docs/SERVER.md).

Layer: beside the in-process API (log, topic, producer, consumer), above admin; built on the Broker's
services, never on the in-process classes. `protocol/` is pure (frames, commands, batches, message ids);
`connection.py` is a client connection's state on asyncio, handing each command to its handler (its
producers' to `producers.py`, who may produce across connections being `producer_access.py`'s, its
consumers' deliveries to `consumers.py`); `service.py` maps commands to the Broker;
`errors.py` maps seglog's exceptions to Pulsar's error codes; `auth.py` authenticates and authorizes
clients; `flight/` streams ranges of partitions as Arrow (the Flight port); `app.py` runs `seglog serve`."""

from seglog.server.app import ServeOptions, run, serve
from seglog.server.auth import create_secret_key, create_token, read_secret_key

__all__ = ["ServeOptions", "create_secret_key", "create_token", "read_secret_key", "run", "serve"]
