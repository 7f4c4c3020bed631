"""SEND_RECEIPT frames read natively (seglog._core._pulsar_wire.send_receipts, FrameDecoder.feed_with_receipts,
which a replicator's connection reads with): the same producer and sequence ids protobuf's parser reads, any
other field skipped; a run stops at anything that is not a whole well-formed receipt, which frames.py then
decodes (or reports) as it does any frame, so nothing is lost, read twice or read wrongly."""

from __future__ import annotations

import struct

import pytest

from seglog._core._pulsar_wire import send_receipts
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import (
    FrameDecoder,
    SendReceipts,
    Type,
    command,
    encode_command,
    encode_send,
)

U64_MAX = (1 << 64) - 1


def receipt(producer_id: int, sequence_id: int, **fields) -> bytes:
    return encode_command(command(Type.SEND_RECEIPT, producer_id=producer_id, sequence_id=sequence_id, **fields))


def raw_command(body: bytes) -> bytes:
    """A simple frame around a BaseCommand's bytes as given (which need not parse)."""
    return struct.pack(">II", len(body) + 4, len(body)) + body


@pytest.mark.parametrize("producer_id, sequence_id", [(0, 0), (1, 127), (128, 16_384), (U64_MAX, U64_MAX - 1)])
def test_ids_of_every_size_are_read_as_protobuf_reads_them(producer_id, sequence_id):
    frame = receipt(producer_id, sequence_id, message_id=api.MessageIdData(ledger_id=U64_MAX, entry_id=3),
                    highest_sequence_id=sequence_id)
    assert send_receipts(frame, 0) == ([(producer_id, sequence_id)], len(frame))
    assert send_receipts(bytearray(b"xx" + frame), 2) == ([(producer_id, sequence_id)], 2 + len(frame))


def test_a_run_stops_at_a_frame_that_is_no_receipt_or_not_all_here():
    run = receipt(1, 10) + receipt(1, 11) + receipt(2, 5)
    ping = encode_command(command(Type.PING))
    send = encode_send(1, 12, 1, b"", b"payload")
    for after in (ping, send, receipt(1, 12)[:-1], b"\x00\x00"):
        assert send_receipts(run + after, 0) == ([(1, 10), (1, 11), (2, 5)], len(run))
    assert send_receipts(b"", 0) == ([], 0)
    assert send_receipts(ping + run, 0) == ([], 0)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _unknown_fields(first: int) -> bytes:
    """Fields `first`, `first` + 1 and + 2, which neither message has: a varint, a fixed64 and bytes."""
    return (_varint(first << 3) + b"\x01" + _varint((first + 1) << 3 | 1) + b"\x00" * 8
            + _varint((first + 2) << 3 | 2) + b"\x02ab")


def test_fields_in_any_order_unknown_fields_and_repeats_are_read_as_protobuf_reads_them():
    # the sub-command's sequence id before its producer id, unknown fields inside and outside, the type
    # last, and the sub-command twice (protobuf merges the two: the later sequence id wins)
    inner = b"\x10\x08\x08\x09" + _unknown_fields(15)
    body = b"\x3a" + _varint(len(inner)) + inner + _unknown_fields(2000) + b"\x08\x07" + b"\x3a\x02\x10\x07"
    parsed = api.BaseCommand.FromString(body)
    assert (parsed.type, parsed.send_receipt.producer_id, parsed.send_receipt.sequence_id) == (Type.SEND_RECEIPT, 9, 7)
    frame = raw_command(body)
    assert send_receipts(frame, 0) == ([(9, 7)], len(frame))


@pytest.mark.parametrize("body", [
    b"\x08\x07",  # a receipt without its sub-command
    b"\x08\x07\x3a\x02\x08\x01",  # no sequence id (a required field)
    b"\x08\x07\x3a\x04\x08\x01\x10",  # a sub-command longer than what follows
    b"\x08\x07\x3a\x03\x08\x01\x10",  # a varint cut by the sub-command's end
    b"\x08\x07\x3a\x04\x08\x01\x10\x80",  # ... still cut
    b"\x08\x07\x3a\x02\x08\x01\x0b",  # a field of wire type 3 (groups: not Pulsar's)
    b"\x3a\x04\x08\x01\x10\x02",  # no type
    b"\x08\x06\x3a\x04\x08\x01\x10\x02",  # type SEND
])
def test_a_malformed_receipt_is_left_to_frames_py(body):
    frame = raw_command(body)
    assert send_receipts(frame + receipt(1, 2), 0) == ([], 0)
    first, second = FrameDecoder().feed_with_receipts(frame + receipt(1, 2))
    (expected,) = FrameDecoder().feed(frame)  # (what frames.py makes of it: decoded, or a FrameError)
    assert type(first) is type(expected) and str(first) == str(expected)
    assert second == SendReceipts([(1, 2)])


def test_the_decoder_gives_runs_as_they_arrive_and_keeps_a_frame_cut_between_reads():
    ping = encode_command(command(Type.PING))
    stream = receipt(1, 1) + receipt(1, 2) + ping + receipt(1, 3) + receipt(1, 4)
    cut = len(stream) - 3
    decoder = FrameDecoder()
    got = decoder.feed_with_receipts(stream[:cut]) + decoder.feed_with_receipts(stream[cut:])
    assert [item if isinstance(item, SendReceipts) else item.command.type for item in got] == [
        SendReceipts([(1, 1), (1, 2)]), Type.PING, SendReceipts([(1, 3)]), SendReceipts([(1, 4)])]
    assert decoder.feed_with_receipts(b"") == []
    assert [f.command.type for f in FrameDecoder().feed(stream)] == [Type.SEND_RECEIPT] * 2 + [Type.PING] + \
        [Type.SEND_RECEIPT] * 2  # (feed() decodes every frame as before)
