"""The maintenance pass: the lifecycle rules turned into cursor moves and segment deletions
(../shared/LIFECYCLE.md, section 7), and the background thread that runs it.

Per partition, in order: message TTL (cursors skip expired messages), backlog-quota eviction (the slowest
cursors skip their oldest messages), then segment deletion (retention.py decides). Only the process that
holds a partition's writer deletes its segments: a writer of this process, or the writer lock taken for
the deletion; a partition written by another process is left to that process's own pass. A subscription
consumed by another process is likewise moved by that process."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seglog.lifecycle.backlog import PartitionBacklog, first_offset_at_or_after, offset_within_bytes, partition_backlog
from seglog.errors import PartitionLockedError, SymbolicLinkError, TopicNotFoundError
from seglog.storage.lock import WriterLock
from seglog.catalog.policies import BacklogQuota, EffectivePolicies
from seglog.lifecycle.retention import Backlog, Limits, deletable_prefix
from seglog.storage.segment import LOCK_FILE, delete_segments, refuse_symbolic_links
from seglog.storage.segment_table import SegmentTable
from seglog.subscriptions.subscription import reading

if TYPE_CHECKING:
    from seglog.log import Log
    from seglog.storage.partition_view import PartitionView
    from seglog.topic import Topic

logger = logging.getLogger(__name__)

EVICTION_TARGET = 0.9  # consumer_backlog_eviction brings a size backlog down to 90% of the limit (Pulsar)


@dataclass
class MaintenanceReport:
    """What one pass did."""
    deleted_segments: list[tuple[str, int, int]] = field(default_factory=list)  # (topic, partition, base)
    freed_bytes: int = 0
    expired: int = 0   # messages acknowledged by message TTL
    evicted: int = 0   # messages skipped by backlog-quota eviction or segment deletion
    skipped_partitions: list[tuple[str, int, str]] = field(default_factory=list)  # (topic, partition, why)


def limits_of(topic: Topic, policies: EffectivePolicies) -> Limits:
    config = topic.config
    return Limits(policies.retention, config.retention_time, config.max_partition_size,
                  config.retention_min_timestamp)


def acked_until(topic: Topic, partition: int, table: SegmentTable) -> Backlog:
    """How far every subscription of the topic has acknowledged the partition (cursor files of other
    processes as last persisted: they can only be behind, which keeps more, never less)."""
    floors = [(record.partitions[partition].acks.floor, name)
              for name, record, _ in topic._log._subscriptions.states(topic)]
    if not floors:
        return Backlog(table.end_offset, None)
    floor, name = min(floors)
    return Backlog(floor, name)


def run_pass(log_: Log) -> MaintenanceReport:
    report = MaintenanceReport()
    for name in log_.list_topics():
        try:
            topic = log_.topic(name)
        except TopicNotFoundError:  # deleted since it was listed
            continue
        if topic.fence.deleted:  # a deletion in progress (or interrupted: the next open finishes it)
            continue
        policies = topic.policies()
        for partition in range(topic.partitions):
            _maintain_partition(topic, partition, policies, report)
    return report


def _maintain_partition(topic: Topic, partition: int, policies: EffectivePolicies, report: MaintenanceReport) -> None:
    log_ = topic._log
    try:
        view = topic._segments(partition)
    except SymbolicLinkError as error:  # refused, as its writer is: the other partitions are still maintained
        report.skipped_partitions.append((topic.name, partition, str(error)))
        return
    table = log_._segment_facts(view).table()
    if not len(table):
        return
    now = log_.clock()
    ttl = policies.message_ttl_ms.value
    if ttl:
        report.expired += _skip_older(topic, partition, first_offset_at_or_after(view, table, now - ttl), "expired")
    evicting = [q.value for q in policies.backlog_quotas.values() if q.value.policy == "consumer_backlog_eviction"]
    if evicting:
        report.evicted += evict(topic, partition, table, evicting, now)
    limits = limits_of(topic, policies)
    count = deletable_prefix(table, limits, now, acked_until(topic, partition, table))
    if count:
        _delete(topic, partition, [int(b) for b in table.bases[:count]], report)
        report.freed_bytes += int(table.sizes[:count].sum())
        report.evicted += _skip_older(topic, partition, int(table.bases[count]), "evicted")


def _skip_older(topic: Topic, partition: int, offset: int, counter: str) -> int:
    """Move every subscription's cursor on `partition` to at least `offset`; count what it skipped
    unacknowledged on the subscription as `counter` ('expired' or 'evicted')."""
    total = 0
    registry = topic._log._subscriptions
    for name, record, _ in list(registry.states(topic)):
        if record.partitions[partition].acks.floor >= offset:
            continue
        with registry.modify(topic, name) as subscription:
            if subscription is not None:
                total += subscription.skip_to(partition, offset, counter=counter)
    return total


def evict(topic: Topic, partition: int, table: SegmentTable, quotas: list[BacklogQuota], now: int,
          incoming: int = 0) -> int:
    """consumer_backlog_eviction: the cursors at or over any of `quotas` skip their oldest messages, far
    enough for all of them. `incoming`: the bytes of a send about to be written, which must find room below
    a size limit."""
    view = topic._segments(partition)
    evicted = 0
    registry = topic._log._subscriptions
    for name, record, live in list(registry.states(topic)):
        with reading(live):
            backlog = partition_backlog(view, table, record.partitions[partition].acks)
        targets = [_eviction_target(view, table, backlog, quota, now, incoming) for quota in quotas]
        target = max((t for t in targets if t is not None), default=None)
        if target is None:
            continue
        with registry.modify(topic, name) as subscription:
            if subscription is not None:
                evicted += subscription.skip_to(partition, target, counter="evicted")
    return evicted


def _eviction_target(view: PartitionView, table: SegmentTable, backlog: PartitionBacklog, quota: BacklogQuota,
                     now: int, incoming: int) -> int | None:
    """The offset a cursor with `backlog` skips to under `quota`, `incoming` bytes more to come, or None if
    it is within it."""
    if quota.type == "destination_storage" and backlog.bytes + incoming >= quota.limit:
        kept = min(int(quota.limit * EVICTION_TARGET), quota.limit - incoming - 1)
        return offset_within_bytes(view, table, max(kept, 0))
    if quota.type == "message_age" and backlog.oldest_timestamp is not None \
            and now - backlog.oldest_timestamp >= quota.limit:
        return first_offset_at_or_after(view, table, now - quota.limit + 1)
    return None


def _delete(topic: Topic, partition: int, bases: list[int], report: MaintenanceReport) -> None:
    log_ = topic._log
    directory = topic.partition_directory(partition)
    writer = log_._writers.get((topic.name, partition))
    if writer is not None:
        with writer.write_lock:
            bases = [b for b in bases if b != writer.active.base_offset]
            delete_segments(directory, bases)
    else:
        try:
            refuse_symbolic_links(directory)
            lock = WriterLock(directory / LOCK_FILE)
        except (PartitionLockedError, SymbolicLinkError) as error:
            report.skipped_partitions.append((topic.name, partition, str(error)))
            return
        try:
            delete_segments(directory, bases)
        finally:
            lock.release()
    for base in bases:
        report.deleted_segments.append((topic.name, partition, base))
        logger.info("%s partition %d: deleted segment %d", topic.name, partition, base)


class Housekeeper:
    """A daemon thread: persists changed cursors every `cursor_persist_interval` and runs the maintenance
    pass every `maintenance_interval` (the first one interval after open)."""

    def __init__(self, log_: Log) -> None:
        self._log = log_
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="seglog-housekeeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        config = self._log.config
        next_pass = time.monotonic() + config.maintenance_interval / 1000
        while not self._stop.wait(config.cursor_persist_interval / 1000):
            try:
                self._log._subscriptions.persist_dirty()
                self._log._policies_changed()  # another process may have changed them
                if time.monotonic() >= next_pass:
                    self._log.run_maintenance()
                    next_pass = time.monotonic() + config.maintenance_interval / 1000
            except Exception:  # keep the thread alive; the next round tries again
                logger.exception("%s: background maintenance failed", self._log.path)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
