"""The Flight port of `seglog serve` (docs/SERVER.md, "Flight (Arrow data port)"): ranges of a partition's
stored batches streamed as Arrow IPC by Arrow Flight's DoGet (pyarrow.flight), for query engines reading
through the server (the Spark connector's executors).

ticket.py (what a DoGet asks for), service.py (DoGet), authentication.py (the `authorization` header, as the
HTTP port reads it), streams.py (the bounds on streams and batches), errors.py (seglog's errors as the client
sees them), port.py (listening and stopping)."""

from seglog.server.flight.port import DEFAULT_PORT, FlightPort, FlightTls

__all__ = ["DEFAULT_PORT", "FlightPort", "FlightTls"]
