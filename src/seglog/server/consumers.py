"""A consumer on a connection (SUBSCRIBE .. CLOSE_CONSUMER): a user of its subscription's dispatcher beside
in-process consumers. It holds a ConsumerState, whose FLOW permits the dispatcher never exceeds and whose
pending messages the dispatcher keeps, as for any consumer.

Each delivered message goes out as one MESSAGE frame of its own, an unbatched entry (docs/SERVER.md,
"Consuming"): its id is (ledgerId 0, entryId = its offset, batchIndex -1), so every id a consumer acks names
exactly one offset, and one permit is one message. An encrypted entry, which the server cannot unpack, goes
out whole as the producer sent it (encryption.py): its id is (0, its first offset, -1), with the batch
indexes given in this delivery in its ack_set when not all of them are, and an ack or redelivery of the whole
entry names all of its offsets (EncryptedEntries). A task per consumer takes what dispatch gives it (in the
thread pool) and writes the frames; it waits for FLOW, an append to the topic (the partitions' append
signals), or a change in the subscription (acks, redeliveries, consumers leaving), with a capped poll as the
fallback for what nothing signals (appends by other processes, TTL)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from seglog._core._messages import Message
from seglog.server.errors import ServerFailure
from seglog.server.producers import peer_address
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.encryption import ack_set, cleared_indexes, entry_metadata
from seglog.server.protocol.frames import Type, command, encode_payload_command
from seglog.server.protocol.message_ids import UINT64_MINUS_ONE, message_id, offset_of, signed
from seglog.server.protocol.metadata import ENCRYPTION, message_metadata
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
# its permits: a read becomes frames in memory before they are written (Pulsar reads 100 entries at most)
READ_MESSAGES = 1000
T = TypeVar("T")

SUBSCRIPTION_TYPES = {
    api.CommandSubscribe.Exclusive: "exclusive",
    api.CommandSubscribe.Shared: "shared",
    api.CommandSubscribe.Failover: "failover",
    api.CommandSubscribe.Key_Shared: "key_shared",
}


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
        # permits start at 0: nothing is sent before the client's first FLOW; a consumer of one partition of a
        # partitioned topic consumes only that partition of the seglog subscription (docs/SERVER.md)
        self.state = ConsumerState(name, None, _keep, self._disconnected, permits=0,
                                   partitions=frozenset({target.partition}) if target.partitioned else None,
                                   hash_ranges=hash_ranges, whole_if_marked=ENCRYPTION.encode(),
                                   max_unacked=connection.service.settings.max_unacked_messages_per_consumer or None)
        self.subscription: Subscription | None = None
        self.task: asyncio.Task | None = None
        self._signal_event = LoopWake(self.loop, self.wake)
        # the partition the ids of messages sent carry: that of a partitioned topic's partition, else none
        self.id_partition = target.partition if target.partitioned else None
        # the MESSAGE command, filled in for each message sent (a seventh of the cost of building one; only
        # this consumer's task uses it, one delivery at a time)
        self._message = command(Type.MESSAGE, consumer_id=consumer_id, message_id=message_id(0, self.id_partition),
                                redelivery_count=0)
        self.encrypted = EncryptedEntries()

    @property
    def closed(self) -> bool:
        return self._stopped.is_set()

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
            if not await self._turn():
                return
            try:
                frames = await self.connection.blocking(self._take)
                if not self.closed:  # (else what _take gave goes back to the subscription as the consumer detaches)
                    self.connection.write(frames)
            except Exception as error:  # (the topic was deleted, the broker closed: the client re-subscribes)
                logger.info("%s: consumer %s of %s: %s", self.connection.peer, self.name, self.target.ref, error)
                self.loop.create_task(self.connection.close_consumer_by_server(self))
                return
            finally:
                self.connection.dispatching.release()
            if frames:
                delay = POLL_START_S
                continue
            if not self.state.permits:
                await self.wake.wait()  # FLOW, or closing
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

    def _take(self) -> bytes:
        """In the thread pool: the next messages dispatch gives this consumer (at most its permits and one
        read's worth), as MESSAGE frames."""
        subscription = self.subscription
        assert subscription is not None
        pieces = subscription.next_delivery(self.state, READ_MESSAGES)
        frames = []
        for piece in pieces:
            messages = piece.messages()
            if ENCRYPTION in messages[0].batch_attributes:
                frames.append(self._entry_frame(piece, messages[0], subscription))
                continue
            for message in messages:
                count = subscription.redelivery_count(message.partition, message.offset)
                frames.append(self._frame(message, piece.base, count))
        return b"".join(frames)

    def _entry_frame(self, piece: Piece, given: Message, subscription: Subscription) -> bytes:
        """A MESSAGE for the encrypted entry stored in `piece`'s batch, of which the piece's messages (the
        first of them `given`) are delivered: all of them unless some were acknowledged or are redelivered
        alone (dispatch never cuts an encrypted entry to fit the permits: ConsumerState.whole_if_marked)."""
        first = given if given.offset == piece.base else \
            piece.with_offsets(np.array([piece.base], dtype=np.int64)).messages()[0]
        self.encrypted.sent(piece.base, piece.count)
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

    def flow(self, permits: int) -> None:
        assert self.subscription is not None
        self.subscription.flow(self.state, permits)

    def ack(self, cumulative: bool, ids: list[api.MessageIdData]) -> None:
        """Acknowledge the messages `ids` name (offset = entryId + max(batchIndex, 0)); ids of messages
        not written yet, or before the first entry (entryId -1), are left alone."""
        subscription = self.subscription
        assert subscription is not None
        partition = self.target.partition
        end = self.connection.service.broker.store.end_offset(self.target.ref.name, partition)
        if self.encrypted:
            offsets = [o for o in self.encrypted.acknowledged(ids, cumulative) if 0 <= o < end]
        else:
            offsets = [o for o in (_offset(i) for i in ids) if 0 <= o < end]
        if not offsets:
            return
        if cumulative:
            subscription.ack_cumulative(partition, max(offsets))
        else:
            subscription.ack_many(partition, np.array(sorted(offsets), dtype=np.int64))

    def redeliver(self, ids: list[api.MessageIdData]) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: the messages `ids` name, or all this consumer was given and did
        not acknowledge when there are none."""
        assert self.subscription is not None
        if not ids:
            self.subscription.redeliver(self.state, None)
            return
        named = self.encrypted.redelivered(ids) if self.encrypted else (_offset(i) for i in ids)
        offsets = np.array(sorted({o for o in named if o >= 0}), dtype=np.int64)
        self.subscription.redeliver(self.state, {self.target.partition: offsets})

    def last_message_id(self) -> tuple[api.MessageIdData, api.MessageIdData]:
        """GET_LAST_MESSAGE_ID: the id of the partition's last message (entryId -1 when it has none) and the
        subscription's mark-delete position (the last offset before its first unacknowledged one)."""
        assert self.subscription is not None
        partition = self.target.partition
        end = self.connection.service.broker.store.end_offset(self.target.ref.name, partition)
        floor = self.subscription.cursors[partition].acks.floor
        return _id(end - 1), _id(floor - 1)

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


class EncryptedEntries:
    """The encrypted entries a consumer was sent, by first offset (an entry's id), with their messages: the
    client acknowledges or redelivers such an entry by its id alone (batch index -1) once it is done with
    all of its messages, and that names every offset of the entry. Forgotten once acknowledged whole."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self._counts)

    def sent(self, entry: int, count: int) -> None:
        self._counts[entry] = count

    def acknowledged(self, ids: list[api.MessageIdData], cumulative: bool) -> list[int]:
        """The offsets an ACK's `ids` acknowledge: an entry's all, or with the ack_set of a client that
        acknowledges batch indexes, those whose bit is clear (a cumulative ack: up to the first set)."""
        offsets: list[int] = []
        for mid in ids:
            entry, count = self._entry(mid)
            if count is None:
                offsets.append(_offset(mid))
                continue
            acked = cleared_indexes(mid.ack_set, count) if mid.ack_set else range(count)
            if cumulative:
                run = next((i for i, index in enumerate(acked) if i != index), len(acked))
                offsets.append(entry + run - 1)
            else:
                offsets += [entry + index for index in acked]
            if len(acked) == count:
                del self._counts[entry]
        if cumulative and offsets:
            last = max(offsets)
            self._counts = {e: n for e, n in self._counts.items() if e + n - 1 > last}
        return offsets

    def redelivered(self, ids: list[api.MessageIdData]) -> list[int]:
        """The offsets a REDELIVER_UNACKNOWLEDGED_MESSAGES's `ids` name: all of an entry's for its id."""
        offsets: list[int] = []
        for mid in ids:
            entry, count = self._entry(mid)
            offsets += [_offset(mid)] if count is None else range(entry, entry + count)
        return offsets

    def _entry(self, mid: api.MessageIdData) -> tuple[int, int | None]:
        """(first offset, messages) of the encrypted entry `mid` names whole, or (-1, None) if it names a
        message."""
        if mid.batch_index >= 0:
            return -1, None
        entry = _offset(mid)
        return entry, self._counts.get(entry)


def _keep(partition: int | None) -> None:
    """ConsumerState.on_forget of a remote consumer: what was sent is in the client's queue already."""


def _id(offset: int) -> api.MessageIdData:
    """The id of the message at `offset` as this server sends it; offset -1 is "before the first entry"."""
    return message_id(offset if offset >= 0 else UINT64_MINUS_ONE)


def _offset(mid: api.MessageIdData) -> int:
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
