"""Topic stats and internal stats in Pulsar's shapes (TopicStats, PartitionedTopicStats,
PersistentTopicInternalStats): the admin layer's (admin/pulsar_stats.py, with the producers and consumers and
their rates) with what only the server knows, its replicators' connections and counts, and the messages it
refused to replicate.

Positions are message ids as the binary protocol sends them (`0:offset`, server/protocol/message_ids.py);
in internalStats a ledger is a segment, its `ledgerId` the segment's base offset, and the compacted ledger the
partition's compacted view (compacted_ledger), with seglog's `compactionHorizon` beside it."""

from __future__ import annotations

from typing import Any

from seglog.admin.pulsar_stats import pulsar_topic_stats
from seglog.admin.stats import REPLICATOR_STATS, backlog_messages, replication_section
from seglog.catalog.topics import TopicRef
from seglog.names import REPLICATOR_PREFIX
from seglog.server.protocol.message_ids import LEDGER_ID
from seglog.server.rest.base import RestContext


def position(offset: int) -> str:
    """A position as Pulsar's `ledgerId:entryId`, by the message-id rule (entryId -1: before the first)."""
    return f"{LEDGER_ID}:{offset}"


def _replication(ctx: RestContext, ref: TopicRef, partition: int | None,
                 section: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The `replication` section with what the server knows besides the admin stats' `section` (the backlogs
    of the replicators' cursors `pulsar.repl.REMOTE`): per remote cluster, what this cluster's replicators send
    it (the replication extension) and what its replicators write here (the server's producers)."""
    outbound = ctx.replication_stats(str(ref.name), partition)
    inbound = ctx.service.inbound_replication(str(ref.name)) if partition is None else {}
    return {remote: {**REPLICATOR_STATS, **inbound.get(remote, {}), **outbound.get(remote, {}),
                     "replicationBacklog": section.get(remote, REPLICATOR_STATS)["replicationBacklog"]}
            for remote in sorted({*outbound, *inbound, *section})}


def replication_of(ctx: RestContext, ref: TopicRef) -> dict[str, Any]:
    """The `replication` section of a topic's stats (every partition together; blocking), as each /metrics
    scrape asks it of every topic: a topic with no replicator here, none writing to it and no replication
    cursor has none, and of the others only the replication cursors' backlogs are read, not the topic's
    whole stats (about 0.3 ms a topic)."""
    if not (ctx.replication_stats(str(ref.name), None) or ctx.service.inbound_replication(str(ref.name))
            or any(name.startswith(REPLICATOR_PREFIX) for name in ctx.broker.subscriptions.names(ref))):
        return {}
    return _replication(ctx, ref, None, replication_section(backlog_messages(ctx.broker, ref, REPLICATOR_PREFIX)))


def _add_live(ctx: RestContext, ref: TopicRef, stats: dict[str, Any], partition: int | None) -> None:
    """Give TopicStats of the admin layer (of the topic, or of `partition`) the server's replicators."""
    stats["replication"] = _replication(ctx, ref, partition, stats["replication"])
    if partition is None:
        stats["replicationNotAllowed"] = ctx.service.not_allowed_counts(str(ref.name))


def topic_stats(ctx: RestContext, topic: str) -> dict[str, Any]:
    """TopicStats of a topic (every partition together)."""
    ref = ctx.broker.topic(topic)
    stats = pulsar_topic_stats(ctx.broker, ref)
    _add_live(ctx, ref, stats, None)
    return stats


def partitioned_stats(ctx: RestContext, topic: str, per_partition: bool) -> dict[str, Any]:
    """PartitionedTopicStats (log.admin.topics.partitioned_stats) with the server's replicators, in the
    aggregate and in each partition's TopicStats."""
    ref = ctx.broker.topic(topic)
    stats = ctx.admin.topics.partitioned_stats(topic, per_partition=per_partition)
    _add_live(ctx, ref, stats, None)
    for p, name in enumerate(stats["partitions"]):
        _add_live(ctx, ref, stats["partitions"][name], p)
    return stats


def internal_stats(ctx: RestContext, topic: str, partition: int = 0) -> dict[str, Any]:
    """PersistentTopicInternalStats of one partition."""
    seglog = ctx.admin.topics.internal_stats(topic)["partitions"][str(partition)]
    segments = seglog["segments"]
    active = segments[-1] if segments else None
    end = active["nextOffset"] if active else 0
    ledgers = [{"ledgerId": s["baseOffset"], "entries": s["messages"], "size": s["size"], "timestamp": s["lastWriteMs"],
                "offloaded": False, "underReplicated": False, "metadata": None} for s in segments]
    cursors = {}
    snapshots = ctx.subscription_snapshots(topic, partition)  # (`topic` is the seglog name, as the keys are)
    for name, cursor in seglog["cursors"].items():
        gaps = cursor["ackedRanges"]
        cursors[name] = {
            "markDeletePosition": position(cursor["markDeletePosition"]),
            "readPosition": position(cursor["readPosition"]), "waitingReadOp": False, "pendingReadOps": 0,
            "messagesConsumedCounter": 0, "cursorLedger": -1, "cursorLedgerLastEntry": -1,
            "individuallyDeletedMessages": "[" + ",".join(f"({position(a - 1)}..{position(b - 1)}]"
                                                          for a, b in gaps) + "]",
            "lastLedgerSwitchTimestamp": "", "state": "Open",
            "numberOfEntriesSinceFirstNotAckedMessage": max(cursor["readPosition"] - cursor["markDeletePosition"], 1),
            "totalNonContiguousDeletedMessagesRange": len(gaps), "properties": {}}
        if name in snapshots:  # (seglog's key: in Pulsar they are markers in the topic, which seglog never writes)
            cursors[name]["replicatedSubscriptionSnapshots"] = [
                {"snapshotId": s["snapshotId"], "position": position(s["position"]),
                 "clusters": {c: position(o) for c, o in s["clusters"].items()}} for s in snapshots[name]]
    return {"entriesAddedCounter": seglog["numberOfEntries"], "numberOfEntries": seglog["numberOfEntries"],
            "totalSize": seglog["totalSize"], "currentLedgerEntries": active["messages"] if active else 0,
            "currentLedgerSize": active["size"] if active else 0,
            "lastLedgerCreatedTimestamp": "", "lastLedgerCreationFailureTimestamp": "",
            "waitingCursorsCount": 0, "pendingAddEntriesCount": 0, "lastConfirmedEntry": position(end - 1),
            "state": "LedgerOpened", "ledgers": ledgers, "cursors": cursors, "schemaLedgers": [],
            "compactedLedger": compacted_ledger(seglog["compaction"]),
            "compactionHorizon": seglog["compaction"]["horizon"]}


def compacted_ledger(compaction: dict[str, int]) -> dict[str, Any]:
    """Pulsar's compactedLedger (a LedgerInfo) of a partition's compacted view, from seglog's compaction
    section of its internal stats: the view's generation stands for the ledger's id (each compaction writes
    the next one, as each of Pulsar's writes a new ledger), its messages for the entries; -1 for all three
    where the partition was never compacted, as Pulsar answers without a compacted ledger."""
    made = compaction["generation"] > 0
    return {"ledgerId": compaction["generation"] if made else -1, "entries": compaction["messages"] if made else -1,
            "size": compaction["size"] if made else -1, "offloaded": False, "underReplicated": False}
