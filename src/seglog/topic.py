"""A topic: its partitions, settings and the handles to write and read them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from seglog.config import TopicConfig
from seglog.errors import InvalidArgumentError
from seglog.names import TopicName
from seglog.producer import Producer
from seglog.reader import Reader

if TYPE_CHECKING:
    from seglog.log import Log
    from seglog.reader import PartitionView
    from seglog.writer import PartitionWriter


class Topic:
    """Handle to one topic of an open log (cheap; get it from `log.topic(name)` or `log.create_topic`)."""

    def __init__(self, log: Log, name: TopicName, partitions: int, config: TopicConfig) -> None:
        self._log = log
        self.topic_name = name
        self.partitions = partitions
        self.config = config

    @property
    def name(self) -> str:
        """The full name, 'tenant/namespace/topic'."""
        return str(self.topic_name)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={self.partitions})"

    def partition_directory(self, partition: int) -> Path:
        return self._log._topic_directory(self.topic_name) / str(self._check_partition(partition))

    def producer(self, **config: Any) -> Producer:
        """A producer for this topic: batch_size (bytes, default 1 MiB), linger_ms (default 5)."""
        return Producer(self, **config)

    def reader(self, start: Any = "earliest", partition: int = 0, *, verify_crc: bool | None = None) -> Reader:
        """A reader of one partition from `start`: 'earliest', 'latest', an offset, or {'timestamp': ms}
        (the first message whose timestamp is >= it). CRC checks follow the log's `verify_crc` setting."""
        verify = self._log.config.verify_crc if verify_crc is None else verify_crc
        return Reader(self._segments(partition), partition, start, verify_crc=verify)

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
        total = 0
        for partition in range(self.partitions):
            view = self._segments(partition)
            view.rescan()
            for base in view.bases:
                index = view.view(base).index
                index.refresh()
                total += index.end_position + 2 * 16 * index.count
        return total

    def _segments(self, partition: int) -> PartitionView:
        return self._log._partition_view(self.partition_directory(partition))

    def _acquire_writers(self) -> list[PartitionWriter]:
        return self._log._acquire_writers(self)

    def _release_writers(self) -> None:
        self._log._release_writers(self)

    def _check_partition(self, partition: int) -> int:
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < self.partitions:
            raise InvalidArgumentError("partition", partition, f"an int from 0 to {self.partitions - 1}")
        return partition
