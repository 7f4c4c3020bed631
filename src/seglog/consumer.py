"""Consumer: receives a subscription's messages and acknowledges them (Pulsar's consumer API).

`receive()` gives one Message, `receive_batch()` a pyarrow RecordBatch over the segment's memory (the
partition is in its schema metadata, so `ack(batch)` needs nothing else). Acks take a Message, a
MessageId, a RecordBatch, or offsets (an int, a numpy array or a pyarrow array) with `partition=`; a whole
batch or array is acknowledged in one call of the Cython AckSet. Timeouts are seconds of real time;
`ack_timeout` and `negative_ack_redelivery_delay` are ages measured by the log's clock. A receive that
waits is woken by an append of this process to the topic (storage.notification), and polls for the rest
(appends by other processes, redeliveries due by time: seglog._wait)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from seglog._core._acks import AckSetBusyError
from seglog._core._messages import Message, MessageId
from seglog._wait import wait_until
from seglog.errors import ClosedError, InvalidArgumentError, ReceiveTimeoutError
from seglog.subscriptions.delivery import ConsumerState, Piece
from seglog.subscriptions.registry import Subscriptions
from seglog.subscriptions.subscription import Subscription
from seglog.units import parse_duration, parse_timeout

if TYPE_CHECKING:
    from seglog.catalog.topics import TopicRef
    from seglog.dead_letters import DeadLetters
    from seglog.storage.fence import TopicFence

RECEIVER_QUEUE_SIZE = 1000  # messages one receive() prefetches, as Pulsar's receiverQueueSize
_CLOSED = b"\1"  # the fence of a closed consumer: set, so that ack() takes the slow path, which says closed
_consumer_numbers = count()


class ConsumerTopic(Protocol):
    """What a consumer uses of the topic handle that made it (seglog.topic.Topic, which imports this module)."""
    ref: TopicRef  # the topic's name, partitions and settings
    fence: TopicFence  # set when the topic is deleted, by any process

    @property
    def name(self) -> str: ...
    def end_offset(self, partition: int = 0) -> int: ...


@dataclass
class _Prefetched:
    """A piece receive() took from the subscription: its messages, and the index of the next to return."""
    piece: Piece
    messages: list[Message]
    next: int = 0


class Consumer:
    """One consumer of a subscription. Close it (or use it as a context manager) to hand what it received
    and did not acknowledge back to the subscription.

    Thread safety: `ack`, `ack_cumulative` and `negative_ack` may be called from any thread; `receive`,
    `receive_batch` and `seek` from one thread at a time (for several receiving threads, one consumer each
    on a shared or key_shared subscription). One process consumes a subscription at a time: a consumer in
    another process gets ConsumerBusyError."""

    def __init__(self, topic: ConsumerTopic, subscription: Subscription, registry: Subscriptions, *,
                 subscription_type: str, consumer_name: str | None, ack_timeout: Any,
                 negative_ack_redelivery_delay: Any, dead_letters: DeadLetters | None = None,
                 read_compacted: bool = False) -> None:
        self.topic = topic
        self._dead_letters = dead_letters  # where messages past their redeliveries go (dead_letters.py)
        self._registry = registry
        self._fence: memoryview | bytes = topic.fence.lend(self._let_go)  # tested on every ack: one byte, no call
        self.subscription = subscription
        self.name = consumer_name if consumer_name is not None else f"consumer-{next(_consumer_numbers)}"
        ack_timeout_ms = None if ack_timeout is None else _seconds("ack_timeout", ack_timeout)
        self.nack_delay_ms = _seconds("negative_ack_redelivery_delay", negative_ack_redelivery_delay)
        self.state = ConsumerState(self.name, ack_timeout_ms, self._drop_prefetched, self.close,
                                   read_compacted=read_compacted)
        self._prefetched: deque[_Prefetched] = deque()  # taken by receive(), not all returned yet
        self._cursor = subscription.cursor  # the per-message ack and is_acked go to it directly
        self._cursors = subscription.cursors
        self._ends = [0] * len(subscription.cursors)  # the partitions' end offsets when last looked up
        self._closed = False
        subscription.attach(self.state, subscription_type)

    def __repr__(self) -> str:
        return f"Consumer({self.topic.name!r}, subscription={self.subscription.name!r}, name={self.name!r})"

    # receiving

    def receive(self, timeout: float | None = None) -> Message:
        """The next message; waits up to `timeout` (seconds, math.inf or a duration such as '500ms', see
        units.parse_timeout; None: forever), then raises ReceiveTimeoutError (ClosedError if the log is closed
        meanwhile)."""
        seconds = parse_timeout(timeout, none=math.inf)
        self._check_open()
        message = wait_until(time.monotonic() + seconds, self._next_message, self.subscription.appended)
        if message is None:
            raise ReceiveTimeoutError(f"no message on subscription {self.subscription.name!r} of "
                                      f"{self.topic.name} within {timeout} s")
        return message

    def _next_message(self) -> Message | None:
        prefetched, cursor = self._prefetched, self._cursor
        while True:
            while prefetched:
                head = prefetched[0]
                while head.next < len(head.messages):
                    message = head.messages[head.next]
                    head.next += 1
                    if not cursor.is_acked(message.partition, message.offset):  # skipped meanwhile: drop
                        return message
                prefetched.popleft()
            pieces = self._deliverable(self.subscription.next_delivery(self.state, RECEIVER_QUEUE_SIZE))
            if not pieces:
                return None
            prefetched.extend(_Prefetched(piece, piece.messages()) for piece in pieces)

    def receive_batch(self, max_messages: int | None = None, timeout: float | None = 0) -> pa.RecordBatch | None:
        """The next messages as one RecordBatch (at most `max_messages`, from one stored batch; zero copy
        unless acknowledged messages had to be left out), or None when there are none. Returns at once
        unless given a `timeout` to wait for messages (seconds, math.inf or a duration such as '500ms', see
        units.parse_timeout; None: forever; ClosedError if the log is closed meanwhile)."""
        seconds = parse_timeout(timeout, none=math.inf)
        self._check_open()
        if max_messages is not None and (isinstance(max_messages, bool) or not isinstance(max_messages, int)
                                         or max_messages < 1):
            raise InvalidArgumentError("max_messages", max_messages, "an int >= 1, or None for a whole stored batch")
        while self._prefetched and self._prefetched[0].next == len(self._prefetched[0].messages):
            self._prefetched.popleft()
        if self._prefetched:  # receive() took these: hand them over first
            return self._prefetched_batch(max_messages)
        subscription = self.subscription
        pieces = wait_until(time.monotonic() + seconds,
                            lambda: self._deliverable(subscription.next_delivery(self.state, max_messages)),
                            subscription.appended)
        if not pieces:
            return None
        batches = [piece.record_batch() for piece in pieces]
        if len(batches) == 1:
            return batches[0]
        return pa.Table.from_batches(batches).combine_chunks().to_batches()[0].replace_schema_metadata(
            batches[0].schema.metadata)

    def _deliverable(self, pieces: list[Piece]) -> list[Piece]:
        """The pieces dispatch gave, less the messages past the dead-letter policy's redeliveries: those go to
        the dead-letter topic and are acknowledged here (a piece of nothing else is left out)."""
        if self._dead_letters is None:
            return pieces
        kept = []
        for piece in pieces:
            dead = self._dead_letters.dead(self.subscription, piece)
            if dead.any():
                self._dead_letters.send(piece.with_offsets(piece.offsets[dead]).messages())
                self.ack(piece.offsets[dead], partition=piece.partition)
                piece = piece.with_offsets(piece.offsets[~dead])
            if len(piece.offsets):
                kept.append(piece)
        return kept

    def _prefetched_batch(self, max_messages: int | None) -> pa.RecordBatch:
        """The rest of the piece receive() is going through, over the log's memory as any batch is."""
        head = self._prefetched[0]
        stop = len(head.messages) if max_messages is None else min(len(head.messages), head.next + max_messages)
        offsets = head.piece.offsets[head.next:stop]
        head.next = stop
        return head.piece.with_offsets(offsets).record_batch()

    def _drop_prefetched(self, partition: int | None) -> None:
        """Forget what receive() took and has not returned yet (the subscription rewound or was reset)."""
        if partition is None:
            self._prefetched.clear()
        else:
            self._prefetched = deque(p for p in self._prefetched if p.piece.partition != partition)

    # acknowledging

    def ack(self, target: Any, partition: int | None = None) -> None:
        """Acknowledge a Message, a MessageId, a RecordBatch from receive_batch, or offsets (an int, a
        numpy or pyarrow array) of `partition` (default 0)."""
        if self._fence[0]:
            self._check_open()
        kind = type(target)
        if kind is Message or kind is MessageId:  # the per-message paths: no isinstance chain
            self._ack_one(target.partition, target.offset)
            return
        if kind is int and target >= 0:  # an offset: no isinstance chain either
            self._ack_one(0 if partition is None else self._partition(partition), target)
            return
        partition, offsets = self._offsets(target, partition)
        if isinstance(offsets, int):
            self._ack_one(partition, offsets)
            return
        if len(offsets):
            self._check_written(partition, int(offsets.max()))
            self.subscription.ack_many(partition, offsets)

    def _ack_one(self, partition: int, offset: int) -> None:
        """The per-message path. `partition` and `offset` are >= 0 (MessageId and _offsets check that)."""
        try:
            end = self._ends[partition]
        except IndexError:
            end = -1  # not a partition of the topic: _check_written refuses it
        if offset >= end:
            self._check_written(partition, offset)
        try:
            self._cursors[partition].acks.ack(offset)
        except AckSetBusyError:  # see subscriptions/cursor.py: a GIL-free loop of the thread holding the mutex
            self._cursor.ack_holding_mutex(partition, offset)
        else:
            self._cursor.dirty = True

    def ack_cumulative(self, target: Any, partition: int | None = None) -> None:
        """Acknowledge every message of the partition up to and including `target` (a Message, MessageId,
        RecordBatch: its last message, or an offset). Refused on shared and key_shared subscriptions."""
        self.topic.fence.check()
        if self.subscription.type in ("shared", "key_shared"):
            raise InvalidArgumentError("ack_cumulative", self.subscription.type,
                                       "exclusive or failover subscriptions (as in Pulsar, a cumulative ack "
                                       "would acknowledge other consumers' messages)")
        partition, offsets = self._offsets(target, partition)
        last = offsets if isinstance(offsets, int) else int(offsets.max())
        self._check_written(partition, last)
        self.subscription.ack_cumulative(partition, last)

    def negative_ack(self, target: Any, partition: int | None = None) -> None:
        """Ask for redelivery of messages (after `negative_ack_redelivery_delay`)."""
        self.topic.fence.check()
        partition, offsets = self._offsets(target, partition)
        offsets = np.array([offsets], dtype=np.int64) if isinstance(offsets, int) else offsets
        self.subscription.negative_ack(partition, offsets, self.nack_delay_ms)
        if self.state.traffic is not None:  # (as a remote consumer's negative acks are, in its REDELIVER)
            self.state.traffic.redelivery_asked(partition, len(offsets))

    def _offsets(self, target: Any, partition: int | None) -> tuple[int, Any]:
        if isinstance(target, (Message, MessageId)):
            return self._partition(target.partition), _offset(target.offset)
        if isinstance(target, tuple) and len(target) == 2:
            return self._partition(target[0]), _offset(target[1])
        if isinstance(target, pa.RecordBatch):
            metadata = target.schema.metadata or {}
            if partition is None and b"partition" in metadata:
                partition = int(metadata[b"partition"])
            return self._partition(partition or 0), np.asarray(target.column("offset"))
        if isinstance(target, (np.ndarray, pa.Array, pa.ChunkedArray)):
            offsets = np.asarray(target)
            if offsets.ndim != 1 or offsets.dtype.kind not in "iu":
                raise InvalidArgumentError("offsets", f"{offsets.dtype} array of shape {offsets.shape}",
                                           "a 1-D array of integer offsets")
            return self._partition(partition or 0), offsets.astype(np.int64, copy=False)
        return self._partition(partition or 0), _offset(target)

    def _partition(self, partition: Any) -> int:
        return self.topic.ref.check_partition(partition)

    def _check_written(self, partition: int, offset: int) -> None:
        self._partition(partition)
        if offset >= self._ends[partition]:
            self._ends[partition] = self.topic.end_offset(partition)
            if offset >= self._ends[partition]:
                raise InvalidArgumentError("offset", offset, f"an offset of a message written to partition "
                                           f"{partition} (below its end offset {self._ends[partition]})")

    # position

    def seek(self, position: Any, partition: int | None = None) -> None:
        """Reset the subscription to `position`: 'earliest', 'latest', an offset, {'timestamp': ms} or a
        MessageId; everything before it counts as acknowledged, everything from it on as not. Without
        `partition` (and for anything but a MessageId) every partition is reset."""
        self._check_open()
        partitions: Sequence[int]
        if isinstance(position, MessageId):
            partitions, position = [position.partition], position.offset
        else:
            partitions = [self._partition(partition)] if partition is not None else range(self.topic.ref.partitions)
        for p in partitions:
            self.subscription.seek(p, self._registry.store.start_offset(self.topic.ref.name, p, position))

    # lifecycle

    def close(self) -> None:
        """Leave the subscription: unacknowledged messages given to this consumer go to the others (or to
        the next consumer). The subscription's state is persisted when its last consumer leaves."""
        if self._closed:
            return
        self._let_go()
        self.subscription.detach(self.state)
        if not self.subscription.consumers:
            self._registry.release(self.subscription)
        if self._dead_letters is not None:
            self._dead_letters.close()

    def unsubscribe(self) -> None:
        """Delete the subscription (refused while other consumers are attached): its backlog no longer
        keeps messages."""
        self._check_open()
        self._let_go()
        self.subscription.detach(self.state)
        self._registry.unsubscribe(self.subscription)

    def _let_go(self) -> None:
        """Refuse every call from now on, and hold nothing of the data directory: neither the fence's map
        nor messages taken and not returned (their buffers point into the segments' maps). The consumer
        closes, or the log does (the fence calls this), which closed the subscriptions first."""
        self._closed = True
        self._fence = _CLOSED
        self._prefetched.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("consumer is closed")
        self.topic.fence.check()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _offset(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgumentError("offset", value, "an int >= 0, a Message, a MessageId, a RecordBatch or an "
                                   "array of offsets")
    return int(value)


def _seconds(name: str, value: Any) -> int:
    return parse_duration(value, argument=name, unit="s")
