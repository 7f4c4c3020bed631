"""Pulsar's TopicStats and PartitionedTopicStats of a topic (pulsar-admin topics stats and partitioned-stats),
made from seglog's stats (stats.py): Pulsar's field names, the consumers attached to each subscription in this
process, and the aggregation over partitions. A server adds what only it knows: its connected producers
(`publishers`), its replicators' connections and counts (in `replication`) and the messages it refused to
replicate (`replicationNotAllowed`), server/rest/stats.py.

seglog measures no rates or counters yet: msgRateIn/Out, msgThroughputIn/Out and the *Counter keys are 0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog.admin.stats import consumer_states, partition_subscriptions, replication_section, topic_stats
from seglog.errors import NotFoundError

if TYPE_CHECKING:
    from seglog.broker import Broker
    from seglog.catalog.topics import TopicRef

PULSAR_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "Key_Shared"}


def publisher_stats(name: str) -> dict[str, Any]:
    """PublisherStats of a producer connected to a server, by its name."""
    return {"producerName": name, "accessMode": "Shared", "msgRateIn": 0.0, "msgThroughputIn": 0.0,
            "averageMsgSize": 0.0, "chunkedMessageRate": 0.0, "address": None, "connectedSince": None,
            "clientVersion": None, "metadata": {}, "supportsPartialProducer": False}


def _consumer(state: dict[str, Any]) -> dict[str, Any]:
    return {"consumerName": state["name"], "msgRateOut": 0.0, "msgThroughputOut": 0.0, "msgRateRedeliver": 0.0,
            "availablePermits": state["permits"] or 0, "unackedMessages": state["unacked"],
            "blockedConsumerOnUnackedMsgs": state["blocked"], "address": None, "connectedSince": None,
            "clientVersion": None, "msgOutCounter": 0, "bytesOutCounter": 0, "lastAckedTimestamp": 0,
            "lastConsumedTimestamp": 0, "metadata": {}}


def _subscription(broker: Broker, ref: TopicRef, name: str, seglog: dict[str, Any],
                  partition: dict[str, Any] | None = None) -> dict[str, Any]:
    """A SubscriptionStats from seglog's stats of the subscription, with one partition's backlog and
    replication (partition_subscriptions) for a partition's stats."""
    consumers = [_consumer(state) for state in consumer_states(broker, ref, name)]
    own = seglog if partition is None else partition
    messages, size, delayed = own["msgBacklog"], own["backlogSize"], own["msgDelayed"]
    return {"msgRateOut": 0.0, "msgThroughputOut": 0.0, "bytesOutCounter": 0, "msgOutCounter": 0,
            "msgRateRedeliver": 0.0, "msgRateExpired": 0.0, "totalMsgExpired": seglog["msgExpired"],
            "msgBacklog": messages, "msgBacklogNoDelayed": messages - delayed, "msgDelayed": delayed,
            "backlogSize": size,
            "unackedMessages": sum(c["unackedMessages"] for c in consumers),
            "type": PULSAR_TYPES.get(seglog["type"], seglog["type"]),
            "activeConsumerName": consumers[0]["consumerName"] if consumers else None, "consumers": consumers,
            "isDurable": True, "isReplicated": own["isReplicated"], "messageAckRate": 0.0, "lastExpireTimestamp": 0,
            "lastConsumedTimestamp": 0, "lastAckedTimestamp": 0, "lastMarkDeleteAdvancedTimestamp": 0,
            "subscriptionProperties": {}, "nonContiguousDeletedMessagesRanges": 0}


def _topic(subscriptions: dict[str, Any], storage: int, backlog: int, replication: dict[str, Any]) -> dict[str, Any]:
    return {"msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
            "msgInCounter": 0, "bytesInCounter": 0, "msgOutCounter": 0, "bytesOutCounter": 0,
            "averageMsgSize": 0.0, "msgChunkPublished": False, "storageSize": storage, "backlogSize": backlog,
            "offloadedStorageSize": 0, "earliestMsgPublishTimeInBacklogs": 0, "publishers": [],
            "waitingPublishers": 0, "subscriptions": subscriptions, "replication": replication,
            "deduplicationStatus": "Disabled",
            "nonContiguousDeletedMessagesRanges": 0, "nonContiguousDeletedMessagesRangesSerializedSize": 0}


def pulsar_topic_stats(broker: Broker, ref: TopicRef) -> dict[str, Any]:
    """TopicStats of a topic, every partition together."""
    return _together(broker, ref, topic_stats(broker, ref))


def _together(broker: Broker, ref: TopicRef, seglog: dict[str, Any]) -> dict[str, Any]:
    subscriptions = {name: _subscription(broker, ref, name, s) for name, s in seglog["subscriptions"].items()}
    stats = _topic(subscriptions, seglog["storageSize"], seglog["backlogSize"], seglog["replication"])
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
    stats = _together(broker, ref, seglog)
    stats["metadata"] = {"partitions": ref.partitions}
    stats["partitions"] = {}
    if not per_partition:
        return stats
    own = partition_subscriptions(broker, ref)
    for p in range(ref.partitions):
        subscriptions = {name: _subscription(broker, ref, name, s, own[name][p])
                         for name, s in seglog["subscriptions"].items() if name in own}
        stats["partitions"][ref.pulsar_name(p)] = _topic(
            subscriptions, seglog["partitions"][str(p)]["storageSize"],
            max((s["backlogSize"] for s in subscriptions.values()), default=0),
            replication_section({name: s["msgBacklog"] for name, s in subscriptions.items()}))
    return stats
