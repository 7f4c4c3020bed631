"""The Flight port's writes (docs/SERVER.md, "Flight (Arrow data port)"): a DoPut stages one task attempt's rows in
the server's data directory (storage/staged_writes.py), the action "publish" publishes a write's committed attempts
exactly once (storage/publication.py, the in-process sink's implementation, on a ServerTarget), "abort" drops
them. Each needs the role to be allowed to produce to the topic.

Bounds: a DoPut holds one record batch at a time (written to its file as it comes), and its file at most
MAX_ATTEMPT_BYTES; writes nobody published or aborted (a driver that died) are removed STALE_AFTER_S after their
last change, when the server starts and at every publish and abort. The publishings of one topic are one at a
time, so what a publishing finds after the end offsets it noted is its own (storage/publication.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from seglog.catalog.topics import TopicRef
from seglog.errors import InvalidArgumentError, SeglogError, TopicNotFoundError
from seglog.server import auth
from seglog.server.errors import ServerFailure
from seglog.server.flight.publish_target import ServerTarget
from seglog.server.flight.write_requests import PutDescriptor, parse_abort, parse_publish, parse_put
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.service import BrokerService
from seglog.storage.publication import SinkJournal, publish
from seglog.storage.staged_writes import (
    STAGED,
    attempt_file,
    remove,
    remove_stale,
    stage,
    staged_batches,
    write_directory,
)

MAX_ATTEMPT_BYTES = 8 << 30  # one task attempt's rows (Arrow's bytes): more is refused, its file removed
STALE_AFTER_S = 24 * 3600.0  # a write neither published nor aborted this long after its last DoPut is removed
TOPIC_FILE = "topic"  # in a write's directory: the topic its first DoPut named, which every call must name


class FlightWrites:
    """Staging, publishing and aborting writes on the broker's services, for the roles the Authority allows."""

    def __init__(self, service: BrokerService, authority: auth.Authority, *,
                 max_attempt_bytes: int = MAX_ATTEMPT_BYTES, stale_after_s: float = STALE_AFTER_S) -> None:
        self._service = service
        self._authority = authority
        self._data = service.broker.path
        self._max_attempt_bytes = max_attempt_bytes
        self._stale_after_s = stale_after_s
        self._topic_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        remove_stale(self._data, stale_after_s)

    def check_put(self, principal: auth.Principal, command: bytes) -> PutDescriptor:
        """The attempt a DoPut's descriptor names, once the role may produce to its topic and the write is
        one of that topic's."""
        put = parse_put(command)
        topic = self._authorized(principal, put.topic)
        self._claim(put.write_id, topic)
        return put

    def put(self, put: PutDescriptor, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> None:
        """Stage the rows of a DoPut checked by check_put, batch by batch, replacing the attempt's earlier file."""
        if not schema.equals(STAGED):
            raise InvalidArgumentError("DoPut schema", schema.to_string(show_schema_metadata=False),
                                       f"the staged rows' schema: {STAGED.to_string(show_schema_metadata=False)}")
        directory = write_directory(self._data, put.write_id)
        stage(attempt_file(directory, put.task, put.attempt), self._bounded(batches, put))

    def publish(self, principal: auth.Principal, body: bytes) -> bool:
        """The action "publish": the committed attempts, in task order, once; the write's directory removed.
        Whether rows were published (False: the sink's batch was published before)."""
        request = parse_publish(body)
        topic = self._authorized(principal, request.topic)
        directory = write_directory(self._data, request.write_id)
        staged = self._claimed_topic(directory)
        if staged is not None and staged != topic:  # (refused before the write is touched: it is another's)
            raise InvalidArgumentError("topic", request.topic, f"the topic write {request.write_id} staged its rows "
                                       f"for, {staged}")
        try:
            journal = None if request.sink is None else SinkJournal(self._data, request.sink)
            batches = staged_batches((task, attempt_file(directory, task, attempt))
                                     for task, attempt in request.attempts)
            with self._topic_lock(topic), ServerTarget(self._service, self._resolved(topic)) as target:
                return publish(target, batches, journal, request.batch_id)
        finally:
            remove(directory)
            remove_stale(self._data, self._stale_after_s)

    def abort(self, principal: auth.Principal, body: bytes) -> None:
        """The action "abort": the write's directory removed (nothing if it is gone)."""
        directory = write_directory(self._data, parse_abort(body))
        topic = self._claimed_topic(directory)
        if topic is not None:
            self._authorized(principal, topic)
        remove(directory)
        remove_stale(self._data, self._stale_after_s)

    def _authorized(self, principal: auth.Principal, topic: str) -> str:
        """The topic's full name, once the role may produce to it (ServerFailure if not)."""
        try:
            parsed, _, _ = self._service.parse(topic)
        except ServerFailure as failure:  # (a non-persistent topic)
            raise InvalidArgumentError("topic", topic, "a persistent topic's name", detail=str(failure)) from None
        name = str(parsed)
        self._authority.authorize_topic(principal, name, auth.PRODUCE, f"produce to topic {name}")
        return name

    def _claim(self, write_id: str, topic: str) -> None:
        """Note the write's topic at its first DoPut; refuse a DoPut of the same write naming another."""
        directory = write_directory(self._data, write_id)
        directory.mkdir(parents=True, exist_ok=True)
        record = directory / TOPIC_FILE
        with self._locks_lock:
            staged = self._claimed_topic(directory)
            if staged is None:
                record.write_text(topic)
            elif staged != topic:
                raise InvalidArgumentError("topic", topic, f"the topic write {write_id} stages its rows for, {staged}")

    @staticmethod
    def _claimed_topic(directory: Path) -> str | None:
        try:
            return (directory / TOPIC_FILE).read_text()
        except FileNotFoundError:
            return None

    def _bounded(self, batches: Iterator[pa.RecordBatch], put: PutDescriptor) -> Iterator[pa.RecordBatch]:
        total = 0
        for batch in batches:
            total += batch.nbytes
            if total > self._max_attempt_bytes:
                raise InvalidArgumentError("DoPut stream", f"more than {self._max_attempt_bytes:,} bytes",
                                           f"at most {self._max_attempt_bytes:,} bytes of rows per task attempt "
                                           f"(task {put.task}): write the rows in more Spark partitions")
            yield batch

    def _resolved(self, topic: str) -> TopicRef:
        """The topic's TopicRef, the topic created as its namespace creates topics on first use if missing."""
        try:
            target = self._service.resolve(topic, create=True)
        except ServerFailure as failure:
            if failure.code == api.TopicNotFound:
                raise TopicNotFoundError(str(failure)) from None
            raise SeglogError(str(failure)) from None
        assert target is not None  # (create=True: made, or refused)
        if target.named_partition:
            raise InvalidArgumentError("topic", topic, f"a topic's name, not the name of partition "
                                       f"{target.partition} of {target.ref.name}: rows are routed to partitions")
        return target.ref

    def _topic_lock(self, topic: str) -> threading.Lock:
        with self._locks_lock:
            return self._topic_locks.setdefault(topic, threading.Lock())
