"""A connection's producers and consumers of non-persistent topics (non_persistent.py): the commands
connection.py hands here (`claims`), and the partition counts and lookups of non-persistent names.

A SEND is handled as it is read, on the event loop: its entry goes to each subscription's consumer or is
dropped (non_persistent.py), and its receipt, message id (0, 0) as Pulsar's broker answers, goes out at once.
Who may produce is producer_access.py's to say, as for persistent topics (access modes, unique names).
Commands Pulsar's broker does not serve on a non-persistent topic are refused as it refuses them: SEEK and
GET_LAST_MESSAGE_ID; acks and redelivery requests change nothing (nothing is kept to acknowledge)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from seglog._core._pulsar_send import SendFrame
from seglog.catalog.policies import AutoTopicCreation
from seglog.names import NonPersistentTopicName, is_non_persistent, partition_of
from seglog.rates import RateMeter, iso_time
from seglog.server import auth
from seglog.server.consumers import SUBSCRIPTION_TYPES, sticky_ranges
from seglog.server.errors import Attempt, ServerFailure
from seglog.server.features import check_subscribe_features
from seglog.server.non_persistent import (
    Entry,
    NonPersistentConsumer,
    NonPersistentSubscription,
    NonPersistentTopic,
    Publisher,
    message_id,
)
from seglog.server.producer_access import Waiter
from seglog.server.producers import peer_address
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import BatchError, parse_metadata
from seglog.server.protocol.frames import NO_REQUEST, Type, command, encode_command
from seglog.server.service import BrokerService

T = TypeVar("T")
_CONSUMER_COMMANDS = frozenset({Type.FLOW, Type.ACK, Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, Type.CLOSE_CONSUMER,
                                Type.UNSUBSCRIBE, Type.GET_LAST_MESSAGE_ID, Type.SEEK})


class NonPersistentConnection(Protocol):
    """What this module uses of a connection (connection.Connection)."""
    service: BrokerService
    peer: Any

    async def blocking(self, function: Callable[..., T], *args: Any) -> T: ...
    def send(self, base: api.BaseCommand) -> None: ...
    def write(self, data: bytes) -> None: ...
    def output_backlogged(self) -> bool: ...
    def reply_error(self, request_id: int, failure: ServerFailure) -> None: ...
    def answering_failures(self, request_id: int) -> AbstractContextManager[Attempt]: ...
    async def authorize(self, name: str, actions: tuple[str, ...], doing: str) -> None: ...


@dataclass(eq=False)
class _Producer:
    topic: NonPersistentTopic
    publisher: Publisher


@dataclass(eq=False)
class _Consumer:
    topic: NonPersistentTopic
    subscription: NonPersistentSubscription
    consumer: NonPersistentConsumer


Blocking = Callable[..., Awaitable[Any]]  # runs a blocking call in the server's thread pool


def namespace_rule(service: BrokerService, name: NonPersistentTopicName) -> AutoTopicCreation:
    """The auto-creation rule of the topic's namespace (blocking); TopicNotFound if it does not exist."""
    service.check_namespace(name)
    return service.broker.catalog.auto_topic_creation(name.namespace_name)


async def partition_count(service: BrokerService, blocking: Blocking, topic: str, create: bool) -> int:
    """PARTITIONED_METADATA (and the HTTP lookup's partitions) of a non-persistent name: its partition count, 0
    for a topic that is not partitioned. With `create`, a missing topic of a namespace whose auto-creation type
    is partitioned is made a partitioned topic here, as Pulsar's broker does for both domains."""
    name = NonPersistentTopicName.parse(topic)
    rule = await blocking(namespace_rule, service, name)
    topics, full = service.non_persistent, str(name)
    count = topics.partition_count(full)
    if (not count and create and rule.allowed and rule.partitions is not None and partition_of(name.topic) is None
            and topics.get(full) is None):
        count = topics.make_partitioned(full, rule.partitions)
    return count


async def look_up(service: BrokerService, blocking: Blocking, topic: str) -> None:
    """Refuse (TopicNotFound) a lookup of a non-persistent name in a missing namespace, or past the partitions of
    its partitioned topic."""
    name = NonPersistentTopicName.parse(topic)
    await blocking(namespace_rule, service, name)
    service.non_persistent.resolve(name)


class NonPersistentClients:
    """The producers and consumers of non-persistent topics on one connection, by the client's ids."""

    def __init__(self, connection: NonPersistentConnection) -> None:
        self.connection = connection
        self.topics = connection.service.non_persistent
        self.producers: dict[int, _Producer] = {}
        self.consumers: dict[int, _Consumer] = {}
        self.waiting: dict[int, asyncio.Task[None]] = {}  # WaitForExclusive producers, until admitted
        self.closed: set[int] = set()  # producers the server closed: their SENDs in flight are dropped
        self._handlers: dict[int, Callable[[Any], Awaitable[None]]] = {
            Type.PRODUCER: self._producer, Type.CLOSE_PRODUCER: self._close_producer,
            Type.SUBSCRIBE: self._subscribe, Type.FLOW: self._flow, Type.ACK: self._ack,
            Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._redeliver, Type.CLOSE_CONSUMER: self._close_consumer,
            Type.UNSUBSCRIBE: self._unsubscribe, Type.GET_LAST_MESSAGE_ID: self._not_served,
            Type.SEEK: self._not_served,
        }

    def claims(self, kind: int, request: Any) -> bool:
        """Whether a command is for a non-persistent topic: it names one, or a producer or consumer of one."""
        if kind in (Type.PRODUCER, Type.SUBSCRIBE):
            return is_non_persistent(request.topic)
        if kind == Type.CLOSE_PRODUCER:
            return request.producer_id in self.producers or request.producer_id in self.waiting
        return kind in _CONSUMER_COMMANDS and request.consumer_id in self.consumers

    async def handle(self, kind: int, request: Any) -> None:
        await self._handlers[kind](request)

    # names

    async def partitions(self, topic: str, create: bool) -> int:
        return await partition_count(self.connection.service, self.connection.blocking, topic, create)

    async def look_up(self, topic: str) -> None:
        await look_up(self.connection.service, self.connection.blocking, topic)

    async def _client_topic(self, topic: str) -> NonPersistentTopic:
        """The topic a producer or consumer names, made on first use where the namespace's auto-creation allows,
        as Pulsar's broker does; TopicNotFound otherwise."""
        name = NonPersistentTopicName.parse(topic)
        rule = await self.connection.blocking(namespace_rule, self.connection.service, name)
        full, partition = self.topics.resolve(name)
        if partition is None and self.topics.get(full) is None and not rule.allowed:
            raise ServerFailure(api.TopicNotFound, f"topic {full} does not exist, and namespace {name.namespace_name} "
                                                   "does not create topics on first use (auto topic creation is "
                                                   "off); create the topic first")
        return self.topics.open(full, partition)

    # producers

    async def _producer(self, request: api.CommandProducer) -> None:
        producer_id = request.producer_id
        existing = self.producers.get(producer_id)
        if existing is not None:  # the client asks again (its first answer was late)
            self._producer_success(request, existing.publisher.name)
            return
        if producer_id in self.waiting:
            return
        self.closed.discard(producer_id)
        connection = self.connection
        with connection.answering_failures(request.request_id) as attempt:
            await connection.authorize(request.topic, auth.PRODUCE, f"produce to {request.topic}")
            topic = await self._client_topic(request.topic)
            try:
                claim = connection.service.producers.claim((topic.name, 0), topic.name, request.producer_name or None,
                                                           request.producer_access_mode,
                                                           lambda: self._close_by_server(producer_id))
            except ServerFailure:
                self.topics.release(topic)
                raise
        if attempt.failed:
            return
        if isinstance(claim, Waiter):
            connection.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id, producer_name=claim.name,
                                    last_sequence_id=-1, producer_ready=False))
            task = asyncio.get_running_loop().create_task(self._wait_for_exclusive(request, topic, claim))
            self.waiting[producer_id] = task
            return
        self._admit(request, topic, claim)

    async def _wait_for_exclusive(self, request: api.CommandProducer, topic: NonPersistentTopic,
                                  waiter: Waiter) -> None:
        try:
            await waiter.granted
        except asyncio.CancelledError:  # the client closed it, or went away
            self._release_claim(topic, waiter.name)
            raise
        except ServerFailure as refusal:  # fenced while waiting
            self._release_claim(topic, waiter.name)
            self.connection.reply_error(request.request_id, refusal)
            return
        finally:
            self.waiting.pop(request.producer_id, None)
        self._admit(request, topic, waiter.name)

    def _admit(self, request: api.CommandProducer, topic: NonPersistentTopic, name: str) -> None:
        clock = self.topics.clock
        publisher = Publisher(name, RateMeter(clock), peer_address(self.connection.peer), iso_time(clock()))
        topic.producers[name] = publisher
        self.producers[request.producer_id] = _Producer(topic, publisher)
        self._producer_success(request, name)

    def _producer_success(self, request: api.CommandProducer, name: str) -> None:
        self.connection.send(command(Type.PRODUCER_SUCCESS, request_id=request.request_id, producer_name=name,
                                     last_sequence_id=-1))

    def send(self, send: SendFrame) -> bool:
        """SEND: whether it was for a non-persistent producer of this connection (then it is handled: handed to
        the topic's subscriptions and receipted, or refused)."""
        producer = self.producers.get(send.producer_id)
        if producer is None:
            return send.producer_id in self.closed  # (sent before the client learnt it was closed: dropped)
        failure = None
        if not send.checksum_ok:
            failure = ServerFailure(api.ChecksumError, "the message's CRC32C does not match")
        else:
            try:
                metadata = parse_metadata(send.metadata)
            except BatchError as error:
                failure = ServerFailure(api.ChecksumError, str(error))
            else:
                producer.topic.publish(producer.publisher, Entry.of(metadata, send.metadata,
                                                                    send.payload))
        if failure is not None:
            self.connection.write(encode_command(command(
                Type.SEND_ERROR, producer_id=send.producer_id, sequence_id=send.sequence_id, error=failure.code,
                message=str(failure))))
        else:
            self.connection.write(encode_command(command(
                Type.SEND_RECEIPT, producer_id=send.producer_id, sequence_id=send.sequence_id,
                highest_sequence_id=send.highest_sequence_id, message_id=message_id(None))))
        return True

    async def _close_producer(self, request: api.CommandCloseProducer) -> None:
        waiting = self.waiting.pop(request.producer_id, None)
        if waiting is not None:
            waiting.cancel()
        self._drop_producer(request.producer_id)
        self.connection.send(command(Type.SUCCESS, request_id=request.request_id))

    def _drop_producer(self, producer_id: int) -> None:
        producer = self.producers.pop(producer_id, None)
        if producer is None:
            return
        topic, name = producer.topic, producer.publisher.name
        if topic.producers.get(name) is producer.publisher:
            del topic.producers[name]
        self._release_claim(topic, name)

    def _release_claim(self, topic: NonPersistentTopic, name: str) -> None:
        self.connection.service.producers.release((topic.name, 0), name)
        self.topics.release(topic)

    def _close_by_server(self, producer_id: int) -> None:
        """Fenced by an ExclusiveWithFencing producer, or its topic deleted: closed, and the client told."""
        if producer_id in self.producers:
            self._drop_producer(producer_id)
            self.closed.add(producer_id)
            self.connection.send(command(Type.CLOSE_PRODUCER, producer_id=producer_id, request_id=NO_REQUEST))

    # consumers

    async def _subscribe(self, request: api.CommandSubscribe) -> None:
        if request.consumer_id in self.consumers:  # the client asks again (its first answer was late)
            self.connection.send(command(Type.SUCCESS, request_id=request.request_id))
            return
        connection = self.connection
        with connection.answering_failures(request.request_id) as attempt:
            await connection.authorize(request.topic, auth.CONSUME, f"consume from {request.topic}")
            check_subscribe_features(request)
            ranges = sticky_ranges(request)
            topic = await self._client_topic(request.topic)
            kind = SUBSCRIPTION_TYPES[request.sub_type]
            name = request.consumer_name or f"{connection.service.settings.cluster}-consumer-{request.consumer_id}"
            consumer = NonPersistentConsumer(request.consumer_id, name, connection, self.topics.clock,
                                             partition=topic.partition, hash_ranges=ranges,
                                             address=peer_address(connection.peer))
            subscription = topic.subscription(request.subscription, kind, durable=request.durable)
            try:
                subscription.attach(consumer, kind)
            except ServerFailure:
                if not subscription.consumers:
                    topic.remove_subscription(subscription)
                self.topics.release(topic)
                raise
        if attempt.failed:
            return
        self.consumers[request.consumer_id] = _Consumer(topic, subscription, consumer)
        connection.send(command(Type.SUCCESS, request_id=request.request_id))

    async def _flow(self, request: api.CommandFlow) -> None:
        self.consumers[request.consumer_id].consumer.permits += request.message_permits

    async def _ack(self, request: api.CommandAck) -> None:
        if request.HasField("request_id"):  # (nothing is kept to acknowledge)
            self.connection.send(command(Type.ACK_RESPONSE, consumer_id=request.consumer_id,
                                         request_id=request.request_id))

    async def _redeliver(self, request: api.CommandRedeliverUnacknowledgedMessages) -> None:
        """Nothing was kept to deliver again, as on Pulsar's broker."""

    async def _not_served(self, request: api.CommandSeek | api.CommandGetLastMessageId) -> None:
        kind = "SEEK" if isinstance(request, api.CommandSeek) else "GET_LAST_MESSAGE_ID"
        self.connection.reply_error(request.request_id, ServerFailure(
            api.NotAllowedError, f"{kind} is not supported on non-persistent topics (they keep no messages)"))

    async def _close_consumer(self, request: api.CommandCloseConsumer) -> None:
        self._leave(request.consumer_id, unsubscribe=False)
        self.connection.send(command(Type.SUCCESS, request_id=request.request_id))

    async def _unsubscribe(self, request: api.CommandUnsubscribe) -> None:
        subscription = self.consumers[request.consumer_id].subscription
        others = len(subscription.consumers) - 1
        if others:
            self.connection.reply_error(request.request_id, ServerFailure(
                api.ConsumerBusy, f"subscription {subscription.name!r} has {others} other consumer(s)"))
            return
        self._leave(request.consumer_id, unsubscribe=True)
        self.connection.send(command(Type.SUCCESS, request_id=request.request_id))

    def _leave(self, consumer_id: int, *, unsubscribe: bool) -> None:
        """Detach a consumer; its subscription goes with it when unsubscribed or a reader's (not durable), and
        stays otherwise, as Pulsar's does."""
        entry = self.consumers.pop(consumer_id, None)
        if entry is None:
            return
        entry.subscription.detach(entry.consumer)
        if unsubscribe or not entry.subscription.durable:
            entry.topic.remove_subscription(entry.subscription)
        self.topics.release(entry.topic)

    # the connection ends

    def close_all(self) -> None:
        for waiting in self.waiting.values():
            waiting.cancel()
        for producer_id in list(self.producers):
            self._drop_producer(producer_id)
        for consumer_id in list(self.consumers):
            self._leave(consumer_id, unsubscribe=False)
