"""The replicator's side of Pulsar's binary protocol: one connection to a remote cluster's broker, and the
producers on it (Pulsar's replicator producer is an ordinary producer, so any Pulsar broker takes it).

Only what a replicator needs: CONNECT (with a token when the cluster's registration gives one), PRODUCER,
SEND of entries whose metadata and payload are made already, SEND_RECEIPT in order, PING/PONG, and the
broker closing a producer or the connection. Frames are made and read with seglog.server.protocol, the
codec both sides share. A failure of the connection fails every send in flight with RemoteUnavailable: the
replicator rewinds its cursor and sends them again (the remote drops what it had: docs/REPLICATION.md)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from urllib.parse import urlsplit

from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import (
    FrameDecoder,
    FrameError,
    SendReceipts,
    Type,
    command,
    encode_command,
    encode_send,
)
from seglog.version import __version__

logger = logging.getLogger("seglog.replication")

PROTOCOL_VERSION = 19
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
READ_SIZE = 1 << 16


class RemoteUnavailable(Exception):
    """The remote broker cannot be reached, refused a request, or dropped the connection."""


@dataclass(frozen=True)
class RemoteCluster:
    """How to reach a remote cluster's broker: from its registration (ClusterData)."""
    name: str
    broker_url: str  # pulsar://host:port or pulsar+ssl://host:port
    token: str | None = None  # the replicator's credentials (authenticationPlugin token)
    trust_certs_file: str | None = None  # CA of a pulsar+ssl:// broker (brokerClientTrustCertsFilePath)


@dataclass(eq=False)
class RemoteProducer:
    """A producer on a remote topic. `last_sequence_id` is what the broker said it has stored under the
    producer's name (for a replicator: the last origin offset it has). `receipted` counts the entries sent
    whose SEND_RECEIPT came (receipts come in the order sent); once the producer is gone (`closed`),
    `failure` says why."""
    connection: RemoteConnection
    producer_id: int
    topic: str
    name: str
    last_sequence_id: int
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    receipted: int = 0
    failure: RemoteUnavailable | None = None
    _awaiting: deque[int] = field(default_factory=deque)  # the sequence ids sent and not receipted, in order
    _receipt_came: asyncio.Event = field(default_factory=asyncio.Event)  # (or the producer failed)

    def send(self, entries: Iterable[tuple[int, bytes, bytes, int]]) -> None:
        """Send entries, each (sequence id, metadata, payload, how many messages), in one write (one system
        call, not one an entry: for unbatched messages that was most of the sending's cost)."""
        if self.closed.is_set():
            raise RemoteUnavailable(f"producer {self.name} on {self.topic} was closed")
        frames = []
        for sequence_id, metadata, payload, count in entries:
            self._awaiting.append(sequence_id)
            frames.append(encode_send(self.producer_id, sequence_id, count, metadata, payload))
        self.connection.write(b"".join(frames))

    async def receipts_beyond(self, seen: int) -> int:
        """Wait until more than `seen` entries were receipted; how many were. RemoteUnavailable if the
        producer is gone first. (A count, not a future an entry: those cost a replicator of unbatched
        messages more than the rest of its receipt handling.)"""
        while self.receipted <= seen:
            if self.failure is not None:
                raise self.failure
            self._receipt_came.clear()
            await self._receipt_came.wait()
        return self.receipted

    def receipt(self, sequence_ids: Iterable[int]) -> None:
        """SEND_RECEIPTs, in the order they came: the entry of each sequence id and every entry sent before
        it are receipted."""
        awaiting = self._awaiting
        for sequence_id in sequence_ids:
            while awaiting:
                self.receipted += 1
                if awaiting.popleft() == sequence_id:
                    break
        self._receipt_came.set()

    def fail(self, reason: str) -> None:
        """The producer is gone (closed by the broker, or its connection lost): what is in flight fails."""
        self.closed.set()
        self.failure = RemoteUnavailable(reason)
        self._awaiting.clear()
        self._receipt_came.set()

    async def close(self) -> None:
        if not self.closed.is_set():
            self.fail(f"producer {self.name} closed")
            await self.connection.request(Type.CLOSE_PRODUCER, producer_id=self.producer_id)
            self.connection.producers.pop(self.producer_id, None)


class RemoteConnection:
    """One connection to a remote broker, its producers multiplexed on it."""

    def __init__(self, cluster: RemoteCluster, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.cluster = cluster
        self.reader = reader
        self.writer = writer
        self.producers: dict[int, RemoteProducer] = {}
        self.closed = asyncio.Event()
        sockname = writer.get_extra_info("sockname")
        self.local_address = f"{sockname[0]}:{sockname[1]}" if sockname else ""  # (outboundConnection)
        self._ids = itertools.count()
        self._requests: dict[int, asyncio.Future[api.BaseCommand]] = {}
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, cluster: RemoteCluster) -> RemoteConnection:
        """Connect and hand-shake; RemoteUnavailable if that fails."""
        url = urlsplit(cluster.broker_url)
        if url.scheme not in ("pulsar", "pulsar+ssl") or not url.hostname or not url.port:
            raise RemoteUnavailable(f"cluster {cluster.name}: broker URL {cluster.broker_url!r} is not "
                                    "pulsar://HOST:PORT or pulsar+ssl://HOST:PORT")
        context = None
        if url.scheme == "pulsar+ssl":
            context = ssl.create_default_context(cafile=cluster.trust_certs_file)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(url.hostname, url.port, ssl=context), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ssl.SSLError) as error:
            raise RemoteUnavailable(f"cluster {cluster.name}: cannot connect to {cluster.broker_url}: "
                                    f"{error}") from None
        connection = cls(cluster, reader, writer)
        connection._task = asyncio.get_running_loop().create_task(connection._read())
        connect = {"client_version": f"seglog-replicator {__version__}", "protocol_version": PROTOCOL_VERSION}
        if cluster.token is not None:
            connect.update(auth_method_name="token", auth_data=cluster.token.encode())
        try:
            await connection._exchange(command(Type.CONNECT, **connect), None, Type.CONNECTED)
        except RemoteUnavailable:
            await connection.close()
            raise
        return connection

    async def create_producer(self, topic: str, name: str) -> RemoteProducer:
        producer_id = next(self._ids)
        reply = await self.request(Type.PRODUCER, topic=topic, producer_id=producer_id, producer_name=name,
                                   user_provided_producer_name=True)
        if reply.type != Type.PRODUCER_SUCCESS:
            raise RemoteUnavailable(f"cluster {self.cluster.name}: producer {name} on {topic} refused: "
                                    f"{_reason(reply)}")
        producer = RemoteProducer(self, producer_id, topic, name, reply.producer_success.last_sequence_id)
        self.producers[producer_id] = producer
        return producer

    async def partitions(self, topic: str) -> int:
        """The remote's partition count of `topic` (0: not partitioned, or no such topic), asked without
        letting the remote create it (its auto-creation rule must not decide the type: the origin's does)."""
        reply = await self.request(Type.PARTITIONED_METADATA, topic=topic, metadata_auto_creation_enabled=False)
        answer = reply.partition_metadata_response
        if reply.type != Type.PARTITIONED_METADATA_RESPONSE or answer.response == answer.Failed:
            raise RemoteUnavailable(f"cluster {self.cluster.name}: partitions of {topic}: {answer.message}")
        return answer.partitions

    async def request(self, kind: int, **fields: object) -> api.BaseCommand:
        """A command with a request id, and the broker's answer to it."""
        request_id = next(self._ids)
        return await self._exchange(command(kind, request_id=request_id, **fields), request_id, None)

    async def _exchange(self, sent: api.BaseCommand, request_id: int | None, expected: int | None) -> api.BaseCommand:
        key = -1 if request_id is None else request_id
        future: asyncio.Future[api.BaseCommand] = asyncio.get_running_loop().create_future()
        self._requests[key] = future
        self.write(encode_command(sent))
        try:
            reply = await asyncio.wait_for(future, REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise RemoteUnavailable(f"cluster {self.cluster.name}: no answer to {Type.Name(sent.type)} within "
                                    f"{REQUEST_TIMEOUT_S:.0f} s") from None
        finally:
            self._requests.pop(key, None)
        if expected is not None and reply.type != expected:
            raise RemoteUnavailable(f"cluster {self.cluster.name}: {Type.Name(sent.type)} refused: {_reason(reply)}")
        return reply

    def write(self, data: bytes) -> None:
        if self.closed.is_set():
            raise RemoteUnavailable(f"the connection to cluster {self.cluster.name} is closed")
        self.writer.write(data)

    async def drain(self) -> None:
        """Wait while the socket's buffer is full (TCP back-pressure from the remote)."""
        try:
            await self.writer.drain()
        except (OSError, RuntimeError) as error:
            raise RemoteUnavailable(f"the connection to cluster {self.cluster.name} failed: {error}") from None

    async def _read(self) -> None:
        decoder = FrameDecoder()
        reason = f"cluster {self.cluster.name} closed the connection"
        try:
            while True:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    break
                for frame in decoder.feed_with_receipts(data):
                    if isinstance(frame, SendReceipts):
                        self._receipts(frame.receipts)
                    elif isinstance(frame, FrameError):
                        if frame.fatal:
                            raise RemoteUnavailable(f"cluster {self.cluster.name} sent a bad frame: {frame}")
                    else:
                        self._dispatch(frame.command)
        except (OSError, RemoteUnavailable) as error:
            reason = f"the connection to cluster {self.cluster.name} failed: {error}"
        finally:
            self._lost(reason)

    def _receipts(self, receipts: list[tuple[int, int]]) -> None:
        # (a run of one producer's receipts in one call: one a receipt was a tenth of a replicator's loop)
        for producer_id, run in itertools.groupby(receipts, key=itemgetter(0)):
            producer = self.producers.get(producer_id)
            if producer is not None:
                producer.receipt(sequence_id for _, sequence_id in run)

    def _dispatch(self, received: api.BaseCommand) -> None:
        kind = received.type
        if kind == Type.PING:
            self.write(encode_command(command(Type.PONG)))
        elif kind == Type.SEND_RECEIPT:  # (one SendReceipts did not take: frames.py decoded it)
            self._receipts([(received.send_receipt.producer_id, received.send_receipt.sequence_id)])
        elif kind == Type.SEND_ERROR:
            producer = self.producers.pop(received.send_error.producer_id, None)
            if producer is not None:
                producer.fail(f"cluster {self.cluster.name} refused a send: {received.send_error.message}")
        elif kind == Type.CLOSE_PRODUCER:
            producer = self.producers.pop(received.close_producer.producer_id, None)
            if producer is not None:
                producer.fail(f"cluster {self.cluster.name} closed producer {producer.name}")
        elif kind == Type.CONNECTED:
            self._answer(-1, received)
        else:
            sub = getattr(received, _REPLY_FIELDS.get(kind, ""), None)
            if sub is not None and sub.HasField("request_id"):
                self._answer(sub.request_id, received)

    def _answer(self, key: int, received: api.BaseCommand) -> None:
        future = self._requests.get(key)
        if future is not None and not future.done():
            future.set_result(received)

    def _lost(self, reason: str) -> None:
        self.closed.set()
        for producer in list(self.producers.values()):
            producer.fail(reason)
        self.producers.clear()
        for future in self._requests.values():
            if not future.done():
                future.set_exception(RemoteUnavailable(reason))
        self.writer.close()

    async def close(self) -> None:
        self._lost(f"the connection to cluster {self.cluster.name} was closed")
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


_REPLY_FIELDS = {Type.PRODUCER_SUCCESS: "producer_success", Type.ERROR: "error", Type.SUCCESS: "success",
                 Type.PARTITIONED_METADATA_RESPONSE: "partition_metadata_response"}


def _reason(reply: api.BaseCommand) -> str:
    if reply.type == Type.ERROR:
        return f"{api.ServerError.Name(reply.error.error)}: {reply.error.message}"
    return Type.Name(reply.type)
