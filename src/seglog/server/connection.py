"""One client connection: its protocol state (connected, keep-alive, consumers) on asyncio streams.

Commands are handled in the order they arrive, each by the handler its type names (Connection._handlers); a
connection's producers and their SENDs are producers.py's, its consumers' deliveries consumers.py's. A
request refused is answered with Pulsar's ERROR (answering_failures), or with the failure its own response
carries.

What one client costs the server is bounded: the connection stops reading while its SENDs not yet written are
over its share of the publish buffer (publish_buffer.py), or while what it was sent waits unread past
MAX_OUTPUT_BYTES; only complete commands count as activity for the keep-alive, and a connection that has not
completed CONNECT by the first keep-alive tick is closed."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from seglog._core._pulsar_send import SendFrame
from seglog._core._pulsar_wire import AckCommand, FlowCommand
from seglog.names import is_non_persistent
from seglog.server import auth
from seglog.server.consumers import SUBSCRIPTION_TYPES, AckedMessageId, ConsumerSession, sticky_ranges
from seglog.server.errors import Attempt, ServerFailure, answering_failures, server_error
from seglog.server.features import check_subscribe_features
from seglog.server.inbound import Inbox
from seglog.server.non_persistent_clients import NonPersistentClients
from seglog.server.producers import ConnectionProducers
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import (
    NO_REQUEST,
    Frame,
    FrameDecoder,
    FrameError,
    Type,
    command,
    encode_command,
    frame_of,
    send_of,
    sub_command,
)
from seglog.server.schemas import answer_get_or_create_schema, answer_get_schema, consumer_schema
from seglog.server.service import BrokerService
from seglog.subscriptions.delivery import READ_COMPACTED_REFUSED
from seglog.subscriptions.subscription import Subscription
from seglog.version import __version__

logger = logging.getLogger("seglog.server")

PROTOCOL_VERSION = 19  # the highest seglog speaks; CONNECTED answers min(this, the client's)
# What was written to a client and waits unread, past which the connection stops reading its commands until
# the client reads (a client that sends commands without reading the answers): more than one consumer read
# (consumers.READ_MESSAGES) on top of the transport's high-water mark, so consuming alone never stops it.
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
READ_SIZE = 1 << 18
# received bytes waiting to be read past twice this stop the transport's reading until they are down to it
# (Inbox; asyncio's StreamReader default)
INBOX_LIMIT = 64 * 1024
# PING and PONG are handled whether or not they carry their (empty) sub-command
KEEPALIVE = (Type.PING, Type.PONG)
T = TypeVar("T")


class Connection:
    def __init__(self, service: BrokerService, reader: Inbox, writer: asyncio.StreamWriter,
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
        self.producers = ConnectionProducers(self)
        self.consumers: dict[int, ConsumerSession] = {}
        self.non_persistent = NonPersistentClients(self)  # its producers and consumers of non-persistent topics
        # readers' non-durable subscriptions between a SEEK and the reader's SUBSCRIBE that follows it
        self.parked_readers: dict[tuple[tuple[str, int], str], Subscription] = {}
        # consumers read for this connection one at a time (ConsumerSession._turn)
        self.dispatching = asyncio.Lock()
        self._received = False  # a command received since the last keep-alive tick
        self._ping_pending = False
        self._closing = False
        # What the commands of one read answered, while serve() handles them without a pause: written in one
        # go afterwards (_answer_read), since each write is a system call and a loopback delivery
        self._corked: list[bytes] | None = None
        # each command type's handler, given the command's sub-command (SEND, the hot path, is handled first)
        self._handlers: dict[int, Callable[[Any], Awaitable[None]]] = {
            Type.PING: self._ping, Type.PONG: self._pong,
            Type.PRODUCER: self.producers.open, Type.CLOSE_PRODUCER: self.producers.close,
            Type.PARTITIONED_METADATA: self._partitioned_metadata, Type.LOOKUP: self._lookup,
            Type.SUBSCRIBE: self._subscribe, Type.FLOW: self._flow, Type.ACK: self._ack,
            Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._redeliver, Type.CLOSE_CONSUMER: self._close_consumer,
            Type.UNSUBSCRIBE: self._unsubscribe, Type.GET_LAST_MESSAGE_ID: self._get_last_message_id,
            Type.SEEK: self._seek, Type.GET_TOPICS_OF_NAMESPACE: self._topics_of_namespace,
            Type.GET_SCHEMA: functools.partial(answer_get_schema, self),
            Type.GET_OR_CREATE_SCHEMA: functools.partial(answer_get_or_create_schema, self),
        }

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
                self._corked = []
                for item in decoder.feed_with_sends(data):
                    if isinstance(item, FrameError):
                        logger.warning("%s: closing the connection: %s", self.peer, item)
                        return
                    self._received = True  # (a command: bytes that complete none are no sign of life)
                    self._ping_pending = False
                    if isinstance(item, SendFrame) and self.connected:  # (the hot path: no coroutine)
                        self._send(item)
                    elif not (self.connected and self._at_once(item)):
                        self._answer_read()  # (before the handler waits, and other tasks run meanwhile)
                        await self._handle(item if isinstance(item, Frame | SendFrame) else frame_of(item))
                        self._corked = []
                    if self._closing:
                        break
                self._answer_read()
                if self.publish.over:
                    await self.publish.room()
                if self.writer.transport.get_write_buffer_size() > MAX_OUTPUT_BYTES:
                    await self.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            logger.info("%s: connection lost: %s", self.peer, error)
        finally:
            self._answer_read()
            keepalive.cancel()
            await self.producers.close_all()
            await self._close_consumers()
            self.non_persistent.close_all()
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    def stop_reading(self) -> None:
        """Shutdown: take no further command; those received are still answered, then the connection closes."""
        self._closing = True
        transport = self.writer.transport  # (typed as the writing half; it is the socket's whole Transport)
        if not transport.is_closing() and isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()
        self.reader.feed_eof()

    def close_after_this_command(self) -> None:
        """A protocol error: take no further command (Java's broker closes the connection too)."""
        self._closing = True

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
        self.write(encode_command(base))

    def write(self, data: bytes) -> None:
        if self._corked is not None:
            self._corked.append(data)
        elif not self.writer.is_closing():
            self.writer.write(data)

    def _answer_read(self) -> None:
        """Write the SENDs the producers staged of the commands read (ConnectionProducers.write_staged), then
        the answers held back meanwhile (`_corked`), in one write."""
        self.producers.write_staged()
        corked, self._corked = self._corked, None
        if corked:
            self.write(b"".join(corked))

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

    def answering_failures(self, request_id: int) -> AbstractContextManager[Attempt]:
        """Handle request `request_id` in the `with` block: an exception there is answered with ERROR."""
        return answering_failures(lambda failure: self.reply_error(request_id, failure))

    # commands

    def _send(self, send: SendFrame) -> None:
        if not self.non_persistent.send(send):
            self.producers.send(send)

    async def _handle(self, frame: Frame | SendFrame) -> None:
        if isinstance(frame, SendFrame):  # (before CONNECT)
            logger.warning("%s: SEND before CONNECT: closing", self.peer)
            self._closing = True
            return
        base = frame.command
        kind = base.type
        if not self.connected:
            if kind != Type.CONNECT or not base.HasField("connect"):
                logger.warning("%s: %s before CONNECT: closing", self.peer, Type.Name(kind))
                self._closing = True
                return
            await self._connect(base.connect)
            return
        if kind == Type.SEND and base.HasField("send"):  # (one with fields cut_sends leaves to frames.py)
            self._send(send_of(frame))
            return
        handler = self._handlers.get(kind)
        request = sub_command(base)
        if request is not None and self.non_persistent.claims(kind, request):
            await self.non_persistent.handle(kind, request)
        elif handler is not None and (request is not None or kind in KEEPALIVE):
            await handler(request)
        elif kind == Type.CONNECT:
            logger.warning("%s: a second CONNECT: closing", self.peer)
            self._closing = True
        else:
            logger.warning("%s: %s is not supported: closing", self.peer, Type.Name(kind))
            self._closing = True

    async def _ping(self, _request: api.CommandPing | None) -> None:
        self.send(command(Type.PONG))

    async def _pong(self, _request: api.CommandPong | None) -> None:
        pass  # (a sign of life, as every command is: serve() noted it)

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

    async def authorize(self, name: str, actions: tuple[str, ...], doing: str, *, namespace: bool = False) -> None:
        """Refuse (ServerFailure AuthenticationError or AuthorizationError, which the client raises at once)
        what this connection's role may not do on topic or namespace `name` (server/auth.py)."""
        if self.authority is not None and self.authority.enabled:
            check = self.authority.authorize_namespace if namespace else self.authority.authorize_topic
            await self.blocking(check, self.principal, name, actions, doing)

    async def _partitioned_metadata(self, request: api.CommandPartitionedTopicMetadata) -> None:
        response = api.CommandPartitionedTopicMetadataResponse
        with answering_failures(lambda failure: self.send(command(
                Type.PARTITIONED_METADATA_RESPONSE, request_id=request.request_id, response=response.Failed,
                error=failure.code, message=str(failure)))) as attempt:
            await self.authorize(request.topic, auth.LOOKUP, f"look up {request.topic}")
            if is_non_persistent(request.topic):
                partitions = await self.non_persistent.partitions(request.topic, request.metadata_auto_creation_enabled)
            else:
                partitions = await self.blocking(self.service.partitions, request.topic,
                                                 request.metadata_auto_creation_enabled)
        if attempt.failed:
            return
        self.send(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=request.request_id,
                          response=response.Success, partitions=partitions))

    async def _lookup(self, request: api.CommandLookupTopic) -> None:
        response = api.CommandLookupTopicResponse
        with answering_failures(lambda failure: self.send(command(
                Type.LOOKUP_RESPONSE, request_id=request.request_id, response=response.Failed, error=failure.code,
                message=str(failure)))) as attempt:
            await self.authorize(request.topic, auth.LOOKUP, f"look up {request.topic}")
            if request.advertised_listener_name:
                # seglog serve has no named listeners; the client turns exactly this message into ConnectError
                raise ServerFailure(api.ServiceNotReady, f"the broker do not have {request.advertised_listener_name} "
                                                         "listener (seglog serve has no named listeners)")
            if is_non_persistent(request.topic):
                await self.non_persistent.look_up(request.topic)
            else:
                await self.blocking(self.service.resolve, request.topic, False)
        if attempt.failed:
            return
        self.send(command(Type.LOOKUP_RESPONSE, request_id=request.request_id, response=response.Connect,
                          broker_service_url=self.service.settings.broker_url,
                          broker_service_url_tls=self.service.settings.broker_url_tls or None, authoritative=True))

    async def _topics_of_namespace(self, request: api.CommandGetTopicsOfNamespace) -> None:
        """The topics a pattern consumer chooses from: all of them in the mode it asks (persistent, non-persistent
        or all; the client applies its pattern itself)."""
        modes = api.CommandGetTopicsOfNamespace
        with self.answering_failures(request.request_id) as attempt:
            await self.authorize(request.namespace, auth.LOOKUP, f"list the topics of {request.namespace}",
                                 namespace=True)
            persistent = await self.blocking(self.service.topics_of_namespace, request.namespace)  # (or TopicNotFound)
            topics = [] if request.mode == modes.NON_PERSISTENT else persistent
            if request.mode != modes.PERSISTENT:
                topics += [topic.name for topic in self.service.non_persistent.topics_of(request.namespace)]
        if attempt.failed:
            return
        self.send(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=request.request_id, topics=topics,
                          filtered=False, changed=True))

    # consumers

    async def _subscribe(self, request: api.CommandSubscribe) -> None:
        if request.consumer_id in self.consumers:  # the client asks again (its first answer was late)
            self.send(command(Type.SUCCESS, request_id=request.request_id))
            return
        service = self.service
        with self.answering_failures(request.request_id) as attempt:
            await self.authorize(request.topic, auth.CONSUME, f"consume from {request.topic}")
            check_subscribe_features(request)
            if request.read_compacted and request.sub_type not in (api.CommandSubscribe.Exclusive,
                                                                   api.CommandSubscribe.Failover):
                raise ServerFailure(api.NotAllowedError, READ_COMPACTED_REFUSED)
            target = await self.blocking(service.resolve, request.topic, request.force_topic_creation)
            if target is None:
                raise ServerFailure(api.TopicNotFound, f"topic {request.topic} does not exist")
            if request.HasField("schema"):
                await self.blocking(consumer_schema, service.broker, target, request.schema)
            initial = "earliest" if request.initial_position == api.CommandSubscribe.Earliest else "latest"
            session = ConsumerSession(self, request.consumer_id, target,
                                      request.consumer_name or f"{service.settings.cluster}-consumer-"
                                                               f"{request.consumer_id}",
                                      sticky_ranges(request))
            session.state.read_compacted = request.read_compacted
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
        if attempt.failed:
            return
        self.consumers[request.consumer_id] = session
        service.watch(subscription, session.subscription_changed)
        session.start(subscription)
        self.send(command(Type.SUCCESS, request_id=request.request_id))

    def _consumer(self, consumer_id: int, request_id: int) -> ConsumerSession | None:
        """The consumer a request names, or None after answering ConsumerNotFound."""
        session = self.consumers.get(consumer_id)
        if session is None:
            self.reply_error(request_id, consumer_not_found(consumer_id))
        return session

    def _at_once(self, item: Frame | SendFrame | FlowCommand | AckCommand) -> bool:
        """A consumer's FLOW or ACK, which it sends all along (read natively, or by protobuf when it has
        fields the native reader leaves to it), handled without a coroutine when its subscription is free at
        this moment, as _unless_held first tries: whether it was. _handle takes it otherwise (another thread
        holds the subscription, a consumer of a non-persistent topic or of none), and every other command: a
        coroutine a command was a third of what FLOW and ACK cost."""
        request: api.CommandFlow | api.CommandAck | FlowCommand | AckCommand
        if isinstance(item, FlowCommand | AckCommand):
            request = item
        elif isinstance(item, Frame) and item.command.type == Type.FLOW and item.command.HasField("flow"):
            request = item.command.flow
        elif isinstance(item, Frame) and item.command.type == Type.ACK and item.command.HasField("ack"):
            request = item.command.ack
        else:
            return False
        flow = isinstance(request, FlowCommand | api.CommandFlow)
        session = self.consumers.get(request.consumer_id)
        if session is None or self.non_persistent.claims(Type.FLOW if flow else Type.ACK, request):
            return False
        if isinstance(request, FlowCommand | api.CommandFlow):
            self._answer_read()  # (what was read before goes out first, as for _handle: deliver_now bounds the backlog)
            try:
                if not session.flow(request.message_permits, wait=False):
                    return False
                self._read_after_flow(session)
            finally:
                self._corked = []
            return True
        try:
            if not session.ack(*_ack_arguments(request), wait=False):
                return False
        except Exception as error:
            self._acked(session, request, error)
        else:
            self._acked(session, request, None)
        return True

    async def _flow(self, request: api.CommandFlow) -> None:
        session = self.consumers.get(request.consumer_id)
        if session is not None:
            await self._unless_held(session.flow, request.message_permits)
            self._read_after_flow(session)

    def _read_after_flow(self, session: ConsumerSession) -> None:
        """A read for the consumer at once (deliver_now); its task reads what that read did not."""
        if not session.deliver_now() or session.has_permits:
            session.wake.set()

    async def _unless_held(self, call: Callable[..., bool], *args: Any) -> None:
        """`call(*args, wait=False)` on the loop, which does it if the subscription is free now; if another thread
        holds it, `call(*args)` in the thread pool, behind that thread. A trip to the pool cost a consumer more
        than its FLOWs and ACKs themselves: half of its busy samples."""
        if not call(*args, wait=False):
            await self.blocking(call, *args)

    async def _ack(self, request: api.CommandAck) -> None:
        session = self.consumers.get(request.consumer_id)
        if session is None:
            self._answer_ack(request, consumer_not_found(request.consumer_id))
            return
        try:
            await self._unless_held(session.ack, *_ack_arguments(request))
        except Exception as error:
            self._acked(session, request, error)
        else:
            self._acked(session, request, None)

    def _acked(self, session: ConsumerSession, request: api.CommandAck | AckCommand, error: Exception | None) -> None:
        """After an ACK, or its `error` (logged, and answered when the client asks for receipts): the
        subscription's consumers are told of the change, the client answered."""
        failure = None
        if error is not None:
            logger.warning("%s: ack of consumer %s failed: %s", self.peer, session.name, error)
            failure = server_error(error)
        assert session.subscription is not None
        self.service.wake(session.subscription)
        self._answer_ack(request, failure)

    def _answer_ack(self, request: api.CommandAck | AckCommand, failure: ServerFailure | None) -> None:
        request_id = request.request_id if isinstance(request, AckCommand) or request.HasField("request_id") else None
        if request_id is not None:
            fields = {} if failure is None else {"error": failure.code, "message": str(failure)}
            self.send(command(Type.ACK_RESPONSE, consumer_id=request.consumer_id, request_id=request_id, **fields))

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
        with self.answering_failures(request.request_id) as attempt:
            last, mark_delete = await self.blocking(session.last_message_id)
        if attempt.failed:
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
        with self.answering_failures(request.request_id) as attempt:
            by_time = request.HasField("message_publish_time")
            if not by_time and not request.HasField("message_id"):
                raise ServerFailure(api.NotAllowedError, "SEEK names neither a message id nor a publish time")
            offset = await self.blocking(service.seek_offset, session.target,
                                         None if by_time else request.message_id,
                                         request.message_publish_time if by_time else None)
        if attempt.failed:
            return
        del self.consumers[request.consumer_id]
        await session.stop()
        service.unwatch(subscription, session.subscription_changed)
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
        self.send(command(Type.CLOSE_CONSUMER, consumer_id=session.consumer_id, request_id=NO_REQUEST))
        if failure is None:
            self.send(command(Type.SUCCESS, request_id=request.request_id))
        else:
            self.reply_error(request.request_id, failure)

    async def _close_consumer(self, request: api.CommandCloseConsumer) -> None:
        session = self.consumers.pop(request.consumer_id, None)
        if session is not None:
            with self.answering_failures(request.request_id) as attempt:
                await self._leave(session, unsubscribe=False)
            if attempt.failed:
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
        with self.answering_failures(request.request_id) as attempt:
            await self._leave(session, unsubscribe=True)
        if attempt.failed:
            return
        self.send(command(Type.SUCCESS, request_id=request.request_id))

    async def _leave(self, session: ConsumerSession, *, unsubscribe: bool) -> None:
        """Stop a consumer's deliveries, then detach it from its subscription."""
        await session.stop()
        subscription = session.subscription
        if subscription is None:
            return
        self.service.unwatch(subscription, session.subscription_changed)
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
        self.send(command(Type.CLOSE_CONSUMER, consumer_id=session.consumer_id, request_id=NO_REQUEST))


def _ack_arguments(request: api.CommandAck | AckCommand) -> tuple[bool, list[AckedMessageId]]:
    """(cumulative, ids) of an ACK, as ConsumerSession.ack takes them."""
    return request.ack_type == api.CommandAck.Cumulative, list(request.message_id)


def consumer_not_found(consumer_id: int) -> ServerFailure:
    return ServerFailure(api.ConsumerNotFound, f"consumer {consumer_id} is not open here")
