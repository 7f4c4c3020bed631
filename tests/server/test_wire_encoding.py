"""What a server sends with every stored message it delivers (and a replicator with every message it
replicates), written by the native encoder (seglog._core._pulsar_wire): the metadata byte for byte what
protobuf serializes for the same fields, for messages stored as the server stores them (batch attributes,
ordering keys, event times) and read back; a SEND's command as protobuf serializes it; payload frames as
frames.py describes them, their CRC32C checked by an independent implementation."""

from __future__ import annotations

import base64
import struct

import crc32c as crc32c_reference
import pytest

from helpers_server import dispatched
from seglog._core._pulsar_wire import single_message_metadata
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import pack, parse_metadata, unpack
from seglog.server.protocol.frames import MAGIC_CRC32C, Type, command, decode_frame, encode_payload_command, encode_send
from seglog.server.protocol.metadata import message_metadata

TOPIC = "public/default/encoded"
NOW = 1_700_000_000_123
CHUNK = {"pulsar.chunk": "3f2a-uuid,2,5,1048576", "pulsar.compression": "3,1048000"}
ENTRY = {"pulsar.producer": "the-producer", "pulsar.sequence_id": "4294967300",
         "pulsar.highest_sequence_id": "4294967302"}


def stored(tmp_path, *batches: dict) -> list:
    """Write each batch (writer.source's arguments; published now, no event times unless given) as the
    server does, one stored batch each; read back every message, with the base offset of its batch."""
    bases, given = dispatched(tmp_path, NOW, TOPIC, *batches)
    out = [(message, piece.base) for piece, messages in given for message in messages]
    assert sorted({base for _, base in out}) == bases
    return out


def expected(producer: str, sequence_id: int, **fields) -> bytes:
    metadata = api.MessageMetadata(producer_name=producer, sequence_id=sequence_id, publish_time=NOW, **fields)
    return metadata.SerializeToString()


def test_fields_of_the_message_and_its_entry(tmp_path):
    (plain, base), (keyed, _), (null, _), (binary_key, _) = stored(tmp_path, dict(
        values=[b"v", b"k", None, b"b"], keys=[None, "ключ".encode(), b"n", b"\xff\x00"],
        properties=[{}, {"a": "1", "ünï": "cödé"}, {"action": "delete"}, {}],
        event_times=[None, 0, 2**40, None], ordering_keys=[None, b"order-1", None, b""], attributes=ENTRY))
    first = 4294967300
    assert message_metadata(plain, base) == expected("the-producer", first)
    assert message_metadata(keyed, base) == expected(
        "the-producer", first + 1, properties=[api.KeyValue(key="a", value="1"), api.KeyValue(key="ünï", value="cödé")],
        partition_key="ключ", event_time=0, ordering_key=b"order-1")
    assert message_metadata(null, base) == expected(
        "the-producer", first + 2, properties=[api.KeyValue(key="action", value="delete")], partition_key="n",
        event_time=2**40, null_value=True)
    assert message_metadata(binary_key, base) == expected(
        "the-producer", first + 3, partition_key=base64.b64encode(b"\xff\x00").decode(),
        partition_key_b64_encoded=True, ordering_key=b"")


def test_a_message_written_in_process_has_its_offset_as_sequence_id_and_no_producer(tmp_path):
    _, (message, base) = stored(tmp_path, dict(values=[b"first"]), dict(values=[b"second"], keys=[b"k"]))
    assert message.offset == base == 1
    assert message_metadata(message, base) == expected("", 1, partition_key="k")


def test_replicated_from_and_replicate_to(tmp_path):
    (replicated, base), (outgoing, other) = stored(
        tmp_path, dict(values=[b"r"], attributes=ENTRY | {"pulsar.replicated_from": "east"}),
        dict(values=[None], keys=[b"k"], attributes=ENTRY))
    assert message_metadata(replicated, base) == expected("the-producer", 4294967300, replicated_from="east")
    assert message_metadata(outgoing, other, "west", ["east", "south"]) == expected(
        "the-producer", 4294967300, replicated_from="west", partition_key="k", replicate_to=["east", "south"],
        null_value=True)


def test_a_chunk_keeps_its_chunk_fields_and_compression(tmp_path):
    ((chunk, base),) = stored(tmp_path, dict(values=[b"piece"], properties=[{"p": "1"}], attributes=ENTRY | CHUNK))
    encoded = message_metadata(chunk, base, "east")
    assert encoded == expected(
        "the-producer", 4294967300, properties=[api.KeyValue(key="p", value="1")], replicated_from="east",
        compression=api.ZSTD, uncompressed_size=1048000, uuid="3f2a-uuid", chunk_id=2, num_chunks_from_msg=5,
        total_chunk_msg_size=1048576)
    parsed = parse_metadata(encoded)  # (what the receiving server reads back: a chunk, stored as it came)
    assert unpack(parsed, b"piece").attributes["pulsar.chunk"] == CHUNK["pulsar.chunk"]


def test_single_message_metadata_of_batch_items_and_the_batch_unpacks_to_the_messages(tmp_path):
    messages = stored(tmp_path, dict(
        values=[b"one", None, b""], keys=[b"k", None, b"\xfe"], properties=[{"x": "y"}, {}, {}],
        event_times=[5, None, 0], ordering_keys=[None, b"o", None], attributes=ENTRY))
    singles = [single_message_metadata(message, 4294967300 + index) for index, (message, _) in enumerate(messages)]
    assert singles == [
        api.SingleMessageMetadata(properties=[api.KeyValue(key="x", value="y")], partition_key="k", payload_size=3,
                                  event_time=5, sequence_id=4294967300).SerializeToString(),
        api.SingleMessageMetadata(payload_size=0, ordering_key=b"o", sequence_id=4294967301,
                                  null_value=True).SerializeToString(),
        api.SingleMessageMetadata(partition_key=base64.b64encode(b"\xfe").decode(), payload_size=0, event_time=0,
                                  partition_key_b64_encoded=True, sequence_id=4294967302).SerializeToString()]
    entry = api.MessageMetadata(producer_name="the-producer", sequence_id=4294967300, publish_time=NOW,
                                num_messages_in_batch=3)
    payload, starts = pack([message for message, _ in messages], 4294967300)
    assert starts == [0, 4 + len(singles[0]) + 3, 4 + len(singles[0]) + 3 + 4 + len(singles[1])]
    got = unpack(entry, payload)
    assert got.values == [b"one", None, b""] and got.keys == [b"k", None, b"\xfe"]
    assert got.event_times == [5, None, None]  # (0 is "none" in Pulsar's batch items)
    assert got.ordering_keys == [None, b"o", None] and got.properties == [{"x": "y"}, {}, {}]


def test_out_of_range_fields_are_refused_as_protobuf_refuses_them(tmp_path):
    ((message, base),) = stored(tmp_path, dict(values=[b"v"], event_times=[-1]))
    with pytest.raises(OverflowError):
        message_metadata(message, base)
    with pytest.raises(ValueError):
        api.MessageMetadata(event_time=-1)


@pytest.mark.parametrize("producer_id, sequence_id, count",
                         [(0, 0, 1), (3, 2**40 + 7, 1000), (2**64 - 1, 2**63, 2**31 - 1)])
def test_a_send_is_the_command_protobuf_serializes_in_a_checked_frame(producer_id, sequence_id, count):
    metadata, payload = expected("pulsar.repl.east-->west", sequence_id, replicated_from="east"), b"\x00value" * 9
    frame = encode_send(producer_id, sequence_id, count, metadata, payload)
    sent = command(Type.SEND, producer_id=producer_id, sequence_id=sequence_id, num_messages=count)
    assert frame == encode_payload_command(sent, metadata, payload)
    decoded = decode_frame(frame[4:])
    assert decoded.command == sent and decoded.checksum_ok
    assert (decoded.metadata, decoded.payload) == (metadata, payload)
    assert frame[4 + 4:4 + 4 + len(sent.SerializeToString())] == sent.SerializeToString()


@pytest.mark.parametrize("metadata, payload", [(b"", b""), (b"m", b""), (b"meta" * 100, b"p" * 70_000)])
def test_a_payload_frame_has_the_layout_and_checksum_of_frames_py(metadata, payload):
    message = command(Type.MESSAGE, consumer_id=1, message_id=api.MessageIdData(ledger_id=0, entry_id=5))
    body = message.SerializeToString()
    checked = struct.pack(">I", len(metadata)) + metadata + payload
    assert encode_payload_command(message, metadata, payload) == (
        struct.pack(">II", 4 + len(body) + 2 + 4 + len(checked), len(body)) + body
        + struct.pack(">HI", MAGIC_CRC32C, crc32c_reference.crc32c(checked)) + checked)
