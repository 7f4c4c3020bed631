"""Non-persistent topics (Pulsar's `non-persistent://`): topics `seglog serve` keeps in its memory only, never in
the data directory (docs/SERVER.md, "Non-persistent topics").

As Pulsar's broker does (NonPersistentTopic, NonPersistentDispatcherSingleActiveConsumer,
NonPersistentDispatcherMultipleConsumers, NonPersistentStickyKeyDispatcherMultipleConsumers): each entry a
producer sends (one SEND: a message or a batch, as the producer made it) is handed at once to each subscription
of its topic, whose dispatcher gives it to one consumer that has permits and whose connection takes more (not
backlogged past its transport's high-water mark, as Netty's channel writability in Pulsar), or drops it and
counts it in the subscription's msgDropRate. Nothing waits anywhere: what the server holds of a message is the
frame written to a consumer's connection, so a slow consumer costs the server one transport buffer, and a
producer's SENDs are receipted at once. There are no acks, no backlog, no redelivery.

A topic exists while it has producers or subscriptions (a subscription stays when its consumers leave, as in
Pulsar; a reader's goes with it), or from its creation by the admin API to its deletion. A partitioned topic's
partition count is kept here too, for as long as the server runs.

Only the event loop's thread touches topics, subscriptions and consumers; partition counts are also read and
written by the thread pool (PARTITIONED_METADATA), under a lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from seglog._core._pulsar_wire import payload_frame
from seglog.names import NonPersistentTopicName, partition_of
from seglog.rates import RateMeter, iso_time
from seglog.server.errors import ServerFailure
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command
from seglog.subscriptions.delivery import HashRanges
from seglog.subscriptions.key_shared import NO_STICKY_KEY, HashRing, key_slots, ranges_overlap, sticky_slot

# The id of every message of a non-persistent topic, in receipts and deliveries: Pulsar's broker completes a
# publish with (ledgerId 0, entryId 0) and dispatches each entry as entry (0, 0) (NonPersistentTopic.publishMessage)
LEDGER_ID = 0
ENTRY_ID = 0
SINGLE_ACTIVE = ("exclusive", "failover")


class Outlet(Protocol):
    """Where a consumer's frames go: its connection."""

    def write(self, data: bytes) -> None: ...
    def output_backlogged(self) -> bool: ...


@dataclass(frozen=True)
class Entry:
    """One SEND as its producer sent it: the serialized MessageMetadata and the payload (compressed, batched,
    as it came), with what dispatch reads of them."""

    metadata: bytes
    payload: bytes
    messages: int  # num_messages_in_batch: the permits it takes, the messages it counts
    sticky_key: bytes  # the ordering key, else the partition key, else Pulsar's NONE_KEY (Key_Shared routing)

    @classmethod
    def of(cls, metadata: api.MessageMetadata, raw_metadata: bytes, payload: bytes) -> Entry:
        key = (metadata.ordering_key if metadata.HasField("ordering_key")
               else metadata.partition_key.encode() if metadata.HasField("partition_key") else NO_STICKY_KEY)
        return cls(raw_metadata, payload, max(metadata.num_messages_in_batch, 1), key)


def message_id(partition: int | None) -> api.MessageIdData:
    """The id a non-persistent message has (partition: a partitioned topic's partition, else none)."""
    mid = api.MessageIdData(ledger_id=LEDGER_ID, entry_id=ENTRY_ID)
    if partition is not None:
        mid.partition = partition
    return mid


class NonPersistentConsumer:
    """A consumer of a non-persistent subscription: its permits (FLOW adds, each entry given takes its
    messages, and may leave them below 0 as in Pulsar) and what it was given."""

    def __init__(self, consumer_id: int, name: str, outlet: Outlet, clock: Callable[[], int], *,
                 partition: int | None, hash_ranges: HashRanges | None = None, address: str = "") -> None:
        self.name = name
        self.outlet = outlet
        self.hash_ranges = hash_ranges
        self.permits = 0
        self.out = RateMeter(clock)
        self.address = address
        self.connected_since = iso_time(clock())
        # every MESSAGE it is sent has the same command: encoded once
        self._command = command(Type.MESSAGE, consumer_id=consumer_id, message_id=message_id(partition)
                                ).SerializeToString()

    def available(self) -> bool:
        """Whether it may be given an entry now: permits left and a connection that takes more."""
        return self.permits > 0 and not self.outlet.output_backlogged()

    def give(self, entry: Entry) -> None:
        self.outlet.write(payload_frame(self._command, entry.metadata, entry.payload))
        self.permits -= entry.messages
        self.out.add(entry.messages, len(entry.payload))

    def stats(self) -> dict[str, Any]:
        """ConsumerStats, as Pulsar shows a non-persistent topic's consumer (no acks kept: nothing unacked)."""
        rate, throughput = self.out.rates()
        return {"consumerName": self.name, "msgRateOut": rate, "msgThroughputOut": throughput,
                "msgRateRedeliver": 0.0, "availablePermits": self.permits, "unackedMessages": 0,
                "blockedConsumerOnUnackedMsgs": False, "address": self.address,
                "connectedSince": self.connected_since, "clientVersion": None, "msgOutCounter": self.out.messages,
                "bytesOutCounter": self.out.bytes, "lastAckedTimestamp": 0, "lastConsumedTimestamp": 0,
                "metadata": {}}


class NonPersistentSubscription:
    """A subscription of a non-persistent topic and its dispatcher: the consumer each entry goes to by the
    subscription's type, or the entry dropped (counted in msgDropRate)."""

    def __init__(self, name: str, kind: str, partition: int | None, clock: Callable[[], int], *,
                 durable: bool) -> None:
        self.name = name
        self.kind = kind  # exclusive, shared, failover, key_shared (SUBSCRIPTION_TYPES' names)
        self.durable = durable
        self.partition = partition
        self.consumers: list[NonPersistentConsumer] = []
        self.dropped = RateMeter(clock)
        self._clock = clock
        self._next = 0  # Shared: where the round-robin looks first
        self._ring: HashRing | None = None  # Key_Shared without ranges: the consumers' hash ring
        # what consumers that left were given: the subscription's counters keep it, as Pulsar's do
        self._left_messages = 0
        self._left_bytes = 0

    def attach(self, consumer: NonPersistentConsumer, kind: str) -> None:
        """Add a consumer; ConsumerBusy where the subscription's type does not admit it (Pulsar's rules)."""
        if self.consumers and kind != self.kind:
            raise ServerFailure(api.ConsumerBusy, f"subscription {self.name!r} is of type {self.kind}, not {kind}, "
                                                  "while it has consumers")
        if kind == "exclusive" and self.consumers:
            raise ServerFailure(api.ConsumerBusy, f"exclusive subscription {self.name!r} has a consumer already")
        if kind == "key_shared" and self.consumers:
            self._check_ranges(consumer)
        self.kind = kind
        self.consumers.append(consumer)
        self._ring = None

    def _check_ranges(self, consumer: NonPersistentConsumer) -> None:
        sticky = [c for c in self.consumers if c.hash_ranges is not None]
        if (consumer.hash_ranges is None) != (len(sticky) == 0):
            raise ServerFailure(api.ConsumerBusy, f"subscription {self.name!r}: sticky Key_Shared consumers (with "
                                                  "hash ranges) and consumers without cannot share it")
        for other in sticky:
            assert other.hash_ranges is not None and consumer.hash_ranges is not None
            overlap = ranges_overlap(consumer.hash_ranges, other.hash_ranges)
            if overlap is not None:
                raise ServerFailure(api.ConsumerBusy, f"hash range {list(overlap[0])} overlaps {list(overlap[1])} "
                                                      f"of consumer {other.name!r}")

    def detach(self, consumer: NonPersistentConsumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self._ring = None
            self._left_messages += consumer.out.messages
            self._left_bytes += consumer.out.bytes

    def dispatch(self, entry: Entry) -> None:
        """Give `entry` to the consumer the type chooses, if it is available; else drop it."""
        consumer = self._chosen(entry)
        if consumer is not None and consumer.available():
            consumer.give(entry)
        else:
            self.dropped.add(entry.messages, len(entry.payload))

    def _chosen(self, entry: Entry) -> NonPersistentConsumer | None:
        consumers = self.consumers
        if not consumers:
            return None
        if self.kind in SINGLE_ACTIVE:
            return self.active()
        if self.kind == "key_shared":
            return self._key_owner(entry.sticky_key)
        for step in range(len(consumers)):  # shared: the next available consumer, round robin
            index = (self._next + step) % len(consumers)
            if consumers[index].available():
                self._next = index + 1
                return consumers[index]
        return None

    def active(self) -> NonPersistentConsumer | None:
        """Exclusive and Failover: the consumer given everything. Failover's is the one at the partition's index
        (0 for a non-partitioned topic) among the consumers sorted by name, seglog's rule for persistent topics."""
        if not self.consumers:
            return None
        ordered = sorted(self.consumers, key=lambda c: c.name)
        return ordered[(self.partition or 0) % len(ordered)]

    def _key_owner(self, key: bytes) -> NonPersistentConsumer | None:
        """Key_Shared: the consumer whose hash ranges hold the key's slot (Pulsar's sticky hash), or none; without
        ranges, the key's owner on the consumers' hash ring (subscriptions/key_shared.py)."""
        if self.consumers[0].hash_ranges is not None:
            slot = sticky_slot(key)
            return next((c for c in self.consumers
                         if any(start <= slot <= end for start, end in c.hash_ranges or ())), None)
        if self._ring is None:
            self._ring = HashRing([c.name for c in self.consumers])
        owner = self._ring.owners(key_slots(pa.array([key], pa.binary())))
        return self.consumers[int(np.asarray(owner)[0])]

    def stats(self) -> dict[str, Any]:
        """NonPersistentSubscriptionStats: SubscriptionStats without a backlog, with msgDropRate."""
        consumers = [c.stats() for c in self.consumers]
        drop_rate, _ = self.dropped.rates()
        active = self.active() if self.kind in SINGLE_ACTIVE else (self.consumers[0] if self.consumers else None)
        return {"msgRateOut": sum(c["msgRateOut"] for c in consumers),
                "msgThroughputOut": sum(c["msgThroughputOut"] for c in consumers),
                "bytesOutCounter": self._left_bytes + sum(c["bytesOutCounter"] for c in consumers),
                "msgOutCounter": self._left_messages + sum(c["msgOutCounter"] for c in consumers),
                "msgRateRedeliver": 0.0, "msgRateExpired": 0.0, "totalMsgExpired": 0, "msgBacklog": 0,
                "msgBacklogNoDelayed": 0, "msgDelayed": 0, "backlogSize": 0, "unackedMessages": 0,
                "type": _PULSAR_TYPES[self.kind], "activeConsumerName": active.name if active else None,
                "consumers": consumers, "isDurable": self.durable, "isReplicated": False,
                "messageAckRate": 0.0, "lastExpireTimestamp": 0, "lastConsumedTimestamp": 0,
                "lastAckedTimestamp": 0, "lastMarkDeleteAdvancedTimestamp": 0, "subscriptionProperties": {},
                "msgDropRate": drop_rate}


_PULSAR_TYPES = {"exclusive": "Exclusive", "shared": "Shared", "failover": "Failover", "key_shared": "Key_Shared"}


@dataclass(eq=False)
class Publisher:
    """A producer connected to a non-persistent topic."""

    name: str
    meter: RateMeter
    address: str = ""
    connected_since: str = ""

    def stats(self) -> dict[str, Any]:
        """NonPersistentPublisherStats. Its msgDropRate counts what Pulsar's broker drops past a connection's
        limit of messages in flight (maxConcurrentNonPersistentMessagePerConnection): seglog hands each SEND on
        as it reads it, holds none in flight, and so never drops one there."""
        rate, throughput = self.meter.rates()
        return {"producerName": self.name, "accessMode": "Shared", "msgRateIn": rate, "msgThroughputIn": throughput,
                "averageMsgSize": throughput / rate if rate else 0.0, "chunkedMessageRate": 0.0,
                "address": self.address, "connectedSince": self.connected_since, "clientVersion": None,
                "metadata": {}, "supportsPartialProducer": False, "msgDropRate": 0.0}


@dataclass(eq=False)
class NonPersistentTopic:
    """One non-persistent topic, or one partition of a partitioned one (`partition`, its index; None for a
    topic that is not a partition): its producers and subscriptions."""

    name: str  # the Pulsar name, `non-persistent://tenant/namespace/topic` (of the partition: `...-partition-N`)
    partition: int | None
    clock: Callable[[], int]
    created: bool = False  # created by the admin API: it stays until deleted
    producers: dict[str, Publisher] = field(default_factory=dict)
    subscriptions: dict[str, NonPersistentSubscription] = field(default_factory=dict)
    inbound: RateMeter = field(init=False)
    # what subscriptions removed since were given: the topic's counters keep it, as Pulsar's do
    _removed_messages: int = 0
    _removed_bytes: int = 0

    def __post_init__(self) -> None:
        self.inbound = RateMeter(self.clock)

    @property
    def in_use(self) -> bool:
        return bool(self.producers or self.subscriptions or self.created)

    @property
    def clients(self) -> int:
        """Producers and consumers connected."""
        return len(self.producers) + sum(len(s.consumers) for s in self.subscriptions.values())

    def publish(self, publisher: Publisher, entry: Entry) -> None:
        """An entry a producer sent: counted in, and handed to every subscription."""
        publisher.meter.add(entry.messages, len(entry.payload))
        self.inbound.add(entry.messages, len(entry.payload))
        for subscription in self.subscriptions.values():
            subscription.dispatch(entry)

    def subscription(self, name: str, kind: str, *, durable: bool) -> NonPersistentSubscription:
        """The subscription `name`, made if new (its type is its first consumer's)."""
        subscription = self.subscriptions.get(name)
        if subscription is None:
            subscription = NonPersistentSubscription(name, kind, self.partition, self.clock, durable=durable)
            self.subscriptions[name] = subscription
        return subscription

    def remove_subscription(self, subscription: NonPersistentSubscription) -> None:
        if self.subscriptions.get(subscription.name) is subscription:
            del self.subscriptions[subscription.name]
            stats = subscription.stats()
            self._removed_messages += stats["msgOutCounter"]
            self._removed_bytes += stats["bytesOutCounter"]

    def stats(self) -> dict[str, Any]:
        """NonPersistentTopicStats: TopicStats without storage, backlog or deleted ranges, with msgDropRate (the
        publishers' drops, which seglog never makes: each subscription counts its own)."""
        publishers = [p.stats() for p in sorted(self.producers.values(), key=lambda p: p.name)]
        subscriptions = {name: s.stats() for name, s in sorted(self.subscriptions.items())}
        rate_in, throughput_in = self.inbound.rates()
        return {"msgRateIn": rate_in, "msgThroughputIn": throughput_in,
                "msgRateOut": sum(s["msgRateOut"] for s in subscriptions.values()),
                "msgThroughputOut": sum(s["msgThroughputOut"] for s in subscriptions.values()),
                "msgInCounter": self.inbound.messages, "bytesInCounter": self.inbound.bytes,
                "msgOutCounter": self._removed_messages + sum(s["msgOutCounter"] for s in subscriptions.values()),
                "bytesOutCounter": self._removed_bytes + sum(s["bytesOutCounter"] for s in subscriptions.values()),
                "averageMsgSize": throughput_in / rate_in if rate_in else 0.0, "msgChunkPublished": False,
                "storageSize": 0, "backlogSize": 0, "offloadedStorageSize": 0, "earliestMsgPublishTimeInBacklogs": 0,
                "publishers": publishers, "waitingPublishers": 0, "subscriptions": subscriptions, "replication": {},
                "deduplicationStatus": "Disabled", "topicEpoch": None,
                "msgDropRate": sum(p["msgDropRate"] for p in publishers)}


_SUMMED = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgInCounter", "bytesInCounter",
           "msgOutCounter", "bytesOutCounter", "msgDropRate")
_SUBSCRIPTION_SUMMED = ("msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgDropRate")


def partitioned_stats(partitions: dict[str, dict[str, Any] | None], count: int, *, per_partition: bool
                      ) -> dict[str, Any]:
    """NonPersistentPartitionedTopicStats: the partitions' stats (None for a partition no client made) added up
    as Pulsar adds them (rates and counters summed, publishers listed, subscriptions merged by name), the
    partition count, and with `per_partition` each partition's own by its name."""
    present = {name: stats for name, stats in partitions.items() if stats is not None}
    total: dict[str, Any] = {**NonPersistentTopic("", None, lambda: 0).stats(), "metadata": {"partitions": count},
                             "partitions": dict(present) if per_partition else {}}
    for stats in present.values():
        for key in _SUMMED:
            total[key] += stats[key]
        total["publishers"] += stats["publishers"]
        for name, subscription in stats["subscriptions"].items():
            merged = total["subscriptions"].get(name)
            if merged is None:
                total["subscriptions"][name] = {**subscription, "consumers": list(subscription["consumers"])}
                continue
            for key in _SUBSCRIPTION_SUMMED:
                merged[key] += subscription[key]
            merged["consumers"] += subscription["consumers"]
    total["averageMsgSize"] = total["msgThroughputIn"] / total["msgRateIn"] if total["msgRateIn"] else 0.0
    return total


class NonPersistentTopics:
    """Every non-persistent topic of the server, by Pulsar name, and the partition counts of partitioned ones."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self._topics: dict[str, NonPersistentTopic] = {}
        self._partitioned: dict[str, int] = {}  # by the partitioned topic's name (loop and thread pool)
        self._lock = threading.Lock()

    # partitioned topics (any thread)

    def partition_count(self, name: str) -> int:
        """The partitions of partitioned topic `name`; 0 if it is not one."""
        with self._lock:
            return self._partitioned.get(name, 0)

    def make_partitioned(self, name: str, partitions: int) -> int:
        """Make `name` a partitioned topic of `partitions` unless it is one: its partition count."""
        with self._lock:
            return self._partitioned.setdefault(name, partitions)

    def partitioned_names(self, namespace: str) -> list[str]:
        with self._lock:
            return sorted(name for name in self._partitioned if _namespace_of(name) == namespace)

    def forget_partitioned(self, name: str) -> None:
        with self._lock:
            self._partitioned.pop(name, None)

    def resolve(self, name: NonPersistentTopicName) -> tuple[str, int | None]:
        """(the topic's Pulsar name, its partition index or None): `NAME-partition-N` is partition N of a
        partitioned topic NAME (TopicNotFound past its partitions), any other name a topic of its own."""
        full = str(name)
        split = partition_of(name.topic)
        if split is None:
            return full, None
        base = str(NonPersistentTopicName(name.tenant, name.namespace, split[0]))
        count = self.partition_count(base)
        if not count:
            return full, None
        if split[1] >= count:
            raise ServerFailure(api.TopicNotFound, f"{full}: topic {base} has {count} partitions")
        return full, split[1]

    # topics (the loop's thread)

    def get(self, full: str) -> NonPersistentTopic | None:
        return self._topics.get(full)

    def open(self, full: str, partition: int | None, *, created: bool = False) -> NonPersistentTopic:
        """The topic `full`, made if it does not exist."""
        topic = self._topics.get(full)
        if topic is None:
            topic = self._topics[full] = NonPersistentTopic(full, partition, self.clock)
        topic.created = topic.created or created
        return topic

    def release(self, topic: NonPersistentTopic) -> None:
        """Forget `topic` once nothing uses it (no producer, no subscription, not created by the admin API)."""
        if not topic.in_use and self._topics.get(topic.name) is topic:
            del self._topics[topic.name]

    def delete(self, topic: NonPersistentTopic) -> None:
        """Forget `topic` (the admin API deletes it: its clients were closed, or it has none)."""
        topic.created = False
        topic.producers.clear()
        topic.subscriptions.clear()
        self.release(topic)

    def topics_of(self, namespace: str) -> Iterator[NonPersistentTopic]:
        """The topics of `namespace` that exist now (partitions each by its own name), by name."""
        for name in sorted(self._topics):
            if _namespace_of(name) == namespace:
                yield self._topics[name]


def _namespace_of(full: str) -> str:
    """'tenant/namespace' of a Pulsar name `non-persistent://tenant/namespace/topic`."""
    return "/".join(full.split("://", 1)[1].split("/")[:2])
