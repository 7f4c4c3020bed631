"""bench/wire_load.py, the raw-socket load generator of bench/bench_wire.py, against a scripted broker: it
must count what a broker really answered, so that a broker losing, reordering or repeating frames fails (or
is counted apart), never reads as a faster broker."""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

import pytest

from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import FrameDecoder, Type, command, encode_command, encode_payload_command

# bench/ is no package and not on the tests' path: the module is loaded from its file, under a name of its own
_spec = importlib.util.spec_from_file_location("bench_wire_load",
                                               Path(__file__).parents[2] / "bench" / "wire_load.py")
wire_load = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wire_load)

VALUE = b"v" * 100


class ScriptedBroker:
    """One connection at a time on 127.0.0.1: CONNECTED, PRODUCER_SUCCESS and SUCCESS as a broker answers
    them, and `on_send(send)` / `on_flow(flow)` for the rest (each returns the frames to write)."""

    def __init__(self, on_send: Callable[[api.CommandSend], list[bytes]] = lambda send: [],
                 on_flow: Callable[[api.CommandFlow], list[bytes]] = lambda flow: []) -> None:
        self.on_send, self.on_flow = on_send, on_flow
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"pulsar://127.0.0.1:{self.listener.getsockname()[1]}"
        self.acks: list[api.CommandAck] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        decoder = FrameDecoder()
        with connection:
            try:
                while data := connection.recv(1 << 16):
                    for frame in decoder.feed(data):
                        connection.sendall(b"".join(self.answer(frame.command)))
            except OSError:
                return  # the generator closed its end after a WireError

    def answer(self, base: api.BaseCommand) -> list[bytes]:
        if base.type == Type.CONNECT:
            return [encode_command(command(Type.CONNECTED, server_version="scripted", protocol_version=19))]
        if base.type == Type.PRODUCER:
            return [encode_command(command(Type.PRODUCER_SUCCESS, request_id=base.producer.request_id,
                                           producer_name="p"))]
        if base.type == Type.SUBSCRIBE:
            return [encode_command(command(Type.SUCCESS, request_id=base.subscribe.request_id))]
        if base.type == Type.SEND:
            return self.on_send(base.send)
        if base.type == Type.FLOW:
            return self.on_flow(base.flow)
        if base.type == Type.ACK:
            self.acks.append(base.ack)
        return []

    def close(self) -> None:
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def broker() -> Iterator[Callable[..., ScriptedBroker]]:
    made: list[ScriptedBroker] = []

    def make(**handlers) -> ScriptedBroker:
        made.append(ScriptedBroker(**handlers))
        return made[-1]

    yield make
    for one in made:
        one.close()


def receipt(send: api.CommandSend, sequence_id: int | None = None) -> bytes:
    return encode_command(command(Type.SEND_RECEIPT, producer_id=send.producer_id,
                                  sequence_id=send.sequence_id if sequence_id is None else sequence_id,
                                  message_id=api.MessageIdData(ledger_id=0, entry_id=send.sequence_id)))


def produce(url: str, sends: int = 400) -> int:
    pool = wire_load.batch_sends(10, VALUE, pool=200, per_write=50)
    with wire_load.WireConnection.open(url) as connection:
        connection.producer("persistent://public/default/t")
        return wire_load.produce(connection, pool, sends, window=100)


def test_every_receipt_counts_its_batch(broker):
    assert produce(broker(on_send=lambda send: [receipt(send)]).url) == 4_000


def test_a_receipt_for_another_send_fails_the_round(broker):
    def wrong_one(send):
        return [receipt(send, sequence_id=send.sequence_id + (1 if send.sequence_id == 1_000 else 0))]

    with pytest.raises(wire_load.WireError, match="receipt 100 is for producer 0 sequence 1001, expected"):
        produce(broker(on_send=wrong_one).url)


def test_a_lost_receipt_fails_the_round(broker):
    with pytest.raises(wire_load.WireError, match="receipt 100 is for producer 0 sequence 1010, expected .* 1000"):
        produce(broker(on_send=lambda send: [] if send.sequence_id == 1_000 else [receipt(send)]).url)


def test_a_receipt_that_never_comes_fails_the_round_in_time(broker, monkeypatch):
    sends = count(1)
    monkeypatch.setattr(wire_load, "TIMEOUT_S", 0.5)
    with pytest.raises(wire_load.WireError, match="no progress in .* waiting for SEND_RECEIPT"):
        produce(broker(on_send=lambda send: [] if next(sends) == 400 else [receipt(send)]).url)  # the last


def test_a_send_error_fails_the_round(broker):
    def error(send):
        return [encode_command(command(Type.SEND_ERROR, producer_id=send.producer_id, sequence_id=send.sequence_id,
                                       error=api.PersistenceError, message="disk full"))]

    with pytest.raises(wire_load.WireError, match="(?s)SEND_ERROR.*disk full"):
        produce(broker(on_send=error).url)


def entry(entry_id: int, messages: int) -> bytes:
    """A MESSAGE frame of one batch entry of `messages` messages."""
    metadata = api.MessageMetadata(producer_name="p", sequence_id=entry_id, publish_time=1,
                                   num_messages_in_batch=messages).SerializeToString()
    return encode_payload_command(command(Type.MESSAGE, consumer_id=0,
                                          message_id=api.MessageIdData(ledger_id=0, entry_id=entry_id)),
                                  metadata, b"x" * messages)


def test_consume_counts_batches_skips_repeats_and_acks_the_highest(broker):
    delivered = iter([entry(0, 100), entry(1, 100), entry(1, 100), entry(2, 50)])
    scripted = broker(on_flow=lambda flow: [next(delivered, b"") for _ in range(4)])
    with wire_load.WireConnection.open(scripted.url) as connection:
        connection.subscribe("persistent://public/default/t", "s")
        consumed = wire_load.consume(connection, 0, 250, permits=1_000, ack_every=300)
    assert (consumed.messages, consumed.frames, consumed.repeated_frames, consumed.acks) == (250, 4, 1, 1)
    scripted.close()  # (the ACK was written before consume returned; the broker reads it before closing)
    assert [(a.ack_type, a.message_id[0].entry_id) for a in scripted.acks] == [(api.CommandAck.Cumulative, 2)]


def test_one_flow_counts_what_a_broker_sends_past_the_permits(broker):
    """answered_to_one_flow counts messages as the client does (a batch entry's num_messages_in_batch), and
    everything the broker sends for the FLOW, past its permits too."""
    scripted = broker(on_flow=lambda flow: [entry(i, 100) for i in range(flow.message_permits)])
    with wire_load.WireConnection.open(scripted.url) as connection:
        connection.subscribe("persistent://public/default/t", "s")
        assert wire_load.answered_to_one_flow(connection, 0, 3, 0.3) == 300
