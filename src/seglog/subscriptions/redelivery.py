"""Redelivery (Pulsar's MessageRedeliveryController with its negative-ack and ack-timeout trackers): the
messages of each partition to be delivered again, before new ones, because a consumer negatively
acknowledged them (due after its delay), did not acknowledge them within its ack timeout, or left; and the
delayed messages (delayed.py) once their time has come, delivered the same way but not counted as
redelivered.

Delays and timeouts are ages measured by the log's clock. Acknowledged messages are never redelivered.
Every call is made holding the subscription's mutex."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from seglog.subscriptions.cursor import unacknowledged
from seglog.subscriptions.delayed import DelayedDeliveries

if TYPE_CHECKING:
    from pathlib import Path

    from seglog.clock import Clock
    from seglog.subscriptions.cursor import Cursor
    from seglog.subscriptions.delivery import ConsumerState, Pending, Piece

_COUNTS_PRUNED_ABOVE = 10_000  # redelivery counts kept per partition before those of acknowledged ones go
# delayed messages moved to a partition's redeliveries at once at most: taking redeliveries sorts what waits
RELEASED_AT_ONCE = 10_000


@dataclass
class PartitionRedeliveries:
    """One partition's messages waiting to be delivered again, and the negative acks not yet due."""
    redeliver: set[int] = field(default_factory=set)
    nacked: list[tuple[int, int, np.ndarray]] = field(default_factory=list)  # heap of (due ms, seq, offsets)
    counts: dict[int, int] = field(default_factory=dict)  # offset: how many times it was sent to redelivery
    counts_kept: int = 0  # how many counts the last pruning kept: the next prunes at twice that


class Redeliveries:
    """The redeliveries of one subscription, per partition."""

    def __init__(self, cursor: Cursor, partitions: int, clock: Clock, spill_directory: Path) -> None:
        """`spill_directory`: where the delayed messages' index writes its full buckets (delayed.py)."""
        self.cursor = cursor
        self.clock = clock
        self.partitions = [PartitionRedeliveries() for _ in range(partitions)]
        self.delayed = DelayedDeliveries(partitions, spill_directory)
        self._nack_sequence = 0

    def waiting(self, partition: int) -> bool:
        return bool(self.partitions[partition].redeliver)

    def add(self, partition: int, offsets: np.ndarray) -> None:
        """Deliver the messages at `offsets` again, those not acknowledged meanwhile."""
        if not len(offsets):
            return
        acks = self.cursor.acks(partition)
        unacked = unacknowledged(acks, np.sort(offsets)).tolist()
        waiting = self.partitions[partition]
        waiting.redeliver.update(unacked)
        counts = waiting.counts
        for offset in unacked:
            counts[offset] = counts.get(offset, 0) + 1
        # forget the counts of acknowledged messages, once the counts doubled since the last time: pruning
        # at every add past the bound took a consumer leaving with 500,000 unacknowledged messages 40 s
        if len(counts) > max(_COUNTS_PRUNED_ABOVE, 2 * waiting.counts_kept):
            waiting.counts = {o: n for o, n in counts.items() if not acks.is_acked(o)}
            waiting.counts_kept = len(waiting.counts)

    def count(self, partition: int, offset: int) -> int:
        """How many times the message at `offset` was sent to redelivery (Pulsar's redelivery count)."""
        return self.partitions[partition].counts.get(offset, 0)

    def counts_of(self, partition: int, offsets: np.ndarray) -> np.ndarray | None:
        """The redelivery counts of the messages at `offsets` (as `count` gives them), or None when all are 0:
        what dispatch hands a consumer with the redeliveries it gives it."""
        counts = self.partitions[partition].counts
        if not counts:
            return None
        found = np.fromiter((counts.get(offset, 0) for offset in offsets.tolist()), dtype=np.int64,
                            count=len(offsets))
        return found if found.any() else None

    def negative_ack(self, partition: int, offsets: np.ndarray, delay_ms: int) -> None:
        """Deliver the messages at `offsets` again once `delay_ms` passed (by the log's clock)."""
        self._nack_sequence += 1
        heapq.heappush(self.partitions[partition].nacked,
                       (self.clock() + delay_ms, self._nack_sequence, offsets))

    def consumer_left(self, consumer: ConsumerState) -> None:
        """What a consumer that left was given, routed or held and did not acknowledge goes again."""
        given: list[Pending | Piece] = [*consumer.pending, *consumer.queue, *consumer.held]
        for piece in given:
            self.add(piece.partition, piece.offsets)

    def expire(self, consumers: Iterable[ConsumerState], now: int) -> None:
        """Drop what the consumers were given and have acknowledged since from their pending lists; what
        is past its ack timeout, and the negative acks due by `now`, go to redelivery."""
        for consumer in consumers:
            while consumer.pending:
                head = consumer.pending[0]
                acks = self.cursor.acks(head.partition)
                if acks.floor > int(head.offsets[-1]):
                    consumer.release_head()  # acknowledged
                elif head.deadline_ms is not None and head.deadline_ms <= now:
                    consumer.release_head()
                    self.add(head.partition, head.offsets)
                    if consumer.traffic is not None:  # (a remote consumer's client asks for these itself)
                        consumer.traffic.redelivery_asked(head.partition, len(head.offsets))
                else:
                    break
        for partition, waiting in enumerate(self.partitions):
            while waiting.nacked and waiting.nacked[0][0] <= now:
                _, _, offsets = heapq.heappop(waiting.nacked)
                self.add(partition, offsets)
            room = RELEASED_AT_ONCE - len(waiting.redeliver)
            if room > 0:
                due = self.delayed.take_due(partition, now, room)
                if len(due):
                    waiting.redeliver.update(unacknowledged(self.cursor.acks(partition), np.sort(due)).tolist())

    def delay(self, partition: int, offsets: np.ndarray, deliver_at: int) -> None:
        """Deliver the messages at `offsets` once `deliver_at` (ms since the epoch) has come, before new ones."""
        self.delayed.add(partition, offsets, deliver_at)

    def take(self, partition: int, max_messages: int | None) -> list[int]:
        """The oldest waiting offsets of `partition`, ascending, at most `max_messages`; acknowledged ones
        are dropped."""
        waiting, acks = self.partitions[partition], self.cursor.acks(partition)
        offsets = sorted(o for o in waiting.redeliver if not acks.is_acked(o))
        cut = len(offsets) if max_messages is None else max_messages
        waiting.redeliver = set(offsets[cut:])
        return offsets[:cut]

    def put_back(self, partition: int, offsets: list[int]) -> None:
        """Offsets `take` gave that are not delivered after all: waiting again, their counts unchanged."""
        self.partitions[partition].redeliver.update(offsets)

    def clear(self, partition: int | None = None) -> None:
        """Forget the redeliveries, negative acks and delayed messages of a partition, or of all (a rewind or
        a seek: dispatch reads the delayed ones again)."""
        for waiting in self.partitions if partition is None else [self.partitions[partition]]:
            waiting.redeliver.clear()
            waiting.nacked.clear()
            waiting.counts.clear()
            waiting.counts_kept = 0
        self.delayed.clear(partition)
