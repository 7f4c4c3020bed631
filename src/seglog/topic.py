"""A topic: its partitions, settings, and the handles to write, read and consume them; its stats."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from seglog.catalog.config import TopicConfig
from seglog.consumer import Consumer
from seglog.errors import InvalidArgumentError
from seglog.names import TopicName
from seglog.producer import Producer
from seglog.reader import Reader
from seglog.storage.partition_view import start_offset

if TYPE_CHECKING:
    from seglog.storage.fence import TopicFence
    from seglog.log import Log
    from seglog.catalog.policies import EffectivePolicies
    from seglog.storage.partition_view import PartitionView
    from seglog.storage.writer import PartitionWriter


class Topic:
    """Handle to one topic of an open log (cheap; get it from `log.topic(name)` or `log.create_topic`)."""

    def __init__(self, log: Log, name: TopicName, partitions: int, config: TopicConfig, fence: TopicFence) -> None:
        self._log = log
        self.topic_name = name
        self.partitions = partitions
        self.config = config
        self.fence = fence  # set when the topic is deleted, by any process: every use then fails

    @property
    def name(self) -> str:
        """The full name, 'tenant/namespace/topic'."""
        return str(self.topic_name)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={self.partitions})"

    def partition_directory(self, partition: int) -> Path:
        self.fence.check()  # a deleted topic's directories may be a new topic's of the same name
        return self._log._topic_directory(self.topic_name) / str(self._check_partition(partition))

    def producer(self, **config: Any) -> Producer:
        """A producer for this topic: batch_size (bytes, default 1 MiB), linger_ms (default 5), send_timeout
        (seconds a producer_request_hold quota may hold a send, default 30), partitions (the partitions
        whose writers, and writer locks, it takes at once; the others at their first message)."""
        return Producer(self, **config)

    def reader(self, start: Any = "earliest", partition: int = 0, *, verify_crc: bool | None = None) -> Reader:
        """A reader of one partition from `start`: 'earliest', 'latest', an offset, or {'timestamp': ms}
        (the first message whose timestamp is >= it). CRC checks follow the log's `verify_crc` setting."""
        verify = self._log.config.verify_crc if verify_crc is None else verify_crc
        return Reader(self._segments(partition), partition, start, verify_crc=verify, fence=self.fence)

    def subscribe(self, name: str, *, subscription_type: str = "exclusive", initial_position: str = "latest",
                  consumer_name: str | None = None, ack_timeout: Any = None,
                  negative_ack_redelivery_delay: Any = 60) -> Consumer:
        """A consumer of the durable subscription `name` (created at `initial_position`, 'latest' or
        'earliest', if it does not exist). subscription_type: 'exclusive' (one consumer), 'failover' (one
        active consumer per partition), 'shared' (messages spread over the consumers), 'key_shared' (each
        key's messages to one consumer). ack_timeout: seconds after which an unacknowledged message is
        redelivered (None: never); negative_ack_redelivery_delay: seconds before a negatively acknowledged
        message is redelivered (Pulsar's default, 60). Both are measured by the log's clock."""
        # Partitions added since this handle was made (log.update_partitions): a subscription spans them all.
        self.partitions = self._log._metadata_store().topic(self.topic_name).partitions
        registry = self._log._subscriptions
        new = name not in self.subscriptions()
        subscription = registry.open(self, name, subscription_type, initial_position)
        try:
            return Consumer(self, subscription, subscription_type=subscription_type, consumer_name=consumer_name,
                            ack_timeout=ack_timeout, negative_ack_redelivery_delay=negative_ack_redelivery_delay)
        except BaseException:
            if new:  # a refused first consumer leaves no subscription behind
                registry.remove_unused(subscription)
            elif not subscription.consumers:
                registry.release(subscription)
            raise

    def subscriptions(self) -> list[str]:
        """The names of the topic's subscriptions."""
        return self._log._subscriptions.names(self)

    def policies(self) -> EffectivePolicies:
        """The retention, message TTL and backlog quotas in force on this topic, each with the level that set
        it: the topic's own policy, else its namespace's, else the broker default."""
        return self._log._effective_policies(self)

    def _start_offset(self, position: Any, partition: int) -> int:
        return start_offset(self._segments(partition), position)

    def stats(self) -> dict[str, Any]:
        """Pulsar-style topic stats: storage (logical and on disk), backlog per subscription, the policies
        in force with their levels, and the backlog quotas' limits and usage (see stats.py)."""
        from seglog.admin.stats import topic_stats
        return topic_stats(self)

    def internal_stats(self) -> dict[str, Any]:
        """Segments (base offset, messages, size, last write) and cursors (mark-delete position, acked
        ranges) of every partition."""
        from seglog.admin.stats import internal_stats
        return internal_stats(self)

    def explain_retention(self) -> dict[str, Any]:
        """Why each segment is kept, or which rule deletes it next and when."""
        from seglog.admin.stats import explain_retention
        return explain_retention(self)

    def _clear_backlog(self, subscription: str | None) -> None:
        """Acknowledge every message written so far, on one subscription or all (Pulsar's clear-backlog)."""
        names = self.subscriptions() if subscription is None else [subscription]
        if subscription is not None and subscription not in self.subscriptions():
            raise InvalidArgumentError("subscription", subscription, f"a subscription of {self.name}: "
                                       f"{', '.join(self.subscriptions()) or 'it has none'}")
        for name in names:
            with self._log._subscriptions.modify(self, name) as live:
                if live is None:
                    raise InvalidArgumentError("subscription", name, "a subscription not consumed by another "
                                               "process (clear its backlog there)")
                for partition in range(self.partitions):
                    live.skip_to(partition, self.end_offset(partition))

    def earliest_offset(self, partition: int = 0) -> int:
        """The first offset still stored in the partition."""
        segments = self._segments(partition)
        segments.rescan()
        return segments.earliest_offset()

    def end_offset(self, partition: int = 0) -> int:
        """The offset the next message written to the partition will get."""
        return self._segments(partition).end_offset()

    def storage_size(self) -> int:
        """Bytes the topic's segments and indexes hold (pre-allocated space not yet written not counted)."""
        return sum(self._log._segment_facts(self._segments(p)).table().total_size for p in range(self.partitions))

    def _segments(self, partition: int) -> PartitionView:
        return self._log._partition_view(self.partition_directory(partition))

    def _acquire_writer(self, partition: int) -> PartitionWriter:
        return self._log._acquire_writer(self, partition)

    def _release_writer(self, partition: int) -> None:
        self._log._release_writer(self, partition)

    def _producer_opened(self) -> None:
        self._log._producer_opened(self)

    def _producer_closed(self) -> None:
        self._log._producer_closed(self)

    def _check_partition(self, partition: int) -> int:
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < self.partitions:
            raise InvalidArgumentError("partition", partition, f"an int from 0 to {self.partitions - 1}")
        return partition
