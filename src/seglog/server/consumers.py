"""A consumer on a connection (SUBSCRIBE .. CLOSE_CONSUMER): a user of its subscription's dispatcher beside in-process
consumers. It holds a ConsumerState, whose FLOW permits the dispatcher never exceeds and whose pending messages the
dispatcher keeps, as for any consumer.

Messages go out as Pulsar's broker dispatches entries (docs/SERVER.md, "Consuming"): the messages given of a stored
batch of several as batch entries, each a run of them at consecutive offsets (id (0, its first offset, -1), message i at
batch index i), built natively from the mapped segment; a stored batch of one as an unbatched entry, id (0, its offset,
-1). One permit is one message. An encrypted entry, which the server cannot unpack, goes out whole as the producer sent
it (encryption.py), with the batch indexes given in this delivery in its ack_set when not all of them are. The client
acknowledges and redelivers a batch entry by its id, which names all of its messages (SentEntries). A task per consumer
takes what dispatch gives it (on the loop when the subscription is free, else in the thread pool) and writes the frames;
it waits for FLOW, an append to the topic (the partitions' append signals), or a change in the subscription (acks,
redeliveries, consumers leaving), with a capped poll as the fallback for what nothing signals (appends by other
processes, TTL)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import abc
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from seglog._core._messages import Message
from seglog._core._pulsar_wire import DeliveryEncoder
from seglog.server.errors import ServerFailure
from seglog.server.producers import peer_address
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.encryption import ack_set, cleared_indexes, entry_metadata
from seglog.server.protocol.frames import Type, command, encode_payload_command
from seglog.server.protocol.message_ids import UINT64_MINUS_ONE, message_id, offset_of, signed
from seglog.server.protocol.metadata import DELIVERED_FIELDS, ENCRYPTION, WHOLE_ENTRY, message_metadata
from seglog.storage.notification import LoopWake
from seglog.subscriptions.delivery import ConsumerState, HashRanges, Piece
from seglog.subscriptions.key_shared import STICKY_HASH_SLOTS
from seglog.subscriptions.subscription import Subscription

if TYPE_CHECKING:
    from seglog.server.service import BrokerService, Target

logger = logging.getLogger("seglog.server")

POLL_START_S = 0.005
POLL_MAX_S = 0.1
# messages one read gives a consumer at most (and ConsumerState.max_read_bytes of stored batches), whatever
# its permits: a read becomes frames in memory before they are written (Pulsar reads 100 entries at most).
# And at most half its receiver queue (the most permits one FLOW granted: a client's first FLOW is its whole
# queue), so that a client granting permits for what arrived, as it arrives, has half a queue to process
# while the next read is built and sent, rather than waiting for it: with a queue of 1,000 over raw sockets,
# reads of 500 moved 2.05 M msg/s against 1.56-1.71 M for reads of 1,000, and 0.47 µs of CPU a message
# against 0.40-0.44; with a queue of 5,000, reads of 1,000 (3.44-3.60 M against 2.81-2.87 M for 500)
READ_MESSAGES = 1000
# a batch entry sent holds at most this many messages (pulsar-client's default batchingMaxMessages) and this
# many bytes of values, a larger message alone (a fifth of Pulsar's 5 MiB maxMessageSize)
MAX_ENTRY_MESSAGES = 1000
MAX_ENTRY_BYTES = 1024 * 1024
# batch entries remembered per consumer until acknowledged whole (SentEntries): more than it can hold
# unacknowledged with Pulsar's default maxUnackedMessagesPerConsumer (50,000), one message an entry
MAX_SENT_ENTRIES = 100_000
T = TypeVar("T")

SUBSCRIPTION_TYPES = {
    api.CommandSubscribe.Exclusive: "exclusive",
    api.CommandSubscribe.Shared: "shared",
    api.CommandSubscribe.Failover: "failover",
    api.CommandSubscribe.Key_Shared: "key_shared",
}


class AckedMessageId(Protocol):
    """What an ACK or a redelivery names a message by: protobuf's MessageIdData, or what the native reader
    of ACKs gives (_pulsar_wire.AckedId), whose fields have the same names."""
    @property
    def ledger_id(self) -> int: ...
    @property
    def entry_id(self) -> int: ...
    @property
    def batch_index(self) -> int: ...
    @property
    def ack_set(self) -> abc.Sequence[int]: ...


class ConsumerConnection(Protocol):
    """What a connection's consumers use of it (connection.Connection, which imports this module)."""
    service: BrokerService
    peer: Any
    dispatching: asyncio.Lock  # held by the consumer reading for the connection (one at a time)

    async def blocking(self, function: Callable[..., T], *args: Any) -> T: ...
    def write(self, data: bytes) -> None: ...
    def output_backlogged(self) -> bool: ...
    async def drain(self) -> None: ...
    async def close_consumer_by_server(self, session: ConsumerSession) -> None: ...


class ConsumerSession:
    """One remote consumer: its ConsumerState on the subscription, and the task that sends it messages."""

    def __init__(self, connection: ConsumerConnection, consumer_id: int, target: Target, name: str,
                 hash_ranges: HashRanges | None = None) -> None:
        self.connection = connection
        self.consumer_id = consumer_id
        self.target = target
        self.name = name
        self.loop = asyncio.get_running_loop()
        self.wake = asyncio.Event()
        self._stopped = asyncio.Event()  # stop() was called
        settings = connection.service.settings
        # permits start at 0: nothing is sent before the client's first FLOW; a consumer of one partition of a
        # partitioned topic consumes only that partition of the seglog subscription (docs/SERVER.md)
        self.state = ConsumerState(name, None, _keep, self._disconnected, permits=0,
                                   partitions=frozenset({target.partition}) if target.partitioned else None,
                                   hash_ranges=hash_ranges, whole_if_marked=ENCRYPTION.encode(),
                                   max_unacked=settings.max_unacked_messages_per_consumer or None,
                                   entry_permits=not settings.precise_dispatcher_flow_control)
        self.subscription: Subscription | None = None
        self.task: asyncio.Task | None = None
        self._signal_event = LoopWake(self.loop, self.wake)
        # the partition the ids of messages sent carry: that of a partitioned topic's partition, else none
        self.id_partition = target.partition if target.partitioned else None
        # the MESSAGE command, filled in for each message sent (a seventh of the cost of building one; only
        # this consumer's task uses it, one delivery at a time)
        self._message = command(Type.MESSAGE, consumer_id=consumer_id, message_id=message_id(0, self.id_partition),
                                redelivery_count=0)
        self._encoder = DeliveryEncoder(consumer_id, -1 if self.id_partition is None else self.id_partition,
                                        MAX_ENTRY_MESSAGES, MAX_ENTRY_BYTES, DELIVERED_FIELDS, WHOLE_ENTRY)
        self.entries = SentEntries()
        self._written_end = 0  # the partition's end offset when last asked (ack): it only grows
        self._read_messages = 1  # messages a read gives it at most (READ_MESSAGES), set by its FLOWs

    @property
    def closed(self) -> bool:
        return self._stopped.is_set()

    @property
    def has_permits(self) -> bool:
        """Whether it may be sent messages: its permits go below zero by what whole stored batches sent
        past them (ConsumerState.entry_permits), and nothing goes until FLOWs make up for it."""
        return (self.state.permits or 0) > 0

    def start(self, subscription: Subscription) -> None:
        self.subscription = subscription
        if self.state.traffic is not None:  # (its subscription made it on attaching it; Pulsar's address form)
            self.state.traffic.address = f"/{peer_address(self.connection.peer)}"
        for signal in subscription.appended:
            signal.watch(self._signal_event)
        self.task = self.loop.create_task(self._run())

    # delivery

    async def _run(self) -> None:
        delay = POLL_START_S
        while not self.closed:
            self.wake.clear()
            if not self.has_permits:  # nothing goes before a FLOW: an append's wake waits for it
                await self.wake.wait()
                continue
            if not await self._turn():
                return
            try:
                frames = self._take_now()
                if frames is None:
                    frames = await self.connection.blocking(self._take)
                if not self.closed:  # (else what _take gave goes back to the subscription as the consumer detaches)
                    self.connection.write(frames)
            except Exception as error:
                self._read_failed(error)
                return
            finally:
                self.connection.dispatching.release()
            if frames:
                delay = POLL_START_S
            if frames or not self.has_permits:
                continue
            try:
                await asyncio.wait_for(self.wake.wait(), delay)
            except TimeoutError:
                delay = min(delay * 2, POLL_MAX_S)

    async def _turn(self) -> bool:
        """Wait for this consumer's turn to read: one read at a time per connection, and only once what was
        written before has drained to the socket, so that a client that does not read holds one read's
        frames of the server's memory, not more. False if the consumer was stopped meanwhile."""
        dispatching = self.connection.dispatching
        if dispatching.locked():
            if not await self._unless_stopped(dispatching.acquire()):
                return False
        else:
            await dispatching.acquire()
        if self.connection.output_backlogged() and not await self._unless_stopped(self.connection.drain()):
            dispatching.release()
            return False
        return True

    async def _unless_stopped(self, wait: Coroutine[Any, Any, object]) -> bool:
        """Wait for `wait`, unless this consumer is stopped first (then `wait` is cancelled): whether it
        completed. Waits that depend on the client (its reading the socket) must not hold up stop()."""
        task = self.loop.create_task(wait)
        stopped = self.loop.create_task(self._stopped.wait())
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        task.cancel()  # (nothing if it completed)
        await asyncio.wait((task,))
        return not task.cancelled()

    def _read_failed(self, error: Exception) -> None:
        """A read failed (the topic was deleted, the broker closed): the server closes the consumer, what it was
        given goes back to the subscription, and the client subscribes again."""
        logger.info("%s: consumer %s of %s: %s", self.connection.peer, self.name, self.target.ref, error)
        self.loop.create_task(self.connection.close_consumer_by_server(self))

    def subscription_changed(self) -> None:
        """The subscription changed (BrokerService.wake: an ACK, a redelivery, a consumer leaving): read again,
        unless nothing may be sent before a FLOW, which wakes the task itself. Every ACK wakes every consumer
        of its subscription, and a consumer waiting for permits did nothing with it but wait again."""
        if self.has_permits:
            self.wake.set()

    def deliver_now(self) -> bool:
        """One read for this consumer at once, on the loop (a FLOW's, so that the messages go out without a turn
        of its task): if no read of the connection's is under way, what was written before has drained, and
        the subscription is free at this moment. Whether it read (or failed); its task reads otherwise."""
        if self.closed or self.connection.dispatching.locked() or self.connection.output_backlogged():
            return False
        try:
            frames = self._take_now()
        except Exception as error:
            self._read_failed(error)
            return True
        if frames is None:
            return False
        if frames:
            self.connection.write(frames)
        return True

    def _take_now(self) -> bytes | None:
        """_take on the event loop, if the subscription is free at this moment; None if it is not (then the
        thread pool waits for it). The frames are built holding the GIL either way, so a page read from disk
        stalls the loop from the pool as well: the trip there only added its cost (a consumer of a batched
        topic read 1.4-1.6 M msg/s without it, 0.8-1.2 M with it), and what the loop must not do is wait for
        the lock another thread holds."""
        subscription = self.subscription
        assert subscription is not None
        with subscription.held(wait=False) as taken:
            return self._take() if taken else None

    def _take(self) -> bytes:
        """The next messages dispatch gives this consumer (at most its permits and one read's worth), as
        MESSAGE frames: built natively, all of the read's pieces in one call (DeliveryEncoder), but for
        encrypted entries and chunks."""
        subscription = self.subscription
        assert subscription is not None
        pieces = subscription.next_delivery(self.state, self._read_messages)
        frames = []
        entries: list[tuple[int, int]] = []
        done = 0
        while done < len(pieces):
            data, done = self._encoder.frames(pieces, done, entries)
            frames.append(data)
            if done < len(pieces):
                frames += self._whole_entry_frames(pieces[done], subscription, entries)
                done += 1
        if entries:
            self.entries.sent(entries)
        return frames[0] if len(frames) == 1 else b"".join(frames)

    def _whole_entry_frames(self, piece: Piece, subscription: Subscription,
                            entries: list[tuple[int, int]]) -> list[bytes]:
        """The frames of a piece the native encoder leaves to this (metadata.WHOLE_ENTRY): an encrypted entry
        whole, or a chunk (a stored batch of one message, its chunk fields in its metadata)."""
        if ENCRYPTION in piece.batch_attributes:
            return [self._entry_frame(piece, subscription, entries)]
        return [self._frame(message, piece.base, subscription.redelivery_count(piece.partition, message.offset))
                for message in piece.messages()]

    def _entry_frame(self, piece: Piece, subscription: Subscription, entries: list[tuple[int, int]]) -> bytes:
        """A MESSAGE for the encrypted entry stored in `piece`'s batch, of which the piece's messages are
        delivered: all of them unless some were acknowledged or are redelivered alone (dispatch never cuts
        an encrypted entry to fit the permits: ConsumerState.whole_if_marked); the entry is added to
        `entries`."""
        first = piece.with_offsets(np.array([piece.base], dtype=np.int64)).messages()[0]
        entries.append((piece.base, piece.count))
        fields = self._message.message
        fields.message_id.entry_id = piece.base
        fields.redelivery_count = subscription.redelivery_count(piece.partition, int(piece.offsets[0]))
        if len(piece.offsets) < piece.count:
            fields.ack_set.extend(ack_set((piece.offsets - piece.base).tolist()))
        try:
            return encode_payload_command(self._message, entry_metadata(first), first.value or b"")
        finally:
            del fields.ack_set[:]

    def _frame(self, message: Message, base_offset: int, redelivery_count: int) -> bytes:
        """A MESSAGE for `message`, stored in the batch that starts at `base_offset`."""
        fields = self._message.message
        fields.message_id.entry_id = message.offset
        fields.redelivery_count = redelivery_count
        return encode_payload_command(self._message, message_metadata(message, base_offset), message.value or b"")

    # the client's commands (blocking ones run in the thread pool)

    def flow(self, permits: int, *, wait: bool = True) -> bool:
        """FLOW: `permits` more (Subscription.flow); with `wait` False only if the subscription is free now."""
        assert self.subscription is not None
        self._read_messages = min(READ_MESSAGES, max(self._read_messages, (permits + 1) // 2))
        return self.subscription.flow(self.state, permits, wait=wait)

    def ack(self, cumulative: bool, ids: abc.Sequence[AckedMessageId], *, wait: bool = True) -> bool:
        """Acknowledge the messages `ids` name: a batch entry's all (its id alone) or those its ack_set
        clears, else offset = entryId + max(batchIndex, 0) (SentEntries); ids of messages not written yet,
        or before the first entry (entryId -1), are left alone. With `wait` False only if the subscription is
        free now (Subscription.held): whether they were. Acks only mark the cursor (it is saved apart)."""
        subscription = self.subscription
        assert subscription is not None
        with subscription.held(wait=wait) as taken:
            if taken:
                self._ack(subscription, cumulative, ids)
            return taken

    def _ack(self, subscription: Subscription, cumulative: bool, ids: abc.Sequence[AckedMessageId]) -> None:
        partition = self.target.partition
        if cumulative:  # (in ints: the common ACK, one id, every few hundred messages)
            through = self.entries.acknowledged_through(ids)
            written = self._written_through(max(through, default=-1))
            last = max((offset for offset in through if 0 <= offset < written), default=-1)
            if last >= 0:
                subscription.ack_cumulative(partition, last)
                self.entries.forget_through(last)
            return
        offsets = self.entries.acknowledged(ids)
        if len(offsets):
            self._written_through(int(offsets.max()))
        offsets = offsets[(offsets >= 0) & (offsets < self._written_end)]
        if len(offsets):  # (entries' offsets come ascending: sorted again only when they do not)
            subscription.ack_many(partition, offsets if (np.diff(offsets) > 0).all() else np.unique(offsets))

    def _written_through(self, offset: int) -> int:
        """The partition's end offset as last known, asked again when `offset` is past it: it looks at the
        partition's files, and an ACK names what was delivered, long written, nearly always."""
        if offset >= self._written_end:
            self._written_end = self.connection.service.broker.store.end_offset(self.target.ref.name,
                                                                                self.target.partition)
        return self._written_end

    def redeliver(self, ids: abc.Sequence[AckedMessageId]) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: the messages `ids` name (a batch entry's all by its id), or all
        this consumer was given and did not acknowledge when there are none."""
        assert self.subscription is not None
        if not ids:
            self.entries.clear()  # (the client dropped what it had not handed out: anything may come again)
            self.subscription.redeliver(self.state, None)
            return
        offsets = self.entries.redelivered(ids)
        self.subscription.redeliver(self.state, {self.target.partition: np.unique(offsets[offsets >= 0])})

    def last_message_id(self) -> tuple[api.MessageIdData, api.MessageIdData]:
        """GET_LAST_MESSAGE_ID: the id of the partition's last message (entryId -1 when it has none) as this
        consumer is sent it, and the subscription's mark-delete position (the last offset before its first
        unacknowledged one) as an entry before that id's while the last message is unacknowledged. The
        client compares them with the ids it received (has_message_available); see _entry_of."""
        assert self.subscription is not None
        partition = self.target.partition
        end = self.connection.service.broker.store.end_offset(self.target.ref.name, partition)
        floor = self.subscription.cursors[partition].acks.floor
        last = end - 1
        if last < 0:
            return _id(last), _id(floor - 1)
        entry = self._entry_of(last)
        last_id = _id(last) if entry == last else message_id(entry, batch_index=last - entry)
        return last_id, _id(floor - 1 if floor > last else min(floor - 1, entry - 1))

    def _entry_of(self, offset: int) -> int:
        """The id of the entry in which this consumer receives (or received) the message at `offset`, or a
        lower one that no entry it received before lies above. A run not sent yet starts at the read
        position or after it, so (read position, offset - read position) compares with every id the client
        has above or equal as the id the message will arrive with is; one sent is the last entry sent."""
        assert self.subscription is not None
        read = self.subscription.read_position(self.target.partition)
        if read <= offset:
            return read
        sent = self.entries.last
        if sent is not None and sent[0] <= offset < sent[0] + sent[1]:
            return sent[0]
        return offset

    # closing

    async def stop(self) -> None:
        """Stop sending (the task finishes what it is doing first, so nothing dispatch gave is lost)."""
        self._stopped.set()
        self.wake.set()
        if self.task is not None and not self.task.done() and self.task is not asyncio.current_task():
            await self.task
        if self.subscription is not None:
            for signal in self.subscription.appended:
                signal.unwatch(self._signal_event)

    def _disconnected(self) -> None:
        """The subscription closes this consumer (a forced unsubscribe): tell the client (any thread)."""
        def close() -> None:
            self.loop.create_task(self.connection.close_consumer_by_server(self))
        try:
            self.loop.call_soon_threadsafe(close)
        except RuntimeError:
            pass


class SentEntries:
    """The batch entries a consumer was sent (runs of stored batches, and encrypted entries), by id (their
    first offset), with how many messages each holds. pulsar-client acknowledges a batch entry by its id
    alone once all of its messages are acknowledged (BatchMessageAcker; with batch index acks, before that
    with an ack_set whose clear bits are the messages acknowledged), and negative acks and ack timeouts name
    the entry too: each names every message of the entry. Forgotten once acknowledged whole or redelivered,
    and past MAX_SENT_ENTRIES the oldest first (an id of a forgotten entry then names its first message)."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self.last: tuple[int, int] | None = None  # (id, messages) of the highest entry sent
        # entries are recorded by the consumer's dispatch (thread pool) while its ACKs are taken (the loop, or
        # another thread of the pool): each method holds it for its whole step over the entries
        self._lock = threading.Lock()

    def sent(self, entries: list[tuple[int, int]]) -> None:
        with self._lock:
            counts = self._counts
            for entry, count in entries:
                counts.pop(entry, None)  # (sent again: it is the newest)
                counts[entry] = count
            if self.last is None or entries[-1][0] >= self.last[0]:
                self.last = entries[-1]
            if len(counts) > MAX_SENT_ENTRIES:
                for entry in list(itertools.islice(counts, len(counts) - MAX_SENT_ENTRIES)):
                    del counts[entry]

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()

    def acknowledged(self, ids: abc.Sequence[AckedMessageId]) -> np.ndarray:
        """The offsets an individual ACK's `ids` acknowledge: an entry's all, or with the ack_set of a client
        that acknowledges batch indexes, those whose bit is clear; for an id of no entry, the message it names."""
        parts: list[np.ndarray] = []
        with self._lock:
            for mid in ids:
                first, count, acked = self._acked_by(mid)
                if count is None:
                    parts.append(np.array([first], dtype=np.int64))
                else:
                    parts.append(np.arange(first, first + count, dtype=np.int64) if acked is None else first + acked)
        return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, dtype=np.int64)

    def acknowledged_through(self, ids: abc.Sequence[AckedMessageId]) -> list[int]:
        """For each of a cumulative ACK's `ids`, the offset it acknowledges up to (the caller passes the highest
        to forget_through): an entry's last, or with an ack_set the last before its first set bit; for an id of
        no entry, the message it names."""
        through = []
        with self._lock:
            for mid in ids:
                first, count, acked = self._acked_by(mid)
                if count is None:
                    through.append(first)
                elif acked is None:
                    through.append(first + count - 1)
                else:
                    gaps = np.flatnonzero(acked != np.arange(len(acked)))
                    through.append(first + (int(gaps[0]) if len(gaps) else len(acked)) - 1)
        return through

    def _acked_by(self, mid: AckedMessageId) -> tuple[int, int | None, np.ndarray | None]:
        """(first offset, messages, batch indexes acknowledged) of the entry `mid` acknowledges, the indexes
        None when all of them are (its id alone); (the offset it names, None, None) for an id of no entry. An
        entry acknowledged whole is forgotten."""
        entry, count = self._entry(mid)
        if count is None:
            return _offset(mid), None, None
        if not mid.ack_set:
            del self._counts[entry]
            return entry, count, None
        acked = cleared_indexes(mid.ack_set, count)
        if len(acked) == count:
            del self._counts[entry]
        return entry, count, acked

    def forget_through(self, offset: int) -> None:
        """Forget the entries a cumulative ack up to `offset` acknowledged (those it did not name too)."""
        with self._lock:
            self._counts = {e: n for e, n in self._counts.items() if e + n - 1 > offset}

    def redelivered(self, ids: abc.Sequence[AckedMessageId]) -> np.ndarray:
        """The offsets a REDELIVER_UNACKNOWLEDGED_MESSAGES's `ids` name: all of an entry's for its id."""
        parts: list[np.ndarray] = []
        with self._lock:
            for mid in ids:
                entry, count = self._entry(mid)
                if count is None:
                    parts.append(np.array([_offset(mid)], dtype=np.int64))
                else:
                    parts.append(np.arange(entry, entry + count, dtype=np.int64))
                    del self._counts[entry]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _entry(self, mid: AckedMessageId) -> tuple[int, int | None]:
        """(first offset, messages) of the entry `mid` names whole, or (-1, None) if it names a message."""
        if mid.batch_index >= 0:
            return -1, None
        entry = _offset(mid)
        return entry, self._counts.get(entry)


def _keep(partition: int | None) -> None:
    """ConsumerState.on_forget of a remote consumer: what was sent is in the client's queue already."""


def _id(offset: int) -> api.MessageIdData:
    """The id of the message at `offset` as this server sends it; offset -1 is "before the first entry"."""
    return message_id(offset if offset >= 0 else UINT64_MINUS_ONE)


def _offset(mid: AckedMessageId) -> int:
    entry = signed(mid.entry_id)
    if entry < 0 or signed(mid.ledger_id) < 0:
        return -1
    return offset_of(entry, mid.batch_index)


def sticky_ranges(request: api.CommandSubscribe) -> HashRanges | None:
    """The key slots a Key_Shared consumer in Pulsar's sticky mode takes, checked; None otherwise."""
    meta = request.keySharedMeta
    if (request.sub_type != api.CommandSubscribe.Key_Shared or not request.HasField("keySharedMeta")
            or meta.keySharedMode != api.KeySharedMeta.STICKY):
        return None
    ranges = tuple(sorted((r.start, r.end) for r in meta.hashRanges))
    if not ranges:
        raise ServerFailure(api.NotAllowedError, "a sticky Key_Shared consumer names no hash range")
    for start, end in ranges:
        if not 0 <= start <= end < STICKY_HASH_SLOTS:
            raise ServerFailure(api.NotAllowedError, f"hash range [{start}, {end}]: expected 0 <= start <= end "
                                                     f"<= {STICKY_HASH_SLOTS - 1}")
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        if start <= end:
            raise ServerFailure(api.NotAllowedError, f"the consumer's hash ranges overlap at {start}")
    return ranges
