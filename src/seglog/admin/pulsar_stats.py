"""Pulsar's TopicStats and PartitionedTopicStats of a topic (pulsar-admin topics stats and partitioned-stats),
made from seglog's stats (stats.py): Pulsar's field names, the producers connected and the consumers attached
in this process with their live rates and counters (traffic_stats.py), and the aggregation over partitions. A
server adds what only it knows: its replicators' connections and counts (in `replication`) and the messages
it refused to replicate (`replicationNotAllowed`), server/rest/stats.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog.admin import traffic_stats
from seglog.admin.stats import (
    compacted_state,
    compaction_stats,
    consumer_states,
    partition_subscriptions,
    replication_section,
    topic_stats,
)
from seglog.errors import NotFoundError

if TYPE_CHECKING:
    from seglog.broker import Broker
    from seglog.catalog.topics import TopicRef

# the live figures (traffic_stats) of a TopicStats and of a SubscriptionStats, as seglog's stats have them
TOPIC_LIVE_KEYS = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgInCounter", "bytesInCounter",
                   "msgOutCounter", "bytesOutCounter", "averageMsgSize", "publishers")
OUT_KEYS = ("msgRateOut", "msgThroughputOut", "msgOutCounter", "bytesOutCounter", "msgRateRedeliver")
PULSAR_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "Key_Shared"}


def _subscription(seglog: dict[str, Any], consumers: list[dict[str, Any]],
                  partition: dict[str, Any] | None = None) -> dict[str, Any]:
    """A SubscriptionStats from seglog's stats of the subscription and its `consumers`' ConsumerStats, with
    one partition's backlog, replication and out figures (partition_subscriptions) for a partition's stats."""
    own = seglog if partition is None else partition
    messages, size, delayed = own["msgBacklog"], own["backlogSize"], own["msgDelayed"]
    return {**{key: own[key] for key in OUT_KEYS}, "msgRateExpired": 0.0, "totalMsgExpired": seglog["msgExpired"],
            "msgBacklog": messages, "msgBacklogNoDelayed": messages - delayed, "msgDelayed": delayed,
            "backlogSize": size,
            "unackedMessages": sum(c["unackedMessages"] for c in consumers),
            "type": PULSAR_TYPES.get(seglog["type"], seglog["type"]),
            "activeConsumerName": consumers[0]["consumerName"] if consumers else None, "consumers": consumers,
            "isDurable": True, "isReplicated": own["isReplicated"], "messageAckRate": 0.0, "lastExpireTimestamp": 0,
            "lastConsumedTimestamp": 0, "lastAckedTimestamp": 0, "lastMarkDeleteAdvancedTimestamp": 0,
            "subscriptionProperties": {}, "nonContiguousDeletedMessagesRanges": 0}


def _topic(live: dict[str, Any], subscriptions: dict[str, Any], storage: int, backlog: int,
           replication: dict[str, Any], compaction: dict[str, int]) -> dict[str, Any]:
    """A TopicStats: `live` holds the rates and counters (traffic_stats) and the publishers; `compaction` is
    Pulsar's CompactionStats (stats.compaction_stats)."""
    return {**{key: live[key] for key in TOPIC_LIVE_KEYS},
            "msgChunkPublished": False, "storageSize": storage, "backlogSize": backlog,
            "offloadedStorageSize": 0, "earliestMsgPublishTimeInBacklogs": 0,
            "waitingPublishers": 0, "subscriptions": subscriptions, "replication": replication,
            "deduplicationStatus": "Disabled",
            "nonContiguousDeletedMessagesRanges": 0, "nonContiguousDeletedMessagesRangesSerializedSize": 0,
            "compaction": compaction}


def pulsar_topic_stats(broker: Broker, ref: TopicRef) -> dict[str, Any]:
    """TopicStats of a topic, every partition together."""
    return _together(topic_stats(broker, ref))


def _together(seglog: dict[str, Any]) -> dict[str, Any]:
    subscriptions = {name: _subscription(s, s["consumers"]) for name, s in seglog["subscriptions"].items()}
    stats = _topic(seglog, subscriptions, seglog["storageSize"], seglog["backlogSize"], seglog["replication"],
                   seglog["compaction"])
    # seglog's: messages whose producer named clusters outside the namespace's allowed ones, per cluster (a
    # server's producers only: in-process producers name no clusters)
    stats["replicationNotAllowed"] = {}
    return stats


def partitioned_stats(broker: Broker, ref: TopicRef, *, per_partition: bool) -> dict[str, Any]:
    """PartitionedTopicStats of a topic of several partitions: the TopicStats of them all together,
    `metadata.partitions`, and with `per_partition` each partition's TopicStats by its Pulsar name
    (`persistent://tenant/namespace/topic-partition-N`); NotFoundError for a topic of one partition, which is
    non-partitioned in Pulsar."""
    if ref.partitions == 1:
        raise NotFoundError(f"partitioned topic {ref.name} does not exist ({ref.name} is non-partitioned)")
    seglog = topic_stats(broker, ref)
    stats = _together(seglog)
    stats["metadata"] = {"partitions": ref.partitions}
    stats["partitions"] = {}
    if not per_partition:
        return stats
    own = partition_subscriptions(broker, ref)
    traffic = broker.store.traffic.topic(str(ref.name))
    for p in range(ref.partitions):
        subscriptions = {name: _subscription(s, consumer_states(broker, ref, name, p), own[name][p])
                         for name, s in seglog["subscriptions"].items() if name in own}
        live = {**traffic_stats.inbound(traffic, (p,)), **traffic_stats.outbound(list(subscriptions.values())),
                "publishers": traffic_stats.publishers(traffic, (p,))}
        stats["partitions"][ref.pulsar_name(p)] = _topic(
            live, subscriptions, seglog["partitions"][str(p)]["storageSize"],
            max((s["backlogSize"] for s in subscriptions.values()), default=0),
            replication_section({name: s["msgBacklog"] for name, s in subscriptions.items()}),
            compaction_stats([compacted_state(broker.store.partition_directory(ref.name, p))],
                             broker.compactor.status(ref).failed_ms))
    return stats
