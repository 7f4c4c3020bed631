"""Message deduplication by producer name and sequence id, as Pulsar's broker does it (docs/SERVER.md,
"Deduplication"): on a topic whose `deduplication` policy is on (and always for replicators' SENDs, by
origin offset: protocol/metadata.py), a SEND whose highest sequence id is not above the highest one stored
for its producer name is a duplicate. It is acknowledged (the client's send
succeeds) and not stored again, and a producer that connects again learns the last sequence id stored under
its name (PRODUCER_SUCCESS `last_sequence_id`), so it goes on from there.

What was stored per producer name is in the log itself: every batch a server producer writes carries its
producer name and sequence ids (protocol/metadata.py). A partition's table is made from the log at its first
use, from a snapshot (every SNAPSHOT_INTERVAL entries, and when the server stops) and the entries written
after it, as Pulsar replays its log from the deduplication cursor's snapshot. A snapshot names the last
entry it covers; one that does not match the log (the log lost its tail in a power loss, and others wrote
there since) is ignored, and the table made from the whole log."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from seglog.names import TopicName
from seglog.server.protocol.metadata import deduplication_ids
from seglog.storage.fence import TopicFence
from seglog.storage.reader import BatchInfo
from seglog.storage.store import PartitionStore

logger = logging.getLogger("seglog.server")

SNAPSHOT_FILE = "deduplication.snapshot"
SNAPSHOT_INTERVAL = 1000  # entries between snapshots (Pulsar's brokerDeduplicationEntriesInterval)


@dataclass
class PartitionSequences:
    """The highest sequence id stored under each producer name on one partition."""
    path: Path  # the snapshot file
    highest: dict[str, int] = field(default_factory=dict)
    covered: int = 0  # offsets below this are in `highest`
    last_entry: tuple[int, str, int] | None = None  # (base offset, producer, highest sequence id)
    since_snapshot: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def last(self, producer: str) -> int:
        """The highest sequence id stored under `producer`; -1 if none."""
        return self.highest.get(producer, -1)

    def record(self, producer: str, highest_sequence_id: int, base_offset: int, end_offset: int) -> None:
        """An entry of `producer` was written at `base_offset` (the partition ends at `end_offset` now)."""
        with self.lock:
            self.account(producer, highest_sequence_id, base_offset, end_offset)
            self.since_snapshot += 1
            if self.since_snapshot >= SNAPSHOT_INTERVAL:
                self.snapshot()

    def account(self, producer: str, highest_sequence_id: int, base_offset: int, end_offset: int) -> None:
        """Take in an entry of `producer` at `base_offset` (the partition ends at `end_offset` after it), from
        the log or as it is written; the caller holds the lock or owns the table alone."""
        if highest_sequence_id > self.highest.get(producer, -1):
            self.highest[producer] = highest_sequence_id
        self.covered = end_offset
        self.last_entry = (base_offset, producer, highest_sequence_id)

    def snapshot(self) -> None:
        """Write the table (atomically: a crash leaves the old snapshot or the new one)."""
        self.since_snapshot = 0
        data = {"covered": self.covered, "last_entry": self.last_entry, "highest": self.highest}
        temporary = self.path.with_suffix(".tmp")
        try:
            temporary.write_text(json.dumps(data))
            os.replace(temporary, self.path)
        except OSError as error:  # (the log has everything: the next start replays further back)
            logger.warning("could not write the deduplication snapshot %s: %s", self.path, error)


def load(store: PartitionStore, name: TopicName, partition: int) -> PartitionSequences:
    """The partition's table: its snapshot, if it matches the log, and the entries written after it."""
    path = store.partition_directory(name, partition) / SNAPSHOT_FILE
    sequences = PartitionSequences(path)
    start = store.earliest_offset(name, partition)
    snapshot = _read_snapshot(path)
    if snapshot is not None and _matches(snapshot, store, name, partition, start):
        sequences.highest = {str(k): int(v) for k, v in snapshot["highest"].items()}
        start = max(start, int(snapshot["covered"]))
        last = snapshot["last_entry"]
        sequences.last_entry = (int(last[0]), str(last[1]), int(last[2])) if last else None
    sequences.covered = start
    for base, count, attributes in _entries(store, name, partition, start):
        ids = deduplication_ids(attributes)
        if ids is not None:
            sequences.account(ids[0], ids[1], base, base + count)
        sequences.covered = base + count
    return sequences


def _entries(store: PartitionStore, name: TopicName, partition: int, start: int) -> Iterator[BatchInfo]:
    """The stored batches from the one holding `start` to the end (their attributes, not their messages)."""
    if start >= store.end_offset(name, partition):
        return
    with store.reader(name, partition, start, verify_crc=True) as reader:
        yield from reader.batch_infos()


def _read_snapshot(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        logger.warning("ignoring the deduplication snapshot %s: %s", path, error)
        return None
    if not isinstance(data, dict) or not {"covered", "last_entry", "highest"} <= data.keys():
        logger.warning("ignoring the deduplication snapshot %s: not a snapshot", path)
        return None
    return data


def _matches(snapshot: dict, store: PartitionStore, name: TopicName, partition: int, earliest: int) -> bool:
    """Whether the log still holds what the snapshot covers: as far, and its last entry as it was."""
    covered, last_entry = int(snapshot["covered"]), snapshot["last_entry"]
    if covered > store.end_offset(name, partition):
        return False
    if last_entry is None or int(last_entry[0]) < earliest:
        return True  # (nothing to compare, or deleted by retention since: what follows is replayed)
    base, producer, highest = int(last_entry[0]), str(last_entry[1]), int(last_entry[2])
    for found in _entries(store, name, partition, base):
        return found.base_offset == base and deduplication_ids(found.attributes) == (producer, highest)
    return False


class Deduplication:
    """The tables of the partitions whose producers deduplicate, made at first use (blocking)."""

    def __init__(self, store: PartitionStore) -> None:
        self._store = store
        # by topic and partition, with the fence of the topic the table was made for: a topic deleted and
        # made again under its name starts a table of its own
        self._tables: dict[tuple[str, int], tuple[TopicFence, PartitionSequences]] = {}
        self._lock = threading.Lock()

    def sequences(self, name: TopicName, partition: int, fence: TopicFence) -> PartitionSequences:
        key = (str(name), partition)
        with self._lock:
            known = self._tables.get(key)
            if known is None or known[0] is not fence:
                known = self._tables[key] = (fence, load(self._store, name, partition))
            return known[1]

    def close(self) -> None:
        """Snapshot every table (the server stops)."""
        with self._lock:
            tables, self._tables = [table for fence, table in self._tables.values() if not fence.deleted], {}
        for table in tables:
            with table.lock:
                table.snapshot()
