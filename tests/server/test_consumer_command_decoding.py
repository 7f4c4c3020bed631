"""A consumer's FLOW and ACK frames read natively (seglog._core._pulsar_wire.consumer_commands, through
FrameDecoder.feed_with_sends, which a server's connections read with): the same values protobuf's parser
reads; a command with any field the native reader leaves (properties, a transaction, a chunk's first id,
anything malformed) stops the run, and frames.py decodes it (or reports it) as it does any frame, so
nothing is lost, read twice or read wrongly. frame_of gives back the protobuf Frame of what was read."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog._core._pulsar_wire import AckCommand, FlowCommand, consumer_commands
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import FrameDecoder, Type, command, decode_frame, encode_command, frame_of

U64 = st.integers(0, (1 << 64) - 1)
I32 = st.integers(-(1 << 31), (1 << 31) - 1)


def flow(consumer_id: int, permits: int) -> bytes:
    return encode_command(command(Type.FLOW, consumer_id=consumer_id, message_permits=permits))


message_ids = st.builds(
    lambda ledger, entry, partition, index, ack_set, batch_size: api.MessageIdData(
        ledger_id=ledger, entry_id=entry, ack_set=ack_set,
        **{k: v for k, v in (("partition", partition), ("batch_index", index), ("batch_size", batch_size))
           if v is not None}),
    U64, U64, st.none() | I32, st.none() | I32, st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=3),
    st.none() | I32)
acks = st.builds(
    lambda consumer, kind, ids, request: command(Type.ACK, consumer_id=consumer, ack_type=kind, message_id=ids,
                                                 request_id=request),
    U64, st.sampled_from([api.CommandAck.Individual, api.CommandAck.Cumulative]), st.lists(message_ids, max_size=4),
    st.none() | U64)


@settings(max_examples=300, deadline=None)
@given(acks)
def test_an_ack_is_read_as_protobuf_reads_it(ack):
    frame = encode_command(ack)
    (read,), position = consumer_commands(frame, 0)
    assert position == len(frame)
    assert isinstance(read, AckCommand)
    decoded = decode_frame(frame[4:]).command
    assert (read.consumer_id, read.ack_type) == (decoded.ack.consumer_id, decoded.ack.ack_type)
    assert read.request_id == (decoded.ack.request_id if decoded.ack.HasField("request_id") else None)
    assert id_fields(read.message_id) == id_fields(decoded.ack.message_id)
    again = frame_of(read).command.ack  # (the fields' values: a default the client sent, -1, is left unset)
    assert (again.consumer_id, again.ack_type, again.HasField("request_id"), again.request_id) == \
        (decoded.ack.consumer_id, decoded.ack.ack_type, decoded.ack.HasField("request_id"), decoded.ack.request_id)
    assert id_fields(again.message_id) == id_fields(decoded.ack.message_id)


def id_fields(ids) -> list[tuple]:
    """What the server reads of acknowledged ids (not batch_size)."""
    return [(m.ledger_id, m.entry_id, m.partition, m.batch_index, list(m.ack_set)) for m in ids]


@settings(max_examples=100, deadline=None)
@given(U64, st.integers(0, (1 << 32) - 1))
def test_a_flow_is_read_as_protobuf_reads_it(consumer_id, permits):
    (read,), _ = consumer_commands(flow(consumer_id, permits), 0)
    assert isinstance(read, FlowCommand)
    assert (read.consumer_id, read.message_permits) == (consumer_id, permits)
    assert frame_of(read).command == decode_frame(flow(consumer_id, permits)[4:]).command


def test_a_run_stops_at_what_the_native_reader_leaves_to_protobuf():
    run = flow(1, 500) + encode_command(command(Type.ACK, consumer_id=1, ack_type=1,
                                                message_id=[api.MessageIdData(ledger_id=0, entry_id=99)]))
    chunked = api.MessageIdData(ledger_id=0, entry_id=5)
    chunked.first_chunk_message_id.CopyFrom(api.MessageIdData(ledger_id=0, entry_id=3))
    left = [
        encode_command(command(Type.PING)),
        encode_command(command(Type.ACK, consumer_id=1, ack_type=0, message_id=[chunked])),
        encode_command(command(Type.ACK, consumer_id=1, ack_type=0, txnid_least_bits=7)),
        encode_command(command(Type.ACK, consumer_id=1, ack_type=0,
                               properties=[api.KeyLongValue(key="k", value=1)])),
        encode_command(command(Type.ACK, consumer_id=1, ack_type=0, validation_error=2)),
        flow(1, 5)[:-1],  # not all here yet
        _raw(bytes([0x08, 11, 0x5A, 0x02, 0x08, 0x01])),  # a FLOW without its required permits
        _raw(bytes([0x08, 10, 0x5A, 0x02, 0x08, 0x01])),  # a type that does not match the command
        _raw(bytes([0x08, 11, 0x5A, 0x04, 0x08, 0x01, 0x10])),  # cut short inside
    ]
    for after in left:
        commands, position = consumer_commands(run + after, 0)
        assert [type(c) for c in commands] == [FlowCommand, AckCommand]
        assert position == len(run)


def test_the_decoder_gives_native_commands_and_frames_in_order():
    decoder = FrameDecoder()
    data = flow(1, 10) + encode_command(command(Type.PING)) + flow(2, 20)
    items = decoder.feed_with_sends(data[:7]) + decoder.feed_with_sends(data[7:])
    assert [type(item).__name__ for item in items] == ["FlowCommand", "Frame", "FlowCommand"]
    assert [item.consumer_id for item in (items[0], items[2])] == [1, 2]


def _raw(body: bytes) -> bytes:
    return struct.pack(">II", len(body) + 4, len(body)) + body
