"""Dispatch (Pulsar's dispatchers): which consumer of a subscription gets which message, and what each
consumer was given.

A dispatcher reads each partition forwards from its read position, in pieces of one stored batch, and
leaves out what the cursor already acknowledged (after a restart, the individual acks beyond the
mark-delete position). Redeliveries (redelivery.py) go first. It keeps a ConsumerState (delivery.py) for
each consumer, whoever that consumer is: an in-process Consumer holds one, and so will a remote consumer on
a connection.

One class per kind of subscription, as in Pulsar's broker: SingleActiveConsumerDispatcher for exclusive and
failover, MultipleConsumersDispatcher for shared, StickyKeyDispatcher for key_shared (its routing is in
key_shared.py). A subscription's type changes only while it has no consumers, and its dispatcher is then
replaced by one of the new type that takes over the read positions and redeliveries (`with_type`).
Every call is made holding the subscription's mutex."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from seglog._core._messages import batch_offsets
from seglog.errors import ConsumerBusyError, OffsetOutOfRangeError
from seglog.rates import ConsumerTraffic
from seglog.storage.batch import to_record_batch
from seglog.storage.compacted import CompactedFile
from seglog.storage.delivery_time import deliver_at
from seglog.subscriptions.cursor import unacknowledged
from seglog.subscriptions.delivery import MAX_READ_BYTES, MAX_READ_ENTRIES, ConsumerState, Pending, Piece
from seglog.subscriptions.key_shared import (
    HashRing,
    ranges_overlap,
    release_held,
    route_by_key,
    route_by_ranges,
    routed_to,
)

if TYPE_CHECKING:
    from seglog._core._acks import AckSet
    from seglog.clock import Clock
    from seglog.storage.partition_view import SegmentView
    from seglog.storage.reader import Reader
    from seglog.subscriptions.cursor import Cursor
    from seglog.subscriptions.redelivery import Redeliveries

# how long a consumer held at its max_unacked waits before its pending messages are counted again (by the
# log's clock): counting costs a look at each, and the consumer's acks may free none
UNACKED_RECOUNT_MS = 1000
# delayed batches one read passes over at most (each goes to the delayed index): a read that finds only
# delayed messages ends there, and the consumer's next read goes on
MAX_DELAYED_PASSED = 10_000


class Dispatcher:
    """What the dispatchers share: the consumers, a Reader per partition (its offset is the read position),
    the redeliveries, and the order of delivery (routed, redelivered, then new messages, the consumer's
    partitions taken in turn). Dispatchers that `delays_delivery` (shared and key_shared, as in Pulsar) pass
    over batches whose delivery time has not come, into the redeliveries' delayed index; the others deliver
    them at once."""

    delays_delivery = False

    def __init__(self, subscription_type: str, cursor: Cursor, readers: list[Reader], redeliveries: Redeliveries,
                 clock: Clock, earliest_offset: Callable[[int], int], described: str) -> None:
        """`earliest_offset(partition)` says where a partition starts once its oldest segments were
        deleted under the read position; `described` names the subscription in errors."""
        self.subscription_type = subscription_type
        self.cursor = cursor
        self.readers = readers
        self.redeliveries = redeliveries
        self.clock = clock
        self.earliest_offset = earliest_offset
        self.described = described
        self.consumers: list[ConsumerState] = []
        self.next_partition = 0  # where the turn of the partitions starts next
        # the last read ended at MAX_DELAYED_PASSED delayed batches, not at the end: reading on may find more
        self.read_on = False

    def with_type(self, subscription_type: str) -> Dispatcher:
        """A dispatcher for `subscription_type` that takes over this one's read positions and redeliveries;
        only while there are no consumers."""
        if self.consumers:
            raise ConsumerBusyError(f"{self.described} is {self.subscription_type} and has consumers")
        dispatcher = dispatcher_for(subscription_type, self.cursor, self.readers, self.redeliveries, self.clock,
                                    self.earliest_offset, self.described)
        dispatcher.next_partition = self.next_partition
        if self.redeliveries.delayed.count and not dispatcher.delays_delivery:
            dispatcher.rewind()  # the delayed messages are read again, and delivered at once
        return dispatcher

    # consumers

    def add(self, consumer: ConsumerState) -> None:
        self.consumers.append(consumer)

    def remove(self, consumer: ConsumerState) -> None:
        """A consumer left: what it was given and did not acknowledge goes to the others."""
        raise NotImplementedError

    def partitions_for(self, consumer: ConsumerState) -> list[int]:
        return [p for p in range(len(self.readers)) if consumer.covers(p)]

    def consumers_of(self, partition: int) -> list[ConsumerState]:
        """The consumers that consume `partition`, in the order they came."""
        return [c for c in self.consumers if c.covers(partition)]

    # delivery

    def next_delivery(self, consumer: ConsumerState, max_messages: int | None) -> list[Piece]:
        """The next messages for `consumer`; [] if none now. Each is pending on the consumer until
        acknowledged (or its ack timeout passes). [] with `read_on` set: the read stopped after passing
        over MAX_DELAYED_PASSED delayed batches, and a next call reads on."""
        now = self.clock()
        self.read_on = False
        self.redeliveries.expire(self.consumers, now)
        return self._give(consumer, max_messages, now)

    def next_deliveries(self, consumer: ConsumerState, max_messages: int) -> list[Piece]:
        """What next_delivery gives `consumer`, called until it gives nothing or `max_messages` messages were
        given, in one call: the time read and due redeliveries expired once, not once a piece, which is once
        a message for a topic of unbatched messages."""
        now = self.clock()
        self.read_on = False
        self.redeliveries.expire(self.consumers, now)
        given: list[Piece] = []
        while max_messages > 0:
            pieces = self._give(consumer, max_messages, now)
            if not pieces:
                break
            given += pieces
            max_messages -= sum(len(piece.offsets) for piece in pieces)
        return given

    def _give(self, consumer: ConsumerState, max_messages: int | None, now: int) -> list[Piece]:
        if consumer.max_unacked is not None:
            if not self._may_give(consumer, now):
                return []
            room = consumer.max_unacked - consumer.pending_messages
            max_messages = room if max_messages is None else min(max_messages, room)
        max_entries = 0
        if consumer.permits is not None:
            if consumer.permits <= 0:
                return []
            max_messages = consumer.permits if max_messages is None else min(max_messages, consumer.permits)
            if consumer.entry_permits:  # (a stored batch counts as one of the read's messages)
                max_entries = min(max_messages, MAX_READ_ENTRIES)
        pieces = self._deliver(consumer, max_messages, max_entries)
        if consumer.permits is not None:
            consumer.permits -= sum(len(piece.offsets) for piece in pieces)
        deadline = None if consumer.ack_timeout_ms is None else now + consumer.ack_timeout_ms
        _hold(consumer, pieces, deadline)
        if pieces and consumer.traffic is not None:
            count_delivered(consumer.traffic, pieces)
        return pieces

    def _may_give(self, consumer: ConsumerState, now: int) -> bool:
        """Whether a consumer with a max_unacked may be given more. At the bound, the messages it was given
        are counted again, those acknowledged meanwhile dropped (acknowledged out of order, they stay in
        `pending` until the subscription's mark-delete passes them); held still at the bound, it is given
        nothing, and counted again UNACKED_RECOUNT_MS later or once its pending messages go below it."""
        assert consumer.max_unacked is not None
        if consumer.pending_messages < consumer.max_unacked:
            consumer.recount_at = None
            return True
        if consumer.recount_at is not None and now < consumer.recount_at:
            return False
        self._drop_acknowledged(consumer)
        held = consumer.pending_messages >= consumer.max_unacked
        consumer.recount_at = now + UNACKED_RECOUNT_MS if held else None
        return not held

    def _drop_acknowledged(self, consumer: ConsumerState) -> None:
        """Leave out of what `consumer` holds pending the messages acknowledged since it was given them."""
        kept = []
        for pending in consumer.pending:
            offsets = unacknowledged(self.cursor.acks(pending.partition), pending.offsets)
            if len(offsets):
                kept.append(Pending(pending.deadline_ms, pending.partition, offsets))
        consumer.keep_pending(kept)

    def _deliver(self, consumer: ConsumerState, max_messages: int | None, max_entries: int) -> list[Piece]:
        return self._dispatch_to(consumer, max_messages, max_entries)

    def _dispatch_to(self, consumer: ConsumerState, max_messages: int | None, max_entries: int) -> list[Piece]:
        """Redeliveries or new messages of the consumer's partitions, taken in turn."""
        partitions = self.partitions_for(consumer)
        for i in range(len(partitions)):
            partition = partitions[(self.next_partition + i) % len(partitions)]
            pieces = self._share(consumer, self._take(partition, max_messages, consumer, max_entries))
            if pieces:
                self.next_partition = (self.next_partition + i + 1) % max(len(partitions), 1)
                return pieces
        return []

    def _share(self, consumer: ConsumerState, pieces: list[Piece]) -> list[Piece]:
        """What of the pieces read for `consumer` it gets: all of them, but for key_shared."""
        return pieces

    def _take(self, partition: int, max_messages: int | None, consumer: ConsumerState,
              max_entries: int = 0) -> list[Piece]:
        """Redeliveries due on the partition, else its next messages: with `max_messages`, stored batches in
        turn up to that many messages (one a piece: for a topic of unbatched messages, taking them one call
        each cost more than the rest of dispatch; the last one whole for a consumer of `whole_batches`, or if
        it bears the consumer's `whole_if_marked` attribute), and further while fewer than `max_entries`
        stored batches were taken (all whole: ConsumerState.entry_permits); without, the next stored batch's;
        no further batch once the pieces taken reach the consumer's `max_read_bytes`."""
        max_bytes = consumer.max_read_bytes
        if self.redeliveries.waiting(partition):
            redelivered = self._take_redeliveries(partition, max_messages, max_bytes)
            if redelivered:
                return redelivered
        if consumer.read_compacted or self.readers[partition].below_log():
            compacted = self._take_compacted(partition, max_messages, consumer)
            if compacted is not None:
                return compacted
        acks = self.cursor.acks(partition)
        reader = self.readers[partition]
        pieces: list[Piece] = []
        room = max_messages
        delayed_passed = 0
        now = self.clock() if self.delays_delivery else 0
        ahead: deque[tuple[SegmentView, int, int, int]] = deque()  # batches located after the last taken
        whole = consumer.whole_batches or max_entries > 0
        while room is None or room > 0 or max_entries > 0:
            offset = reader.offset
            if acks.high > offset and acks.is_acked(offset):  # a run acknowledged ahead: passed over at once
                offset = acks.next_unacked(offset)
                reader.seek(offset)
            try:
                located: tuple[SegmentView, int, int, int] | None
                if ahead and ahead[0][2] == offset:  # reading goes on at the next batch located
                    located = ahead.popleft()
                else:
                    located = _locate(reader, offset, room, max_bytes, max_entries, ahead)
            except OffsetOutOfRangeError:
                if pieces:  # (what was taken goes first; the gap is counted at the next take)
                    break
                compacted = self._take_compacted(partition, room, consumer)
                if compacted is not None:  # compaction deleted them: the view stands for them (Kafka's model)
                    return compacted
                self.skip_deleted(partition)
                continue
            if located is None:
                break
            view, position, base, count = located
            if self.delays_delivery:
                due = deliver_at(view, position)
                if due is not None and due > now:
                    reader.seek(base + count)
                    self.redeliveries.delay(partition, _unacked_from(acks, offset, base + count), due)
                    delayed_passed += 1
                    if delayed_passed == MAX_DELAYED_PASSED:
                        self.read_on = True
                        break
                    continue
            stop = count if room is None or whole else min(count, offset - base + room)
            if stop < count and consumer.whole_if_marked is not None and \
                    view.batch_attribute(position, consumer.whole_if_marked) is not None:
                stop = count
            reader.seek(base + stop)
            offsets = _unacked_from(acks, offset, base + stop)
            if len(offsets):
                piece = Piece(partition, view, position, base, count, offsets)
                pieces.append(piece)
                if room is None:
                    break
                room -= len(offsets)
                max_entries -= 1
                if max_bytes is not None:
                    max_bytes -= piece.stored_bytes
                    if max_bytes <= 0:
                        break
        return pieces

    def _take_compacted(self, partition: int, max_messages: int | None, consumer: ConsumerState) -> list[Piece] | None:
        """The next messages of the partition's compacted view, stored batches in turn as _take takes them:
        for a consumer that reads compacted (Pulsar's readCompacted) while the read position is below the
        view's horizon (each key's latest message there, tombstones left out), and for every consumer while
        it is below the log's first segment where the view stands for the log (Kafka's model, tombstones
        read). The offsets passed over (messages compaction removed) are acknowledged: they are no message
        of this subscription's any more, and left unacknowledged they would hold its backlog, and retention,
        forever. None when the view is not read at the read position (moved to where reading it stops when
        it holds nothing more before it): the log from there on."""
        reader = self.readers[partition]
        reach = reader.compacted_view.reach(consumer.read_compacted, lambda: self.earliest_offset(partition))
        if reach is None or reader.offset >= reach.limit:
            return None
        file, limit = reach.file, reach.limit
        acks = self.cursor.acks(partition)
        pieces: list[Piece] = []
        room, max_bytes = max_messages, consumer.max_read_bytes
        while (room is None or room > 0) and reader.offset < limit:
            offset = reader.offset
            found = None if file is None else _view_batch(file, offset, limit)
            if found is None:  # nothing more in the view before the limit: read on in the log
                self.cursor.ack_range(partition, offset, limit)
                reader.seek(limit)
                break
            assert file is not None
            position, base, offsets, row, end_row = found
            stop = end_row if room is None or consumer.whole_batches else min(end_row, row + room)
            taken = offsets[row:stop]
            kept = taken if not reach.drop_null_values else taken[to_record_batch(file.data, position).column(
                3).slice(row, stop - row).is_valid().to_numpy(zero_copy_only=False)]
            end = int(taken[-1]) + 1
            for start, gap_end in zip([offset, *(kept + 1).tolist()], [*kept.tolist(), end]):
                self.cursor.ack_range(partition, start, gap_end)
            reader.seek(end)
            unacked = unacknowledged(acks, kept) if len(kept) else kept
            if len(unacked):
                piece = Piece(partition, file, position, base, len(offsets), unacked)
                pieces.append(piece)
                if room is None:
                    break
                room -= len(unacked)
                if max_bytes is not None:
                    max_bytes -= piece.stored_bytes
                    if max_bytes <= 0:
                        break
        return pieces or None

    def _take_redeliveries(self, partition: int, max_messages: int | None, max_bytes: int | None) -> list[Piece]:
        """Redeliveries due on the partition, up to `max_messages` and `max_bytes` as _take counts them: a
        piece per stored batch, its offsets cut from the sorted redeliveries in one step."""
        pieces: list[Piece] = []
        reader = self.readers[partition]
        offsets = np.asarray(self.redeliveries.take(partition, max_messages), dtype=np.int64)
        index = 0
        while index < len(offsets):
            if max_bytes is not None and pieces:
                max_bytes -= pieces[-1].stored_bytes
                if max_bytes <= 0:
                    self.redeliveries.put_back(partition, offsets[index:].tolist())
                    break
            try:
                located = reader.locate(int(offsets[index]))
            except OffsetOutOfRangeError:  # deleted meanwhile
                in_view = self._redelivered_from_view(partition, offsets, index)
                if in_view is not None:  # compaction deleted it: the view stands for it (Kafka's model)
                    piece, index = in_view
                    if piece is not None:
                        pieces.append(piece)
                    continue
                located = None  # deleted by retention: skip_deleted counts it when dispatch reaches the gap
            if located is None:
                index += 1
                continue
            view, position, base, count = located
            stop = int(np.searchsorted(offsets, base + count))
            taken = offsets[index:stop]
            pieces.append(Piece(partition, view, position, base, count, taken,
                                self.redeliveries.counts_of(partition, taken)))
            index = stop
        return pieces

    def _redelivered_from_view(self, partition: int, offsets: np.ndarray,
                               index: int) -> tuple[Piece | None, int] | None:
        """For the redeliveries `offsets` (ascending) from `index` on, the first of which is below the log's
        first segment: None unless the partition's compacted view stands for the log there (Kafka's model);
        else the piece of the view's batch that holds the next of them (None if the view holds none of them)
        and the index of the first redelivery past that batch. Those the view does not hold were compacted
        away: they are no message of this subscription any more and are acknowledged, as _take_compacted
        acknowledges what it passes over."""
        reach = self.readers[partition].compacted_view.reach(False, lambda: self.earliest_offset(partition))
        if reach is None or int(offsets[index]) >= reach.limit:
            return None
        file, limit = reach.file, reach.limit
        found = None if file is None else _view_batch(file, int(offsets[index]), limit)
        if found is None:  # the view holds nothing more below where it stands for the log
            stop, piece = int(np.searchsorted(offsets, limit)), None
        else:
            assert file is not None
            position, base, batch, _, end_row = found
            stop = int(np.searchsorted(offsets, int(batch[end_row - 1]) + 1))
            taken = offsets[index:stop][np.isin(offsets[index:stop], batch)]
            piece = Piece(partition, file, position, base, len(batch), taken,
                          self.redeliveries.counts_of(partition, taken)) if len(taken) else None
        wanted = offsets[index:stop]
        gone = wanted if piece is None else wanted[~np.isin(wanted, piece.offsets)]
        if len(gone):
            self.cursor.ack_many(partition, gone)
        return piece, stop

    def redeliver_pending(self, consumer: ConsumerState, given: dict[int, np.ndarray] | None) -> None:
        """Deliver again (to any consumer) what `consumer` was given and has not acknowledged: the offsets
        in `given` per partition, or everything pending on it for None (Pulsar's
        REDELIVER_UNACKNOWLEDGED_MESSAGES: negative acks and ack timeouts of a remote consumer)."""
        if consumer.traffic is not None:  # (Pulsar's msgRateRedeliver counts what the consumer asks for)
            asked = ({p.partition: len(p.offsets) for p in consumer.pending} if given is None
                     else {partition: len(offsets) for partition, offsets in given.items()})
            for partition, messages in asked.items():
                consumer.traffic.redelivery_asked(partition, messages)
        if given is None:
            for pending in consumer.pending:
                self.redeliveries.add(pending.partition, pending.offsets)
            consumer.keep_pending(())
            return
        for partition, offsets in given.items():
            self.redeliveries.add(partition, offsets)
            # no longer the consumer's: were it to leave, they must not go to redelivery a second time
            kept: deque[Pending] = deque()
            for pending in consumer.pending:
                if pending.partition == partition:
                    pending = Pending(pending.deadline_ms, partition,
                                      pending.offsets[~np.isin(pending.offsets, offsets)])
                if len(pending.offsets):
                    kept.append(pending)
            consumer.keep_pending(kept)

    # read positions

    def read_position(self, partition: int) -> int:
        return self.readers[partition].offset

    def advance(self, partition: int, offset: int) -> None:
        """Read on from `offset` if the read position is before it (the cursor skipped to it)."""
        reader = self.readers[partition]
        if reader.offset < offset:
            reader.seek(offset)

    def skip_deleted(self, partition: int) -> None:
        """The partition's oldest segments were deleted under the read position: move the cursor and the
        read position to the new earliest offset, counting the unacknowledged messages lost as evicted."""
        offset = self.earliest_offset(partition)
        self.cursor.skip_to(partition, offset, counter="evicted")
        self.advance(partition, offset)

    def reset(self, partition: int, offset: int) -> None:
        """The cursor was reset to `offset` on `partition` (a seek): read from there, and forget what was
        given out or waits for redelivery there."""
        self.readers[partition].seek(offset)
        self.redeliveries.clear(partition)
        for consumer in self.consumers:
            consumer.forget(partition)

    def rewind(self, partitions: frozenset[int] | None = None) -> None:
        """Start dispatch again at the mark-delete position of `partitions` (None: all; acknowledged
        messages are left out), as Pulsar does when the active consumer of an exclusive or failover
        subscription changes."""
        if partitions is None:
            for partition, reader in enumerate(self.readers):
                reader.seek(self.cursor.acks(partition).floor)
            self.redeliveries.clear()
            for consumer in self.consumers:
                consumer.forget()
            return
        for partition in partitions:
            self.readers[partition].seek(self.cursor.acks(partition).floor)
            self.redeliveries.clear(partition)
            for consumer in self.consumers_of(partition):
                consumer.forget(partition)


class SingleActiveConsumerDispatcher(Dispatcher):
    """exclusive and failover (Pulsar's PersistentDispatcherSingleActiveConsumer): one consumer is active on
    each partition. exclusive has one consumer per partition; failover gives partition p to the (p mod n)-th
    of the n consumers of p sorted by name. When that changes, dispatch starts again at the mark-delete
    positions of the partitions concerned."""

    def add(self, consumer: ConsumerState) -> None:
        if self.subscription_type == "exclusive":
            busy = next((c for c in self.consumers if c.overlaps(consumer)), None)
            if busy is not None:
                raise ConsumerBusyError(f"exclusive {self.described} already has a consumer ({busy.name!r})")
        self.consumers.append(consumer)
        if self.subscription_type == "failover":
            self.rewind(consumer.partitions)

    def remove(self, consumer: ConsumerState) -> None:
        self.consumers.remove(consumer)
        self.rewind(consumer.partitions)

    def partitions_for(self, consumer: ConsumerState) -> list[int]:
        if self.subscription_type != "failover":
            return super().partitions_for(consumer)
        return [p for p in super().partitions_for(consumer) if self.active_consumer(p) is consumer]

    def active_consumer(self, partition: int) -> ConsumerState | None:
        """The consumer that `partition` is dispatched to."""
        candidates = self.consumers_of(partition)
        if not candidates:
            return None
        if self.subscription_type != "failover":
            return candidates[0]
        return sorted(candidates, key=lambda c: c.name)[partition % len(candidates)]


class MultipleConsumersDispatcher(Dispatcher):
    """shared (Pulsar's PersistentDispatcherMultipleConsumers): each read goes to the consumer asking; what
    a consumer that left did not acknowledge goes to the others."""

    delays_delivery = True

    def remove(self, consumer: ConsumerState) -> None:
        self.consumers.remove(consumer)
        self.redeliveries.consumer_left(consumer)
        consumer.forget()


class StickyKeyDispatcher(MultipleConsumersDispatcher):
    """key_shared (Pulsar's PersistentStickyKeyDispatcherMultipleConsumers): the messages of a key go to
    the consumer owning it on the hash ring, a recently joined consumer held back (key_shared.py)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # per partition, its consumers' points on the ring, made again when the consumers change
        self.rings: dict[int, HashRing] = {}
        # sticky ranges: per partition, messages whose slot no consumer's range holds (until one does)
        self.unowned: dict[int, list[Piece]] = {}

    def add(self, consumer: ConsumerState) -> None:
        self._check_ranges(consumer)
        if consumer.hash_ranges is None:
            # held back on the partitions others consume already: see key_shared.py
            joined_at = [reader.offset if self.consumers_of(p) else None for p, reader in enumerate(self.readers)]
            if any(position is not None for position in joined_at):
                consumer.joined_at = joined_at
        super().add(consumer)
        self.rings.clear()
        if consumer.hash_ranges is not None:
            self._route_unowned(consumer)

    def _check_ranges(self, consumer: ConsumerState) -> None:
        """Sticky and ring consumers do not mix on a partition, and sticky ranges do not overlap (Pulsar's
        broker refuses both)."""
        for other in self.consumers:
            if not other.overlaps(consumer):
                continue
            if (other.hash_ranges is None) != (consumer.hash_ranges is None):
                sticky, ring = (consumer, other) if other.hash_ranges is None else (other, consumer)
                raise ConsumerBusyError(f"{self.described}: consumer {sticky.name!r} takes sticky hash ranges and "
                                        f"{ring.name!r} does not; the consumers of a partition use one or the other")
            if consumer.hash_ranges is not None and other.hash_ranges is not None:
                clash = ranges_overlap(consumer.hash_ranges, other.hash_ranges)
                if clash is not None:
                    (start, end), (other_start, other_end) = clash
                    raise ConsumerBusyError(f"{self.described}: hash range {start} to {end} of consumer "
                                            f"{consumer.name!r} overlaps range {other_start} to {other_end} of "
                                            f"consumer {other.name!r}")

    def _route_unowned(self, joined: ConsumerState) -> None:
        """Messages no range held may be the new consumer's now (those acknowledged meanwhile dropped)."""
        for partition, pieces in list(self.unowned.items()):
            if not joined.covers(partition):
                continue
            acks = self.cursor.acks(partition)
            live = []
            for piece in pieces:  # (the acknowledged ones left out, as Redeliveries.add leaves them out)
                live.append(piece.with_offsets(unacknowledged(acks, piece.offsets)))
            mine, unowned = route_by_ranges(self.consumers_of(partition), joined,
                                            [p for p in live if len(p.offsets)])
            joined.queue.extend(mine)
            self.unowned[partition] = unowned

    def reset(self, partition: int, offset: int) -> None:
        super().reset(partition, offset)
        self.unowned.pop(partition, None)

    def remove(self, consumer: ConsumerState) -> None:
        super().remove(consumer)
        self.rings.clear()

    def _deliver(self, consumer: ConsumerState, max_messages: int | None, max_entries: int) -> list[Piece]:
        """What was routed to the consumer first, then its share of what dispatch reads for it."""
        if consumer.joined_at is not None:
            release_held(consumer, self.cursor)
        return routed_to(consumer, max_messages) or self._dispatch_to(consumer, max_messages, max_entries)

    def _share(self, consumer: ConsumerState, pieces: list[Piece]) -> list[Piece]:
        if not pieces:
            return pieces
        partition = pieces[0].partition  # (what dispatch reads at once is of one partition)
        consumers = self.consumers_of(partition)
        if consumer.hash_ranges is not None:
            mine, unowned = route_by_ranges(consumers, consumer, pieces)
            self.unowned.setdefault(partition, []).extend(unowned)
            return mine
        ring = self.rings.get(partition)
        if ring is None:
            ring = self.rings[partition] = HashRing([c.name for c in consumers])
        return route_by_key(ring, consumers, consumer, pieces)


def _hold(consumer: ConsumerState, pieces: list[Piece], deadline: int | None) -> None:
    """Hold what `pieces` gave `consumer` pending, one Pending a run of pieces of one partition in offset order
    (a read's pieces, nearly always): released once all of its messages are acknowledged, and expired
    together (what was acknowledged meanwhile is not redelivered). A Pending a piece was one a stored batch
    to hold and release on every read."""
    start = 0
    for stop in range(1, len(pieces) + 1):
        if stop < len(pieces) and pieces[stop].partition == pieces[start].partition \
                and pieces[stop].offsets[0] > pieces[stop - 1].offsets[-1]:
            continue
        offsets = pieces[start].offsets if stop - start == 1 else np.concatenate(
            [piece.offsets for piece in pieces[start:stop]])
        consumer.hold(Pending(deadline, pieces[start].partition, offsets))
        start = stop


def _locate(reader: Reader, offset: int, room: int | None, max_bytes: int | None, max_entries: int,
            ahead: deque[tuple[SegmentView, int, int, int]]) -> tuple[SegmentView, int, int, int] | None:
    """reader.locate(offset); for a read of `room` messages (or of `max_entries` stored batches), the batches
    after it that the read may take are located in the same call (Reader.locate_run) and put in `ahead`, in
    order."""
    ahead.clear()
    if room is None:
        return reader.locate(offset)
    run = reader.locate_run(offset, room, MAX_READ_BYTES if max_bytes is None else max_bytes, max_entries)
    if run is None:
        return None
    ahead.extend(run[1:])
    return run[0]


def _view_batch(file: CompactedFile, offset: int, limit: int) -> tuple[int, int, np.ndarray, int, int] | None:
    """(position, base offset, offsets, first row, stop row) of the compacted batch holding the view's next
    messages from `offset` on, below `limit`; None when the view has none. (Its base offset is the stored
    batch's it was compacted from: a Pulsar entry's sequence ids count from there.)"""
    index = file.find(offset)
    if index == file.batches:
        return None
    position = int(file.positions[index])
    offsets = batch_offsets(file.data, position)
    row, end_row = int(np.searchsorted(offsets, offset)), int(np.searchsorted(offsets, limit))
    return (position, int(file.bases[index]), offsets, row, end_row) if row < end_row else None


def _unacked_from(acks: AckSet, start: int, stop: int) -> np.ndarray:
    """The offsets [start, stop) not acknowledged."""
    offsets = np.arange(start, stop, dtype=np.int64)
    if acks.high > start:  # acknowledged messages in range: leave them out
        offsets = offsets[acks.unacked_mask(start, stop)]
    return offsets


DISPATCHERS: dict[str, type[Dispatcher]] = {
    "exclusive": SingleActiveConsumerDispatcher,
    "failover": SingleActiveConsumerDispatcher,
    "shared": MultipleConsumersDispatcher,
    "key_shared": StickyKeyDispatcher,
}


def count_delivered(traffic: ConsumerTraffic, pieces: list[Piece]) -> None:
    """Count what one delivery gave a consumer: once per partition (a delivery is mostly of one), not per piece."""
    partition, messages, nbytes = pieces[0].partition, 0, 0
    for piece in pieces:
        if piece.partition != partition:
            traffic.delivered(partition, messages, nbytes)
            partition, messages, nbytes = piece.partition, 0, 0
        messages += len(piece.offsets)
        nbytes += piece.value_bytes
    traffic.delivered(partition, messages, nbytes)


def dispatcher_for(subscription_type: str, cursor: Cursor, readers: list[Reader], redeliveries: Redeliveries,
                   clock: Clock, earliest_offset: Callable[[int], int], described: str) -> Dispatcher:
    """The dispatcher of a subscription of `subscription_type` (one of cursor_file.SUBSCRIPTION_TYPES)."""
    return DISPATCHERS[subscription_type](subscription_type, cursor, readers, redeliveries, clock, earliest_offset,
                                          described)
