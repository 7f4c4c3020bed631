"""One client connection: its protocol state (connected, producers, keep-alive) on asyncio streams.

Commands are handled in the order they arrive. Each producer has a task that writes its SENDs in the order
received, up to WRITE_TRIP_SENDS per trip to the thread pool, and answers each with a SEND_RECEIPT (or
SEND_ERROR) only once it is written: receipts go out in order per producer, as the client requires.

What one client costs the server is bounded: the connection stops reading while its SENDs not yet written are
over its share of the publish buffer (publish_buffer.py), or while what it was sent waits unread past
MAX_OUTPUT_BYTES; only complete commands count as activity for the keep-alive, and a connection that has not
completed CONNECT by the first keep-alive tick is closed."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from seglog import __version__
from seglog.server import auth
from seglog.server.consumers import SUBSCRIPTION_TYPES, ConsumerSession
from seglog.server.errors import ServerFailure, server_error
from seglog.server.producers import Waiter
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import BatchError, parse_metadata, unpack
from seglog.server.protocol.frames import Frame, FrameDecoder, FrameError, Type, command, encode_command
from seglog.server.protocol.message_ids import DUPLICATE_ID, UINT64_MINUS_ONE, message_id
from seglog.server.protocol.metadata import replicator_origin, reserved_subscription
from seglog.server.publish_buffer import send_cost
from seglog.server.service import BrokerService, ProducerHandle, QuotaRefusal, Target
from seglog.subscriptions.key_shared import STICKY_HASH_SLOTS, HashRanges
from seglog.subscriptions.subscription import Subscription

logger = logging.getLogger("seglog.server")

PROTOCOL_VERSION = 19  # the highest seglog speaks; CONNECTED answers min(this, the client's)
# What was written to a client and waits unread, past which the connection stops reading its commands until
# the client reads (a client that sends commands without reading the answers): more than one consumer read
# (consumers.READ_MESSAGES) on top of the transport's high-water mark, so consuming alone never stops it.
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
# SENDs written in one trip to the thread pool, at most: their receipts go out when the trip ends, so a trip
# of every SEND waiting (thousands of unbatched ones) held the first receipt back 100 ms and more, and a
# producer with a window of messages in flight (a replicator's 1,000) waited for it with nothing to send
WRITE_TRIP_SENDS = 64
READ_SIZE = 1 << 16
T = TypeVar("T")


@dataclass
class QueuedSend:
    """A SEND waiting for its producer's next trip to the thread pool."""
    sequence_id: int
    highest_sequence_id: int
    frame: Frame
    cost: int  # what holding it costs, as the publish buffer counts it


_CLOSE = object()


class ProducerSession:
    def __init__(self, connection: Connection, producer_id: int, handle: ProducerHandle) -> None:
        self.connection = connection
        self.producer_id = producer_id
        self.handle = handle
        self.queue: asyncio.Queue[Any] = asyncio.Queue()  # (bounded in bytes by the connection's publish account)
        self.blocked: QuotaRefusal | None = None  # a backlog quota refused a send: the server closes it
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            items = [await self.queue.get()]
            while not self.queue.empty() and len(items) < WRITE_TRIP_SENDS:
                items.append(self.queue.get_nowait())
            sends = [item for item in items if item is not _CLOSE]
            if sends:
                results = await self.connection.blocking(self._write, sends)
                # (one write for all the answers: one each was a system call, and a loopback delivery, a message
                # for unbatched messages)
                self.connection.write(b"".join(self.connection.answer_to_send(self.producer_id, send, result)
                                               for send, result in zip(sends, results)))
                self.connection.publish.release(sum(send.cost for send in sends))
                await self.connection.drain()
            if self.blocked is not None:
                # As Pulsar's broker: no SEND_ERROR (the client would drop the whole connection) but the
                # producer closed; the client re-creates it, is refused with the quota's error while the quota
                # holds, and resends what was not receipted once it clears.
                logger.info("%s: closing producer %s: %s", self.connection.peer, self.handle.name, self.blocked)
                asyncio.get_running_loop().create_task(self.connection.close_producer_by_server(self))
                return
            if len(sends) != len(items):
                return

    def _write(self, sends: list[QueuedSend]) -> list[int | ServerFailure | None]:
        """In the thread pool: write each SEND as one batch; its first offset, or the failure to answer. A
        send a backlog quota refuses, and those after it, are not written and not answered (self.blocked)."""
        results: list[int | ServerFailure | None] = []
        for send in sends:
            frame = send.frame
            if not frame.checksum_ok:
                results.append(ServerFailure(api.ChecksumError, "the message's CRC32C does not match"))
                continue
            try:
                metadata = parse_metadata(frame.metadata or b"")
                if self.handle.origin is not None and metadata.HasField("marker_type"):
                    results.append(self.connection.service.marker(self.handle, metadata, frame.payload or b""))
                    continue
                messages = unpack(metadata, frame.payload or b"", send.highest_sequence_id,
                                  self.connection.service.settings.unpack_limits)
            except BatchError as error:  # corrupt in transit, as a checksum error: the client fails this message
                results.append(ServerFailure(api.ChecksumError, str(error)))
                continue
            try:
                results.append(self.connection.service.append(self.handle, messages, send.sequence_id))
            except QuotaRefusal as refusal:
                self.blocked = refusal
                return results
            except Exception as error:  # (answered to the client, which reconnects and resends)
                logger.warning("write to %s failed: %s", self.handle.target.ref, error)
                results.append(server_error(error))
        return results

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


class Connection:
    def __init__(self, service: BrokerService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 executor: Executor, *, keepalive_s: float, authority: auth.Authority | None = None) -> None:
        self.service = service
        self.authority = authority  # None or not enabled: authentication is off
        self.principal = auth.OPEN  # who the client is, from its CONNECT
        self.reader = reader
        self.writer = writer
        self.executor = executor
        self.keepalive_s = keepalive_s
        self.peer = writer.get_extra_info("peername")
        self.publish = service.publish_buffer.account()  # the bytes of its SENDs not yet written
        self.connected = False
        self.producers: dict[int, ProducerSession] = {}
        self.waiting_producers: dict[int, asyncio.Task[None]] = {}  # WaitForExclusive, until they are admitted
        # producers the server closed (fenced, or refused by a backlog quota): their SENDs still in flight are
        # dropped, not a reason to drop the connection, until the client creates the producer again
        self.closed_producers: set[int] = set()
        self.consumers: dict[int, ConsumerSession] = {}
        # readers' non-durable subscriptions between a SEEK and the reader's SUBSCRIBE that follows it
        self.parked_readers: dict[tuple[tuple[str, int], str], Subscription] = {}
        # consumers read for this connection one at a time (ConsumerSession._turn)
        self.dispatching = asyncio.Lock()
        self._received = False  # a command received since the last keep-alive tick
        self._ping_pending = False
        self._closing = False

    async def blocking(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    # lifetime

    async def serve(self) -> None:
        keepalive = asyncio.get_running_loop().create_task(self._keepalive())
        decoder = FrameDecoder(self.service.settings.max_message_size + 10 * 1024)
        try:
            while not self._closing:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    break
                for item in decoder.feed(data):
                    if isinstance(item, FrameError):
                        logger.warning("%s: closing the connection: %s", self.peer, item)
                        return
                    self._received = True  # (a command: bytes that complete none are no sign of life)
                    self._ping_pending = False
                    await self._handle(item)
                    if self._closing:
                        break
                if self.publish.over:
                    await self.publish.room()
                if self.writer.transport.get_write_buffer_size() > MAX_OUTPUT_BYTES:
                    await self.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            logger.info("%s: connection lost: %s", self.peer, error)
        finally:
            keepalive.cancel()
            await self._close_producers()
            await self._close_consumers()
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    def stop_reading(self) -> None:
        """Shutdown: take no further command; those received are still answered, then the connection closes."""
        self._closing = True
        transport = self.writer.transport
        if not transport.is_closing():
            transport.pause_reading()
        self.reader.feed_eof()

    async def _close_producers(self) -> None:
        for waiting in self.waiting_producers.values():
            waiting.cancel()
        sessions, self.producers = list(self.producers.values()), {}
        for session in sessions:
            try:
                await session.close()
            except Exception:  # (the others still close)
                logger.exception("%s: closing producer %s", self.peer, session.handle.name)

    async def _close_consumers(self) -> None:
        parked, self.parked_readers = list(self.parked_readers.values()), {}
        for subscription in parked:
            await self.blocking(subscription.close)
        sessions, self.consumers = list(self.consumers.values()), {}
        for session in sessions:
            try:
                await self._leave(session, unsubscribe=False)
            except Exception:  # (the others still close)
                logger.exception("%s: closing consumer %s", self.peer, session.name)

    async def _keepalive(self) -> None:
        """PING a silent client; close the connection if it stays silent for another interval, or if it has
        not completed CONNECT by the first tick (as Pulsar's broker does)."""
        while True:
            await asyncio.sleep(self.keepalive_s)
            if not self.connected:
                self._abort(f"no CONNECT in {self.keepalive_s}s")
                return
            if self._received:
                self._received = False
                continue
            if self._ping_pending:
                self._abort(f"no answer to PING in {self.keepalive_s}s")
                return
            self._ping_pending = True
            self.send(command(Type.PING))

    def _abort(self, reason: str) -> None:
        logger.info("%s: %s: closing", self.peer, reason)
        self.stop_reading()
        self.writer.transport.abort()

    # output

    def send(self, base: api.BaseCommand) -> None:
        if not self.writer.is_closing():
            self.writer.write(encode_command(base))

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def output_backlogged(self) -> bool:
        """Whether what was written waits in the transport past its high-water mark (drain() would wait)."""
        transport = self.writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    async def drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass

    def reply_error(self, request_id: int, failure: ServerFailure) -> None:
        self.send(command(Type.ERROR, request_id=request_id, error=failure.code, message=str(failure)))

    @staticmethod
    def answer_to_send(producer_id: int, send: QueuedSend, result: int | ServerFailure | None) -> bytes:
        """The answer to a SEND, encoded: its receipt (the offset it was written at, or None for a duplicate,
        acknowledged with id (-1, -1) as Pulsar's broker does), or its failure."""
        if isinstance(result, ServerFailure):
            return encode_command(command(Type.SEND_ERROR, producer_id=producer_id, sequence_id=send.sequence_id,
                                          error=result.code, message=str(result)))
        return encode_command(command(Type.SEND_RECEIPT, producer_id=producer_id, sequence_id=send.sequence_id,
                                      highest_sequence_id=send.highest_sequence_id,
                                      message_id=DUPLICATE_ID if result is None else message_id(result)))

    # commands

    async def _handle(self, frame: Frame) -> None:
        base = frame.command
        kind = base.type
        if not self.connected:
            if kind != Type.CONNECT or not base.HasField("connect"):
                logger.warning("%s: %s before CONNECT: closing", self.peer, Type.Name(kind))
                self._closing = True
                return
            await self._connect(base.connect)
            return
        if kind == Type.PING:
            self.send(command(Type.PONG))
        elif kind == Type.PONG:
            pass
        elif kind == Type.SEND and base.HasField("send"):
            await self._send(base.send, frame)
        elif kind == Type.PRODUCER and base.HasField("producer"):
            await self._producer(base.producer)
        elif kind == Type.CLOSE_PRODUCER and base.HasField("close_producer"):
            await self._close_producer(base.close_producer)
        elif kind == Type.PARTITIONED_METADATA and base.HasField("partition_metadata"):
            await self._partitioned_metadata(base.partition_metadata)
        elif kind == Type.LOOKUP and base.HasField("lookup_topic"):
            await self._lookup(base.lookup_topic)
        elif kind == Type.SUBSCRIBE and base.HasField("subscribe"):
            await self._subscribe(base.subscribe)
        elif kind == Type.FLOW and base.HasField("flow"):
            await self._flow(base.flow)
        elif kind == Type.ACK and base.HasField("ack"):
            await self._ack(base.ack)
        elif kind == Type.REDELIVER_UNACKNOWLEDGED_MESSAGES and base.HasField("redeliver_unacknowledged_messages"):
            await self._redeliver(base.redeliver_unacknowledged_messages)
        elif kind == Type.CLOSE_CONSUMER and base.HasField("close_consumer"):
            await self._close_consumer(base.close_consumer)
        elif kind == Type.UNSUBSCRIBE and base.HasField("unsubscribe"):
            await self._unsubscribe(base.unsubscribe)
        elif kind == Type.GET_LAST_MESSAGE_ID and base.HasField("get_last_message_id"):
            await self._get_last_message_id(base.get_last_message_id)
        elif kind == Type.SEEK and base.HasField("seek"):
            await self._seek(base.seek)
        elif kind == Type.GET_TOPICS_OF_NAMESPACE and base.HasField("get_topics_of_namespace"):
            await self._topics_of_namespace(base.get_topics_of_namespace)
        elif kind == Type.CONNECT:
            logger.warning("%s: a second CONNECT: closing", self.peer)
            self._closing = True
        else:
            logger.warning("%s: %s is not supported: closing", self.peer, Type.Name(kind))
            self._closing = True

    async def _connect(self, connect: api.CommandConnect) -> None:
        version = min(PROTOCOL_VERSION, connect.protocol_version)
        self.connected = True
        if self.authority is not None and self.authority.enabled:
            # Credentials that authenticate no one are refused at the first request, not here: the client treats
            # an answer other than CONNECTED as a lost connection and retries until its timeout (docs/SERVER.md).
            # In the thread pool: a basic password is hashed. The certificate is the one the TLS handshake
            # verified (None on a plain port, or when the client sent none).
            self.principal = await self.blocking(self.authority.authenticate, connect.auth_method_name,
                                                 connect.auth_data, self.writer.get_extra_info("peercert"))
        self.send(command(Type.CONNECTED, server_version=f"seglog {__version__}", protocol_version=version,
                          max_message_size=self.service.settings.max_message_size))

    async def _authorize(self, name: str, actions: tuple[str, ...], doing: str, *, namespace: bool = False) -> None:
        """Refuse (ServerFailure AuthenticationError or AuthorizationError, which the client raises at once)
        what this connection's role may not do on topic or namespace `name` (server/auth.py)."""
        if self.authority is not None and self.authority.enabled:
            check = self.authority.authorize_namespace if namespace else self.authority.authorize_topic
            await self.blocking(check, self.principal, name, actions, doing)

    async def _partitioned_metadata(self, request: api.CommandPartitionedTopicMetadata) -> None:
        response = api.CommandPartitionedTopicMetadataResponse
        try:
            await self._authorize(request.topic, auth.LOOKUP, f"look up {request.topic}")
            partitions = await self.blocking(self.service.partitions, request.topic,
                                             request.metadata_auto_creation_enabled)
        except Exception as error:  # (answered)
            failure = server_error(error)
            self.send(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=request.request_id,
                              response=response.Failed, error=failure.code, message=str(failure)))
            return
        self.send(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=request.request_id,
                          response=response.Success, partitions=partitions))

    async def _lookup(self, request: api.CommandLookupTopic) -> None:
        response = api.CommandLookupTopicResponse
        try:
            await self._authorize(request.topic, auth.LOOKUP, f"look up {request.topic}")
            if request.advertised_listener_name:
                # seglog serve has no named listeners; the client turns exactly this message into ConnectError
                raise ServerFailure(api.ServiceNotReady, f"the broker do not have {request.advertised_listener_name} "
                                                         "listener (seglog serve has no named listeners)")
            await self.blocking(self.service.resolve, request.topic, False)
        except Exception as error:  # (answered)
            failure = server_error(error)
            self.send(command(Type.LOOKUP_RESPONSE, request_id=request.request_id, response=response.Failed,
                              error=failure.code, message=str(failure)))
            return
        self.send(command(Type.LOOKUP_RESPONSE, request_id=request.request_id, response=response.Connect,
                          broker_service_url=self.service.settings.broker_url,
                          broker_service_url_tls=self.service.settings.broker_url_tls or None, authoritative=True))

    async def _topics_of_namespace(self, request: api.CommandGetTopicsOfNamespace) -> None:
        """The topics a pattern consumer chooses from: all of them (the client applies its pattern itself);
        none for non-persistent topics, which seglog does not have."""
        try:
            await self._authorize(request.namespace, auth.LOOKUP, f"list the topics of {request.namespace}",
                                  namespace=True)
            topics: list[str] = []
            if request.mode != api.CommandGetTopicsOfNamespace.NON_PERSISTENT:
                topics = await self.blocking(self.service.topics_of_namespace, request.namespace)
        except Exception as error:  # (answered)
            self.reply_error(request.request_id, server_error(error))
            return
        self.send(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=request.request_id, topics=topics,
                          filtered=False, changed=True))

    async def _producer(self, request: api.CommandProducer) -> None:
        producer_id = request.producer_id
        existing = self.producers.get(producer_id)
        if existing is not None:  # the client asks again (its first answer was late): the same producer
            self.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id,
                              producer_name=existing.handle.name,
                              last_sequence_id=existing.handle.last_sequence_id))
            return
        if producer_id in self.waiting_producers:  # still in line: the client is waiting for it already
            return
        self.closed_producers.discard(producer_id)
        service = self.service
        try:
            await self._authorize(request.topic, auth.PRODUCE, f"produce to {request.topic}")
            _check_producer_features(request)
            target: Target | None = await self.blocking(
                functools.partial(service.resolve, request.topic, True,
                                  replicator=replicator_origin(request.producer_name or "") is not None))
            assert target is not None  # created when missing
            await self.blocking(service.check_quota, target)
            claim = service.claim_producer(target, request.producer_name or None, request.producer_access_mode,
                                           lambda: self._fence_producer(producer_id))
        except Exception as error:  # (answered)
            self.reply_error(request.request_id, server_error(error))
            return
        if isinstance(claim, Waiter):
            self.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id, producer_name=claim.name,
                              last_sequence_id=-1, producer_ready=False))
            task = asyncio.get_running_loop().create_task(self._wait_for_exclusive(request, target, claim))
            self.waiting_producers[producer_id] = task
            return
        await self._open_producer(request, target, claim)

    async def _wait_for_exclusive(self, request: api.CommandProducer, target: Target, waiter: Waiter) -> None:
        """A WaitForExclusive producer: once the others left, it is opened and the client told again."""
        try:
            await waiter.granted
        except asyncio.CancelledError:  # the client closed it, or went away
            self.service.release_producer(target, waiter.name)
            raise
        except ServerFailure as refusal:  # fenced while waiting
            self.reply_error(request.request_id, refusal)
            return
        finally:
            self.waiting_producers.pop(request.producer_id, None)
        await self._open_producer(request, target, waiter.name)

    async def _open_producer(self, request: api.CommandProducer, target: Target, name: str) -> None:
        try:
            handle = await self.blocking(self.service.open_writer, target, name, _address(self.peer))
        except Exception as error:  # (answered)
            self.service.release_producer(target, name)
            self.reply_error(request.request_id, server_error(error))
            return
        self.producers[request.producer_id] = ProducerSession(self, request.producer_id, handle)
        self.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id, producer_name=name,
                          last_sequence_id=handle.last_sequence_id))

    def _fence_producer(self, producer_id: int) -> None:
        """An ExclusiveWithFencing producer took this producer's partition: close it (loop thread)."""
        session = self.producers.get(producer_id)
        if session is not None:
            asyncio.get_running_loop().create_task(self.close_producer_by_server(session))

    async def close_producer_by_server(self, session: ProducerSession) -> None:
        """Close a producer from the server's side (fenced, or refused by a backlog quota): the client is told
        with CLOSE_PRODUCER, creates it again, and learns there whether it may still produce."""
        if self.producers.get(session.producer_id) is not session:
            return
        del self.producers[session.producer_id]
        self.closed_producers.add(session.producer_id)
        try:
            await session.close()
        except Exception:  # (the client is told either way)
            logger.exception("%s: closing producer %s", self.peer, session.handle.name)
        self.send(command(Type.CLOSE_PRODUCER, producer_id=session.producer_id, request_id=_NO_REQUEST))

    async def _send(self, request: api.CommandSend, frame: Frame) -> None:
        session = self.producers.get(request.producer_id)
        if session is None and request.producer_id in self.closed_producers:
            return  # sent before the client learnt that the server closed the producer: it resends them
        if session is None:
            # Java's broker closes the connection too: the client reconnects and re-creates its producers.
            logger.warning("%s: SEND for producer %d, which is not open here: closing", self.peer,
                           request.producer_id)
            self._closing = True
            return
        cost = send_cost(frame.metadata, frame.payload)
        self.publish.hold(cost)
        session.queue.put_nowait(QueuedSend(request.sequence_id, request.highest_sequence_id, frame, cost))

    async def _close_producer(self, request: api.CommandCloseProducer) -> None:
        waiting = self.waiting_producers.pop(request.producer_id, None)
        if waiting is not None:
            waiting.cancel()
        self.closed_producers.discard(request.producer_id)
        session = self.producers.pop(request.producer_id, None)
        if session is not None:
            await session.close()
        self.send(command(Type.SUCCESS, request_id=request.request_id))


    # consumers

    async def _subscribe(self, request: api.CommandSubscribe) -> None:
        if request.consumer_id in self.consumers:  # the client asks again (its first answer was late)
            self.send(command(Type.SUCCESS, request_id=request.request_id))
            return
        service = self.service
        try:
            await self._authorize(request.topic, auth.CONSUME, f"consume from {request.topic}")
            _check_subscribe_features(request)
            target = await self.blocking(service.resolve, request.topic, request.force_topic_creation)
            if target is None:
                raise ServerFailure(api.TopicNotFound, f"topic {request.topic} does not exist")
            initial = "earliest" if request.initial_position == api.CommandSubscribe.Earliest else "latest"
            session = ConsumerSession(self, request.consumer_id, target,
                                      request.consumer_name or f"{service.settings.cluster}-consumer-"
                                                               f"{request.consumer_id}",
                                      _sticky_ranges(request))
            async with service.subscribing:
                parked = self.parked_readers.pop((target.key, request.subscription), None)
                if request.durable:
                    subscription = await self.blocking(
                        lambda: service.subscribe(target, request.subscription, SUBSCRIPTION_TYPES[request.sub_type],
                                                  initial, session.state,
                                                  replicated=request.replicate_subscription_state))
                elif parked is not None:  # the reader comes back after a seek: where the seek put it
                    await self.blocking(parked.attach, session.state, "exclusive")
                    subscription = parked
                else:
                    start = request.start_message_id if request.HasField("start_message_id") else None
                    subscription = await self.blocking(service.read, target, request.subscription, start,
                                                       session.state)
        except Exception as error:  # (answered)
            self.reply_error(request.request_id, server_error(error))
            return
        self.consumers[request.consumer_id] = session
        service.watch(subscription, session.wake)
        session.start(subscription)
        self.send(command(Type.SUCCESS, request_id=request.request_id))

    def _consumer(self, consumer_id: int, request_id: int) -> ConsumerSession | None:
        """The consumer a request names, or None after answering ConsumerNotFound."""
        session = self.consumers.get(consumer_id)
        if session is None:
            self.reply_error(request_id, consumer_not_found(consumer_id))
        return session

    async def _flow(self, request: api.CommandFlow) -> None:
        session = self.consumers.get(request.consumer_id)
        if session is not None:
            await self.blocking(session.flow, request.message_permits)
            session.wake.set()

    async def _ack(self, request: api.CommandAck) -> None:
        session = self.consumers.get(request.consumer_id)
        failure = None
        if session is None:
            failure = consumer_not_found(request.consumer_id)
        else:
            try:
                await self.blocking(session.ack, request.ack_type == api.CommandAck.Cumulative,
                                    list(request.message_id))
            except Exception as error:  # (answered when the client asks for receipts; logged)
                logger.warning("%s: ack of consumer %s failed: %s", self.peer, session.name, error)
                failure = server_error(error)
            assert session.subscription is not None
            self.service.wake(session.subscription)
        if request.HasField("request_id"):
            fields = {} if failure is None else {"error": failure.code, "message": str(failure)}
            self.send(command(Type.ACK_RESPONSE, consumer_id=request.consumer_id, request_id=request.request_id,
                              **fields))

    async def _redeliver(self, request: api.CommandRedeliverUnacknowledgedMessages) -> None:
        session = self.consumers.get(request.consumer_id)
        if session is None:
            return
        await self.blocking(session.redeliver, list(request.message_ids))
        assert session.subscription is not None
        self.service.wake(session.subscription)

    async def _get_last_message_id(self, request: api.CommandGetLastMessageId) -> None:
        session = self._consumer(request.consumer_id, request.request_id)
        if session is None:
            return
        try:
            last, mark_delete = await self.blocking(session.last_message_id)
        except Exception as error:  # (answered)
            self.reply_error(request.request_id, server_error(error))
            return
        self.send(command(Type.GET_LAST_MESSAGE_ID_RESPONSE, request_id=request.request_id, last_message_id=last,
                          consumer_mark_delete_position=mark_delete))

    async def _seek(self, request: api.CommandSeek) -> None:
        """Reset the subscription's cursor to a message id or a publish time (everything before it
        acknowledged, from it on not), as Subscription.seek does in-process. As Pulsar's broker does, the
        consumer is detached and closed with CLOSE_CONSUMER before SUCCESS: the client completes the seek once
        it has subscribed again (only then does it forget the start of an earlier seek by message id), and
        the grouped acks it flushes meanwhile (from before the seek) name a consumer no longer open here, so
        they are dropped instead of acking the rewound cursor. A reader's non-durable subscription is kept
        for the reader's SUBSCRIBE that follows (it may name no start, after a seek by time)."""
        session = self._consumer(request.consumer_id, request.request_id)
        if session is None:
            return
        subscription = session.subscription
        assert subscription is not None
        service = self.service
        try:
            by_time = request.HasField("message_publish_time")
            if not by_time and not request.HasField("message_id"):
                raise ServerFailure(api.NotAllowedError, "SEEK names neither a message id nor a publish time")
            offset = await self.blocking(service.seek_offset, session.target,
                                         None if by_time else request.message_id,
                                         request.message_publish_time if by_time else None)
        except Exception as error:  # (answered)
            self.reply_error(request.request_id, server_error(error))
            return
        del self.consumers[request.consumer_id]
        await session.stop()
        service.unwatch(subscription, session.wake)
        try:
            async with service.subscribing:
                # seek while still attached (the subscription stays open), then leave: what the consumer held
                # was forgotten by the reset, so nothing of it goes to redelivery
                await self.blocking(service.seek, subscription, session.target.partition, offset)
                if subscription.durable:
                    await self.blocking(lambda: service.leave(subscription, session.state, unsubscribe=False))
                else:
                    await self.blocking(subscription.detach, session.state)
                    self.parked_readers[(session.target.key, subscription.name)] = subscription
        except Exception as error:  # (answered; the client subscribes again after CLOSE_CONSUMER)
            failure: ServerFailure | None = server_error(error)
        else:
            failure = None
        service.wake(subscription)
        self.send(command(Type.CLOSE_CONSUMER, consumer_id=session.consumer_id, request_id=_NO_REQUEST))
        if failure is None:
            self.send(command(Type.SUCCESS, request_id=request.request_id))
        else:
            self.reply_error(request.request_id, failure)

    async def _close_consumer(self, request: api.CommandCloseConsumer) -> None:
        session = self.consumers.pop(request.consumer_id, None)
        if session is not None:
            try:
                await self._leave(session, unsubscribe=False)
            except Exception as error:  # (answered)
                self.reply_error(request.request_id, server_error(error))
                return
        self.send(command(Type.SUCCESS, request_id=request.request_id))

    async def _unsubscribe(self, request: api.CommandUnsubscribe) -> None:
        session = self._consumer(request.consumer_id, request.request_id)
        if session is None:
            return
        assert session.subscription is not None
        others = sum(1 for c in session.subscription.consumers if c is not session.state and c.overlaps(session.state))
        if others:
            self.reply_error(request.request_id, ServerFailure(
                api.ConsumerBusy, f"subscription {session.subscription.name!r} has {others} other consumer(s)"))
            return
        del self.consumers[request.consumer_id]
        try:
            await self._leave(session, unsubscribe=True)
        except Exception as error:  # (answered)
            self.reply_error(request.request_id, server_error(error))
            return
        self.send(command(Type.SUCCESS, request_id=request.request_id))

    async def _leave(self, session: ConsumerSession, *, unsubscribe: bool) -> None:
        """Stop a consumer's deliveries, then detach it from its subscription."""
        await session.stop()
        subscription = session.subscription
        if subscription is None:
            return
        self.service.unwatch(subscription, session.wake)
        async with self.service.subscribing:
            await self.blocking(lambda: self.service.leave(subscription, session.state, unsubscribe=unsubscribe))
        self.service.wake(subscription)

    async def close_consumer_by_server(self, session: ConsumerSession) -> None:
        """Close a consumer from the server's side (its topic was deleted, or it was unsubscribed by
        force): the client is told with CLOSE_CONSUMER, and subscribes again if it still can."""
        if self.consumers.get(session.consumer_id) is not session:
            return
        del self.consumers[session.consumer_id]
        try:
            await self._leave(session, unsubscribe=False)
        except Exception:  # (the client is told either way)
            logger.exception("%s: closing consumer %s", self.peer, session.name)
        self.send(command(Type.CLOSE_CONSUMER, consumer_id=session.consumer_id, request_id=_NO_REQUEST))


_SCHEMA_TYPES = (api.Schema.Type.Value("None"), api.Schema.Type.Value("String"))


def _check_producer_features(request: api.CommandProducer) -> None:
    """Refuse at PRODUCER time what seglog does not do yet, where the client reports it at once."""
    if request.encrypted:
        raise ServerFailure(api.NotAllowedError, "end-to-end encryption is not supported by seglog")
    _check_schema(request)


_NO_REQUEST = UINT64_MINUS_ONE  # the request id of a command the server starts (-1, as Java's broker sends)


def _check_subscribe_features(request: api.CommandSubscribe) -> None:
    """Refuse at SUBSCRIBE time what this server does not do yet, where the client reports it at once."""
    _check_schema(request)
    reserved = reserved_subscription(request.subscription) if request.durable else None
    if reserved is not None:
        raise ServerFailure(api.NotAllowedError, f"subscription {request.subscription!r}: {reserved}, which "
                                                 "clients may not consume (as in Pulsar)")


def _address(peer: object) -> str:
    """A peer as `host:port` (stats' address fields)."""
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer or "")


def _check_schema(request: api.CommandProducer | api.CommandSubscribe) -> None:
    if request.HasField("schema") and request.schema.type not in _SCHEMA_TYPES:
        raise ServerFailure(api.IncompatibleSchema, f"schema type {api.Schema.Type.Name(request.schema.type)} "
                                                    "is not supported by seglog (bytes and string only)")


def _sticky_ranges(request: api.CommandSubscribe) -> HashRanges | None:
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


def consumer_not_found(consumer_id: int) -> ServerFailure:
    return ServerFailure(api.ConsumerNotFound, f"consumer {consumer_id} is not open here")
