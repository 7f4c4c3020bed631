"""A topic: its partitions, settings, and the handles to write, read and consume them; its stats."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seglog.admin.stats import explain_retention, internal_stats, topic_stats
from seglog.broker import Broker
from seglog.catalog.config import TopicConfig
from seglog.catalog.message_keys import KeysRequired
from seglog.catalog.topics import TopicRef
from seglog.consumer import Consumer
from seglog.dead_letters import DeadLetterPolicy, DeadLetters
from seglog.errors import InvalidArgumentError, TopicExistsError, TopicNotFoundError
from seglog.names import TopicName
from seglog.producer import Producer
from seglog.storage.partition_view import is_offset
from seglog.storage.range_read import read_range
from seglog.storage.reader import Reader
from seglog.subscriptions.delivery import READ_COMPACTED_REFUSED, READ_COMPACTED_TYPES
from seglog.subscriptions.registry import parse_subscription_type

if TYPE_CHECKING:
    import pyarrow as pa

    from seglog.catalog.policies import EffectivePolicies
    from seglog.storage.partition_view import PartitionView


class Topic:
    """Handle to one topic of an open log (cheap; get it from `log.topic(name)` or `log.create_topic`).

    Thread safety: a handle may be shared by the threads of a process. Another process gets its own from
    its own Log; a topic created, grown or deleted in one process is seen by the others."""

    def __init__(self, broker: Broker, ref: TopicRef) -> None:
        self._broker = broker
        self.ref = ref
        self.fence = broker.store.fence(ref.name)  # set when the topic is deleted, by any process: every use fails

    @property
    def topic_name(self) -> TopicName:
        """The full name, parsed into tenant, namespace and topic."""
        return self.ref.name

    @property
    def partitions(self) -> int:
        """The number of partitions, as this handle knows it (log.update_partitions returns a new handle)."""
        return self.ref.partitions

    @property
    def config(self) -> TopicConfig:
        """The topic's settings: its own, else the broker's defaults."""
        return self.ref.config

    @property
    def name(self) -> str:
        """The full name, 'tenant/namespace/topic'."""
        return str(self.topic_name)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={self.partitions})"

    def partition_directory(self, partition: int) -> Path:
        """The directory of the partition's segment files (TopicNotFoundError once the topic is deleted)."""
        self.fence.check()  # a deleted topic's directories may be a new topic's of the same name
        return self._broker.store.partition_directory(self.ref.name, self.ref.check_partition(partition))

    def producer(self, **config: Any) -> Producer:
        """A producer for this topic: batch_size (bytes, default 1 MiB), linger_ms (default 5), send_timeout
        (seconds a producer_request_hold quota may hold a send, default 30), partitions (the partitions
        whose writers, and writer locks, it takes at once; the others at their first message)."""
        return Producer(self, self._broker.store, self._broker.quotas.guard(self.ref),
                        KeysRequired(self._broker.catalog, self.ref.name), self._broker.clock, **config)

    def reader(self, start: Any = "earliest", partition: int = 0, *, verify_crc: bool | None = None,
               read_compacted: bool = False) -> Reader:
        """A reader of one partition from `start`: 'earliest', 'latest', an offset, or {'timestamp': ms}
        (the first message whose timestamp is >= it). CRC checks follow the log's `verify_crc` setting.
        With `read_compacted`, each key's latest message up to the partition's compaction horizon (its
        compacted view, tombstones left out), then the rest of the log (docs/LIFECYCLE.md, Compaction)."""
        verify = self._broker.config.verify_crc if verify_crc is None else verify_crc
        self.fence.check()
        if not isinstance(read_compacted, bool):
            raise InvalidArgumentError("read_compacted", read_compacted, "True or False")
        return self._broker.store.reader(self.ref.name, self.ref.check_partition(partition), start,
                                         verify_crc=verify, read_compacted=read_compacted)

    def read_range(self, partition: int, start: int, end: int, *, read_compacted: bool = False,
                   fail_on_data_loss: bool = True, max_horizon: int = 0,
                   schema_versions: bool = False) -> Iterator[pa.RecordBatch]:
        """The messages of offsets [start, end) of one partition as record batches (read_batch's columns, over
        the segments' memory), as a query engine reads an input split. Messages deleted before they are read
        raise OffsetOutOfRangeError naming them, or with `fail_on_data_loss` False are left out. With
        `read_compacted`, the compacted view below the horizon, then the log; a compaction whose horizon passed
        `max_horizon` meanwhile raises OffsetOutOfRangeError. `schema_versions`: a schema_version column, the
        version each message was written with (None when none). seglog.storage.range_read says more."""
        self.fence.check()
        if not is_offset(start) or not is_offset(end) or start > end:
            raise InvalidArgumentError("start, end", (start, end), "offsets from 0 with start <= end")
        return read_range(self._broker.store, self.ref.name, self.ref.check_partition(partition), start, end,
                          verify_crc=self._broker.config.verify_crc, read_compacted=read_compacted,
                          fail_on_data_loss=fail_on_data_loss, max_horizon=max_horizon,
                          schema_versions=schema_versions)

    def subscribe(self, name: str, *, subscription_type: str = "exclusive", initial_position: str = "latest",
                  consumer_name: str | None = None, ack_timeout: Any = None,
                  negative_ack_redelivery_delay: Any = 60,
                  dead_letter_policy: DeadLetterPolicy | None = None, read_compacted: bool = False) -> Consumer:
        """A consumer of the durable subscription `name` (created at `initial_position`, 'latest' or
        'earliest', if it does not exist). subscription_type: 'exclusive' (one consumer), 'failover' (one
        active consumer per partition), 'shared' (messages spread over the consumers), 'key_shared' (each
        key's messages to one consumer). Both in any case and as Pulsar spells them ('Shared', 'Key_Shared',
        'Earliest').
        ack_timeout: seconds after which an unacknowledged message is redelivered (None: never);
        negative_ack_redelivery_delay: seconds before a negatively acknowledged message is redelivered
        (Pulsar's default, 60). Both are measured by the log's clock.
        dead_letter_policy: a DeadLetterPolicy (seglog.dead_letters): a message redelivered more than its
        max_redeliver_count times goes to the dead-letter topic instead, as with pulsar-client's policy.
        read_compacted: below each partition's compaction horizon, the consumer is given its compacted view
        (each key's latest message; docs/LIFECYCLE.md, Compaction), then the log; exclusive and failover
        subscriptions only, as in Pulsar."""
        # Partitions added since this handle was made (log.update_partitions): a subscription spans them all.
        self.fence.check()
        subscription_type = parse_subscription_type(subscription_type)
        if not isinstance(read_compacted, bool):
            raise InvalidArgumentError("read_compacted", read_compacted, "True or False")
        if read_compacted and subscription_type not in READ_COMPACTED_TYPES:
            raise InvalidArgumentError("read_compacted", read_compacted, "False on a shared or key_shared "
                                       "subscription", detail=READ_COMPACTED_REFUSED)
        self.ref = self._broker.topic(self.ref.name)
        registry = self._broker.subscriptions
        new = name not in self.subscriptions()
        if dead_letter_policy is not None and not isinstance(dead_letter_policy, DeadLetterPolicy):
            raise InvalidArgumentError("dead_letter_policy", dead_letter_policy, "a seglog.DeadLetterPolicy or None")
        dead_letters = None if dead_letter_policy is None else DeadLetters(
            dead_letter_policy, self.ref.name, lambda: self._dead_letter_producer(dead_letter_policy, name))
        subscription = registry.open(self.ref, name, subscription_type, initial_position)
        try:
            return Consumer(self, subscription, registry, subscription_type=subscription_type,
                            consumer_name=consumer_name,
                            ack_timeout=ack_timeout, negative_ack_redelivery_delay=negative_ack_redelivery_delay,
                            dead_letters=dead_letters, read_compacted=read_compacted)
        except BaseException:
            if new:  # a refused first consumer leaves no subscription behind
                registry.remove_unused(subscription)
            elif not subscription.consumers:
                registry.release(subscription)
            raise

    def _dead_letter_producer(self, policy: DeadLetterPolicy, subscription: str) -> Producer:
        """A producer of the dead-letter topic of `subscription`, the topic created if it does not exist and
        the policy's initial subscription made on it at the earliest message if it has none of that name."""
        name = policy.topic_for(self.ref.name, subscription)
        try:
            ref = self._broker.topic(name)
        except TopicNotFoundError:
            try:
                ref = self._broker.create_topic(str(name), 1, {})
            except TopicExistsError:  # (created by another consumer meanwhile)
                ref = self._broker.topic(name)
        if policy.initial_subscription_name is not None:
            self._broker.subscriptions.create(ref, policy.initial_subscription_name, "earliest")
        return Topic(self._broker, ref).producer()

    def subscriptions(self) -> list[str]:
        """The names of the topic's subscriptions."""
        return self._broker.subscriptions.names(self.ref)

    def policies(self) -> EffectivePolicies:
        """The retention, message TTL, backlog quotas, deduplication and compaction threshold in force on this
        topic, each with the level that set it: the topic's own policy, else its namespace's, else the broker
        default."""
        return self._broker.catalog.policies(self.ref)

    def stats(self) -> dict[str, Any]:
        """Pulsar-style topic stats: storage (logical and on disk), backlog per subscription, the policies
        in force with their levels, the backlog quotas' limits and usage, and the replication backlog per
        remote cluster (see stats.py)."""
        self.fence.check()
        return topic_stats(self._broker, self.ref)

    def internal_stats(self) -> dict[str, Any]:
        """Segments (base offset, messages, size, last write) and cursors (mark-delete position, acked
        ranges) of every partition."""
        self.fence.check()
        return internal_stats(self._broker, self.ref)

    def explain_retention(self) -> dict[str, Any]:
        """Why each segment is kept, or which rule deletes it next and when."""
        self.fence.check()
        return explain_retention(self._broker, self.ref)

    def partition_view(self, partition: int = 0) -> PartitionView:
        """The log's shared read-side view of a partition: its segments, as mapped for this process's
        readers (storage.partition_view). For tools and tests that look below the reader API."""
        self.fence.check()
        return self._broker.store.view(self.ref.name, self.ref.check_partition(partition))

    def earliest_offset(self, partition: int = 0) -> int:
        """The first offset still stored in the partition."""
        self.fence.check()
        return self._broker.store.earliest_offset(self.ref.name, self.ref.check_partition(partition))

    def end_offset(self, partition: int = 0) -> int:
        """The offset the next message written to the partition will get."""
        self.fence.check()
        return self._broker.store.end_offset(self.ref.name, self.ref.check_partition(partition))

    def storage_size(self) -> int:
        """Bytes the topic's segments and indexes hold (pre-allocated space not yet written not counted)."""
        self.fence.check()
        store = self._broker.store
        return sum(store.view(self.ref.name, p).facts.table().total_size
                   for p in range(self.partitions))
