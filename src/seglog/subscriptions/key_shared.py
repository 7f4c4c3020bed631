"""key_shared routing: the consumer that gets a key's messages, by consistent hashing as in Pulsar.

A key hashes (murmur2, as the producer's partitioner) to a slot of KEY_HASH_SLOTS; each consumer holds
REPLICA_POINTS points on that ring, hashed from its name, and a slot belongs to the consumer of the first
point at or after it. A consumer that joins takes keys only from the others, and one that leaves gives
only its own keys away, so most keys stay where they were (an even split of the slots would move most of
them on every change).

Moving a key must not reorder its messages. Those given out before the move are all redelivered first
when their consumer leaves; when a consumer joins, it is held back (Pulsar's "recently joined consumers"):
it gets no message at or after the read position of the moment it joined until everything before that
position is acknowledged.

Consumers may instead name their own ranges of key slots (Pulsar's sticky mode, a remote consumer's
KeySharedPolicy with sticky ranges): then a message goes to the consumer whose ranges hold the slot of its
sticky key (the ordering key, else the key) by Pulsar's own hash, Murmur3-32 of the key modulo 65536, so a
range means the same keys as on Pulsar's broker. A message whose slot no consumer's range holds waits until
one does, as on Pulsar's broker.

This module routes: the dispatcher (dispatch.StickyKeyDispatcher) reads and calls it holding the
subscription's mutex."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import mmh3
import numpy as np
import pyarrow as pa

from seglog._core._writer import key_partitions
from seglog.storage.batch import binary_column, to_record_batch

if TYPE_CHECKING:
    from seglog.subscriptions.cursor import Cursor
    from seglog.subscriptions.delivery import ConsumerState, HashRanges, Piece

KEY_HASH_SLOTS = 65536
REPLICA_POINTS = 100  # Pulsar's keySharedConsistentHashingReplicaPoints
STICKY_HASH_SLOTS = 65536  # Pulsar's sticky hash range: slots 0..65535
NO_STICKY_KEY = b"NONE_KEY"  # the sticky key of a message with neither ordering key nor key, as Pulsar's


def key_slots(keys: pa.Array) -> np.ndarray:
    """The ring slot of each key (int64)."""
    return key_partitions(binary_column(keys, "keys", allow_null=True, count=len(keys)),
                          KEY_HASH_SLOTS).astype(np.int64)


class HashRing:
    """The consumers' points on the ring of key slots."""

    def __init__(self, consumer_names: Sequence[str]) -> None:
        labels = pa.array([f"{name}{i}".encode() for name in consumer_names for i in range(REPLICA_POINTS)],
                          pa.binary())
        points = key_slots(labels)
        owners = np.repeat(np.arange(len(consumer_names), dtype=np.int64), REPLICA_POINTS)
        order = np.lexsort((owners, points))  # a point two consumers share goes to the first of them
        self._points, self._owners = points[order], owners[order]

    def owners(self, slots: np.ndarray) -> np.ndarray:
        """The index (in the names given) of the consumer owning each slot."""
        return self._owners[np.searchsorted(self._points, slots, side="left") % len(self._points)]


def route_by_key(ring: HashRing, consumers: Sequence[ConsumerState], consumer: ConsumerState,
                 pieces: list[Piece]) -> list[Piece]:
    """Each message goes to the consumer owning its key on the ring (`ring` made of `consumers`, in that
    order); returns the share of `consumer`, which dispatch read these pieces for. The others' shares wait
    in their queues, and a recently joined consumer's share at or after its join position waits in its
    held list."""
    mine = []
    for piece in pieces:
        keys = to_record_batch(piece.data, piece.position).column("key")
        owners = ring.owners(key_slots(keys.take(pa.array(piece.rows))))
        for index, owner in enumerate(consumers):
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


def sticky_slot(key: bytes) -> int:
    """A sticky key's slot as Pulsar's broker computes it (Murmur3_32Hash, its sign bit cleared, mod 65536)."""
    return (mmh3.hash(key, 0, signed=True) & 0x7FFFFFFF) % STICKY_HASH_SLOTS


def ranges_overlap(first: HashRanges, second: HashRanges) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """A range of `first` and one of `second` that share a slot, or None."""
    for a in first:
        for b in second:
            if a[0] <= b[1] and b[0] <= a[1]:
                return a, b
    return None


def route_by_ranges(consumers: Sequence[ConsumerState], consumer: ConsumerState,
                    pieces: list[Piece]) -> tuple[list[Piece], list[Piece]]:
    """Each message goes to the consumer whose hash ranges hold its sticky key's slot: (the share of
    `consumer`, which dispatch read these pieces for; the messages no consumer's ranges hold). The others'
    shares wait in their queues."""
    mine, unowned = [], []
    for piece in pieces:
        slots = np.array([sticky_slot(m.ordering_key if m.ordering_key is not None else
                                      m.key if m.key is not None else NO_STICKY_KEY) for m in piece.messages()],
                         dtype=np.int64)
        taken = np.zeros(len(slots), dtype=bool)
        for owner in consumers:
            chosen = np.zeros(len(slots), dtype=bool)
            for start, end in owner.hash_ranges or ():
                chosen |= (slots >= start) & (slots <= end)
            taken |= chosen
            if not chosen.any():
                continue
            share = piece.with_offsets(piece.offsets[chosen])
            if owner is consumer:
                mine.append(share)
            else:
                owner.queue.append(share)
        if not taken.all():
            unowned.append(piece.with_offsets(piece.offsets[~taken]))
    return mine, unowned


def routed_to(consumer: ConsumerState, max_messages: int | None) -> list[Piece]:
    """The oldest messages another consumer's dispatch routed to `consumer`, at most `max_messages`."""
    if not consumer.queue:
        return []
    piece = consumer.queue.popleft()
    if max_messages is not None and len(piece.offsets) > max_messages:
        consumer.queue.appendleft(piece.with_offsets(piece.offsets[max_messages:]))
        piece = piece.with_offsets(piece.offsets[:max_messages])
    return [piece]


def release_held(consumer: ConsumerState, cursor: Cursor) -> None:
    """A recently joined consumer gets what was held for it on each partition where every message before
    its join position is acknowledged; then it is held back no more there."""
    joined_at = consumer.joined_at
    if joined_at is None:
        return
    for partition, position in enumerate(joined_at):
        if position is not None and cursor.acks(partition).floor >= position:
            joined_at[partition] = None
            consumer.queue.extend(p for p in consumer.held if p.partition == partition)
            consumer.held = deque(p for p in consumer.held if p.partition != partition)
    if all(position is None for position in joined_at):
        consumer.joined_at = None
