"""Topic stats, internal stats and the retention explanation, as dicts with Pulsar's names where Pulsar
has them (msgBacklog, backlogSize, msgExpired, storageSize, markDeletePosition ...).

`storageSize` is logical: the bytes the segments and their indexes hold, which is what the lifecycle rules
count. `physicalStorageSize` is what the files occupy on disk, including the space pre-allocated for the
active segment; the two differ by up to one segment per partition, and deletion is by whole segments, so
a topic may hold more than its retention size until its oldest segment can go as a whole."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from seglog.admin import traffic_stats
from seglog.catalog.policies import MB, MINUTE_MS, Retention
from seglog.lifecycle.backlog import backlog_count, partition_backlog
from seglog.lifecycle.compaction_rules import compaction_plan, explain_compaction
from seglog.lifecycle.maintenance import limits_of
from seglog.lifecycle.retention import explain
from seglog.names import REPLICATOR_PREFIX
from seglog.storage.compacted import CompactedState, read_state
from seglog.storage.segment import list_segments
from seglog.storage.segment_table import listed_again_if_deleted
from seglog.subscriptions.subscription import reading

if TYPE_CHECKING:
    from pathlib import Path

    from seglog.broker import Broker
    from seglog.catalog.topics import TopicRef
    from seglog.storage.partition_view import PartitionView
    from seglog.storage.segment_table import SegmentTable
    from seglog.subscriptions.cursor_file import PartitionCursor


TopicFigures = Callable[['Broker', 'TopicRef'], dict[str, Any]]


def _listed_again_if_deleted(compute: TopicFigures) -> TopicFigures:
    """`compute` (figures of a topic's segments), computed again with each partition listed again when a
    segment it read was deleted since it was listed (by the lifecycle rules of this process or another:
    Kafka's model deletes a segment as soon as it is sealed and compacted); at most LISTING_ATTEMPTS times."""
    @functools.wraps(compute)
    def computed(broker: Broker, ref: TopicRef) -> dict[str, Any]:
        views = [broker.store.view(ref.name, partition) for partition in range(ref.partitions)]
        return listed_again_if_deleted(views, lambda: compute(broker, ref))
    return computed


def _tables(broker: Broker, ref: TopicRef) -> list[tuple[PartitionView, SegmentTable]]:
    views = [broker.store.view(ref.name, p) for p in range(ref.partitions)]
    return [(view, view.facts.table()) for view in views]


def physical_size(broker: Broker, ref: TopicRef) -> int:
    total = 0
    for partition in range(ref.partitions):
        directory = broker.store.partition_directory(ref.name, partition)
        for name in os.listdir(directory) if directory.exists() else ():
            if name.endswith((".log", ".index", ".timeindex")):
                total += os.stat(directory / name).st_blocks * 512
    return total


def compacted_state(directory: Path) -> CompactedState:
    """The compacted view's state of the partition in `directory`; generation 0 (an empty view, horizon 0)
    where it was never compacted."""
    return read_state(directory) or CompactedState()


def compaction_stats(states: Sequence[CompactedState], failed_ms: int = 0) -> dict[str, int]:
    """Pulsar's `compaction` section of TopicStats (CompactionStats) of the partitions whose compacted views'
    `states` are given: the last compaction that changed each view, every partition together (the messages it
    left out and the time it took added up, its end the latest; by the log's clock). `failed_ms`: when the
    last compaction asked of this process failed (Compactor's status; the state on disk keeps no failure)."""
    done = [state for state in states if state.generation]
    return {"lastCompactionRemovedEventCount": sum(state.last_removed for state in done),
            "lastCompactionSucceedTimestamp": max((state.last_finished_ms for state in done), default=0),
            "lastCompactionFailedTimestamp": failed_ms,
            "lastCompactionDurationTimeInMills": sum(state.last_duration_ms for state in done)}


def _compaction(state: CompactedState) -> dict[str, int]:
    """seglog's compaction section of a partition's internal stats: its compacted view (docs/LIFECYCLE.md)."""
    return {"horizon": state.horizon, "generation": state.generation, "messages": state.records,
            "size": state.size, "lastRemoved": state.last_removed, "lastFinishedMs": state.last_finished_ms,
            "lastDurationMs": state.last_duration_ms}


def replicated(broker: Broker, cursor: PartitionCursor) -> bool:
    """Whether a subscription's position on a partition is replicated to the other clusters: marked so, and
    the broker has replicated subscriptions (broker.conf enableReplicatedSubscriptions). The mark stays while
    they are disabled, as Pulsar keeps the cursor's property, and counts again once they are enabled."""
    return cursor.replicated and broker.config.enable_replicated_subscriptions


def shown_retention(retention: Retention) -> dict[str, int]:
    """A retention as stats, explain_retention and the applied retention show it: Pulsar's RetentionPolicies
    (retentionTimeInMinutes, retentionSizeInMB), whole numbers of its units. A topic's retention_time /
    max_partition_size acting as its retention need not be ('10 GB' is 9536.74 MB): Pulsar's figure is then
    rounded up (Retention.to_admin, never down to 0, which would mean keep nothing) and the exact one is given
    beside it, retentionTimeInMs or retentionSizeInBytes."""
    shown = retention.to_admin()
    if retention.time_ms > 0 and retention.time_ms % MINUTE_MS:
        shown["retentionTimeInMs"] = retention.time_ms
    if retention.size_bytes > 0 and retention.size_bytes % MB:
        shown["retentionSizeInBytes"] = retention.size_bytes
    return shown


# Pulsar's ReplicatorStats of a remote cluster, with nothing measured: what a data directory shows, where no
# replicator runs; a server fills in its replicators' connections and counts (server/rest/stats.py)
REPLICATOR_STATS: dict[str, Any] = {
    "msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgInCounter": 0, "bytesInCounter": 0, "msgRateOut": 0.0,
    "msgThroughputOut": 0.0, "msgOutCounter": 0, "bytesOutCounter": 0, "msgRateExpired": 0.0,
    "replicationBacklog": 0, "connected": False, "replicationDelayInSeconds": 0, "inboundConnection": None,
    "inboundConnectedSince": None, "outboundConnection": None, "outboundConnectedSince": None}


def replication_section(backlogs: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The `replication` section of stats from the messages behind each subscription (`backlogs`): per remote
    cluster X whose replicator's cursor `pulsar.repl.X` the topic has, ReplicatorStats with that cursor's
    backlog as replicationBacklog; {} for a topic that replicates nowhere."""
    return {name[len(REPLICATOR_PREFIX):]: {**REPLICATOR_STATS, "replicationBacklog": messages}
            for name, messages in sorted(backlogs.items()) if name.startswith(REPLICATOR_PREFIX)}


def _policies(broker: Broker, ref: TopicRef) -> dict[str, Any]:
    policies = broker.catalog.policies(ref)
    retention = policies.retention
    quotas = {t: {**q.value.to_admin(), "level": q.level} for t, q in policies.backlog_quotas.items()}
    return {"retention": {**shown_retention(retention.value), "level": retention.level},
            "messageTTLInSeconds": {"value": policies.message_ttl_ms.value // 1000,
                                    "level": policies.message_ttl_ms.level},
            "backlogQuotas": quotas}


@_listed_again_if_deleted
def topic_stats(broker: Broker, ref: TopicRef) -> dict[str, Any]:
    """Pulsar's topic stats: storage, backlog per subscription, policies in force, backlog quotas' usage,
    `replication`: the replication cursors' backlogs per remote cluster (replication_section), the live
    rates and counters (traffic_stats) of what was written, of each subscription and consumer, and of the
    producers connected, and `compaction` (compaction_stats) with each partition's compactionHorizon."""
    now = broker.clock()
    tables = _tables(broker, ref)
    traffic = broker.store.traffic.topic(str(ref.name))
    every = range(ref.partitions)
    subscriptions: dict[str, Any] = {}
    for name, record, live in broker.subscriptions.states(ref):
        with reading(live):
            backlogs = [partition_backlog(view, table, cursor.acks)
                        for (view, table), cursor in zip(tables, record.partitions)]
            consumers = [traffic_stats.consumer(c) for c in live.consumers] if live is not None else []
        oldest = min((b.oldest_timestamp for b in backlogs if b.oldest_timestamp is not None), default=None)
        subscriptions[name] = {
            "type": record.subscription_type,
            "msgBacklog": sum(b.messages for b in backlogs),
            "backlogSize": sum(b.bytes for b in backlogs),
            "msgExpired": sum(c.expired for c in record.partitions),
            "msgEvicted": sum(c.evicted for c in record.partitions),
            "msgDelayed": live.delayed_messages() if live is not None else 0,
            "oldestUnackedMessageAgeSeconds": None if oldest is None else (now - oldest) / 1000,
            "consumers": consumers,
            # on any partition, as Pulsar adds up a partitioned topic's subscription stats
            "isReplicated": any(replicated(broker, c) for c in record.partitions),
            **traffic_stats.subscription_out(traffic.subscriptions.get(name), every),
        }
    policies = broker.catalog.policies(ref)
    compacted = [compacted_state(view.directory) for view, _ in tables]
    slowest_size = max((s["backlogSize"] for s in subscriptions.values()), default=0)
    ages = [(s["oldestUnackedMessageAgeSeconds"], n) for n, s in subscriptions.items()
            if s["oldestUnackedMessageAgeSeconds"] is not None]
    oldest_age, oldest_name = max(ages) if ages else (0, None)
    size_quota = policies.backlog_quotas.get("destination_storage")
    time_quota = policies.backlog_quotas.get("message_age")
    return {
        **traffic_stats.inbound(traffic, every),
        **traffic_stats.outbound(list(subscriptions.values()), traffic.removed_out),
        "publishers": traffic_stats.publishers(traffic, every),
        "storageSize": sum(table.total_size for _, table in tables),
        "physicalStorageSize": physical_size(broker, ref),
        "backlogSize": slowest_size,
        "msgBacklog": max((s["msgBacklog"] for s in subscriptions.values()), default=0),
        "backlogQuotaLimitSize": size_quota.value.limit if size_quota else -1,
        "backlogQuotaLimitTime": time_quota.value.limit // 1000 if time_quota else -1,
        "backlogQuotaUsage": {"size": slowest_size, "timeSeconds": oldest_age},
        "oldestBacklogMessageAgeSeconds": oldest_age,
        "oldestBacklogMessageSubscriptionName": oldest_name,
        "partitions": {str(p): {"earliestOffset": table.earliest_offset, "endOffset": table.end_offset,
                                "storageSize": table.total_size, "segments": len(table),
                                "compactionHorizon": compacted[p].horizon}
                       for p, (_, table) in enumerate(tables)},
        "compaction": compaction_stats(compacted, broker.compactor.status(ref).failed_ms),
        "policies": _policies(broker, ref),
        "subscriptions": subscriptions,
        "replication": replication_section({name: s["msgBacklog"] for name, s in subscriptions.items()}),
    }


@_listed_again_if_deleted
def internal_stats(broker: Broker, ref: TopicRef) -> dict[str, Any]:
    """Segments, cursors and the compacted view of every partition (Pulsar's stats-internal)."""
    tables = _tables(broker, ref)
    states = list(broker.subscriptions.states(ref))
    partitions = {}
    for p, (view, table) in enumerate(tables):
        segments = [{"baseOffset": int(table.bases[i]), "nextOffset": int(table.next_offsets[i]),
                     "messages": int(table.next_offsets[i] - table.bases[i]), "size": int(table.sizes[i]),
                     "lastWriteMs": int(table.last_write_ms[i]), "active": i == len(table) - 1}
                    for i in range(len(table))]
        cursors = {}
        for name, record, live in states:
            with reading(live):
                acks = record.partitions[p].acks
                cursors[name] = {"markDeletePosition": acks.floor - 1,
                                 "readPosition": live.read_position(p) if live is not None else acks.floor,
                                 "ackedRanges": acks.ranges().tolist(),
                                 "individuallyAcked": acks.individual_count}
        partitions[str(p)] = {"numberOfEntries": table.end_offset - table.earliest_offset,
                              "totalSize": table.total_size, "segments": segments, "cursors": cursors,
                              "segmentFiles": len(list_segments(view.directory)),
                              "compaction": _compaction(compacted_state(view.directory)),
                              "spareSegmentReady": broker.store.spare_ready(ref.name, p)}
    return {"partitions": partitions}


@_listed_again_if_deleted
def explain_retention(broker: Broker, ref: TopicRef) -> dict[str, Any]:
    """Why each segment is kept, or which rule deletes it next and when."""
    now = broker.clock()
    policies = broker.catalog.policies(ref)
    limits = limits_of(ref, policies)
    partitions = {}
    compaction = {}
    for p, (view, table) in enumerate(_tables(broker, ref)):
        ack_floor = broker.maintenance.acked_until(ref, p, table)
        state = read_state(view.directory)
        plan = compaction_plan(ref.config, policies.compaction_threshold.value, view, table, state, now) \
            if len(table) else None
        fates, compaction[str(p)] = explain_compaction(ref.config, explain(table, limits, now, ack_floor), table,
                                                       state, plan)
        partitions[str(p)] = [fate.to_dict() for fate in fates]
    config = ref.config.to_admin()
    return {"topic": str(ref), "nowMs": now, "policies": _policies(broker, ref),
            **{name: config[name] for name in ("retentionTimeMs", "maxPartitionSize", "retentionMinTimestampMs",
                                               "cleanupPolicy")},
            "partitions": partitions, "compaction": compaction}


@_listed_again_if_deleted
def partition_subscriptions(broker: Broker, ref: TopicRef) -> dict[str, list[dict[str, Any]]]:
    """Each subscription's backlog, replication, delayed messages and out figures per partition:
    [{'msgBacklog': .., 'backlogSize': .., 'isReplicated': .., 'msgDelayed': .., 'msgRateOut': .., ...}, ...]
    (what per-partition stats show)."""
    tables = _tables(broker, ref)
    traffic = broker.store.traffic.topic(str(ref.name))
    subscriptions = {}
    for name, record, live in broker.subscriptions.states(ref):
        with reading(live):
            found = [partition_backlog(view, table, cursor.acks)
                     for (view, table), cursor in zip(tables, record.partitions)]
        subscriptions[name] = [{"msgBacklog": b.messages, "backlogSize": b.bytes,
                                "isReplicated": replicated(broker, c),
                                "msgDelayed": live.delayed_messages(p) if live is not None else 0,
                                **traffic_stats.subscription_out(traffic.subscriptions.get(name), (p,))}
                               for p, (b, c) in enumerate(zip(found, record.partitions))]
    return subscriptions


def backlog_messages(broker: Broker, ref: TopicRef, prefix: str) -> dict[str, int]:
    """The messages behind each subscription whose name starts with `prefix`, every partition together: the
    msgBacklog of topic_stats alone, without the bytes, ages, sizes and policies it reads besides (what the
    replication metrics need of the replicators' cursors on every scrape)."""
    tables = [broker.store.view(ref.name, p).facts.table() for p in range(ref.partitions)]
    backlogs = {}
    for name, record, live in broker.subscriptions.states(ref):
        if not name.startswith(prefix):
            continue
        with reading(live):
            backlogs[name] = sum(backlog_count(table, cursor.acks) for table, cursor in zip(tables, record.partitions))
    return backlogs


def consumer_states(broker: Broker, ref: TopicRef, subscription: str,
                    partition: int | None = None) -> list[dict[str, Any]]:
    """ConsumerStats of the consumers attached to a subscription in this process (traffic_stats.consumer);
    with `partition`, of those that consume it."""
    live = broker.subscriptions.live(ref, subscription)
    if live is None:
        return []
    with reading(live):
        return [traffic_stats.consumer(c) for c in live.consumers if partition is None or c.covers(partition)]
