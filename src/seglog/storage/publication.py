"""Publishing staged rows (staged_writes.py) exactly once: the one implementation behind the Spark connector's
in-process writes and the server's Flight port, each of which hands it a PublishTarget (the topic's partitions,
their end offsets, reading stored rows, appending staged rows with the topic's backlog quotas applied).

Each row's partition is decided here, the same way every time (routed()): the row's partition column, else its
key's partition as a producer's (Kafka's murmur2), else the staged batch's turn. So the same staged rows go to
the same partitions in the same order.

A streaming sink remembers, in its journal (DATA/spark-sinks/SINK.json, replaced atomically), the last
micro-batch it published, and skips a batch id it has published already: Spark commits a batch again after a
restart that followed a crash between its offset and commit logs. Before it sends a batch's first row it notes
each partition's end offset there, so that a batch whose publishing the driver's (or the server's) death cut
short is completed, not repeated, when it is replayed: the rows of each partition found right after the end
offset noted (the same values and keys in the same order) are left out (_AlreadyPublished). That holds while
nothing else appends to the partitions during a publishing: the in-process publisher holds every partition's
writer lock, the server publishes one write of a topic at a time (docs/SPARK.md, "Writes")."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seglog.storage.partitioning import partitions_for_keys
from seglog.storage.staged_writes import check_sink_id

SINK_STATE_DIRECTORY = "spark-sinks"


class PublishTarget(Protocol):
    """The topic staged rows are published to, and its partitions' writers held for the publishing."""

    @property
    def partitions(self) -> int:
        """The topic's partitions."""

    def end_offset(self, partition: int) -> int:
        """The offset the next message written to `partition` will get."""

    def read(self, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """The stored messages [start, end) of `partition`, batches with `value` and `key` columns."""

    def append(self, rows: pa.RecordBatch, partition: int) -> None:
        """Write staged rows (staged_writes.STAGED's columns) to `partition`, as a producer's send_batch does
        (backlog quotas applied; a null timestamp is the time of the send)."""


def publish(target: PublishTarget, batches: Iterable[pa.RecordBatch], journal: SinkJournal | None = None,
            batch_id: int = -1) -> bool:
    """Send the staged rows to `target`. With a `journal` (a streaming sink's), micro-batch `batch_id` once: a
    batch id published already sends nothing, and one cut short is completed. Whether anything was published
    (False: the batch id was published before)."""
    if journal is not None and batch_id <= journal.last_batch_id():
        return False
    resumed = _AlreadyPublished(target, journal.begin(batch_id, target) if journal is not None else {})
    for index, batch in enumerate(batches):
        for rows, partition in routed(batch, index, target.partitions):
            rows = resumed.left_out(rows, partition)
            if rows.num_rows:
                target.append(rows, partition)
    if journal is not None:
        journal.published(batch_id)
    return True


def send_arguments(rows: pa.RecordBatch, now: int) -> tuple[pa.Array, pa.Array | None, pa.Array | None,
                                                              pa.Array | None]:
    """Staged rows as send_batch's values, keys, timestamps and properties: a column of nulls is None, a null
    timestamp `now` (the time of the send)."""
    keys, timestamps, properties = rows.column("key"), rows.column("timestamp"), rows.column("properties")
    # pyarrow-stubs type fill_null's result as the join of the array and the Python fill value: object
    stamps = cast(pa.Array, pc.fill_null(timestamps, now))  # type: ignore[type-var]
    return (rows.column("value"), None if keys.null_count == len(keys) else keys,
            None if timestamps.null_count == len(timestamps) else stamps,
            None if properties.null_count == len(properties) else properties)


def routed(batch: pa.RecordBatch, index: int, partitions: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The rows of staged batch number `index` for each partition: the row's partition column, else its
    key's partition (Kafka's murmur2, as a producer's), else the batch's turn (index % partitions, as
    keyless send_batch calls take turns)."""
    n = batch.num_rows
    targets = np.full(n, index % partitions, dtype=np.int64)
    keys, given = batch.column("key"), batch.column("partition")
    if keys.null_count < n:
        keyed = np.asarray(pc.is_valid(keys))
        targets[keyed] = partitions_for_keys(keys, partitions)[keyed]
    if given.null_count < n:
        named = np.asarray(pc.is_valid(given))
        targets[named] = np.asarray(given.fill_null(0), dtype=np.int64)[named]
    for partition in np.unique(targets):
        yield batch.filter(pa.array(targets == partition)), int(partition)


class _AlreadyPublished:
    """For a batch whose publishing was cut short: the rows of each partition found right after the end
    offset noted before it began (the same values and keys in the same order) are left out."""

    def __init__(self, target: PublishTarget, ends: dict[int, int]) -> None:
        self.target = target
        self.positions = dict(ends)  # partitions still being compared, and where

    def left_out(self, rows: pa.RecordBatch, partition: int) -> pa.RecordBatch:
        position = self.positions.get(partition)
        if position is None:
            return rows
        found = self._matching_prefix(rows, partition, position)
        if found < rows.num_rows:
            del self.positions[partition]  # from here on, nothing of this batch was published
        else:
            self.positions[partition] = position + found
        return rows.slice(found)

    def _matching_prefix(self, rows: pa.RecordBatch, partition: int, position: int) -> int:
        found = 0
        end = max(position, min(self.target.end_offset(partition), position + rows.num_rows))
        for stored in self.target.read(partition, position, end):
            expected = rows.slice(found, stored.num_rows)
            same = pc.and_(_equal(stored.column("value"), expected.column("value")),
                           _equal(stored.column("key"), expected.column("key")))
            run = len(same) if pc.all(same).as_py() else pc.index(same, False).as_py()
            found += run
            if run < len(same):
                break
        return found


def _equal(left: pa.Array, right: pa.Array) -> pa.Array:
    """Row by row: both null, or equal."""
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    # pyarrow-stubs type fill_null's result as the join of the array and the Python fill value: object
    return pc.or_(pc.fill_null(pc.equal(left, right), False), both_null)  # type: ignore[call-overload, type-var]


class SinkJournal:
    """What a streaming sink published: DATA/spark-sinks/SINK.json, replaced atomically, holding the last
    batch id published and, while a batch is being published, its id and the partitions' end offsets
    before it."""

    def __init__(self, data_directory: str | os.PathLike[str], sink: str) -> None:
        self.path = Path(data_directory, SINK_STATE_DIRECTORY, f"{check_sink_id(sink)}.json")

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"batchId": -1}

    def last_batch_id(self) -> int:
        return self._read()["batchId"]

    def begin(self, batch_id: int, target: PublishTarget) -> dict[int, int]:
        """Note that `batch_id` is being published; returns, if its publishing was begun before and cut
        short, the end offsets noted then ({} otherwise)."""
        state = self._read()
        publishing = state.get("publishing")
        if publishing is not None and publishing["batchId"] == batch_id:
            return {int(p): offset for p, offset in publishing["ends"].items()}
        ends = {str(p): target.end_offset(p) for p in range(target.partitions)}
        self._write({"batchId": state["batchId"], "publishing": {"batchId": batch_id, "ends": ends}})
        return {}

    def published(self, batch_id: int) -> None:
        self._write({"batchId": batch_id})

    def _write(self, state: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_suffix(".tmp")
        staging.write_text(json.dumps(state))
        os.replace(staging, self.path)
