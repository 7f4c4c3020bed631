"""Writes through a `seglog serve` (the serviceUrl option): each task attempt streams its staged rows to the
server's Flight port (DoPut), which stages them in its data directory; the driver's commit() asks the server to
publish the committed attempts (the action "publish"), its abort() to drop them ("abort"). The server publishes
as the in-process sink does (seglog.storage.publication), so a write stays exactly-once (docs/SERVER.md,
"Flight (Arrow data port)")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from pyspark_seglog.sessions import Location, flight_client
from pyspark_seglog.staging import StagedFile
from seglog.storage.staged_writes import STAGED

PRODUCE = "produce"  # what the token's role must be allowed to do on the topic


class RemoteWrites:
    """The Flight calls of a sink writing through the server at `location` (resolved: executors make no REST
    call)."""

    def __init__(self, location: Location) -> None:
        self.location = location

    def stage(self, write_id: str, topic: str, task: int, attempt: int,
              batches: Iterator[pa.RecordBatch]) -> StagedFile:
        """DoPut of one task attempt's rows, batch by batch, to the server's staging file of the attempt."""
        from pyarrow import flight
        descriptor = flight.FlightDescriptor.for_command(json.dumps(
            {"stage": write_id, "task": task, "attempt": attempt, "topic": topic}).encode())
        with flight_client(self.location, PRODUCE) as (client, options):
            writer, _ = client.do_put(descriptor, STAGED, options)
            with writer:  # (closing waits for the server's answer: its error, if it refused, raises there)
                for batch in batches:
                    writer.write_batch(batch)
        return StagedFile(task, attempt)

    def publish(self, write_id: str, topic: str, attempts: list[StagedFile], sink: str | None,
                batch_id: int) -> None:
        """The committed attempts published by the server, in task order (micro-batch `batch_id` of `sink` once)."""
        self._act("publish", {"stage": write_id, "topic": topic, "attempts": [[a.task, a.attempt] for a in attempts],
                              "sink": sink, "batch_id": batch_id})

    def abort(self, write_id: str) -> None:
        """The write's staged attempts dropped by the server."""
        self._act("abort", {"stage": write_id})

    def _act(self, name: str, body: dict[str, Any]) -> None:
        from pyarrow import flight
        with flight_client(self.location, PRODUCE) as (client, options):
            for _ in client.do_action(flight.Action(name, json.dumps(body).encode()), options):
                pass
