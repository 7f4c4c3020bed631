"""The MESSAGE frames a server sends, built natively from stored batches (_pulsar_wire.DeliveryEncoder,
docs/SERVER.md "Consuming"): a message of a stored batch of one goes unbatched, byte for byte as protobuf
and frames.py write it; the messages of a bigger batch go as batch entries, runs at consecutive offsets of
one publish time and redelivery count, which unpack as the SEND of a batch does; a read's pieces in one
call, up to one the server sends otherwise (an encrypted entry, a chunk)."""

from __future__ import annotations

import struct
from dataclasses import replace

import numpy as np
import pytest

from helpers_server import dispatched
from seglog._core._pulsar_wire import DeliveryEncoder
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import parse_metadata, unpack
from seglog.server.protocol.frames import Type, command, decode_frame, encode_payload_command
from seglog.server.protocol.message_ids import message_id
from seglog.server.protocol.metadata import DELIVERED_FIELDS, ENCRYPTION, WHOLE_ENTRY, message_metadata

TOPIC = "public/default/frames"
NOW = 1_700_000_000_123
ENTRY = {"pulsar.producer": "the-producer", "pulsar.sequence_id": "4294967300",
         "pulsar.highest_sequence_id": "4294967399", "pulsar.schema_version": "0000000000000002"}
CONSUMER_ID = 7


def pieces(tmp_path, *batches: dict) -> list:
    """Write each batch (writer.source's arguments; published now unless timestamps are given) as the server
    stores them; the pieces a consumer is given of them, with their messages read back."""
    return dispatched(tmp_path, NOW, TOPIC, *batches)[1]


def encoder(max_messages: int = 1000, max_bytes: int = 1 << 20, partition: int = -1) -> DeliveryEncoder:
    return DeliveryEncoder(CONSUMER_ID, partition, max_messages, max_bytes, DELIVERED_FIELDS, WHOLE_ENTRY)


def decoded(data: bytes) -> list:
    frames, position = [], 0
    while position < len(data):
        (size,) = struct.unpack_from(">I", data, position)
        frames.append(decode_frame(data[position + 4:position + 4 + size]))
        position += 4 + size
    return frames


def frames_of(piece, max_messages: int = 1000, max_bytes: int = 1 << 20,
              partition: int = -1) -> tuple[list, list]:
    entries: list = []
    data, done = encoder(max_messages, max_bytes, partition).frames([piece], 0, entries)
    assert done == 1
    return decoded(data), entries


def test_a_message_stored_alone_goes_unbatched_as_protobuf_writes_it(tmp_path):
    ((piece, (message,)),) = pieces(tmp_path, dict(values=[b"v"], keys=[b"k"], properties=[{"a": "1"}],
                                                   event_times=[5], ordering_keys=[b"o"], attributes=ENTRY))
    entries: list = []
    data, _ = encoder(partition=3).frames([replace(piece, redelivery_counts=np.array([2]))], 0, entries)
    sent = command(Type.MESSAGE, consumer_id=CONSUMER_ID, message_id=message_id(0, 3), redelivery_count=2)
    assert data == encode_payload_command(sent, message_metadata(message, piece.base), b"v")
    assert entries == []  # (an unbatched entry is acknowledged by its id: nothing to remember)


def test_a_batch_goes_as_one_entry_that_unpacks_to_its_messages(tmp_path):
    values = [b"a", None, b"ccc", b""]
    ((piece, messages),) = pieces(tmp_path, dict(
        values=values, keys=[b"k", None, b"\xff", "ключ".encode()], properties=[{"p": "1"}, {}, {}, {"ü": "x"}],
        event_times=[None, 7, None, 2**40], ordering_keys=[None, b"o", None, b""], attributes=ENTRY))
    (frame,), entries = frames_of(piece, partition=2)
    assert entries == [(0, 4)]
    assert frame.checksum_ok
    assert frame.command.type == Type.MESSAGE
    assert frame.command.message == api.CommandMessage(consumer_id=CONSUMER_ID, message_id=message_id(0, 2),
                                                       redelivery_count=0)
    metadata = parse_metadata(frame.metadata)
    assert (metadata.producer_name, metadata.sequence_id, metadata.publish_time, metadata.num_messages_in_batch,
            metadata.schema_version) == ("the-producer", 4294967300, NOW, 4, bytes.fromhex(ENTRY[
                "pulsar.schema_version"]))
    unpacked = unpack(metadata, frame.payload)
    assert unpacked.values == values
    assert unpacked.keys == [m.key for m in messages]
    assert unpacked.properties == [m.properties for m in messages]
    assert unpacked.event_times == [m.event_time for m in messages]
    assert unpacked.ordering_keys == [m.ordering_key for m in messages]
    assert int(unpacked.attributes["pulsar.highest_sequence_id"]) == 4294967303  # (sequence ids one a message)


def test_entries_are_runs_of_consecutive_offsets_one_publish_time_and_bounded_size(tmp_path):
    ((piece, _),) = pieces(tmp_path, dict(values=[b"x" * 10] * 10, timestamps=[1, 1, 1, 2, 2, 2, 2, 2, 2, 2]))
    frames, entries = frames_of(piece.with_offsets(np.array([0, 1, 2, 3, 5, 6, 7, 8, 9])), max_messages=3,
                                max_bytes=30)
    assert entries == [(0, 3), (3, 1), (5, 3), (8, 2)]
    assert frames_of(piece, max_bytes=29)[1] == [(0, 2), (2, 1), (3, 2), (5, 2), (7, 2), (9, 1)]
    for frame, (entry, count) in zip(frames, entries):
        metadata = parse_metadata(frame.metadata)
        assert frame.command.message.message_id.entry_id == entry
        assert metadata.num_messages_in_batch == count
        assert metadata.sequence_id == entry  # (written in-process: sequence ids are the offsets)
        assert metadata.publish_time == (1 if entry < 3 else 2)
    (first, *_), _ = frames_of(piece, max_bytes=0)  # a message larger than the bound still goes, alone
    assert parse_metadata(first.metadata).num_messages_in_batch == 1


def test_a_change_of_redelivery_count_starts_a_new_entry(tmp_path):
    ((piece, _),) = pieces(tmp_path, dict(values=[b"x"] * 5))
    frames, entries = frames_of(replace(piece, redelivery_counts=np.array([0, 0, 1, 1, 0])))
    assert entries == [(0, 2), (2, 2), (4, 1)]
    assert [f.command.message.redelivery_count for f in frames] == [0, 1, 0]


def test_a_read_of_several_batches_is_one_call_up_to_a_whole_entry(tmp_path):
    plain = dict(values=[b"a", b"b"], attributes=ENTRY)
    marked = dict(values=[b"c", b"d"], attributes={**ENTRY, ENCRYPTION: "1"})
    given = [piece for piece, _ in pieces(tmp_path, plain, plain, marked, plain)]
    entries: list = []
    data, done = encoder().frames(given, 0, entries)
    assert done == 2  # (the encrypted entry is the caller's)
    assert [f.command.message.message_id.entry_id for f in decoded(data)] == [0, 2]
    assert entries == [(0, 2), (2, 2)]
    data, done = encoder().frames(given, 3, entries)
    assert (done, entries[-1]) == (4, (6, 2))


def test_offsets_outside_the_batch_or_descending_are_refused(tmp_path):
    ((piece, _),) = pieces(tmp_path, dict(values=[b"a", b"b"]))
    with pytest.raises(ValueError, match="offset 2 is not one of the stored batch's 2 records"):
        frames_of(replace(piece, offsets=np.array([0, 2])))
    with pytest.raises(ValueError, match="offsets must ascend; 0 follows 1"):
        frames_of(replace(piece, offsets=np.array([1, 0])))
    with pytest.raises(ValueError, match="a piece without offsets"):
        frames_of(replace(piece, offsets=np.array([], dtype=np.int64)))


@pytest.mark.parametrize(("name", "value", "error"), [
    ("pulsar.sequence_id", "12x", "attribute pulsar.sequence_id is b'12x': expected an unsigned 64-bit decimal"),
    ("pulsar.sequence_id", "18446744073709551616", "expected an unsigned 64-bit decimal"),
    ("pulsar.schema_version", "abc", "attribute pulsar.schema_version has 3 hex digits: expected an even number"),
    ("pulsar.schema_version", "zz", "attribute pulsar.schema_version is b'zz': expected hex digits"),
])
def test_a_malformed_attribute_is_refused_by_name(tmp_path, name, value, error):
    ((piece, _),) = pieces(tmp_path, dict(values=[b"a", b"b"], attributes={**ENTRY, name: value}))
    with pytest.raises(ValueError, match=error):
        frames_of(piece)
