"""A load generator that drives a Pulsar broker with pre-encoded frames over a raw socket, so that the broker
and not the client is the bottleneck (issue 31): pulsar-client spends 15-19 µs of CPU a message, more than
any of the brokers bench_wire.py compares.

    connection = WireConnection.open("pulsar://127.0.0.1:6650")
    producer = connection.producer("persistent://public/default/t", producer_id=0)
    sent = produce(connection, producer, batch_sends(100, VALUE, pool=2_000), sends=50_000, window=1_000)

What each piece does, and why it is cheap enough:

- Frames are encoded before the round (`batch_sends`, `single_sends`): a SEND of a batch entry is laid out
  as pulsar-client's C++ core writes one (MessageMetadata with num_messages_in_batch, then each message as
  [u32 size][SingleMessageMetadata][payload]), with the CRC32C block. A round cycles over a pool of
  distinct SENDs, joined `SENDS_PER_WRITE` at a time, so the loop does no encoding and one `send` call
  carries many SENDs. Sequence ids repeat from one pass over the pool to the next: no broker here
  deduplicates (Pulsar's default), and the receipts are matched by position, not by id.
- Receipts are read natively (`seglog._core._pulsar_wire.send_receipts` parses a run of SEND_RECEIPT frames
  in one call), and each run is compared in one list comparison with the (producer id, sequence id) of the
  SENDs it answers, so that a lost, reordered or extra receipt fails the round.
- Consuming (`consume`) counts the messages of each MESSAGE frame (an entry with num_messages_in_batch counts
  that many), grants permits as pulsar-client does (a first FLOW of `permits`, then one for what arrived
  each time half of them did) and acknowledges cumulatively every `ack_every` messages or so, the message id
  as the broker sent it, so that the broker's ack path is exercised. Only the MessageMetadata of a MESSAGE
  frame is parsed (for its batch size), and its command only when an ACK is due.
- Everything is one thread on a non-blocking socket with `select`: writes go out while receipts come back,
  the window bounds the SENDs in flight, and every wait is bounded (`TIMEOUT_S`, a `WireError` after it).

A broker PING is answered with PONG wherever it arrives; a SEND_ERROR, an ERROR or a closed connection is a
`WireError` saying what the broker sent."""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import count
from urllib.parse import urlsplit

from seglog._core._pulsar_wire import send_receipts
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command, decode_frame, encode_command, encode_send

PROTOCOL_VERSION = 19
TIMEOUT_S = 60.0  # the longest any wait for a broker's answer may take (a hang fails the round)
SENDS_PER_WRITE = 100  # pre-encoded SENDs joined into one buffer, written by one `send` call when it can
READ_SIZE = 1 << 20
PRODUCER_NAME = "wire-load"
_HEAD = struct.Struct(">II")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_MAGIC_CRC32C = 0x0E01
_MAGIC_BROKER_ENTRY_METADATA = 0x0E02


class WireError(AssertionError):
    """The broker answered something else than the load needs, or not in time."""


# ---------------------------------------------------------------------------------------------------------
# pre-encoded SENDs

@dataclass(frozen=True)
class SendPool:
    """Pre-encoded SEND frames, joined `per_write` at a time (`writes`), and what a round needs to check its
    receipts: the producer id they were encoded for, the first sequence id of each SEND (`sequence_ids`), and
    the messages a SEND carries."""

    producer_id: int
    writes: list[bytes]
    per_write: int
    sequence_ids: list[int]
    messages_per_send: int

    @property
    def sends(self) -> int:
        return len(self.sequence_ids)

    @cached_property
    def receipts(self) -> list[tuple[int, int]]:
        """(producer_id, sequence_id) of the receipts of the pool's SENDs in order, twice over: the
        receipts of any run of at most `sends` SENDs are one slice of it."""
        return [(self.producer_id, sequence_id) for sequence_id in self.sequence_ids] * 2


def batch_sends(batch: int, value: bytes, *, pool: int, producer_id: int = 0,
                per_write: int = SENDS_PER_WRITE) -> SendPool:
    """`pool` SENDs of one batch entry of `batch` copies of `value` each, as pulsar-client writes a batch
    without keys, properties or event times."""
    single = [api.SingleMessageMetadata(payload_size=len(value), sequence_id=i).SerializeToString()
              for i in range(batch)]
    frames, sequence_ids = [], []
    publish_time = int(time.time() * 1000)
    for k in range(pool):
        first = k * batch
        payload = b"".join(_U32.pack(len(s)) + s + value for s in single)
        metadata = api.MessageMetadata(producer_name=PRODUCER_NAME, sequence_id=first, publish_time=publish_time,
                                       num_messages_in_batch=batch, uncompressed_size=len(payload))
        frames.append(encode_send(producer_id, first, batch, metadata.SerializeToString(), payload))
        sequence_ids.append(first)
    return _pool(producer_id, frames, sequence_ids, batch, per_write)


def single_sends(value: bytes, *, pool: int, producer_id: int = 0, per_write: int = SENDS_PER_WRITE) -> SendPool:
    """`pool` SENDs of one message each (`value`), as pulsar-client writes them with batching off."""
    frames = []
    publish_time = int(time.time() * 1000)
    for k in range(pool):
        metadata = api.MessageMetadata(producer_name=PRODUCER_NAME, sequence_id=k, publish_time=publish_time,
                                       uncompressed_size=len(value))
        frames.append(encode_send(producer_id, k, 1, metadata.SerializeToString(), value))
    return _pool(producer_id, frames, list(range(pool)), 1, per_write)


def _pool(producer_id: int, frames: list[bytes], sequence_ids: list[int], messages: int, per_write: int) -> SendPool:
    if len(frames) % per_write:
        raise ValueError(f"a pool of {len(frames)} SENDs is not a whole number of writes of {per_write}")
    writes = [b"".join(frames[i:i + per_write]) for i in range(0, len(frames), per_write)]
    return SendPool(producer_id, writes, per_write, sequence_ids, messages)


# ---------------------------------------------------------------------------------------------------------
# a connection

class WireConnection:
    """A raw socket to a broker, past CONNECT/CONNECTED, and the bytes read from it not handled yet."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.position = 0  # where the unhandled bytes of `buffer` start
        self._requests = count()

    @classmethod
    def open(cls, url: str) -> WireConnection:
        parts = urlsplit(url)
        if parts.scheme != "pulsar" or not parts.hostname or not parts.port:
            raise ValueError(f"broker url {url!r}: expected pulsar://HOST:PORT")
        sock = socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(sock)
        connection.write(command(Type.CONNECT, client_version="seglog-wire-load", protocol_version=PROTOCOL_VERSION))
        connection.expect(Type.CONNECTED)
        sock.setblocking(False)
        return connection

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_id(self) -> int:
        return next(self._requests)

    # -- writing and reading -------------------------------------------------------------------------------

    def write(self, base: api.BaseCommand) -> None:
        self.write_bytes(encode_command(base))

    def write_bytes(self, data: bytes) -> None:
        """All of `data`, waiting (bounded) while the socket's buffer is full, reading meanwhile so that a
        broker blocked on writing to us cannot block us in turn."""
        view = memoryview(data)
        deadline = time.monotonic() + TIMEOUT_S
        while view:
            try:
                view = view[self.sock.send(view):]
                continue
            except BlockingIOError:
                pass
            readable, _, _ = select.select([self.sock], [self.sock], [], _left(deadline, "write"))
            if readable:
                self.read()

    def read(self) -> bool:
        """Append what the socket holds now to `buffer`: False if nothing (a WireError if the broker closed
        the connection)."""
        try:
            data = self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return False
        if not data:
            raise WireError("the broker closed the connection")
        if self.position > READ_SIZE:  # drop what was handled, now and then rather than on every read
            del self.buffer[:self.position]
            self.position = 0
        self.buffer += data
        return True

    def wait_readable(self, deadline: float, what: str) -> None:
        readable, _, _ = select.select([self.sock], [], [], _left(deadline, what))
        if readable:
            self.read()

    def next_frame(self) -> tuple[int, int] | None:
        """(start, end) of the whole frame at `position` (its total size included), or None if it is not
        all here yet."""
        available = len(self.buffer) - self.position
        if available < 4:
            return None
        (total,) = _U32.unpack_from(self.buffer, self.position)
        if available - 4 < total:
            return None
        return self.position, self.position + 4 + total

    def take_control(self, start: int, end: int) -> api.BaseCommand:
        """Decode the frame at [start, end) (a frame other than the load's), answer a PING, fail on an error."""
        self.position = end
        base = decode_frame(bytes(self.buffer[start + 4:end])).command
        if base.type == Type.PING:
            self.write(command(Type.PONG))
        elif base.type in (Type.SEND_ERROR, Type.ERROR, Type.CLOSE_PRODUCER, Type.CLOSE_CONSUMER):
            raise WireError(f"the broker sent {Type.Name(base.type)}: {str(base).strip()}")
        return base

    def expect(self, kind: int, accept: Callable[[api.BaseCommand], bool] = lambda base: True) -> api.BaseCommand:
        """The next command of type `kind` that `accept`s (bounded). On the way a PING is answered, and a
        MESSAGE dropped: a broker may still send one after `consume` has counted all it wanted (pulsar-lite
        repeats entries), as it may to a client closing its consumer."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            span = self.next_frame()
            if span is None:
                if self.sock.getblocking():
                    data = self.sock.recv(READ_SIZE)
                    if not data:
                        raise WireError(f"the broker closed the connection instead of {Type.Name(kind)}")
                    self.buffer += data
                else:
                    self.wait_readable(deadline, Type.Name(kind))
                continue
            base = self.take_control(*span)
            if base.type == kind and accept(base):
                return base
            if base.type not in (Type.PING, Type.PONG, Type.MESSAGE):  # (a MESSAGE past what a round counted)
                raise WireError(f"expected {Type.Name(kind)}, the broker sent {Type.Name(base.type)}: "
                                f"{str(base).strip()}")

    # -- producers and consumers ---------------------------------------------------------------------------

    def producer(self, topic: str, producer_id: int = 0) -> int:
        """A producer on `topic` (created if missing), ready to send; its id."""
        request = self.request_id()
        self.write(command(Type.PRODUCER, topic=topic, producer_id=producer_id, request_id=request,
                           producer_name=f"{PRODUCER_NAME}-{producer_id}-{request}"))
        # A broker may answer producer_ready=false first and true once the producer can send (Pulsar's
        # exclusive access modes); true is the default.
        self.expect(Type.PRODUCER_SUCCESS, lambda base: base.producer_success.producer_ready)
        return producer_id

    def subscribe(self, topic: str, subscription: str, consumer_id: int = 0) -> int:
        """An Exclusive consumer from the earliest message; its id. No permits yet (see `consume`)."""
        request = self.request_id()
        self.write(command(Type.SUBSCRIBE, topic=topic, subscription=subscription,
                           sub_type=api.CommandSubscribe.Exclusive, consumer_id=consumer_id, request_id=request,
                           consumer_name=f"wire-load-{consumer_id}",
                           initial_position=api.CommandSubscribe.Earliest))
        self.expect(Type.SUCCESS, lambda base: base.success.request_id == request)
        return consumer_id

    def unsubscribe(self, consumer_id: int) -> None:
        request = self.request_id()
        self.write(command(Type.UNSUBSCRIBE, consumer_id=consumer_id, request_id=request))
        self.expect(Type.SUCCESS, lambda base: base.success.request_id == request)

    def close_consumer(self, consumer_id: int) -> None:
        request = self.request_id()
        self.write(command(Type.CLOSE_CONSUMER, consumer_id=consumer_id, request_id=request))
        self.expect(Type.SUCCESS, lambda base: base.success.request_id == request)


def _left(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise WireError(f"no progress in {TIMEOUT_S:.0f} s waiting for {what}")
    return left


# ---------------------------------------------------------------------------------------------------------
# the loads

def produce(connection: WireConnection, pool: SendPool, sends: int, window: int) -> int:
    """`sends` SENDs of `pool` (cycled) with at most `window` waiting for their receipts, until every
    receipt is in; the messages sent. A WireError if a receipt is missing, out of order or late."""
    if sends % pool.per_write or not pool.per_write <= window <= pool.sends:
        raise ValueError(f"sends ({sends}) must be whole writes of {pool.per_write}, and the window ({window}) "
                         f"at least one write and at most the pool ({pool.sends})")
    sock, writes, per_write = connection.sock, pool.writes, pool.per_write
    pool_sends = pool.sends
    sent = received = 0
    pending = memoryview(b"")
    deadline = time.monotonic() + TIMEOUT_S
    while received < sends:
        if not pending and sent < sends and sent - received + per_write <= window:
            pending = memoryview(writes[(sent % pool_sends) // per_write])
            sent += per_write
        if pending:
            try:
                pending = pending[sock.send(pending):]
            except BlockingIOError:
                pass
        if pending:  # the socket's buffer is full: wait until it drains or receipts come
            select.select([sock], [sock], [], _left(deadline, "SEND_RECEIPT"))
        elif sent == sends or sent - received + per_write > window:  # nothing to write: wait for receipts
            select.select([sock], [], [], _left(deadline, "SEND_RECEIPT"))
        if connection.read():
            got = _receipts(connection, pool, received)
            if got:
                received += got
                deadline = time.monotonic() + TIMEOUT_S
    return sends * pool.messages_per_send


def _receipts(connection: WireConnection, pool: SendPool, received: int) -> int:
    """The receipts whole in the connection's buffer, each checked against the SEND it answers (the
    `received`-th onwards); other frames handled."""
    got = 0
    buffer, expected, sends = connection.buffer, pool.receipts, pool.sends
    while True:
        run, position = send_receipts(buffer, connection.position)
        if run:
            connection.position = position
            start = (received + got) % sends
            if run != expected[start:start + len(run)]:
                _wrong_receipt(run, expected[start:start + len(run)], received + got)
            got += len(run)
            continue
        span = connection.next_frame()
        if span is None:
            return got
        connection.take_control(*span)


def _wrong_receipt(run: list[tuple[int, int]], expected: list[tuple[int, int]], first: int) -> None:
    for i, (got, wanted) in enumerate(zip(run, expected)):
        if got != wanted:
            raise WireError(f"receipt {first + i} is for producer {got[0]} sequence {got[1]}, expected producer "
                            f"{wanted[0]} sequence {wanted[1]}")
    raise WireError(f"{len(run) - len(expected)} receipts more than SENDs in flight after receipt {first}")


def round_trips(connection: WireConnection, pool: SendPool, calls: int) -> list[int]:
    """`calls` SENDs one at a time, each waiting for its receipt: each call's nanoseconds."""
    sock, frames = connection.sock, pool.writes
    if pool.per_write != 1:
        raise ValueError("round trips send one SEND a write: make the pool with per_write=1")
    clock = time.perf_counter_ns
    times = []
    for i in range(calls):
        frame = frames[i % len(frames)]
        start = clock()
        if sock.send(frame) != len(frame):
            raise WireError("a SEND of a round trip did not fit the socket's buffer")
        deadline = time.monotonic() + TIMEOUT_S
        while not _receipts(connection, pool, i):
            connection.wait_readable(deadline, "SEND_RECEIPT")
        times.append(clock() - start)
    return times


@dataclass
class Consumed:
    """What a `consume` call received: the messages of the entries it counted, the MESSAGE frames, the
    frames that repeated an entry already received (counted apart: see `consume`), and the ACKs sent."""

    messages: int
    frames: int
    repeated_frames: int
    acks: int


def consume(connection: WireConnection, consumer_id: int, messages: int, *, permits: int = 1_000,
            ack_every: int = 300) -> Consumed:
    """Receive `messages` messages on a subscribed consumer: FLOW `permits`, then one FLOW for what arrived
    each time half of them did (as pulsar-client's receiver queue does), a cumulative ACK of the highest
    message id received every `ack_every` messages or so and at the end.

    An Exclusive subscription's messages come in order of their ids, so a MESSAGE whose id is not above the
    highest one received repeats an entry (pulsar-lite 0.2.0 sends some entries twice, redelivery count 0,
    when a FLOW arrives while it dispatches): it is counted in `repeated_frames`, not in the messages, and
    still takes its permits."""
    _flow(connection, consumer_id, permits)
    metadata, base = api.MessageMetadata(), api.BaseCommand()
    got = frames = repeated = acks = since_flow = since_ack = 0
    highest: tuple[int, int, int] = (-1, -1, -1)
    highest_id = None
    deadline = time.monotonic() + TIMEOUT_S
    while got < messages:
        connection.wait_readable(deadline, f"MESSAGE ({got:,} of {messages:,} received)")
        buffer = connection.buffer
        while (span := connection.next_frame()) is not None:
            start, end = span
            total, command_size = _HEAD.unpack_from(buffer, start)
            if total == 4 + command_size:  # no payload: not a MESSAGE
                connection.take_control(start, end)
                continue
            connection.position = end
            base.ParseFromString(bytes(buffer[start + 8:start + 8 + command_size]))
            at = start + 8 + command_size
            if _U16.unpack_from(buffer, at)[0] == _MAGIC_BROKER_ENTRY_METADATA:
                at += 6 + _U32.unpack_from(buffer, at + 2)[0]
            if _U16.unpack_from(buffer, at)[0] == _MAGIC_CRC32C:
                at += 6
            (metadata_size,) = _U32.unpack_from(buffer, at)
            metadata.ParseFromString(bytes(buffer[at + 4:at + 4 + metadata_size]))
            n = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
            frames += 1
            since_flow += n
            message_id = base.message.message_id
            key = (message_id.ledger_id, message_id.entry_id,
                   message_id.batch_index if message_id.HasField("batch_index") else -1)
            if key <= highest:
                repeated += 1
                continue
            highest, highest_id = key, api.MessageIdData()
            highest_id.CopyFrom(message_id)
            got += n
            since_ack += n
        if since_flow >= permits // 2:
            _flow(connection, consumer_id, since_flow)
            since_flow = 0
        if highest_id is not None and (since_ack >= ack_every or (got >= messages and since_ack)):
            connection.write(command(Type.ACK, consumer_id=consumer_id, ack_type=api.CommandAck.Cumulative,
                                     message_id=[highest_id]))
            acks += 1
            since_ack = 0
        deadline = time.monotonic() + TIMEOUT_S
    if got != messages:
        raise WireError(f"received {got:,} messages, {got - messages:,} more than the {messages:,} the topic holds")
    return Consumed(got, frames, repeated, acks)


def _flow(connection: WireConnection, consumer_id: int, permits: int) -> None:
    connection.write(command(Type.FLOW, consumer_id=consumer_id, message_permits=permits))


def _frames_within(connection: WireConnection, wait_s: float) -> Iterator[tuple[int, int]]:
    """(start, end) of each whole frame that arrives within `wait_s`; the caller moves `position` past it."""
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([connection.sock], [], [], left)
        if readable:
            connection.read()
        while (span := connection.next_frame()) is not None:
            yield span


def answered_to_one_flow(connection: WireConnection, consumer_id: int, permits: int, wait_s: float) -> int:
    """The messages a subscribed consumer is sent for one FLOW of `permits` within `wait_s`, as the client
    counts them (a batch entry's num_messages_in_batch): how many a broker sends past the permits."""
    _flow(connection, consumer_id, permits)
    received = 0
    for start, end in _frames_within(connection, wait_s):
        connection.position = end
        frame = decode_frame(bytes(connection.buffer[start + 4:end]))
        if frame.command.type == Type.MESSAGE and frame.metadata is not None:
            metadata = api.MessageMetadata.FromString(frame.metadata)
            received += metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
    return received


def nothing_delivered(connection: WireConnection, consumer_id: int, wait_s: float) -> bool:
    """Grant permits and wait `wait_s`: True if no MESSAGE came (a subscription acknowledged to its end)."""
    _flow(connection, consumer_id, 1_000)
    return all(connection.take_control(*span).type != Type.MESSAGE for span in _frames_within(connection, wait_s))
