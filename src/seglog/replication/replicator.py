"""One replicator: a partition of a local topic, sent to one remote cluster (Pulsar's PersistentReplicator).

It reads the partition through the topic's durable subscription `pulsar.repl.REMOTE` (one per remote: it
holds backlog, so retention, TTL and backlog quotas treat it as any subscription) and produces to the same
topic partition on the remote as `pulsar.repl.LOCAL-->REMOTE`. A message is acknowledged on the
subscription only when the remote's SEND_RECEIPT for it arrives (at the take that follows the receipt,
which a receipt making room wakes), or at once, as it is read, when it must not leave (entries.py); one
replicated here from another cluster before it is read (`replicated_here`). At most `queue_size` messages
are in flight (broker.conf's replicationProducerQueueSize, Pulsar's).

When the producer is (re)created the replicator rewinds: what was sent and not receipted is sent again, and
what the remote says it has stored (PRODUCER_SUCCESS' last sequence id: the last origin offset it keeps from
this cluster) is acknowledged without sending, so a restart on either side loses nothing and the remote
stores nothing twice. Failures to reach the remote are retried with back-off, 100 ms doubling to 60 s. The
server wakes it when messages produced here are appended (`appended()`)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from seglog.errors import TopicNotFoundError
from seglog.rates import RateMeter, iso_time
from seglog.replication.client import RemoteProducer, RemoteUnavailable
from seglog.replication.entries import Entry, entries, marker
from seglog.server.protocol.metadata import replicator_name
from seglog.storage.notification import LoopWake
from seglog.subscriptions.delivery import ConsumerState
from seglog.subscriptions.subscription import Subscription

logger = logging.getLogger("seglog.replication")

BACKOFF_START_S = 0.1
BACKOFF_MAX_S = 60.0
CLOSE_TIMEOUT_S = 5.0
# how often a replicator takes without being woken: for appends no `appended()` told of (other processes'),
# those replicated here from another cluster, which wake nothing, and TTL
POLL_MAX_S = 0.1
# A replicator whose takes find nothing to do (nothing read, acknowledged, in flight or queued) looks half as
# often after each, down to once every POLL_IDLE_MAX_S: an idle replicated topic's two replicators (one on
# each cluster) looking ten times a second cost each server about 1 ms of CPU a second, a core for a thousand
# such topics; once a second, a third of that. Anything to do brings it back to POLL_MAX_S.
POLL_IDLE_MAX_S = 1.0
# A replicator of a topic of small stored batches (unbatched messages: at most LOOP_BATCH_MAX messages each,
# the last ones it read) takes on the event loop's thread while it is at the tail (its last take found the
# end of what was written), at most LOOP_TAKE_MAX messages: what it reads was just appended (in the page
# cache, tens of messages a take) and is turned into entries a message at a time, and a trip to the thread
# pool for it, beside the producers' own trips there, cost more than the take (thread switches: 0.6 a
# message against 0.2; east's CPU 39-43 against 28-34 µs a message, the appends 12 of it, measured in
# process). Catching up, after a take that filled LOOP_TAKE_MAX, and for larger batches (whose entries are
# packed, a millisecond or more for a batch of thousands), it takes in the pool: a backlog may have to be
# read from disk. A stored batch is taken whole, so a large one that follows small ones at the tail is
# taken on the loop once.
LOOP_TAKE_MAX = 256
LOOP_BATCH_MAX = 16
T = TypeVar("T")


@dataclass
class ReplicatorStats:
    """What `topics stats` shows of a replicator (Pulsar's ReplicatorStats, outbound side): `out` counts the
    messages the remote receipted."""
    out: RateMeter
    expired: RateMeter  # messages the topic's TTL acknowledged on the cursor before they were sent
    connected: bool = False
    connected_since: str = ""
    outbound_connection: str = ""
    last_error: str = ""  # why it is not connected, if it is not

    @property
    def messages_out(self) -> int:
        return self.out.messages


class _InFlight:
    """The entries sent to one remote producer and not receipted yet, in the order sent (loop thread only)."""

    def __init__(self) -> None:
        self.entries: deque[tuple[Entry, int]] = deque()  # (entry, when it was sent)
        self.messages = 0
        self.receipted = 0  # entries taken out as receipted
        self.sent = asyncio.Event()  # entries were added
        self.freed = asyncio.Event()  # receipted entries were taken out

    def add(self, entries: list[Entry], now: int) -> None:
        self.entries.extend((entry, now) for entry in entries)
        self.messages += sum(len(entry.offsets) for entry in entries)
        self.sent.set()

    def take_receipted(self, receipted: int) -> list[Entry]:
        """The entries receipted beyond those taken out already, when the producer has `receipted` in all."""
        done = [self.entries.popleft()[0] for _ in range(receipted - self.receipted)]
        self.receipted = receipted
        self.messages -= sum(len(entry.offsets) for entry in done)
        self.freed.set()
        return done

    @property
    def oldest(self) -> int | None:
        return self.entries[0][1] if self.entries else None


class _TakenAhead:
    """Entries taken from the cursor and not sent yet, in order (loop thread only): a replicator takes up to
    a window ahead, so that receipts freeing room are answered with a send at once, not after a trip to the
    thread pool (which, on a busy cluster, waited behind the producers' writes while the remote idled)."""

    def __init__(self) -> None:
        self.entries: deque[Entry] = deque()
        self.messages = 0

    def add(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)
        self.messages += sum(len(entry.offsets) for entry in entries)

    def within(self, room: int) -> list[Entry]:
        """The entries at the front while there is `room` (messages) left, taken out: the last may pass it.
        (Taking only entries that fit would hold a stored batch larger than the window back forever, now that
        takes give stored batches whole, and had a window of one producer batch wait for each receipt.)"""
        out: list[Entry] = []
        while self.entries and room > 0:
            entry = self.entries.popleft()
            room -= len(entry.offsets)
            self.messages -= len(entry.offsets)
            out.append(entry)
        return out

    @property
    def next_offset(self) -> int | None:
        """The origin offset of the first message not sent yet; None when none is taken ahead."""
        return int(self.entries[0].offsets[0]) if self.entries else None


class Replicator:
    def __init__(self, subscription: Subscription, partition: int, local: str, remote: str, remote_topic: str,
                 producer: Callable[[], Any], executor: Executor, clock: Callable[[], int], *,
                 queue_size: int) -> None:
        self.subscription = subscription
        # messages sent and not receipted yet: more are sent while fewer are in flight (a batch may pass it)
        self.queue_size = queue_size
        self.partition = partition
        self.local = local
        self.remote = remote
        self.remote_topic = remote_topic
        self.producer_name = replicator_name(local, remote)
        self._producer = producer  # async () -> RemoteProducer on remote_topic named producer_name
        self._executor = executor
        self._clock = clock
        self.stats = ReplicatorStats(RateMeter(clock), RateMeter(clock))
        self._expired_seen = subscription.cursors[partition].expired
        self.state = ConsumerState(self.producer_name, None, _keep, _no_disconnect,
                                   partitions=frozenset({partition}), whole_batches=True)
        self._wake = asyncio.Event()
        self._append = LoopWake(asyncio.get_running_loop(), self._wake)
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._flight: _InFlight | None = None
        self._markers: deque[tuple[int, int, bytes]] = deque()  # (after offset, marker type, payload)
        self._largest_batch_read: int | None = None  # (the largest stored batch the last take that read any read)
        # (first offset, count) of appends replicated from other clusters, and the origin offsets the remote
        # receipted, acknowledged at the next take (writers' threads and the loop append, the take's thread
        # pops: each is atomic)
        self._replicated: deque[tuple[int, int]] = deque()
        self._receipted: deque[np.ndarray] = deque()

    def start(self) -> None:
        self.subscription.attach(self.state, "exclusive")
        self._task = asyncio.get_running_loop().create_task(self._run())

    def appended(self) -> None:
        """Messages produced here were appended to the partition (any thread): take them now. The replicator
        does not watch the partition's every append: those of messages replicated from another cluster, which
        never leave, would cost it a take each (replicated_here)."""
        self._append.set()

    def replicated_here(self, first: int, count: int) -> None:
        """Messages replicated from another cluster were appended at offsets first .. first + count - 1 (a
        writer's thread): they never leave. The next take acknowledges them all at once, before it reads,
        and so passes over them without reading them (acknowledging each append as it came cost a cluster
        receiving unbatched messages 5% of its time)."""
        self._replicated.append((first, count))

    async def stop(self) -> None:
        """Stop sending; what is in flight is sent again by the next replicator on this cursor."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self._blocking(self._acknowledge_waiting)  # (what was receipted last)
            await self._blocking(self.subscription.detach, self.state)
        except TopicNotFoundError:
            pass  # (the topic went, and its subscription with it)

    async def _run(self) -> None:
        backoff = BACKOFF_START_S
        while not self._stopping:
            producer: RemoteProducer | None = None
            try:
                producer = await self._producer()
                backoff = BACKOFF_START_S
                self.stats.connected, self.stats.last_error = True, ""
                self.stats.connected_since = iso_time(self._clock())
                self.stats.outbound_connection = producer.connection.local_address
                await self._replicate(producer)
            except RemoteUnavailable as error:
                self.stats.last_error = str(error)
                logger.info("replicator %s of %s partition %d: %s; retrying in %.1f s", self.producer_name,
                            self.subscription.ref, self.partition, error, backoff)
            except TopicNotFoundError as error:  # (deleted under it: the service stops it at its next look)
                logger.info("replicator %s: %s", self.producer_name, error)
            except Exception:  # (one failure never ends replication: it retries)
                logger.warning("replicator %s of %s partition %d failed; retrying in %.1f s", self.producer_name,
                               self.subscription.ref, self.partition, backoff, exc_info=True)
            finally:
                self.stats.connected = False
                if producer is not None:  # (the remote frees its name for the next one)
                    await _close_quietly(producer)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _replicate(self, producer: RemoteProducer) -> None:
        await self._blocking(self._rewind, producer.last_sequence_id)
        flight = self._flight = _InFlight()
        ahead = _TakenAhead()
        acker = asyncio.get_running_loop().create_task(self._acknowledge(producer, flight))
        at_tail = False
        poll_s = POLL_MAX_S
        try:
            while True:
                self._wake.clear()
                flight.freed.clear()
                self.count_expired()
                if producer.closed.is_set():
                    raise RemoteUnavailable(f"producer {producer.name} on {producer.topic} was closed")
                if acker.done():
                    acker.result()  # (raises the failure that ended it)
                await self._send(producer, flight, ahead)
                wanted = self.queue_size - ahead.messages
                waiting = bool(self._replicated or self._receipted)  # (acknowledged by the take)
                if wanted <= 0:
                    taken, read = list[Entry](), 0
                elif at_tail and self._small_batches():
                    wanted = min(wanted, LOOP_TAKE_MAX)
                    taken, read = self._take(wanted)
                else:
                    taken, read = await self._blocking(self._take, wanted)
                if wanted > 0:
                    at_tail = read < wanted
                ahead.add(taken)
                await self._send(producer, flight, ahead)
                # A take that read less than it wanted found the end of what was written: the next would find
                # nothing unless something was appended since the take began, which sets the wake (one trip to
                # the thread pool saved for every take, on a cluster that receives replicated messages half
                # its takes). With a window taken ahead, the next take waits for receipts.
                if wanted <= 0 or read < wanted:
                    idle = not (read or waiting or flight.entries or ahead.entries or self._markers)
                    poll_s = min(2 * poll_s, POLL_IDLE_MAX_S) if idle else POLL_MAX_S
                    await self._wait(acker, flight, poll_s)
        finally:
            acker.cancel()
            await asyncio.gather(acker, return_exceptions=True)

    async def _send(self, producer: RemoteProducer, flight: _InFlight, ahead: _TakenAhead) -> None:
        """Send what was taken ahead as far as the flight window has room, with the markers due."""
        outgoing = self._with_markers(ahead.within(self.queue_size - flight.messages), ahead.next_offset)
        if outgoing:
            producer.send((entry.sequence_id, entry.metadata, entry.payload, len(entry.offsets))
                          for entry in outgoing)
            flight.add(outgoing, self._clock())
            await producer.connection.drain()

    async def _wait(self, acker: asyncio.Task[None], flight: _InFlight, poll_s: float) -> None:
        """Until an append, a receipt that makes room, the acker failing, or `poll_s` is up."""
        wakers = {asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(flight.freed.wait())}
        try:
            await asyncio.wait({*wakers, acker}, timeout=poll_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waker in wakers:
                waker.cancel()

    async def _acknowledge(self, producer: RemoteProducer, flight: _InFlight) -> None:
        """Take in what the remote receipted, in order, for the next take to acknowledge on the cursor: the
        room the receipts make wakes a take, and a trip to the thread pool of their own was one more for
        every few receipts; a failed send ends replication."""
        while True:
            await flight.sent.wait()
            flight.sent.clear()
            while flight.entries:
                receipted = await producer.receipts_beyond(flight.receipted)  # (RemoteUnavailable: it failed)
                done = flight.take_receipted(receipted)
                # counted as receipted before the acknowledgement's trip: whoever sees the cursor moved sees
                # them counted too
                self.stats.out.add(sum(len(entry.offsets) for entry in done), sum(len(entry.payload) for entry in done))
                offsets = np.concatenate([entry.offsets for entry in done])
                if len(offsets):  # (markers carry none)
                    self._receipted.append(offsets)

    def _small_batches(self) -> bool:
        """Whether the last take that read anything read stored batches of at most LOOP_BATCH_MAX messages."""
        return self._largest_batch_read is not None and self._largest_batch_read <= LOOP_BATCH_MAX

    def send_marker(self, after: int, marker_type: int, payload: bytes) -> None:
        """Send a marker to the remote once every message before offset `after` was sent (loop thread);
        a marker queued while the remote is unreachable waits for it, one in flight when it fails is lost
        (markers are best effort: replicated subscriptions take the next snapshot)."""
        self._markers.append((after, marker_type, payload))
        self._wake.set()

    @property
    def markers_waiting(self) -> int:
        """Markers queued and not sent yet."""
        return len(self._markers)

    def _with_markers(self, outgoing: list[Entry], unsent: int | None) -> list[Entry]:
        """`outgoing` with the queued markers each put before the first message at or after its offset, or
        at the end once every message before it was sent: `unsent` is the first message taken and not sent
        (None: none is, so everything before the cursor's read position was sent or stays)."""
        if not self._markers:
            return outgoing
        merged: list[Entry] = []
        for entry in outgoing:
            while self._markers and self._markers[0][0] <= int(entry.offsets[-1]):
                # (inside an entry that packs a run; an encrypted entry is not cut, the marker goes before it:
                # early rather than late, a snapshot never counts messages the remote has not received)
                if self._markers[0][0] > int(entry.offsets[0]) and entry.starts is not None:
                    head, entry = entry.split(self._markers[0][0])
                    merged.append(head)
                merged.append(self._marker(*self._markers.popleft()))
            merged.append(entry)
        sent_up_to = self.subscription.read_position(self.partition) if unsent is None else unsent
        while self._markers and self._markers[0][0] <= sent_up_to:
            merged.append(self._marker(*self._markers.popleft()))
        return merged

    def _marker(self, after: int, marker_type: int, payload: bytes) -> Entry:
        return marker(after, marker_type, payload, self.local, self.remote, self._clock())

    def count_expired(self) -> None:
        """Take in what the TTL expired on the cursor since the last look (Pulsar's replicator expiry): the
        replicator looks while it runs, and stats look too, as it does not run while its remote is down."""
        expired = self.subscription.cursors[self.partition].expired
        if expired > self._expired_seen:
            self.stats.expired.add(expired - self._expired_seen, 0)
        self._expired_seen = expired

    def delay_ms(self) -> int:
        """How long the oldest entry sent and not receipted yet has been in flight (Pulsar's
        replicationDelayInSeconds, as its broker measures it); 0 when none is."""
        oldest = self._flight.oldest if self._flight is not None else None
        return 0 if oldest is None else max(0, self._clock() - oldest)

    # in the thread pool (and _take on the loop at the tail)

    def _rewind(self, stored_up_to: int) -> None:
        """Send again what was sent and not receipted; acknowledge what the remote has stored already."""
        self._acknowledge_waiting()
        self.subscription.redeliver(self.state, None)
        floor = self.subscription.cursors[self.partition].acks.floor
        if stored_up_to >= floor:
            self.subscription.ack_cumulative(self.partition, stored_up_to)

    def _take(self, most: int) -> tuple[list[Entry], int]:
        """Up to `most` messages, stored batches in turn: the entries of those that leave, and how many
        messages were read (those that stay are acknowledged here and now). One thread-pool trip for them
        all, not one a stored batch, which for a topic of unbatched messages would be one a message (on a
        cluster that receives replicated messages, one a message it must only acknowledge)."""
        self._acknowledge_waiting()
        pieces = self.subscription.next_deliveries(self.state, most)
        if not pieces:
            return [], 0
        self._largest_batch_read = max(piece.count for piece in pieces)
        taken, staying = entries(pieces, self.local, self.remote)
        if staying:
            self._ack(np.concatenate(staying))
        return taken, sum(len(piece.offsets) for piece in pieces)

    def _acknowledge_waiting(self) -> None:
        """Acknowledge the appends replicated_here was told of, and what the remote receipted."""
        offsets: list[int] = []
        while self._replicated:
            first, count = self._replicated.popleft()
            offsets.extend(range(first, first + count))
        arrays = [np.array(offsets, dtype=np.int64)] if offsets else []
        while self._receipted:
            arrays.append(self._receipted.popleft())
        if arrays:
            self._ack(np.concatenate(arrays))

    def _ack(self, offsets: np.ndarray) -> None:
        self.subscription.ack_many(self.partition, np.sort(offsets))

    async def _blocking(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)


async def _close_quietly(producer: RemoteProducer) -> None:
    try:
        await asyncio.wait_for(producer.close(), CLOSE_TIMEOUT_S)
    except (RemoteUnavailable, TimeoutError):
        pass  # (a lost connection frees the name on the remote too)


def _keep(partition: int | None) -> None:
    """ConsumerState.on_forget: the replicator holds nothing it took and has not sent."""


def _no_disconnect() -> None:
    """ConsumerState.disconnect: the replication service removes replicators, not the subscription."""
