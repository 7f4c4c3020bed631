"""A connection's producers (PRODUCER .. CLOSE_PRODUCER): who may produce is producer_access.py's to say,
across connections; here, each admitted producer's session and its SENDs.

Each producer has a task that writes its SENDs in the order received, up to WRITE_TRIP_SENDS per trip to the
thread pool, and answers each with a SEND_RECEIPT (or SEND_ERROR) only once it is written: receipts go out in
order per producer, as the client requires. A WaitForExclusive producer waits in line in a task of its own
until it is admitted; a producer the server closed (fenced, or refused by a backlog quota) has its SENDs still
in flight dropped, until the client creates it again."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from seglog._core._pulsar_send import SendFrame, send_receipt
from seglog.server import auth
from seglog.server.errors import Attempt, ServerFailure, server_error
from seglog.server.producer_access import Waiter
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import BatchError, Messages, NativeMessages, parse_metadata, unpack, unpack_native
from seglog.server.protocol.frames import NO_REQUEST, Type, command, encode_command
from seglog.server.protocol.message_ids import DUPLICATE_ID, LEDGER_ID
from seglog.server.protocol.metadata import replicator_origin
from seglog.server.publish_buffer import PublishAccount, send_cost
from seglog.server.schemas import producer_schema
from seglog.server.service import BrokerService, ProducerHandle, QuotaRefusal, Target

logger = logging.getLogger("seglog.server")

# SENDs written in one trip to the thread pool, at most: their receipts go out when the trip ends, so a trip
# of every SEND waiting (thousands of unbatched ones) held the first receipt back 100 ms and more, and a
# producer with a window of messages in flight (a replicator's 1,000) waited for it with nothing to send
WRITE_TRIP_SENDS = 64
# SENDs of at most this many bytes in all are written on the event loop when the service says it is cheap
# (BrokerService.cheap_append: pages made ahead, blocks allocated): copying a connection's read of SENDs
# (connection.READ_SIZE) into the mapped segment costs tens of µs there, and a trip to the thread pool and
# back 48-70 µs of CPU (more than the write itself, for unbatched messages)
INLINE_WRITE_BYTES = 1 << 20
# What the stored batches of SENDs take at most for each byte the SENDs held, about: a message's columns (20
# bytes or so) against its SingleMessageMetadata (a dozen), so that cheap_append is asked about enough room
STORED_PER_SENT = 2
T = TypeVar("T")


class ProducerConnection(Protocol):
    """What a connection's producers use of it (connection.Connection)."""
    service: BrokerService
    publish: PublishAccount  # the bytes of its SENDs not yet written
    peer: Any

    async def blocking(self, function: Callable[..., T], *args: Any) -> T: ...
    def send(self, base: api.BaseCommand) -> None: ...
    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def reply_error(self, request_id: int, failure: ServerFailure) -> None: ...
    def answering_failures(self, request_id: int) -> AbstractContextManager[Attempt]: ...
    async def authorize(self, name: str, actions: tuple[str, ...], doing: str) -> None: ...
    def close_after_this_command(self) -> None: ...


@dataclass
class QueuedSend:
    """A SEND waiting for its producer's next write."""
    frame: SendFrame
    cost: int  # what holding it costs, as the publish buffer counts it


_CLOSE = object()


def answer_to_send(producer_id: int, send: QueuedSend, result: int | ServerFailure | None) -> bytes:
    """The answer to a SEND, encoded: its receipt (the offset it was written at, or None for a duplicate,
    acknowledged with id (-1, -1) as Pulsar's broker does), or its failure."""
    frame = send.frame
    if isinstance(result, ServerFailure):
        return encode_command(command(Type.SEND_ERROR, producer_id=producer_id, sequence_id=frame.sequence_id,
                                      error=result.code, message=str(result)))
    if result is None:
        return send_receipt(producer_id, frame.sequence_id, frame.highest_sequence_id, DUPLICATE_ID.ledger_id,
                            DUPLICATE_ID.entry_id)
    return send_receipt(producer_id, frame.sequence_id, frame.highest_sequence_id, LEDGER_ID, result)


class ProducerSession:
    """One admitted producer: its SENDs in order, written by its task. `close_by_server(session)` is started
    when a backlog quota refuses a send."""

    def __init__(self, connection: ProducerConnection, producer_id: int, handle: ProducerHandle,
                 close_by_server: Callable[[ProducerSession], Coroutine[Any, Any, None]]) -> None:
        self.connection = connection
        self.producer_id = producer_id
        self.handle = handle
        self.schema_version: bytes | None = None  # its schema's, as PRODUCER_SUCCESS told it (server/schemas.py)
        self.queue: asyncio.Queue[Any] = asyncio.Queue()  # (bounded in bytes by the connection's publish account)
        self.blocked: QuotaRefusal | None = None  # a backlog quota refused a send: the server closes it
        self._close_by_server = close_by_server
        self._taken = False  # the task took SENDs and has not answered them all yet
        self.staged: list[QueuedSend] = []  # SENDs of the connection's last read, to go in one write (stage)
        self.task = asyncio.get_running_loop().create_task(self._run())

    def stage(self, send: SendFrame, cost: int) -> bool:
        """Take `send` to be written once its connection has handled the rest of what it read (write_staged),
        if that keeps the order: nothing of this producer's waits in its queue or is being written. False:
        queue it."""
        if self._taken or not self.queue.empty():
            return False
        self.staged.append(QueuedSend(send, cost))
        return True

    def write_staged(self) -> None:
        """Write and answer the SENDs staged, on the loop if that is cheap, all in one append when they can be
        (_write); those not written there (too much at once, or a backlog quota armed meanwhile) are queued
        for the task, holding their cost of the publish buffer."""
        sends, self.staged = self.staged, []
        results = self._write(sends) if self._cheap(sends) else []
        if results:
            self.connection.write(b"".join(answer_to_send(self.producer_id, send, result)
                                           for send, result in zip(sends, results)))
        for send in sends[len(results):]:
            self.connection.publish.hold(send.cost)
            self.queue.put_nowait(send)

    def _cheap(self, sends: list[QueuedSend]) -> bool:
        """Whether `sends` may be written on the loop: at most INLINE_WRITE_BYTES in all, and an append the
        service calls cheap."""
        cost = sum(send.cost for send in sends)
        return cost <= INLINE_WRITE_BYTES and self.connection.service.cheap_append(
            self.handle, STORED_PER_SENT * cost, len(sends))

    async def _run(self) -> None:
        while True:
            items = [await self.queue.get()]
            self._taken = True
            while not self.queue.empty() and len(items) < WRITE_TRIP_SENDS:
                items.append(self.queue.get_nowait())
            sends = [item for item in items if item is not _CLOSE]
            if sends:
                if self._cheap(sends):
                    results = self._write(sends)
                else:
                    results = await self.connection.blocking(self._write, sends)
                # (one write for all the answers: one each was a system call, and a loopback delivery, a message
                # for unbatched messages)
                self.connection.write(b"".join(answer_to_send(self.producer_id, send, result)
                                               for send, result in zip(sends, results)))
                self.connection.publish.release(sum(send.cost for send in sends))
                self._taken = False
                await self.connection.drain()
            self._taken = False
            if self.blocked is not None:
                # As Pulsar's broker: no SEND_ERROR (the client would drop the whole connection) but the
                # producer closed; the client re-creates it, is refused with the quota's error while the quota
                # holds, and resends what was not receipted once it clears.
                logger.info("%s: closing producer %s: %s", self.connection.peer, self.handle.name, self.blocked)
                asyncio.get_running_loop().create_task(self._close_by_server(self))
                return
            if len(sends) != len(items):
                return

    def _write(self, sends: list[QueuedSend]) -> list[int | ServerFailure | None]:
        """In the thread pool (or on the loop, when cheap): write each SEND as one batch; its first offset, or
        the failure to answer. SENDs all unpacked natively go in one append of the service's when it can take
        them so (BrokerService.append_all; a failure there, before anything is written, fails them all), the
        others one by one. A send a backlog quota refuses, and those after it, are not written and not answered
        (self.blocked)."""
        unpacked = [self._unpack_native(send) for send in sends]
        native = [messages for messages in unpacked if isinstance(messages, NativeMessages)]
        if len(native) == len(sends):
            try:
                offsets = self.connection.service.append_all(self.handle, native)
            except Exception as error:  # (answered to the client, which reconnects and resends)
                logger.warning("write to %s failed: %s", self.handle.target.ref, error)
                return [server_error(error)] * len(sends)
            if offsets is not None:
                return list(offsets)
        return self._write_each(sends, unpacked)

    def _write_each(self, sends: list[QueuedSend],
                    unpacked: list[NativeMessages | ServerFailure | None]) -> list[int | ServerFailure | None]:
        """_write one SEND at a time, given each one's natively unpacked messages (None: the reference path's
        to unpack, a ServerFailure: its answer)."""
        results: list[int | ServerFailure | None] = []
        service = self.connection.service
        for send, native in zip(sends, unpacked):
            if isinstance(native, ServerFailure):
                results.append(native)
                continue
            messages: Messages | NativeMessages
            if native is None:
                frame = send.frame
                try:
                    metadata = parse_metadata(frame.metadata)
                    if self.handle.origin is not None and metadata.HasField("marker_type"):
                        results.append(service.marker(self.handle, metadata, frame.payload))
                        continue
                    messages = unpack(metadata, frame.payload, frame.highest_sequence_id,
                                      service.settings.unpack_limits)
                except BatchError as error:  # corrupt in transit, as a checksum error: the client fails it
                    results.append(ServerFailure(api.ChecksumError, str(error)))
                    continue
            else:
                messages = native
            try:
                results.append(service.append(self.handle, messages, send.frame.sequence_id))
            except QuotaRefusal as refusal:
                self.blocked = refusal
                return results
            except Exception as error:  # (answered to the client, which reconnects and resends)
                logger.warning("write to %s failed: %s", self.handle.target.ref, error)
                results.append(server_error(error))
        return results

    def _unpack_native(self, send: QueuedSend) -> NativeMessages | ServerFailure | None:
        """A SEND's messages unpacked natively (batches.unpack_native); None for the reference path (entries
        unpack_native leaves to it, and every SEND of a replicator: markers, entries stored in part already);
        or the failure to answer it with, a checksum error (its CRC32C, or a payload that does not
        decompress)."""
        frame = send.frame
        if not frame.checksum_ok:
            return ServerFailure(api.ChecksumError, "the message's CRC32C does not match")
        if self.handle.origin is not None:
            return None
        try:
            return unpack_native(frame.metadata, frame.payload, frame.highest_sequence_id,
                                 self.connection.service.settings.unpack_limits)
        except BatchError as error:  # corrupt in transit, as a checksum error: the client fails this message
            return ServerFailure(api.ChecksumError, str(error))

    async def close(self) -> None:
        """Write what was received, answer it, then let the writer go."""
        if not self.task.done():
            await self.queue.put(_CLOSE)
            await self.task
        while not self.queue.empty():  # left unwritten (a backlog quota closed the producer): the client resends
            item = self.queue.get_nowait()
            if item is not _CLOSE:
                self.connection.publish.release(item.cost)
        service = self.connection.service
        service.release_producer(self.handle.target, self.handle.name)
        await self.connection.blocking(service.close_writer, self.handle)


class ConnectionProducers:
    """The producers of one connection, by the client's producer id: PRODUCER, SEND and CLOSE_PRODUCER."""

    def __init__(self, connection: ProducerConnection) -> None:
        self.connection = connection
        self.sessions: dict[int, ProducerSession] = {}
        self.waiting: dict[int, asyncio.Task[None]] = {}  # WaitForExclusive, until they are admitted
        # producers the server closed (fenced, or refused by a backlog quota): their SENDs still in flight are
        # dropped, not a reason to drop the connection, until the client creates the producer again
        self.closed: set[int] = set()
        self._staging: list[ProducerSession] = []  # those with SENDs staged (write_staged)

    async def open(self, request: api.CommandProducer) -> None:
        """PRODUCER: admit the producer (or put it in line), then open its partition's writer."""
        producer_id = request.producer_id
        existing = self.sessions.get(producer_id)
        if existing is not None:  # the client asks again (its first answer was late): the same producer
            self.connection.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id,
                                         producer_name=existing.handle.name,
                                         last_sequence_id=existing.handle.last_sequence_id,
                                         schema_version=existing.schema_version))
            return
        if producer_id in self.waiting:  # still in line: the client is waiting for it already
            return
        self.closed.discard(producer_id)
        service = self.connection.service
        with self.connection.answering_failures(request.request_id) as attempt:
            await self.connection.authorize(request.topic, auth.PRODUCE, f"produce to {request.topic}")
            target: Target | None = await self.connection.blocking(
                functools.partial(service.resolve, request.topic, True,
                                  replicator=replicator_origin(request.producer_name or "") is not None))
            assert target is not None  # created when missing
            schema_version = await self.connection.blocking(
                producer_schema, service.broker, target, request.schema if request.HasField("schema") else None)
            await self.connection.blocking(service.check_quota, target)
            if request.initial_subscription_name:
                await self.connection.blocking(service.create_initial_subscription, target,
                                               request.initial_subscription_name)
            claim = service.claim_producer(target, request.producer_name or None, request.producer_access_mode,
                                           lambda: self._fence(producer_id))
        if attempt.failed:
            return
        if isinstance(claim, Waiter):
            self.connection.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id,
                                         producer_name=claim.name, last_sequence_id=-1, producer_ready=False))
            task = asyncio.get_running_loop().create_task(self._wait_for_exclusive(request, target, claim,
                                                                                   schema_version))
            self.waiting[producer_id] = task
            return
        await self._admit(request, target, claim, schema_version)

    async def _wait_for_exclusive(self, request: api.CommandProducer, target: Target, waiter: Waiter,
                                  schema_version: bytes | None) -> None:
        """A WaitForExclusive producer: once the others left, it is opened and the client told again."""
        try:
            await waiter.granted
        except asyncio.CancelledError:  # the client closed it, or went away
            self.connection.service.release_producer(target, waiter.name)
            raise
        except ServerFailure as refusal:  # fenced while waiting
            self.connection.reply_error(request.request_id, refusal)
            return
        finally:
            self.waiting.pop(request.producer_id, None)
        await self._admit(request, target, waiter.name, schema_version)

    async def _admit(self, request: api.CommandProducer, target: Target, name: str,
                     schema_version: bytes | None) -> None:
        service = self.connection.service
        with self.connection.answering_failures(request.request_id) as attempt:
            try:
                handle = await self.connection.blocking(service.open_writer, target, name,
                                                        peer_address(self.connection.peer),
                                                        api.ProducerAccessMode.Name(request.producer_access_mode))
            except Exception:
                service.release_producer(target, name)
                raise
        if attempt.failed:
            return
        session = ProducerSession(self.connection, request.producer_id, handle, self.close_by_server)
        session.schema_version = schema_version
        self.sessions[request.producer_id] = session
        self.connection.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id, producer_name=name,
                                     last_sequence_id=handle.last_sequence_id, schema_version=schema_version))

    def _fence(self, producer_id: int) -> None:
        """An ExclusiveWithFencing producer took this producer's partition: close it (loop thread)."""
        session = self.sessions.get(producer_id)
        if session is not None:
            asyncio.get_running_loop().create_task(self.close_by_server(session))

    async def close_by_server(self, session: ProducerSession) -> None:
        """Close a producer from the server's side (fenced, or refused by a backlog quota): the client is told
        with CLOSE_PRODUCER, creates it again, and learns there whether it may still produce."""
        if self.sessions.get(session.producer_id) is not session:
            return
        del self.sessions[session.producer_id]
        self.closed.add(session.producer_id)
        try:
            await session.close()
        except Exception:  # (the client is told either way)
            logger.exception("%s: closing producer %s", self.connection.peer, session.handle.name)
        self.connection.send(command(Type.CLOSE_PRODUCER, producer_id=session.producer_id, request_id=NO_REQUEST))

    def send(self, request: SendFrame) -> None:
        """SEND: queue it for its producer's task, holding its cost of the publish buffer until written."""
        session = self.sessions.get(request.producer_id)
        if session is None and request.producer_id in self.closed:
            return  # sent before the client learnt that the server closed the producer: it resends them
        if session is None:
            # Java's broker closes the connection too: the client reconnects and re-creates its producers.
            logger.warning("%s: SEND for producer %d, which is not open here: closing", self.connection.peer,
                           request.producer_id)
            self.connection.close_after_this_command()
            return
        cost = send_cost(request.metadata, request.payload)
        if session.stage(request, cost):
            if len(session.staged) == 1:
                self._staging.append(session)
            return
        self.connection.publish.hold(cost)
        session.queue.put_nowait(QueuedSend(request, cost))

    def write_staged(self) -> None:
        """Write what the producers staged of the commands the connection read (ProducerSession.stage): once
        it has handled them all, or before it waits on one."""
        sessions, self._staging = self._staging, []
        for session in sessions:
            session.write_staged()

    async def close(self, request: api.CommandCloseProducer) -> None:
        """CLOSE_PRODUCER: write and answer what it sent, then let it go (or take it out of line)."""
        waiting = self.waiting.pop(request.producer_id, None)
        if waiting is not None:
            waiting.cancel()
        self.closed.discard(request.producer_id)
        session = self.sessions.pop(request.producer_id, None)
        if session is not None:
            await session.close()
        self.connection.send(command(Type.SUCCESS, request_id=request.request_id))

    async def close_all(self) -> None:
        """The connection ends: those in line leave it, each open producer's SENDs are written and answered."""
        for waiting in self.waiting.values():
            waiting.cancel()
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            try:
                await session.close()
            except Exception:  # (the others still close)
                logger.exception("%s: closing producer %s", self.connection.peer, session.handle.name)


def peer_address(peer: object) -> str:
    """A peer as `host:port` (stats' address fields)."""
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer or "")
