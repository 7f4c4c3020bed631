"""The maintenance pass: the lifecycle rules turned into cursor moves and segment deletions
(docs/LIFECYCLE.md, When the rules run), and the background thread that runs it.

Per partition, in order: message TTL (cursors skip expired messages), backlog-quota eviction (the slowest
cursors skip their oldest messages), compaction when due (compaction_rules.py decides; Kafka's model then
deletes the compacted segments), then segment deletion (retention.py decides; not on a topic whose
cleanup_policy is 'compact' alone, which Kafka's rules keep whole but for compaction). Only the process that
holds a partition's writer deletes its segments: a writer of this process, or the writer lock taken for
the deletion; a partition written by another process is left to that process's own pass. A subscription
consumed by another process is likewise moved by that process."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from seglog.catalog.policies import BacklogQuota, EffectivePolicies
from seglog.catalog.topics import Catalog, TopicRef
from seglog.clock import Clock
from seglog.errors import PartitionLockedError, SymbolicLinkError, TopicNotFoundError
from seglog.lifecycle.backlog import PartitionBacklog, offset_within_bytes, partition_backlog
from seglog.lifecycle.compaction import CompactionRunningError, compact_partition
from seglog.lifecycle.compaction_rules import CompactionPlan, compaction_plan
from seglog.lifecycle.retention import AckFloor, Limits, deletable_prefix
from seglog.storage.compacted import read_state
from seglog.storage.partition_view import PartitionView
from seglog.storage.segment_table import SegmentTable, first_offset_at_or_after
from seglog.storage.store import PartitionStore
from seglog.subscriptions.registry import Subscriptions
from seglog.subscriptions.subscription import reading

logger = logging.getLogger(__name__)

EVICTION_TARGET = 0.9  # consumer_backlog_eviction brings a size backlog down to 90% of the limit (Pulsar)


@dataclass
class MaintenanceReport:
    """What one pass did: a plain value, the caller's own."""
    deleted_segments: list[tuple[str, int, int]] = field(default_factory=list)  # (topic, partition, base)
    freed_bytes: int = 0
    expired: int = 0   # messages acknowledged by message TTL
    evicted: int = 0   # messages skipped by backlog-quota eviction or segment deletion
    skipped_partitions: list[tuple[str, int, str]] = field(default_factory=list)  # (topic, partition, why)
    # (topic, partition, new horizon, messages removed, the rule that called for it)
    compactions: list[tuple[str, int, int, int, str]] = field(default_factory=list)


def limits_of(ref: TopicRef, policies: EffectivePolicies) -> Limits:
    config = ref.config
    return Limits(policies.retention, config.retention_time, config.max_partition_size,
                  config.retention_min_timestamp)


class Maintenance:
    """The lifecycle rules of one data directory, applied by `run_pass` (and by a quota's eviction at send)."""

    def __init__(self, catalog: Catalog, store: PartitionStore, subscriptions: Subscriptions, clock: Clock) -> None:
        self.catalog = catalog
        self.store = store
        self.subscriptions = subscriptions
        self.clock = clock
        self._lock = threading.Lock()  # one pass at a time

    def run_pass(self) -> MaintenanceReport:
        with self._lock:
            report = MaintenanceReport()
            for name in self.catalog.topic_names():
                try:
                    ref = self.catalog.topic(name)
                except TopicNotFoundError:  # deleted since it was listed
                    continue
                if self.store.fence(ref.name).deleted:  # a deletion in progress (or interrupted: the next open)
                    continue
                policies = self.catalog.policies(ref)
                for partition in range(ref.partitions):
                    self._maintain_partition(ref, partition, policies, report)
            return report

    def acked_until(self, ref: TopicRef, partition: int, table: SegmentTable) -> AckFloor:
        """How far every subscription of the topic has acknowledged the partition (cursor files of other
        processes as last persisted: they can only be behind, which keeps more, never less)."""
        floors = [(record.partitions[partition].acks.floor, name)
                  for name, record, _ in self.subscriptions.states(ref)]
        if not floors:
            return AckFloor(table.end_offset, None)
        floor, name = min(floors)
        return AckFloor(floor, name)

    def _maintain_partition(self, ref: TopicRef, partition: int, policies: EffectivePolicies,
                            report: MaintenanceReport) -> None:
        try:
            view = self.store.view(ref.name, partition)
        except SymbolicLinkError as error:  # refused, as its writer is: the other partitions are still maintained
            report.skipped_partitions.append((str(ref), partition, str(error)))
            return
        table = view.facts.table()
        if not len(table):
            return
        now = self.clock()
        ttl = policies.message_ttl_ms.value
        if ttl:
            report.expired += self._skip_older(ref, partition, first_offset_at_or_after(view, table, now - ttl),
                                               "expired")
        evicting = [q.value for q in policies.backlog_quotas.values() if q.value.policy == "consumer_backlog_eviction"]
        if evicting:
            report.evicted += self.evict(ref, partition, evicting)
        plan = compaction_plan(ref.config, policies.compaction_threshold.value, view, table,
                               read_state(view.directory), now)
        if plan is not None:
            self._compact(ref, partition, view, table, plan, report)
            table = view.facts.table()
        if ref.config.cleanup_policy == "compact":
            return
        count = deletable_prefix(table, limits_of(ref, policies), now, self.acked_until(ref, partition, table))
        if count:
            self._delete(ref, partition, [int(b) for b in table.bases[:count]], report)
            report.freed_bytes += int(table.sizes[:count].sum())
            report.evicted += self._skip_older(ref, partition, int(table.bases[count]), "evicted")

    def _compact(self, ref: TopicRef, partition: int, view: PartitionView, table: SegmentTable,
                 plan: CompactionPlan, report: MaintenanceReport) -> None:
        try:
            outcome = compact_partition(view, horizon=plan.horizon, now_ms=self.clock(),
                                        delete_retention_ms=plan.delete_retention_ms, log_compacted=plan.log_compacted,
                                        expire_before_ms=plan.expire_before_ms)
        except CompactionRunningError as error:
            report.skipped_partitions.append((str(ref), partition, str(error)))
            return
        report.compactions.append((str(ref), partition, outcome.horizon, outcome.removed, plan.reason))
        logger.info("%s partition %d: compacted up to offset %d (%s)", ref, partition, outcome.horizon, plan.reason)
        if plan.log_compacted:  # Kafka's model: the view stands for the log below its horizon
            below = table.next_offsets[:-1] <= outcome.horizon
            self._delete(ref, partition, [int(b) for b in table.bases[:-1][below]], report)
            report.freed_bytes += int(table.sizes[:-1][below].sum())

    def _skip_older(self, ref: TopicRef, partition: int, offset: int, counter: str) -> int:
        """Move every subscription's cursor on `partition` to at least `offset`; count what it skipped
        unacknowledged on the subscription as `counter` ('expired' or 'evicted')."""
        total = 0
        for name, record, _ in list(self.subscriptions.states(ref)):
            if record.partitions[partition].acks.floor >= offset:
                continue
            with self.subscriptions.modify(ref, name) as subscription:
                if subscription is not None:
                    total += subscription.skip_to(partition, offset, counter=counter)
        return total

    def evict(self, ref: TopicRef, partition: int, quotas: list[BacklogQuota], incoming: int = 0) -> int:
        """consumer_backlog_eviction: the cursors at or over any of `quotas` skip their oldest messages, far
        enough for all of them. `incoming`: the bytes of a send about to be written, which must find room
        below a size limit."""
        view = self.store.view(ref.name, partition)
        table = view.facts.table()
        now = self.clock()
        evicted = 0
        for name, record, live in list(self.subscriptions.states(ref)):
            with reading(live):
                backlog = partition_backlog(view, table, record.partitions[partition].acks)
            targets = [_eviction_target(view, table, backlog, quota, now, incoming) for quota in quotas]
            target = max((t for t in targets if t is not None), default=None)
            if target is None:
                continue
            with self.subscriptions.modify(ref, name) as subscription:
                if subscription is not None:
                    evicted += subscription.skip_to(partition, target, counter="evicted")
        return evicted

    def _delete(self, ref: TopicRef, partition: int, bases: list[int], report: MaintenanceReport) -> None:
        try:
            deleted = self.store.delete_segments(ref.name, partition, bases)
        except (PartitionLockedError, SymbolicLinkError) as error:
            report.skipped_partitions.append((str(ref), partition, str(error)))
            return
        for base in deleted:
            report.deleted_segments.append((str(ref), partition, base))
            logger.info("%s partition %d: deleted segment %d", ref, partition, base)


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


class Housekeeper:
    """A daemon thread: persists changed cursors every `cursor_persist_interval` and runs the maintenance
    pass every `maintenance_interval` (the first one interval after open)."""

    def __init__(self, maintenance: Maintenance, *, cursor_persist_interval_ms: int,
                 maintenance_interval_ms: int) -> None:
        self._maintenance = maintenance
        self._persist_interval = cursor_persist_interval_ms / 1000
        self._pass_interval = maintenance_interval_ms / 1000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="seglog-housekeeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        maintenance = self._maintenance
        next_pass = time.monotonic() + self._pass_interval
        while not self._stop.wait(self._persist_interval):
            try:
                maintenance.subscriptions.persist_dirty()
                if maintenance.catalog.metadata.changed_elsewhere():  # (by another process: nothing told us)
                    maintenance.catalog.policies_changed()
                if time.monotonic() >= next_pass:
                    maintenance.run_pass()
                    next_pass = time.monotonic() + self._pass_interval
            except Exception:  # keep the thread alive; the next round tries again
                logger.exception("%s: background maintenance failed", maintenance.store.path)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
