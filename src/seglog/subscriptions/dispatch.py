"""Subscriptions: durable cursors over a topic's partitions, and how their messages reach the consumers
of this process (exclusive, failover, shared, key_shared, as in Pulsar).

A subscription is consumed by one process at a time (an flock beside its cursor file); within it, by any
number of consumers of the types' rules. Dispatch reads a partition forwards from its dispatch position,
in pieces of one stored batch, and leaves out what the cursor already acknowledged (after a restart, the
individual acks beyond the mark-delete position). Redeliveries (negative acks, ack timeouts, consumers
that left) go first. Ack timeout and negative-ack delay are ages, measured by the log's clock."""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from seglog._core._acks import AckSet, AckSetBusyError
from seglog._core._messages import Message, messages_from_batch
from seglog.catalog.topics import TopicRef
from seglog.errors import ConsumerBusyError, OffsetOutOfRangeError
from seglog.storage.batch import to_record_batch
from seglog.storage.lock import WriterLock
from seglog.storage.partition_view import SegmentView
from seglog.storage.reader import Reader
from seglog.subscriptions.cursor_file import CursorRecord, save
from seglog.subscriptions.key_shared import HashRing, key_slots

if TYPE_CHECKING:
    from seglog.subscriptions.registry import Subscriptions



@dataclass
class Piece:
    """Messages of one stored batch handed to one consumer: `offsets` ascending, all inside the batch."""
    partition: int
    view: SegmentView
    position: int
    base: int
    count: int  # messages in the stored batch
    offsets: np.ndarray

    def with_offsets(self, offsets: np.ndarray) -> Piece:
        """The same stored batch, other messages of it."""
        return Piece(self.partition, self.view, self.position, self.base, self.count, offsets)

    @property
    def contiguous(self) -> bool:
        return int(self.offsets[-1]) - int(self.offsets[0]) + 1 == len(self.offsets)

    def record_batch(self) -> pa.RecordBatch:
        """Zero-copy when the offsets are one run; a filtered copy otherwise."""
        first = int(self.offsets[0])
        span = int(self.offsets[-1]) - first + 1
        batch = to_record_batch(self.view.data, self.position).slice(first - self.base, span)
        if not self.contiguous:
            keep = np.zeros(span, dtype=bool)
            keep[self.offsets - first] = True
            batch = batch.filter(pa.array(keep))
        return batch.replace_schema_metadata({b"partition": str(self.partition).encode()})

    def messages(self) -> list[Message]:
        first, last = int(self.offsets[0]), int(self.offsets[-1])
        messages = messages_from_batch(self.view.data, self.position, self.partition, first - self.base,
                                       last - self.base + 1)
        if self.contiguous:
            return messages
        wanted = set(self.offsets.tolist())
        return [m for m in messages if m.offset in wanted]


@dataclass
class PartitionDispatch:
    """Where dispatch stands on one partition: the next offset to read, and what waits for redelivery."""
    reader: Reader
    redeliver: set[int] = field(default_factory=set)
    nacked: list[tuple[int, int, np.ndarray]] = field(default_factory=list)  # heap of (due ms, seq, offsets)


@dataclass
class Pending:
    """Delivered to a consumer and not yet known to be acknowledged."""
    deadline_ms: int | None
    partition: int
    offsets: np.ndarray


@dataclass(eq=False)
class ConsumerState:
    """What dispatch keeps of one consumer: an in-process Consumer holds one, and so will a remote consumer
    on a connection. Only the subscription changes it, holding its mutex.

    `on_forget(partition)` lets the consumer drop what it took and has not handed out yet (the
    subscription rewound or was reset: on one partition, or on all for None); `disconnect()` closes the
    consumer (a forced unsubscribe)."""
    name: str
    ack_timeout_ms: int | None
    on_forget: Callable[[int | None], None]
    disconnect: Callable[[], None]
    pending: deque[Pending] = field(default_factory=deque)  # delivered, not yet known to be acknowledged
    queue: deque[Piece] = field(default_factory=deque)      # key_shared: routed to this consumer by others
    # key_shared, a consumer that joined others: per partition, the read position when it joined, until
    # everything before it is acknowledged; meanwhile its messages from there on are held
    joined_at: list[int | None] | None = None
    held: deque[Piece] = field(default_factory=deque)

    def forget(self, partition: int | None = None) -> None:
        """Drop what was delivered, routed or held (of one partition, or all), and tell the consumer."""
        if partition is None:
            self.pending.clear()
            self.queue.clear()
            self.held.clear()
            self.joined_at = None
        else:
            self.pending = deque(p for p in self.pending if p.partition != partition)
            self.queue = deque(p for p in self.queue if p.partition != partition)
            self.held = deque(p for p in self.held if p.partition != partition)
            if self.joined_at is not None:
                self.joined_at[partition] = None  # the partition starts again for every consumer
        self.on_forget(partition)


class Subscription:
    """One subscription of a topic, consumed in this process. Shared by its consumers; every method that
    changes dispatch or cursor state holds `mutex`.

    The cursors' AckSets: every call that releases the GIL (ack_many, the backlog and dispatch reads, see
    `reading`) is made holding `mutex`. A consumer's per-message ack and is_acked, the hot paths, do not
    take it: they hold the GIL throughout, so they are atomic for every other thread unless they meet one
    of those GIL-free loops (AckSetBusyError, nothing changed), and then they wait for `mutex`, which the
    loop's thread holds, and try again (ack_holding_mutex)."""

    def __init__(self, registry: Subscriptions, ref: TopicRef, name: str, record: CursorRecord, lock: WriterLock,
                 path: Path) -> None:
        self.registry = registry
        self.ref = ref
        self.fence = registry.store.fence(ref.name)
        self.name = name
        self.record = record
        self.path = path
        self.lock = lock  # the cursor file's lock: this process consumes the subscription while it holds it
        self.mutex = threading.RLock()
        self.consumers: list[ConsumerState] = []
        self.cursors = record.partitions
        self.dispatch = [PartitionDispatch(registry.store.reader(ref.name, p, c.acks.floor,
                                                                 verify_crc=registry.verify_crc))
                         for p, c in enumerate(self.cursors)]
        self._next_partition = 0
        self._nack_sequence = 0
        self._ring: HashRing | None = None  # key_shared: the consumers' points, made again when they change
        self.dirty = False
        self.closed = False

    @property
    def type(self) -> str:
        return self.record.subscription_type

    # consumers

    def attach(self, consumer: ConsumerState, subscription_type: str) -> None:
        with self.mutex:
            if self.consumers and subscription_type != self.type:
                raise ConsumerBusyError(f"subscription {self.name!r} of {self.ref} is {self.type} and has "
                                        f"consumers; a {subscription_type} consumer cannot join it")
            if self.type == "exclusive" and self.consumers:
                raise ConsumerBusyError(f"exclusive subscription {self.name!r} of {self.ref} already has "
                                        f"a consumer ({self.consumers[0].name!r})")
            if subscription_type != self.type:  # no consumers: the type may change, as in Pulsar
                self.record.subscription_type = subscription_type
                self.dirty = True
            if self.type == "key_shared" and self.consumers:  # held back: see key_shared.py
                consumer.joined_at = [dispatch.reader.offset for dispatch in self.dispatch]
            self.consumers.append(consumer)
            self._ring = None
            if self.type == "failover":
                self._rewind()

    def detach(self, consumer: ConsumerState) -> None:
        """A consumer left: what it was given and did not acknowledge goes to the others."""
        with self.mutex:
            self.consumers.remove(consumer)
            self._ring = None
            if self.type in ("exclusive", "failover"):
                self._rewind()
                return
            for piece in [*consumer.pending, *consumer.queue, *consumer.held]:
                self._redeliver(piece.partition, piece.offsets)
            consumer.forget()

    def _rewind(self) -> None:
        """Start dispatch again at each mark-delete position (acknowledged messages are left out), as
        Pulsar does when the active consumer of an exclusive or failover subscription changes."""
        for cursor, dispatch in zip(self.cursors, self.dispatch):
            dispatch.reader.seek(cursor.acks.floor)
            dispatch.redeliver.clear()
            dispatch.nacked.clear()
        for consumer in self.consumers:
            consumer.forget()

    def partitions_for(self, consumer: ConsumerState) -> list[int]:
        n = len(self.cursors)
        if self.type != "failover":
            return list(range(n))
        ordered = sorted(self.consumers, key=lambda c: c.name)
        return [p for p in range(n) if ordered[p % len(ordered)] is consumer]

    # dispatch

    def next_delivery(self, consumer: ConsumerState, max_messages: int | None) -> list[Piece]:
        self.fence.check()
        """The next messages for `consumer`: what was routed to it, redeliveries, then new messages; [] if
        none now. Each is pending on the consumer until acknowledged."""
        with self.mutex:
            now = self.registry.clock()
            self._expire_pending(now)
            if consumer.joined_at is not None:
                self._release_held(consumer)
            pieces = self._routed_to(consumer, max_messages) or self._dispatch_to(consumer, max_messages)
            deadline = None if consumer.ack_timeout_ms is None else now + consumer.ack_timeout_ms
            for piece in pieces:
                consumer.pending.append(Pending(deadline, piece.partition, piece.offsets))
            return pieces

    @staticmethod
    def _routed_to(consumer: ConsumerState, max_messages: int | None) -> list[Piece]:
        """key_shared: the oldest messages another consumer's dispatch routed to this one."""
        if not consumer.queue:
            return []
        piece = consumer.queue.popleft()
        if max_messages is not None and len(piece.offsets) > max_messages:
            consumer.queue.appendleft(piece.with_offsets(piece.offsets[max_messages:]))
            piece = piece.with_offsets(piece.offsets[:max_messages])
        return [piece]

    def _dispatch_to(self, consumer: ConsumerState, max_messages: int | None) -> list[Piece]:
        """Redeliveries or new messages of the consumer's partitions, taken in turn."""
        partitions = self.partitions_for(consumer)
        for i in range(len(partitions)):
            partition = partitions[(self._next_partition + i) % len(partitions)]
            pieces = self._take(partition, max_messages)
            if self.type == "key_shared":
                pieces = self._route_by_key(consumer, pieces)
            if pieces:
                self._next_partition = (self._next_partition + i + 1) % max(len(partitions), 1)
                return pieces
        return []

    def _take(self, partition: int, max_messages: int | None) -> list[Piece]:
        dispatch = self.dispatch[partition]
        if dispatch.redeliver:
            pieces = self._take_redeliveries(partition, max_messages)
            if pieces:
                return pieces
        acks = self.cursors[partition].acks
        reader = dispatch.reader
        while True:
            offset = reader.offset
            try:
                located = reader.locate(offset)
            except OffsetOutOfRangeError:
                self.skip_deleted(partition)
                continue
            if located is None:
                return []
            view, position, base, count = located
            stop = count if max_messages is None else min(count, offset - base + max_messages)
            reader.seek(base + stop)
            offsets = np.arange(offset, base + stop, dtype=np.int64)
            if acks.high > offset:  # acknowledged messages in range: leave them out
                offsets = offsets[acks.unacked_mask(offset, base + stop)]
            if len(offsets):
                return [Piece(partition, view, position, base, count, offsets)]

    def _take_redeliveries(self, partition: int, max_messages: int | None) -> list[Piece]:
        dispatch, acks = self.dispatch[partition], self.cursors[partition].acks
        waiting = sorted(o for o in dispatch.redeliver if not acks.is_acked(o))  # acked ones are dropped
        cut = len(waiting) if max_messages is None else max_messages
        due = waiting[:cut]
        dispatch.redeliver = set(waiting[cut:])
        pieces: list[Piece] = []
        reader = dispatch.reader
        for offset in due:
            if pieces and pieces[-1].base <= offset < pieces[-1].base + pieces[-1].count:
                pieces[-1].offsets = np.append(pieces[-1].offsets, offset)
                continue
            try:
                located = reader.locate(offset)
            except OffsetOutOfRangeError:
                continue  # deleted meanwhile: skip_deleted counts it when dispatch reaches the gap
            if located is None:
                continue
            view, position, base, count = located
            pieces.append(Piece(partition, view, position, base, count, np.array([offset], dtype=np.int64)))
        return pieces

    def _route_by_key(self, consumer: ConsumerState, pieces: list[Piece]) -> list[Piece]:
        """key_shared: each message goes to the consumer owning its key on the hash ring; the others'
        share waits in their queues, and a recently joined consumer's share at or after its join
        position waits in its held list (key_shared.py)."""
        if self._ring is None:
            self._ring = HashRing([c.name for c in self.consumers])
        mine = []
        for piece in pieces:
            keys = to_record_batch(piece.view.data, piece.position).column("key")
            owners = self._ring.owners(key_slots(keys.take(pa.array(piece.offsets - piece.base))))
            for index, owner in enumerate(self.consumers):
                chosen = piece.offsets[owners == index]
                joined_at = owner.joined_at[piece.partition] if owner.joined_at is not None else None
                if joined_at is not None and len(chosen) and chosen[-1] >= joined_at:
                    later = chosen >= joined_at
                    owner.held.append(piece.with_offsets(chosen[later]))
                    chosen = chosen[~later]
                if not len(chosen):
                    continue
                share = piece.with_offsets(chosen)
                if owner is consumer:
                    mine.append(share)
                else:
                    owner.queue.append(share)
        return mine

    def _release_held(self, consumer: ConsumerState) -> None:
        """A recently joined key_shared consumer gets what was held for it on each partition where every
        message before its join position is acknowledged; then it is held back no more there."""
        joined_at = consumer.joined_at
        for partition, position in enumerate(joined_at):
            if position is not None and self.cursors[partition].acks.floor >= position:
                joined_at[partition] = None
                consumer.queue.extend(p for p in consumer.held if p.partition == partition)
                consumer.held = deque(p for p in consumer.held if p.partition != partition)
        if all(position is None for position in joined_at):
            consumer.joined_at = None

    def _expire_pending(self, now: int) -> None:
        for consumer in self.consumers:
            pending = consumer.pending
            while pending:
                head = pending[0]
                acks = self.cursors[head.partition].acks
                if acks.floor > int(head.offsets[-1]):
                    pending.popleft()  # acknowledged
                elif head.deadline_ms is not None and head.deadline_ms <= now:
                    pending.popleft()
                    self._redeliver(head.partition, head.offsets)
                else:
                    break
        for partition, dispatch in enumerate(self.dispatch):
            while dispatch.nacked and dispatch.nacked[0][0] <= now:
                _, _, offsets = heapq.heappop(dispatch.nacked)
                self._redeliver(partition, offsets)

    def _redeliver(self, partition: int, offsets: np.ndarray) -> None:
        acks = self.cursors[partition].acks
        if not len(offsets):
            return
        first, last = int(offsets.min()), int(offsets.max()) + 1
        unacked = offsets[acks.unacked_mask(first, last)[offsets - first]]
        self.dispatch[partition].redeliver.update(unacked.tolist())

    def negative_ack(self, partition: int, offsets: np.ndarray, delay_ms: int) -> None:
        with self.mutex:
            self._nack_sequence += 1
            heapq.heappush(self.dispatch[partition].nacked,
                           (self.registry.clock() + delay_ms, self._nack_sequence, offsets))

    # acknowledgements

    def is_acked(self, partition: int, offset: int) -> bool:
        try:
            return self.cursors[partition].acks.is_acked(offset)
        except AckSetBusyError:  # a GIL-free loop of a thread holding the mutex: see the class docstring
            with self.mutex:
                return self.cursors[partition].acks.is_acked(offset)

    def ack_holding_mutex(self, partition: int, offset: int) -> None:
        """Acknowledge one message once the mutex is free: the consumer's ack without it met a GIL-free
        loop (see the class docstring)."""
        with self.mutex:
            self.cursors[partition].acks.ack(offset)
            self.dirty = True

    def ack_many(self, partition: int, offsets: np.ndarray) -> None:
        with self.mutex:
            self.cursors[partition].acks.ack_many(offsets)
            self.dirty = True

    def ack_cumulative(self, partition: int, offset: int) -> None:
        with self.mutex:
            self.cursors[partition].acks.ack_cumulative(offset)
            self.dirty = True

    # cursor moves

    def skip_deleted(self, partition: int) -> None:
        """The partition's oldest segments were deleted under the cursor: move it to the new earliest
        offset, counting the unacknowledged messages it lost as evicted."""
        with self.mutex:
            view = self.registry.store.view(self.ref.name, partition)
            view.rescan()
            self.skip_to(partition, view.earliest_offset(), counter="evicted")

    def skip_to(self, partition: int, offset: int, *, counter: str | None = None) -> int:
        """Acknowledge everything before `offset` (TTL expiry, eviction); returns how many of those
        messages were unacknowledged until now, and adds them to the cursor's `counter` ('expired' or
        'evicted') if given."""
        with self.mutex:
            cursor = self.cursors[partition]
            skipped = cursor.acks.ack_cumulative(offset - 1) if offset > cursor.acks.floor else 0
            reader = self.dispatch[partition].reader
            if reader.offset < offset:
                reader.seek(offset)
            if skipped:
                if counter is not None:
                    setattr(cursor, counter, getattr(cursor, counter) + skipped)
                self.dirty = True
            return skipped

    def skip(self, partition: int, count: int) -> int:
        """Acknowledge the `count` oldest unacknowledged messages of `partition`, or as many as it has
        (pulsar-admin topics skip); returns how many."""
        with self.mutex:
            acks = self.cursors[partition].acks
            end = self.registry.store.end_offset(self.ref.name, partition)
            start, skipped = acks.floor, 0
            while skipped < count and start < end:
                stop = min(end, start + count - skipped)  # at most the messages still to skip
                offsets = np.arange(start, stop, dtype=np.int64)
                if acks.high > start:  # acknowledged ones in range: they are not skipped again
                    offsets = offsets[acks.unacked_mask(start, stop)]
                if len(offsets):
                    acks.ack_many(offsets)
                    skipped += len(offsets)
                start = stop
            if skipped:
                self.dirty = True
            return skipped

    def seek(self, partition: int, offset: int) -> None:
        """Reset the cursor: everything before `offset` acknowledged, everything from it on not. An offset
        past the partition's end is its end, as in Pulsar: the next message written is the next delivered."""
        offset = min(offset, self.registry.store.end_offset(self.ref.name, partition))
        with self.mutex:
            self.cursors[partition].acks = AckSet(offset)
            dispatch = self.dispatch[partition]
            dispatch.reader.seek(offset)
            dispatch.redeliver.clear()
            dispatch.nacked.clear()
            for consumer in self.consumers:
                consumer.forget(partition)
            self.dirty = True

    def persist(self) -> None:
        with self.mutex:
            if self.fence.deleted:  # its files went with the topic (or are a new topic's now)
                self.dirty = False
                return
            self.dirty = False  # before the save: an ack during it (it takes no mutex) marks it dirty again
            try:
                save(self.path, self.record, fsync=self.ref.config.fsync != "never")
            except BaseException:
                self.dirty = True
                raise

    def close(self) -> None:
        """Persist the whole cursor state (individual acks included) and release the subscription."""
        with self.mutex:
            if self.closed:
                return
            try:
                self.persist()
            finally:
                self.closed = True
                self.lock.release()


def reading(subscription: Subscription | None) -> AbstractContextManager:
    """What to hold while reading a subscription's cursors with AckSet calls that release the GIL (the
    backlog, the acknowledged ranges): its mutex if it is consumed in this process (its consumers ack
    meanwhile), nothing for cursors loaded from their file."""
    return subscription.mutex if subscription is not None else nullcontext()
