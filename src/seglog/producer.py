"""Producer: `send()` one message (queued and written in batches) and `send_batch()` (one record batch).

Batching follows Kafka's producer: queued messages of a partition are written when they reach
`batch_size` bytes, when the oldest has waited `linger_ms`, on `flush()` and on close. `flush()` hands
everything to the page cache, so a process crash after it loses nothing; the topic's fsync policy decides
what survives a power loss."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from seglog._core._accumulator import Accumulator, SendPath
from seglog._core._messages import MessageId
from seglog._core._writer import message_size
from seglog.errors import ClosedError, InvalidArgumentError
from seglog.storage.batch import checked_source
from seglog.storage.delivery_time import deliver_at_attributes
from seglog.units import parse_duration, parse_size, parse_time_ms, parse_timeout

if TYPE_CHECKING:
    from seglog.catalog.message_keys import KeysRequired
    from seglog.catalog.topics import TopicRef
    from seglog.clock import Clock
    from seglog.lifecycle.quota import QuotaGuard
    from seglog.storage.fence import TopicFence
    from seglog.storage.store import PartitionStore
    from seglog.storage.writer import PartitionWriter

_CLOSED = b"\0"  # the fence of a closed producer: send() refuses it as closed first
PRODUCER_DEFAULTS = {"batch_size": 1 << 20, "linger_ms": 5}


class ProducerTopic(Protocol):
    """What a producer uses of the topic handle that made it (seglog.topic.Topic, which imports this module)."""
    ref: TopicRef  # the topic's name, partitions and settings
    fence: TopicFence  # set when the topic is deleted, by any process


class Producer(SendPath):
    """Writes messages to a topic. Any number of producers in a process share each partition's writer.

    `send(value, *, key=None, timestamp=None, properties=None, partition=None) -> MessageId` queues one
    message (a None value is a null one: no value, unlike b""); its offset is final at once (this process
    is the partition's only writer) and the message is visible to readers once written. `send_batch`
    writes at once.

    A partition's writer, and so its writer lock, is taken with the producer's first message for it (a
    PartitionLockedError then if another process writes it), so producers in several processes can share
    a topic by partition. `partitions=[...]` takes those partitions' writers at once instead.

    Thread safety: one producer may be shared by any number of threads of its process: however `send`,
    `send_batch` and `flush` interleave, every message is stored once, at the MessageId its call returned.
    A producer cannot cross processes; each process makes its own, for partitions no other process writes."""

    def __init__(self, topic: ProducerTopic, store: PartitionStore, quota_guard: QuotaGuard, keys: KeysRequired,
                 clock: Clock, *, batch_size: int | str = PRODUCER_DEFAULTS["batch_size"],
                 linger_ms: int | str = PRODUCER_DEFAULTS["linger_ms"], send_timeout: float | str = 30.0,
                 partitions: Iterable[int] | None = None) -> None:
        self.topic = topic
        self._store = store
        self._clock = clock  # the log's: a delay (deliver_after) counts from its now
        self.batch_size = parse_size(batch_size, argument="batch_size")
        self.linger_ms = parse_duration(linger_ms, argument="linger_ms", unit="ms")
        # how long a send held by a producer_request_hold backlog quota waits, in seconds (None: no limit)
        self.send_timeout = parse_timeout(send_timeout, argument="send_timeout", none=math.inf)
        if self.batch_size <= 0:
            raise InvalidArgumentError("batch_size", batch_size, "a positive size, e.g. 1048576 or '1 MiB'")
        topic.fence.check()
        # A partition's writer (and its writer lock) is taken at the first message for it, so a producer
        # that writes some partitions leaves the others to other processes: one writer per partition.
        self._ref = topic.ref  # the partitions as the producer was made: a topic grown since is not seen
        self._partitions = topic.ref.partitions
        self._writers: list[PartitionWriter | None] = [None] * self._partitions
        self._accumulators: list[Accumulator | None] = [None] * self._partitions  # send()'s view of them
        self._opening = threading.Lock()
        self._next_batch_partition = 0
        self._closed = False
        opening = _partitions_to_open(partitions, self._partitions)
        store.producer_opened(topic.ref.name)
        self._init_send_path(self._accumulators, self.batch_size, topic.fence.lend(self._let_go))
        try:
            for partition in opening:
                self._writer(partition)
        except BaseException:
            self.close()
            raise
        self._quota_guard = quota_guard
        self._keys = keys  # (a compacted topic's messages need keys: catalog/message_keys.py)
        self._quota_armed = False
        quota_guard.register(self._arm_quota_gate)

    def _arm_quota_gate(self, armed: bool) -> None:
        """The topic has backlog quotas (armed) or none, or its settings may have changed (the quota guard
        calls this whenever either may have): send()'s gate, which it calls before it queues a message, checks
        the key while the topic compacts and the quotas while it has some, and is None, costing nothing, while
        neither."""
        self._quota_armed = armed
        self._keys.refresh()
        if self._keys.required:
            self._quota_gate = self._check_message
        else:
            self._quota_gate = self._check_message_quota if armed else None

    def _check_message(self, partition: int, value: bytes | None, key: bytes | None, timestamp: int | None,
                       properties: dict[str, str] | None) -> None:
        """send()'s gate on a compacted topic: a key first, then the backlog quotas if any."""
        self._keys.check_key(key)
        if self._quota_armed:
            self._check_message_quota(partition, value, key, timestamp, properties)

    def _check_message_quota(self, partition: int, value: bytes | None, key: bytes | None, timestamp: int | None,
                             properties: dict[str, str] | None) -> None:
        """send()'s backlog quota check. The message counts the bytes it would take alone in a batch, header
        included: at least what it adds to the batch it joins, so the quota is never passed."""
        event_time_column = timestamp is not None and self._writer(partition).config.log_append_time
        self._check_quota(partition, message_size(value, key, event_time_column, properties))

    def _check_quota(self, partition: int, nbytes: int) -> None:
        """Backlog quotas (quota.py) for `nbytes` more stored bytes: O(1) while the partition is below its
        limits; else what send() queued is written first, so the backlog is counted as stats() counts it."""
        self._quota_guard.check(partition, nbytes, self.send_timeout, self._writer(partition).flush_pending)

    def _writer(self, partition: int) -> PartitionWriter:
        writer = self._writers[partition]
        if writer is None:
            with self._opening:  # threads sending to a new partition at once open it once
                writer = self._writers[partition]
                if writer is None:
                    writer = self._store.acquire_writer(self.topic.ref.name, partition, self.topic.ref.config)
                    self._accumulators[partition] = writer.accumulator
                    self._writers[partition] = writer
        return writer

    def _open_partition(self, partition: int) -> Accumulator:
        """send()'s first message for `partition`: its writer, opened now."""
        return self._writer(partition).accumulator

    def _first_pending(self, partition: int) -> None:
        self._store.linger(self._writer(partition), self.linger_ms)

    def _batch_full(self, partition: int) -> None:
        self._writer(partition).flush_pending()

    def send_batch(self, values: Any, *, keys: Any = None, timestamps: Any = None, properties: Any = None,
                   partition: int | None = None, deliver_at: Any = None, deliver_after: Any = None) -> MessageId:
        """Write `values` as one record batch (split only where a segment is full); returns the MessageId
        of its first message. values: a list of bytes, a pyarrow binary or string array, or a numpy array
        of fixed-width records; at least one; None (or a pyarrow null) is a null value. keys: the same
        forms, None allowed per key; when given and `partition` is not, messages are spread by key hash
        (one batch per partition). timestamps: ms since the epoch, one per value (None or a pyarrow null:
        the append time). properties: a list of dicts of str to str, or a pyarrow map array. Without keys
        or partition, each call goes to the next partition in turn. deliver_at (ms since the epoch, or a
        datetime) or deliver_after (a timedelta, ms as an int, or a duration such as '30s'): shared and
        key_shared subscriptions deliver the batch's messages no earlier than that, by the log's clock
        (Pulsar's delayed delivery; exclusive and failover deliver them at once). The whole call is checked
        before anything is written: a bad argument writes nothing."""
        self._check_open()
        keys = self._keys.checked_keys(keys)
        attributes = self._delivery_time(deliver_at, deliver_after)
        if partition is not None:
            self._ref.check_partition(partition)
        elif keys is not None and self._partitions > 1:
            return self._send_by_key(values, keys, timestamps, properties, attributes)
        else:
            partition = self._next_batch_partition % self._partitions
            self._next_batch_partition += 1
        writer = self._writer(partition)
        source = writer.source(values, keys, timestamps, properties, attributes=attributes)
        if self._quota_armed:
            self._check_quota(partition, source.size(0, source.count))
        return MessageId(partition, writer.append(source))

    def _send_delayed(self, value: bytes | None, key: bytes | None, timestamp: int | None,
                      properties: dict[str, str] | None, partition: int | None, deliver_at: Any,
                      deliver_after: Any) -> MessageId:
        """send() of a delayed message: a batch of its own, as the delivery time is kept per stored batch."""
        self._keys.check_key(key)
        return self.send_batch([value], keys=None if key is None else [key],
                               timestamps=None if timestamp is None else [timestamp],
                               properties=None if properties is None else [properties], partition=partition,
                               deliver_at=deliver_at, deliver_after=deliver_after)

    def _delivery_time(self, deliver_at: Any, deliver_after: Any) -> dict[str, str] | None:
        """The attributes of a delayed batch (storage.delivery_time), None for one delivered at once."""
        if deliver_at is None and deliver_after is None:
            return None
        if deliver_at is not None and deliver_after is not None:
            raise InvalidArgumentError("deliver_after", deliver_after, "None when deliver_at is given (one or "
                                       "the other: a time, or a delay from now)")
        if deliver_at is not None:
            return deliver_at_attributes(parse_time_ms(deliver_at, argument="deliver_at"))
        delay = (round(deliver_after.total_seconds() * 1000) if isinstance(deliver_after, timedelta)
                 else parse_duration(deliver_after, argument="deliver_after", unit="ms"))
        if delay < 0:
            raise InvalidArgumentError("deliver_after", deliver_after, "a delay of 0 or more")
        return deliver_at_attributes(self._clock() + delay)

    def _send_by_key(self, values: Any, keys: Any, timestamps: Any, properties: Any,
                     attributes: dict[str, str] | None) -> MessageId:
        """One batch per partition, each written only once every one is known to be sound (and within the
        backlog quotas): an error names the index in the call, and nothing is written."""
        from seglog.storage.partitioning import split_by_key
        whole = checked_source(values, keys, timestamps, properties)
        assert whole.keys is not None  # keys were given
        batches = [(partition, self._writer(partition).source(*parts, attributes=attributes))
                   for partition, parts in split_by_key(self._partitions, whole.keys, values, keys, timestamps,
                                                        properties)]
        if self._quota_armed:
            for partition, source in batches:
                self._check_quota(partition, source.size(0, source.count))
        ids = [MessageId(partition, self._writer(partition).append(source)) for partition, source in batches]
        return ids[0]

    def flush(self) -> None:
        """Write every queued message of this producer's topic and hand it to the page cache."""
        self._check_open()
        for writer in self._writers:
            if writer is not None:
                writer.flush_pending()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("producer is closed")
        self.topic.fence.check()

    def close(self) -> None:
        """Flush and release this producer (the partitions' writers stay open for the log's other producers)."""
        if not self._closed:
            if not self.topic.fence.deleted:  # a deleted topic's queued messages are dropped, not written
                self.flush()
            self._let_go()
            for partition, writer in enumerate(self._writers):
                if writer is not None:
                    self._store.release_writer(self.topic.ref.name, partition, self.topic.fence)
            self._store.producer_closed(self.topic.ref.name, self.topic.fence)

    def _let_go(self) -> None:
        """Refuse every call from now on, and let go of the fence's map that send() tests. The producer
        closes, or the log does (the fence calls this): the log closed its writers first."""
        self._closed = True
        self._init_send_path([], self.batch_size, _CLOSED)

    def _fenced(self) -> None:
        self.topic.fence.check()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _partitions_to_open(partitions: Any, count: int) -> list[int]:
    """The partitions a producer opens at once (`partitions=`): valid partition numbers, or none."""
    if partitions is None:
        return []
    accepted = f"partition numbers from 0 to {count - 1} (an iterable of ints), or None"
    try:
        numbers = list(partitions)
    except TypeError:
        raise InvalidArgumentError("partitions", partitions, accepted) from None
    bad = [p for p in numbers if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < count]
    if bad:
        raise InvalidArgumentError("partitions", partitions, accepted, f"{bad[0]!r} is not one")
    return sorted(set(numbers))
