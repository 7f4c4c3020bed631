"""What the binary protocol's commands do, on the Broker's services (never the in-process facade).

Blocking calls (SQLite, opening a writer, appending) are made by the connection in the server's thread pool;
the producer-name registry is only touched from the event loop's thread."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from seglog.broker import Broker
from seglog.catalog.message_keys import KeysRequired
from seglog.catalog.topics import TopicRef
from seglog.errors import InvalidArgumentError, NotFoundError, TopicExistsError, TopicNotFoundError
from seglog.lifecycle.quota import QuotaGuard
from seglog.names import NonPersistentTopicName, TopicName, partition_of
from seglog.rates import Publisher
from seglog.server.deduplication import Deduplication, PartitionSequences
from seglog.server.errors import ServerFailure
from seglog.server.non_persistent import NonPersistentTopics
from seglog.server.producer_access import ProducerRegistry, Waiter
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import Messages, NativeMessages, UnpackLimits
from seglog.server.protocol.message_ids import offset_of, signed
from seglog.server.protocol.metadata import (
    LOCAL_ONLY,
    REPLICATE_TO,
    REPLICATED_FROM,
    REPLICATED_OFFSET,
    deduplication_ids,
    replication_key,
    replicator_origin,
)
from seglog.server.publish_buffer import PublishBuffer
from seglog.storage.fence import TopicFence
from seglog.storage.writer import PartitionWriter
from seglog.subscriptions.delivery import ConsumerState
from seglog.subscriptions.subscription import Subscription

logger = logging.getLogger("seglog.server")

_NON_PERSISTENT = "non-persistent://"


@dataclass(frozen=True)
class Target:
    """A Pulsar topic name resolved to a seglog topic and partition. `partitioned`: the seglog topic has
    more than one partition (Pulsar's partitioned topic; `NAME-partition-N` is its partition N)."""

    ref: TopicRef
    partition: int
    named_partition: bool  # named as `NAME-partition-N`

    @property
    def partitioned(self) -> bool:
        return self.ref.partitions > 1

    @property
    def key(self) -> tuple[str, int]:
        return (str(self.ref.name), self.partition)


@dataclass(eq=False)
class ProducerHandle:
    target: Target
    name: str
    writer: PartitionWriter
    fence: TopicFence
    quota: QuotaGuard
    sequences: PartitionSequences | None  # the partition's deduplication table, when the topic deduplicates
    # what it wrote (counted by the writer), where it connects from and since when: stats' publishers, and a
    # replicator's replication.*In
    publisher: Publisher
    keys: KeysRequired  # while the topic compacts, every message of a SEND needs a key (Kafka's rule)
    quota_armed: bool = False  # the topic has backlog quotas: each SEND is checked against them

    @cached_property  # (asked twice for every SEND: parsing the name each time cost 2% of a cluster's time)
    def origin(self) -> str | None:
        """The cluster a replicator producer (`pulsar.repl.A-->B`) replicates from; None for others."""
        return replicator_origin(self.name)

    @property
    def deduplication_name(self) -> str:
        """Whose sequence ids this producer's SENDs are deduplicated under: its origin cluster's for a
        replicator (its SENDs' sequence ids are origin offsets), else its own name."""
        origin = self.origin
        return self.name if origin is None else replication_key(origin)

    @property
    def last_sequence_id(self) -> int:
        """What PRODUCER_SUCCESS says: the highest sequence id stored under this producer's name when the
        topic deduplicates, else -1 (as Pulsar). For a replicator, the last origin offset stored: where it
        goes on from."""
        return -1 if self.sequences is None else self.sequences.last(self.deduplication_name)

    def arm_quota(self, armed: bool) -> None:
        """The topic's backlog quotas were set or removed, or its settings may have changed (QuotaGuard.register)."""
        self.quota_armed = armed
        self.keys.refresh()


@dataclass
class Settings:
    cluster: str
    broker_url: str  # pulsar://host:port, what LOOKUP answers
    max_message_size: int
    broker_url_tls: str = ""  # pulsar+ssl://host:port when the binary port serves TLS
    max_messages_per_batch: int = UnpackLimits.max_messages  # messages one SEND may carry
    # messages a consumer may hold unacknowledged before it is given no more (Pulsar's default); 0: no bound
    max_unacked_messages_per_consumer: int = 50_000
    # Pulsar's preciseDispatcherFlowControl: a read never gives a consumer more messages than its permits, a
    # stored batch cut to fit them; off (Pulsar's default), a read takes as many stored batches as it has
    # permits, whole (ConsumerState.entry_permits)
    precise_dispatcher_flow_control: bool = False
    # bytes of SENDs received and not yet written, in all and per connection, before connections stop reading
    max_publish_buffer: int = 256 * 1024 * 1024
    max_connection_publish_buffer: int = 16 * 1024 * 1024

    @cached_property
    def unpack_limits(self) -> UnpackLimits:
        """What a SEND may unpack to: a payload inflated to at most the max message size, and at most
        max_messages_per_batch messages (made once: every SEND asks)."""
        return UnpackLimits(self.max_message_size, self.max_messages_per_batch)


@dataclass
class BrokerService:
    broker: Broker
    settings: Settings
    producers: ProducerRegistry = field(init=False)
    publish_buffer: PublishBuffer = field(init=False)
    deduplication: Deduplication = field(init=False)
    non_persistent: NonPersistentTopics = field(init=False)  # the server's non-persistent topics (loop thread)
    # subscribing and leaving, one at a time (a subscription's last consumer leaving releases it)
    subscribing: asyncio.Lock = field(default_factory=asyncio.Lock)
    # the wake-up of each remote consumer, per subscription: an ack, a redelivery or a consumer leaving
    # may give the others something to receive (loop thread only)
    _wakers: dict[tuple[str, str], set[Callable[[], None]]] = field(default_factory=dict)
    # the replicator producers connected, by seglog topic (written in the thread pool, read by stats)
    _replicators_in: dict[str, set[ProducerHandle]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # per seglog topic and cluster, messages whose producer named a cluster outside the allowed ones
    _not_allowed: dict[str, dict[str, int]] = field(default_factory=dict)
    # (topic, partition, origin cluster, marker type, payload, position) -> None: where replicators' markers
    # go (the replication extension sets it; called in the thread pool)
    on_marker: Callable[[str, int, str, int, bytes, int], None] | None = None
    # (topic, partition, first offset, count, origin cluster or None) -> None: after each append by a server
    # producer, with the cluster a replicator's messages came from (None: produced here). The replication
    # extension sets it: messages produced here wake the partition's replicators, those from another
    # cluster, which never leave again, are acknowledged on their cursors unread (called in the thread pool)
    on_append: Callable[[str, int, int, int, str | None], None] | None = None

    def __post_init__(self) -> None:
        self.producers = ProducerRegistry(self.settings.cluster)
        self.publish_buffer = PublishBuffer(self.settings.max_publish_buffer,
                                            self.settings.max_connection_publish_buffer)
        self.deduplication = Deduplication(self.broker.store)
        self.non_persistent = NonPersistentTopics(self.broker.clock)

    # lookups (blocking)

    def parse(self, topic: str) -> tuple[TopicName, TopicName | None, int | None]:
        """(the topic's full name; the name before a `-partition-N` suffix and N, or None, None)."""
        if topic.startswith(_NON_PERSISTENT):
            raise ServerFailure(api.NotAllowedError, f"{topic}: seglog has persistent topics only")
        name = TopicName.parse(topic)
        split = partition_of(name.topic)
        if split is None:
            return name, None, None
        return name, TopicName(name.tenant, name.namespace, split[0]), split[1]

    def resolve(self, topic: str, create: bool, *, replicator: bool = False) -> Target | None:
        """The seglog topic and partition a Pulsar topic name means: `NAME-partition-N` is partition N of a
        seglog topic NAME with more than one partition, any other name a topic of its own (partition 0). A
        missing topic in an existing namespace is created when `create` and the namespace allows it
        (`auto_create`), else None; a missing namespace is TopicNotFound, and so is a missing topic this
        cluster is left out of (`_check_served`). A `replicator`'s producer never creates a `NAME-partition-N`
        topic: it replicates a partition, and a missing partitioned topic NAME here means it was deleted (or
        not made yet), which a stray topic of that name would outlive."""
        name, base, partition = self.parse(topic)
        if base is not None and partition is not None:
            try:
                ref = self.broker.topic(base)
            except TopicNotFoundError:
                pass  # not a partition of a seglog topic: `NAME-partition-N` is a name of its own
            else:
                if ref.partitions > 1:
                    if partition >= ref.partitions:
                        raise ServerFailure(api.TopicNotFound,
                                            f"{topic}: topic {ref} has {ref.partitions} partitions")
                    return Target(ref, partition, True)
        try:
            return Target(self.broker.topic(name), 0, False)
        except TopicNotFoundError:
            pass
        self.check_namespace(name)
        self._check_served(name if base is None else base)
        if not create:
            return None
        if replicator and base is not None:
            raise ServerFailure(api.TopicNotFound, f"{topic}: there is no partitioned topic {base} here, and a "
                                                   "replicator does not create a partition's name as a topic")
        # a partition's own name is never made a partitioned topic: NAME-partition-N-partition-M would follow
        return Target(self.auto_create(name, partitioned=base is None), 0, False)

    def auto_create(self, name: TopicName, *, partitioned: bool) -> TopicRef:
        """Create the missing topic `name` on first use as its namespace's auto-creation rule says (broker.conf
        allowAutoTopicCreation..., or the namespace's override): TopicNotFound where it is off; with
        `partitioned` and the rule's type 'partitioned', its defaultNumPartitions partitions, else one."""
        rule = self.broker.catalog.auto_topic_creation(name.namespace_name)
        if not rule.allowed:
            raise ServerFailure(api.TopicNotFound, f"topic {name} does not exist, and namespace "
                                                   f"{name.namespace_name} does not create topics on first use "
                                                   "(auto topic creation is off); create the topic first")
        return self._create(name, rule.partitions if partitioned and rule.partitions is not None else 1)

    def _create(self, name: TopicName, partitions: int) -> TopicRef:
        try:
            return self.broker.create_topic(str(name), partitions, {})
        except TopicExistsError:  # made meanwhile by another connection
            return self.broker.topic(name)

    def partitions(self, topic: str, create: bool) -> int:
        """PARTITIONED_METADATA's answer: the partition count of a seglog topic with more than one, else 0
        (non-partitioned, or not created yet). With `create` (the client's default), a missing topic of a
        namespace whose auto-creation type is 'partitioned' is created here, as Pulsar's broker does, so the
        client produces to its partitions; one of type 'non-partitioned' waits for its producer or consumer."""
        target = self.resolve(topic, create=False)
        if target is None and create:
            name, base, _ = self.parse(topic)
            rule = self.broker.catalog.auto_topic_creation(name.namespace_name)
            if base is None and rule.allowed and rule.partitions is not None:  # (a partition count: partitioned)
                target = Target(self._create(name, rule.partitions), 0, False)
        if target is None or target.named_partition or target.ref.partitions == 1:
            return 0
        return target.ref.partitions

    def topics_of_namespace(self, namespace: str) -> list[str]:
        """GET_TOPICS_OF_NAMESPACE: the topics of `namespace` by their Pulsar names, the partitions of a
        partitioned topic each by its own (`NAME-partition-i`), as Pulsar's broker lists them."""
        probe = TopicName.parse(f"{namespace}/_")  # (checks the namespace's form)
        self.check_namespace(probe)
        topics: list[str] = []
        for full in self.broker.catalog.topic_names():
            name = TopicName.parse(full)
            if name.namespace_name != probe.namespace_name:
                continue
            try:
                ref = self.broker.topic(name)
            except TopicNotFoundError:
                continue  # (deleted since the names were read: a listing never fails for it)
            topics.extend(ref.pulsar_name(p) for p in range(ref.partitions))
        return topics

    def check_namespace(self, name: TopicName | NonPersistentTopicName) -> None:
        """TopicNotFound unless the topic's namespace exists (blocking)."""
        try:
            namespaces = self.broker.catalog.metadata.namespaces(name.tenant)
        except NotFoundError:
            namespaces = []
        if name.namespace_name not in namespaces:
            raise ServerFailure(api.TopicNotFound, f"namespace {name.namespace_name} does not exist; create it "
                                                   "first (topics are created on first use in an existing one)")

    def _check_served(self, name: TopicName) -> None:
        """Refuse a missing topic this cluster must not hold (Catalog.left_out), as Pulsar refuses clients on
        a cluster a cascading deletion removed a topic from (the global policy that did is kept). A topic that
        is here is not checked: it is being deleted, or stays by the operator's choice (independent stores)."""
        cluster = self.settings.cluster
        if (why := self.broker.catalog.left_out(name, cluster)) is not None:
            raise ServerFailure(api.TopicNotFound, f"topic {name} is not served on cluster {cluster}: {why}")

    # producers

    def claim_producer(self, target: Target, requested: str | None, mode: int,
                       fence: Callable[[], None]) -> str | Waiter:
        """Admit a producer on a topic partition (loop thread): ProducerRegistry.claim."""
        return self.producers.claim(target.key, target.ref.pulsar_name(target.partition), requested, mode, fence)

    def release_producer(self, target: Target, name: str) -> None:
        self.producers.release(target.key, name)

    def check_quota(self, target: Target) -> None:
        """Refuse a new producer while its partition is at a backlog quota of policy producer_request_hold or
        producer_exception, as Pulsar's broker does (blocking)."""
        _check_quota(self.broker.quotas.guard(target.ref), target.partition, 0)

    def create_initial_subscription(self, target: Target, subscription: str) -> None:
        """A producer's initial subscription (pulsar-client's dead-letter policy names one): created at the earliest
        message if the topic has none of that name, before the producer writes anything, as Pulsar's broker
        does, so nothing sent to a dead-letter topic is lost before a consumer comes (blocking)."""
        self.broker.subscriptions.create(target.ref, subscription, "earliest")

    def open_writer(self, target: Target, name: str, peer: str = "", access_mode: str = "Shared") -> ProducerHandle:
        """The partition's writer for a new producer from `peer` (`host:port`) in Pulsar's `access_mode`
        (blocking: the first user opens it)."""
        store = self.broker.store
        fence = store.fence(target.ref.name)
        fence.check()
        writer = store.acquire_writer(target.ref.name, target.partition, target.ref.config)
        # (a replicator writes partition i of its origin to partition i: a growth leaves it as it is)
        store.producer_opened(target.ref.name, routes=replicator_origin(name) is None)
        sequences = None
        # a replicator's SENDs are always deduplicated: a replicator that restarts sends again what was not
        # receipted, and nothing may arrive twice
        if replicator_origin(name) is not None or self.broker.catalog.policies(target.ref).deduplication.value:
            sequences = self.deduplication.sequences(target.ref.name, target.partition, fence)
        # (Pulsar's address: the client's socket address as Java writes one, `/host:port`)
        publisher = store.traffic.topic(str(target.ref.name)).add_publisher(name, target.partition, f"/{peer}",
                                                                             access_mode)
        handle = ProducerHandle(target, name, writer, fence, self.broker.quotas.guard(target.ref), sequences,
                                publisher, KeysRequired(self.broker.catalog, target.ref.name))
        handle.quota.register(handle.arm_quota)
        if handle.origin is not None:
            with self._lock:
                self._replicators_in.setdefault(str(target.ref.name), set()).add(handle)
        return handle

    def close_writer(self, handle: ProducerHandle) -> None:
        with self._lock:
            self._replicators_in.get(str(handle.target.ref.name), set()).discard(handle)
        store = self.broker.store
        store.traffic.topic(str(handle.target.ref.name)).remove_publisher(handle.publisher)
        store.release_writer(handle.target.ref.name, handle.target.partition, handle.fence)
        store.producer_closed(handle.target.ref.name, handle.fence, routes=handle.origin is None)

    def append(self, handle: ProducerHandle, messages: Messages | NativeMessages, sequence_id: int) -> int | None:
        """Write one SEND's messages as one batch; returns the offset of the first (blocking), or None for a
        duplicate the topic's deduplication drops. `sequence_id` is the SEND command's: for a replicator,
        the origin offset of the entry. The write is in the segment (and fsynced where the topic's fsync
        says so) when this returns."""
        handle.fence.check()
        origin = handle.origin
        if handle.keys.required and origin is None:  # (a replicated entry was taken by its origin cluster)
            _check_keys(handle, messages)
        if origin is not None:  # a replicated entry: never replicated again, deduplicated by origin offset
            messages.attributes[REPLICATED_FROM] = origin
            messages.attributes[REPLICATED_OFFSET] = str(sequence_id)
        elif REPLICATE_TO in messages.attributes:
            self._count_not_allowed(handle.target.ref.name, messages)
        sequences = handle.sequences
        if sequences is None:
            offset = self._write(handle, messages)
        else:
            ids = deduplication_ids(messages.attributes)
            assert ids is not None  # (every SEND names its producer and sequence ids)
            name, highest = ids
            with sequences.lock:  # (one producer per name: only the snapshot is shared with others)
                stored = sequences.last(name)
            if highest <= stored:
                return None
            if origin is not None and highest - messages.count < stored:
                # a replicated entry's messages are at consecutive origin offsets, the last at `highest`:
                # those the remote's replicator packed otherwise before were stored then (entries.py)
                assert isinstance(messages, Messages)  # (a replicator's SENDs take the reference path)
                messages = messages.without_first(stored - highest + messages.count)
            offset = self._write(handle, messages)
            sequences.record(name, highest, offset, offset + messages.count)
        if self.on_append is not None:
            self.on_append(str(handle.target.ref.name), handle.target.partition, offset, messages.count, origin)
        return offset

    def append_all(self, handle: ProducerHandle, sends: list[NativeMessages]) -> list[int] | None:
        """Write the messages of several SENDs, one batch each, in one append of the writer
        (PartitionWriter.append_all); each SEND's first offset. None, with nothing written, when they are to
        go one by one through `append`: the topic deduplicates, or has its backlog quota armed, or requires
        keys; the producer is a replicator, or names clusters for its messages; or they do not fit in the
        active segment as it is."""
        if handle.sequences is not None or handle.quota_armed or handle.origin is not None or handle.keys.required:
            return None
        if any(REPLICATE_TO in messages.attributes for messages in sends):
            return None
        handle.fence.check()
        writer = handle.writer
        base = writer.append_all([messages.source(writer) for messages in sends], handle.publisher.meter)
        if base is None:
            return None
        offsets = list(itertools.accumulate((messages.count for messages in sends[:-1]), initial=base))
        if self.on_append is not None:
            self.on_append(str(handle.target.ref.name), handle.target.partition, base,
                           offsets[-1] + sends[-1].count - base, None)
        return offsets

    @staticmethod
    def cheap_append(handle: ProducerHandle, nbytes: int, batches: int) -> bool:
        """Whether appending `batches` batches of up to `nbytes` for `handle` now costs no more than copying
        them into the mapped segment, so that the server may append on its event loop: no backlog quota to
        check (evicting may move cursors), no fsync due with it, room in the active segment (a roll makes and
        syncs files) in blocks allocated already (a posix_fallocate can take milliseconds)."""
        writer = handle.writer
        active = writer.active
        return not handle.quota_armed and writer.config.fsync_interval_ms is None and not active.sealed and \
            active.free_bytes > nbytes and active.allocated_for(nbytes, batches)

    def marker(self, handle: ProducerHandle, metadata: api.MessageMetadata, payload: bytes) -> int:
        """A marker a replicator sent (Pulsar's marker entries: replicated subscriptions' snapshots, topic
        policies): not stored, handed to the replication (`on_marker`) with where it arrived in the partition
        (its end offset now, after everything the replicator sent before it); that offset is the receipt's."""
        target = handle.target
        position = self.broker.store.end_offset(target.ref.name, target.partition)
        assert handle.origin is not None
        if self.on_marker is not None:
            self.on_marker(str(target.ref.name), target.partition, handle.origin, metadata.marker_type, payload,
                           position)
        return position

    def _count_not_allowed(self, name: TopicName, messages: Messages | NativeMessages) -> None:
        """A producer named clusters for its messages (`replication_clusters`): those outside the namespace's
        allowed clusters never get them (no replicator goes there); the messages are stored all the same (a
        refused send would only make the client retry it) and counted per cluster (stats'
        replicationNotAllowed)."""
        local = self.settings.cluster
        named = set(messages.attributes[REPLICATE_TO].split(",")) - {LOCAL_ONLY, local}
        if not named:
            return
        outside = named - self.broker.catalog.allowed_clusters(name.namespace_name, local)
        if outside:
            with self._lock:
                counts = self._not_allowed.setdefault(str(name), {})
                for cluster in outside:
                    counts[cluster] = counts.get(cluster, 0) + messages.count

    def not_allowed_counts(self, topic: str) -> dict[str, int]:
        """Per cluster, the messages of the seglog topic `topic` whose producer named that cluster outside the
        namespace's allowed clusters (since the server started)."""
        with self._lock:
            return dict(sorted(self._not_allowed.get(topic, {}).items()))

    @staticmethod
    def _write(handle: ProducerHandle, messages: Messages | NativeMessages) -> int:
        writer = handle.writer
        source = messages.source(writer)
        if not handle.quota_armed:
            return writer.append(source, handle.publisher.meter)
        # Pulsar's test: refused while the backlog is at or above a quota, so a SEND may take it past by its
        # own size (the stricter in-process test, backlog with the send, would let a client re-create its
        # producer and be refused its next SEND forever)
        partition = handle.target.partition
        _check_quota(handle.quota, partition, 0)
        offset = writer.append(source, handle.publisher.meter)
        handle.quota.count_written(partition, source.size(0, source.count))
        return offset


    # consumers (blocking, but for the wake-ups)

    def subscribe(self, target: Target, name: str, subscription_type: str, initial_position: str,
                  consumer: ConsumerState, *, replicated: bool = False) -> Subscription:
        """Attach a remote consumer to the durable subscription `name`, created at `initial_position` if
        new; a refused first consumer leaves no subscription behind (as Topic.subscribe). A consumer asking
        for a `replicated` subscription (SUBSCRIBE's replicate_subscription_state) makes it replicated on its
        partition, and one that does not leaves it as it is, as Pulsar's broker does. With replicated
        subscriptions disabled (broker.conf enableReplicatedSubscriptions=false) it subscribes all the same
        and the subscription is not made replicated, as Pulsar's broker does since 2.8 (refusing it, as 2.6.2
        did, locked out every consumer that asked once the setting was turned off)."""
        registry = self.broker.subscriptions
        ref = self.broker.topic(target.ref.name)
        new = name not in registry.names(ref)
        subscription = registry.open(ref, name, subscription_type, initial_position)
        try:
            subscription.attach(consumer, subscription_type)
        except BaseException:
            if new:
                registry.remove_unused(subscription)
            elif not subscription.consumers:
                registry.release(subscription)
            raise
        if replicated and not self.broker.config.enable_replicated_subscriptions:
            logger.warning("subscription %r of %s: the consumer %s asks for a replicated subscription, and "
                           "replicated subscriptions are disabled (broker.conf enableReplicatedSubscriptions="
                           "false): it is not replicated", name, target.ref.pulsar_name(target.partition),
                           consumer.name)
        elif replicated:
            subscription.set_replicated([target.partition], True)
        return subscription

    def read(self, target: Target, name: str, start: api.MessageIdData | None,
             consumer: ConsumerState) -> Subscription:
        """A reader: a non-durable subscription of its own (Subscriptions.open_non_durable), starting at
        the message after `start` (docs/SERVER.md, "Readers")."""
        offset = self.reader_start(target, start)
        starts = [0] * target.ref.partitions
        starts[target.partition] = offset
        subscription = self.broker.subscriptions.open_non_durable(self.broker.topic(target.ref.name), name, starts)
        subscription.attach(consumer, "exclusive")
        return subscription

    def reader_start(self, target: Target, start: api.MessageIdData | None) -> int:
        """The first offset a reader starting at `start` is given: earliest (-1, -1) is the partition's
        earliest offset, latest (INT64_MAX, INT64_MAX) or none its end; any other id names the message at
        offset = entryId + max(batchIndex, 0). An unbatched id's message is sent again, and the client
        drops it unless the reader is `start_message_id_inclusive` (as Pulsar's broker restarts at that
        entry); a batched id starts after its message."""
        store = self.broker.store
        name, partition = target.ref.name, target.partition
        end = store.end_offset(name, partition)
        earliest = store.earliest_offset(name, partition)
        if start is None:
            return end
        ledger, entry = signed(start.ledger_id), signed(start.entry_id)
        if ledger < 0 or entry < 0:
            return earliest
        if ledger == _INT64_MAX or entry == _INT64_MAX:
            return end
        offset = offset_of(entry, start.batch_index) + (1 if start.batch_index >= 0 else 0)
        return max(earliest, min(offset, end))

    def seek_offset(self, target: Target, message_id: api.MessageIdData | None, publish_time: int | None) -> int:
        """Where SEEK puts a subscription's cursor: the message a message id names (earliest and latest as
        for readers), or the first message whose timestamp (publish time) is at least `publish_time`."""
        store = self.broker.store
        name, partition = target.ref.name, target.partition
        if publish_time is not None:
            return store.start_offset(name, partition, {"timestamp": publish_time})
        assert message_id is not None
        ledger, entry = signed(message_id.ledger_id), signed(message_id.entry_id)
        if ledger < 0 or entry < 0:
            return store.earliest_offset(name, partition)
        if ledger == _INT64_MAX or entry == _INT64_MAX:
            return store.end_offset(name, partition)
        return offset_of(entry, message_id.batch_index)

    def seek(self, subscription: Subscription, partition: int, offset: int) -> None:
        subscription.seek(partition, offset)

    def leave(self, subscription: Subscription, consumer: ConsumerState, *, unsubscribe: bool) -> None:
        """Detach a remote consumer: what it was given and did not acknowledge goes to the others. The last
        one releases the subscription (its cursor persisted), or deletes it for `unsubscribe`: the consumers
        of a partitioned topic unsubscribe one partition each, and the last of them deletes the subscription
        (docs/SERVER.md). A reader's non-durable subscription is simply closed: it has nothing to persist."""
        registry = self.broker.subscriptions
        subscription.detach(consumer)
        if not subscription.durable:
            subscription.close()
        elif subscription.consumers:
            return
        elif unsubscribe:
            registry.unsubscribe(subscription)
        else:
            registry.release(subscription)

    def watch(self, subscription: Subscription, waker: Callable[[], None]) -> None:
        """Call `waker` when the subscription changes (wake): a remote consumer's, which reads again then."""
        self._wakers.setdefault((str(subscription.ref), subscription.name), set()).add(waker)

    def unwatch(self, subscription: Subscription, waker: Callable[[], None]) -> None:
        key = (str(subscription.ref), subscription.name)
        wakers = self._wakers.get(key)
        if wakers is not None:
            wakers.discard(waker)
            if not wakers:
                del self._wakers[key]

    def wake(self, subscription: Subscription) -> None:
        """The subscription changed (acks, redeliveries, a consumer left): tell its remote consumers."""
        for waker in self._wakers.get((str(subscription.ref), subscription.name), ()):
            waker()

    # read by the admin REST API

    def inbound_replication(self, topic: str) -> dict[str, dict[str, Any]]:
        """Per origin cluster, what its replicators write to the seglog topic `topic` (the inbound half of
        Pulsar's ReplicatorStats): rates summed over partitions, the first connection's address and time."""
        with self._lock:
            handles = sorted(self._replicators_in.get(topic, ()), key=lambda h: h.target.partition)
        inbound: dict[str, dict[str, Any]] = {}
        for handle in handles:
            assert handle.origin is not None
            publisher = handle.publisher
            rate, throughput = publisher.meter.rates()
            entry = inbound.setdefault(handle.origin, {"msgRateIn": 0.0, "msgThroughputIn": 0.0,
                                                       "msgInCounter": 0, "bytesInCounter": 0,
                                                       "inboundConnection": (publisher.address or "").lstrip("/"),
                                                       "inboundConnectedSince": publisher.connected_since})
            entry["msgRateIn"] += rate
            entry["msgThroughputIn"] += throughput
            entry["msgInCounter"] += publisher.meter.messages
            entry["bytesInCounter"] += publisher.meter.bytes
        return inbound


_INT64_MAX = (1 << 63) - 1


class QuotaRefusal(ServerFailure):
    """A backlog quota refuses the partition's producers: they are closed and refused until it clears."""


def _check_keys(handle: ProducerHandle, messages: Messages | NativeMessages) -> None:
    """Refuse a SEND to a compacted topic with a message that has no partition key, before anything is written:
    SEND_ERROR ChecksumError, the one code for which pulsar-client fails that message alone (on any other code it
    drops the connection and resends it until its send timeout). Pulsar's broker has no such rule (its compactor
    leaves keyless messages out); this is Kafka's, for topics whose cleanup_policy compacts (docs/SERVER.md)."""
    try:
        handle.keys.checked_keys(messages.key_list())
    except InvalidArgumentError as refused:
        raise ServerFailure(api.ChecksumError, f"{refused.detail}: give the message a partition key") from None


def _check_quota(guard: QuotaGuard, partition: int, nbytes: int) -> None:
    """QuotaGuard.admit for a server producer: a hold is never waited out in the server (the client holds its
    sends and retries), so both policies refuse at once, with the code the client expects for each;
    consumer_backlog_eviction evicts as in-process."""
    refusal = guard.admit(partition, nbytes, _nothing_queued)
    if refusal is not None:
        code = (api.ProducerBlockedQuotaExceededException if refusal.policy == "producer_exception"
                else api.ProducerBlockedQuotaExceededError)
        raise QuotaRefusal(code, refusal.reason)


def _nothing_queued() -> None:
    """A server producer queues nothing in the writer: each SEND is written as it comes."""
