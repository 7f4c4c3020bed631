"""Topic stats and internal stats in Pulsar's shapes (TopicStats, PartitionedTopicStats,
PersistentTopicInternalStats), made from what seglog's admin stats compute plus the server's connected
producers and consumers.

seglog measures no rates or counters yet: msgRateIn/Out, msgThroughputIn/Out and the *Counter keys are 0.
Positions are message ids as the binary protocol sends them (`0:offset`, server/protocol/message_ids.py);
in internalStats a ledger is a segment, its `ledgerId` the segment's base offset."""

from __future__ import annotations

from typing import Any

from seglog.admin.stats import (
    REPLICATOR_STATS,
    backlog_messages,
    consumer_states,
    partition_subscriptions,
    replication_section,
)
from seglog.catalog.topics import TopicRef
from seglog.names import REPLICATOR_PREFIX
from seglog.server.protocol.message_ids import LEDGER_ID
from seglog.server.protocol.metadata import replicator_origin
from seglog.server.rest.base import RestContext

PULSAR_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "Key_Shared"}


def position(offset: int) -> str:
    """A position as Pulsar's `ledgerId:entryId`, by the message-id rule (entryId -1: before the first)."""
    return f"{LEDGER_ID}:{offset}"


def _publisher(name: str) -> dict[str, Any]:
    return {"producerName": name, "accessMode": "Shared", "msgRateIn": 0.0, "msgThroughputIn": 0.0,
            "averageMsgSize": 0.0, "chunkedMessageRate": 0.0, "address": None, "connectedSince": None,
            "clientVersion": None, "metadata": {}, "supportsPartialProducer": False}


def _consumer(state: dict[str, Any]) -> dict[str, Any]:
    return {"consumerName": state["name"], "msgRateOut": 0.0, "msgThroughputOut": 0.0, "msgRateRedeliver": 0.0,
            "availablePermits": state["permits"] or 0, "unackedMessages": state["unacked"],
            "blockedConsumerOnUnackedMsgs": state["blocked"], "address": None, "connectedSince": None,
            "clientVersion": None, "msgOutCounter": 0, "bytesOutCounter": 0, "lastAckedTimestamp": 0,
            "lastConsumedTimestamp": 0, "metadata": {}}


def _subscription(ctx: RestContext, ref: TopicRef, name: str, seglog: dict[str, Any],
                  partition: dict[str, Any] | None = None) -> dict[str, Any]:
    """A SubscriptionStats from seglog's stats of the subscription, with one partition's backlog and
    replication (partition_subscriptions) for a partition's stats."""
    consumers = [_consumer(state) for state in consumer_states(ctx.broker, ref, name)]
    own = seglog if partition is None else partition
    messages, size = own["msgBacklog"], own["backlogSize"]
    return {"msgRateOut": 0.0, "msgThroughputOut": 0.0, "bytesOutCounter": 0, "msgOutCounter": 0,
            "msgRateRedeliver": 0.0, "msgRateExpired": 0.0, "totalMsgExpired": seglog["msgExpired"],
            "msgBacklog": messages, "msgBacklogNoDelayed": messages, "msgDelayed": 0, "backlogSize": size,
            "unackedMessages": sum(c["unackedMessages"] for c in consumers),
            "type": PULSAR_TYPES.get(seglog["type"], seglog["type"]),
            "activeConsumerName": consumers[0]["consumerName"] if consumers else None, "consumers": consumers,
            "isDurable": True, "isReplicated": own["isReplicated"], "messageAckRate": 0.0, "lastExpireTimestamp": 0,
            "lastConsumedTimestamp": 0, "lastAckedTimestamp": 0, "lastMarkDeleteAdvancedTimestamp": 0,
            "subscriptionProperties": {}, "nonContiguousDeletedMessagesRanges": 0}


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


def _backlogs(subscriptions: dict[str, Any]) -> dict[str, int]:
    return {name: s["msgBacklog"] for name, s in subscriptions.items()}


def _topic_stats(seglog: dict[str, Any], publishers: list[str], subscriptions: dict[str, Any],
                 storage: int, backlog: int, replication: dict[str, Any]) -> dict[str, Any]:
    return {"msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
            "msgInCounter": 0, "bytesInCounter": 0, "msgOutCounter": 0, "bytesOutCounter": 0,
            "averageMsgSize": 0.0, "msgChunkPublished": False, "storageSize": storage, "backlogSize": backlog,
            "offloadedStorageSize": 0, "earliestMsgPublishTimeInBacklogs": 0,
            # (replicator producers are not publishers: they show in `replication`, as in Pulsar)
            "publishers": [_publisher(name) for name in publishers if replicator_origin(name) is None],
            "waitingPublishers": 0, "subscriptions": subscriptions, "replication": replication,
            "deduplicationStatus": "Disabled",
            "nonContiguousDeletedMessagesRanges": 0, "nonContiguousDeletedMessagesRangesSerializedSize": 0}


def topic_stats(ctx: RestContext, topic: str, producers: dict[int, list[str]]) -> dict[str, Any]:
    """TopicStats of a topic (every partition together); `producers` are the connected producers' names by
    partition (BrokerService.producer_names, read on the loop's thread)."""
    ref = ctx.broker.topic(topic)
    seglog = ctx.admin.topics.stats(topic)
    subscriptions = {name: _subscription(ctx, ref, name, s) for name, s in seglog["subscriptions"].items()}
    stats = _topic_stats(seglog, [n for names in producers.values() for n in names], subscriptions,
                         seglog["storageSize"], seglog["backlogSize"],
                         _replication(ctx, ref, None, seglog["replication"]))
    # seglog's: messages whose producer named clusters outside the namespace's allowed ones, per cluster
    stats["replicationNotAllowed"] = ctx.service.not_allowed_counts(str(ref.name))
    return stats


def partitioned_stats(ctx: RestContext, topic: str, producers: dict[int, list[str]], per_partition: bool
                      ) -> dict[str, Any]:
    """PartitionedTopicStats: the aggregate, `metadata.partitions`, and each partition's TopicStats."""
    ref = ctx.broker.topic(topic)
    stats = topic_stats(ctx, topic, producers)
    stats["metadata"] = {"partitions": ref.partitions}
    stats["partitions"] = {}
    if per_partition:
        seglog = ctx.admin.topics.stats(topic)
        own = partition_subscriptions(ctx.broker, ref)
        for p in range(ref.partitions):
            subscriptions = {name: _subscription(ctx, ref, name, s, own[name][p])
                             for name, s in seglog["subscriptions"].items() if name in own}
            slowest = max((s["backlogSize"] for s in subscriptions.values()), default=0)
            stats["partitions"][ref.pulsar_name(p)] = _topic_stats(
                seglog, producers.get(p, []), subscriptions, seglog["partitions"][str(p)]["storageSize"], slowest,
                _replication(ctx, ref, p, replication_section(_backlogs(subscriptions))))
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
            "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                                "underReplicated": False}}
