"""A subscription consumed in this process (Pulsar's PersistentSubscription): its durable cursor
(cursor.py) and the dispatcher of its type (dispatch.py), tied together under one mutex.

A subscription is consumed by one process at a time (an flock beside its cursor file); within it, by any
number of consumers of the types' rules (exclusive, failover, shared, key_shared, as in Pulsar).
Redeliveries (redelivery.py: negative acks, ack timeouts, consumers that left) go before new messages. Ack
timeout and negative-ack delay are ages, measured by the log's clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from seglog.catalog.topics import TopicRef
from seglog.errors import ConsumerBusyError
from seglog.rates import ConsumerTraffic
from seglog.storage.lock import ExclusiveFileLock
from seglog.subscriptions.cursor import Cursor
from seglog.subscriptions.cursor_file import CursorRecord, PartitionCursor
from seglog.subscriptions.delivery import ConsumerState, Piece
from seglog.subscriptions.dispatch import dispatcher_for
from seglog.subscriptions.redelivery import Redeliveries

if TYPE_CHECKING:
    from seglog.clock import Clock
    from seglog.storage.store import PartitionStore

# A consumer's outstanding FLOW permits at most: a client grants what its receiver queue has room for (a
# thousand by default), so only a client that grants without bound reaches it; what dispatch reads at once
# is bounded anyway (ConsumerState.max_read_bytes), this keeps the count itself sane
MAX_PERMITS = 1_000_000


class Subscription:
    """One subscription of a topic, consumed in this process, shared by its consumers. Every method that
    changes dispatch or cursor state holds `mutex` (the cursor's module docstring says which acks do not).
    The dispatcher is replaced when a consumer of another type joins a subscription without consumers."""

    def __init__(self, ref: TopicRef, name: str, record: CursorRecord, lock: ExclusiveFileLock | None,
                 path: Path | None, store: PartitionStore, clock: Clock, *, verify_crc: bool,
                 spill_directory: Path) -> None:
        """`spill_directory`: where the index of delayed messages writes what it holds beyond memory."""
        self.ref = ref
        self.name = name
        self.store = store
        self.fence = store.fence(ref.name)
        self.mutex = threading.RLock()
        self.cursor = Cursor(record, path, lock, self.mutex, self.fence, fsync=ref.config.fsync != "never")
        readers = [store.reader(ref.name, p, c.acks.floor, verify_crc=verify_crc)
                   for p, c in enumerate(record.partitions)]
        self.dispatcher = dispatcher_for(record.subscription_type, self.cursor, readers,
                                         Redeliveries(self.cursor, len(readers), clock, spill_directory), clock,
                                         partial(store.earliest_offset, ref.name),
                                         f"subscription {name!r} of {ref}")
        # what a consumer waiting for messages waits on (storage.notification): an append to any partition
        self.appended = [store.append_signal(ref.name, p) for p in range(len(readers))]

    @property
    def durable(self) -> bool:
        """False for a reader's subscription (Subscriptions.open_non_durable): no file, no lock."""
        return self.cursor.durable

    @property
    def type(self) -> str:
        return self.cursor.subscription_type

    @property
    def record(self) -> CursorRecord:
        return self.cursor.record

    @property
    def cursors(self) -> list[PartitionCursor]:
        """Each partition's acknowledgements."""
        return self.cursor.partitions

    @property
    def consumers(self) -> list[ConsumerState]:
        return self.dispatcher.consumers

    @property
    def closed(self) -> bool:
        """Whether this process let the subscription go (closed, unsubscribed, its topic deleted)."""
        return self.cursor.closed

    def delayed_messages(self, partition: int | None = None) -> int:
        """Messages dispatch holds until their delivery time (Pulsar's msgDelayed): of one partition, or all."""
        with self.mutex:
            delayed = self.dispatcher.redeliveries.delayed
            return delayed.count if partition is None else delayed.partitions[partition].count

    # consumers

    def attach(self, consumer: ConsumerState, subscription_type: str) -> None:
        with self.mutex:
            if self.consumers and subscription_type != self.type:
                raise ConsumerBusyError(f"subscription {self.name!r} of {self.ref} is {self.type} and has "
                                        f"consumers; a {subscription_type} consumer cannot join it")
            if subscription_type != self.type:  # no consumers: the type may change, as in Pulsar
                self.dispatcher = self.dispatcher.with_type(subscription_type)
                self.cursor.set_subscription_type(subscription_type)
            self.dispatcher.add(consumer)
            consumer.traffic = ConsumerTraffic(self.store.traffic.topic(str(self.ref.name)).subscription(self.name),
                                               self.store.clock)

    def detach(self, consumer: ConsumerState) -> None:
        """A consumer left: what it was given and did not acknowledge goes to the others."""
        with self.mutex:
            self.dispatcher.remove(consumer)

    def partitions_for(self, consumer: ConsumerState) -> list[int]:
        return self.dispatcher.partitions_for(consumer)

    # dispatch

    def next_delivery(self, consumer: ConsumerState, max_messages: int | None) -> list[Piece]:
        """The next messages for `consumer`: what was routed to it, redeliveries, then new messages; [] if
        none now. Each is pending on the consumer until acknowledged."""
        return self._reading_on(lambda: self.dispatcher.next_delivery(consumer, max_messages))

    def next_deliveries(self, consumer: ConsumerState, max_messages: int) -> list[Piece]:
        """next_delivery until it gives nothing or `max_messages` messages were given, holding the mutex
        once a read (Dispatcher.next_deliveries)."""
        return self._reading_on(lambda: self.dispatcher.next_deliveries(consumer, max_messages))

    def _reading_on(self, read: Callable[[], list[Piece]]) -> list[Piece]:
        """`read`, again while it gave nothing only because it passed over as many delayed batches as one read
        may (each time further on: the log's end bounds it), the mutex let go in between."""
        self.fence.check()
        while True:
            with self.mutex:
                pieces = read()
                if pieces or not self.dispatcher.read_on:
                    return pieces

    def held(self, *, wait: bool = True) -> AbstractContextManager[bool]:
        """The subscription's mutex held for a block of calls; gives whether it was taken. With `wait` False
        it is taken only if free now: a server's event loop must not wait for a dispatch read in its thread
        pool, and does the work there instead."""
        return _Held(self.mutex, wait)

    def flow(self, consumer: ConsumerState, permits: int, *, wait: bool = True) -> bool:
        """A remote consumer grants `permits` more messages (Pulsar's FLOW), its outstanding permits capped at
        MAX_PERMITS; with `wait` False only if the subscription is free now (held): whether they were."""
        with self.held(wait=wait) as taken:
            if taken:
                consumer.permits = min((consumer.permits or 0) + permits, MAX_PERMITS)
            return taken

    def redeliver(self, consumer: ConsumerState, given: dict[int, np.ndarray] | None) -> None:
        """Deliver again what `consumer` was given and did not acknowledge: the offsets of `given` per
        partition, or everything pending on it for None."""
        with self.mutex:
            self.dispatcher.redeliver_pending(consumer, given)

    def redelivery_count(self, partition: int, offset: int) -> int:
        with self.mutex:
            return self.dispatcher.redeliveries.count(partition, offset)

    def read_position(self, partition: int) -> int:
        """Where dispatch reads the partition next."""
        return self.dispatcher.read_position(partition)

    def negative_ack(self, partition: int, offsets: np.ndarray, delay_ms: int) -> None:
        with self.mutex:
            self.dispatcher.redeliveries.negative_ack(partition, offsets, delay_ms)

    # acknowledgements

    def is_acked(self, partition: int, offset: int) -> bool:
        return self.cursor.is_acked(partition, offset)

    def ack_holding_mutex(self, partition: int, offset: int) -> None:
        self.cursor.ack_holding_mutex(partition, offset)

    def ack_many(self, partition: int, offsets: np.ndarray) -> None:
        self.cursor.ack_many(partition, offsets)

    def ack_cumulative(self, partition: int, offset: int) -> None:
        self.cursor.ack_cumulative(partition, offset)

    # cursor moves

    def skip_to(self, partition: int, offset: int, *, counter: str | None = None) -> int:
        """Acknowledge everything before `offset` (TTL expiry, eviction); returns how many of those
        messages were unacknowledged until now, and adds them to the cursor's `counter` ('expired' or
        'evicted') if given."""
        with self.mutex:
            skipped = self.cursor.skip_to(partition, offset, counter=counter)
            self.dispatcher.advance(partition, offset)
            return skipped

    def skip(self, partition: int, count: int) -> int:
        """Acknowledge the `count` oldest unacknowledged messages of `partition`, or as many as it has
        (pulsar-admin topics skip); returns how many."""
        with self.mutex:
            return self.cursor.skip(partition, count, self.store.end_offset(self.ref.name, partition))

    def seek(self, partition: int, offset: int) -> None:
        """Reset the cursor: everything before `offset` acknowledged, everything from it on not. An offset
        past the partition's end is its end, as in Pulsar: the next message written is the next delivered."""
        offset = min(offset, self.store.end_offset(self.ref.name, partition))
        with self.mutex:
            self.cursor.reset(partition, offset)
            self.dispatcher.reset(partition, offset)

    # replication (PIP-33)

    def set_replicated(self, partitions: Iterable[int], replicated: bool) -> None:
        """Whether the subscription's position on each of `partitions` is replicated to the topic's other
        clusters (a consumer that asks for it, or the admin API). Persisted at once when it changes: it is a
        setting, not a position the next persist may carry."""
        if self.cursor.set_replicated(partitions, replicated):
            self.cursor.persist()

    # the file

    def persist(self) -> None:
        self.cursor.persist()

    def close(self) -> None:
        """Persist the whole cursor state (individual acks included) and release the subscription."""
        self.cursor.close()
        if not self.durable:  # a reader's subscription ends with it
            self.store.traffic.topic(str(self.ref.name)).remove_subscription(self.name)

    def abandon(self) -> None:
        """Release the subscription without persisting it: its topic is being deleted."""
        self.cursor.abandon()

    def remove(self) -> None:
        """Delete the subscription's files (an unsubscribe; the caller holds the mutex)."""
        self.cursor.remove()
        self.store.traffic.topic(str(self.ref.name)).remove_subscription(self.name)


class _Held:
    """Subscription.held: a class, not a generator, for a server takes it for every FLOW, ACK and read (a
    generator's context manager cost 2.4 µs a use, this 0.6)."""
    __slots__ = ("mutex", "wait", "taken")

    def __init__(self, mutex: threading.RLock, wait: bool) -> None:
        self.mutex = mutex
        self.wait = wait
        self.taken = False

    def __enter__(self) -> bool:
        self.taken = self.mutex.acquire(blocking=self.wait)
        return self.taken

    def __exit__(self, *_exception: object) -> None:
        if self.taken:
            self.mutex.release()


def reading(subscription: Subscription | None) -> AbstractContextManager:
    """What to hold while reading a subscription's cursors with AckSet calls that release the GIL (the
    backlog, the acknowledged ranges): its mutex if it is consumed in this process (its consumers ack
    meanwhile), nothing for cursors loaded from their file."""
    return subscription.mutex if subscription is not None else nullcontext()
