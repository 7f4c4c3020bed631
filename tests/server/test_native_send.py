"""The native way in of a SEND (seglog._core._pulsar_send) against the reference path it stands in for:
batches.unpack_native stores every entry it takes byte for byte as batches.unpack and PartitionWriter.source
do (the same encoded batch, the same attributes), and leaves to the reference path every entry it does not
take (encrypted, chunks, markers, base64 keys, malformed ones), never answering otherwise than it would;
cut_sends cuts the SEND frames FrameDecoder decodes, with the same fields; send_receipt writes the bytes
protobuf does."""

from __future__ import annotations

import random
import zlib

import cramjam
import pytest

from seglog._core._pulsar_send import cut_sends, send_receipt
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import BatchError, UnpackLimits, parse_metadata, unpack, unpack_native
from seglog.server.protocol.frames import (
    FrameDecoder,
    Type,
    command,
    encode_command,
    encode_payload_command,
    encode_send,
)
from seglog.server.protocol.message_ids import DUPLICATE_ID, UINT64_MINUS_ONE, message_id

NOW = 1_700_000_000_123
LIMITS = UnpackLimits(max_uncompressed_size=1 << 20, max_messages=500)
TEXTS = ["", "k", "κλειδί", "🔑", "a" * 200, "x=y", "\x00nul"]


@pytest.fixture(scope="module")
def writers(tmp_path_factory):
    """A writer of a topic that stamps create time, and one of a topic that stamps log-append time."""
    broker = Broker.open(tmp_path_factory.mktemp("native-send"), clock=ManualClock(NOW), background=False)
    create = broker.create_topic("public/default/create-time", 1, {})
    append = broker.create_topic("public/default/append-time", 1, {"timestamp_type": "log_append_time"})
    yield [broker.store.acquire_writer(ref.name, 0, ref.config) for ref in (create, append)]
    broker.close()


def encoded(source) -> bytes:
    buffer = bytearray(source.size(0, source.count))
    source.write(buffer, 0, 42, 0, source.count)
    return bytes(buffer)


def assert_same(metadata: bytes, payload: bytes, highest: int, writers) -> bool:
    """Whether the native path took the entry; if it did, it stores it as the reference path would. If the
    reference path refuses it, the native one refuses it or leaves it to it."""
    try:
        reference = unpack(parse_metadata(metadata), payload, highest, LIMITS)
    except BatchError:
        try:
            native = unpack_native(metadata, payload, highest, LIMITS)
        except BatchError:
            return True
        assert native is None
        return False
    native = unpack_native(metadata, payload, highest, LIMITS)
    if native is None:
        return False
    assert native.attributes == reference.attributes
    assert native.count == reference.count
    assert native.key_list() == reference.key_list()
    for writer in writers:
        assert encoded(native.source(writer)) == encoded(reference.source(writer))
    return True


def random_fields(rng: random.Random, message):
    """Fill the message fields both kinds of metadata have, each sometimes."""
    if rng.random() < 0.4:
        message.partition_key = rng.choice(TEXTS)
        message.null_partition_key = rng.random() < 0.1
    if rng.random() < 0.3:
        for _ in range(rng.randint(1, 3)):
            message.properties.add(key=rng.choice(TEXTS) + str(rng.random()), value=rng.choice(TEXTS))
    if rng.random() < 0.3:
        message.event_time = rng.choice([0, 1, NOW, 2**63 - 1])
    if rng.random() < 0.3:
        message.ordering_key = rng.choice(TEXTS).encode() + rng.randbytes(rng.randint(0, 3))
    if rng.random() < 0.15:
        message.null_value = True


def random_entry(rng: random.Random) -> tuple[bytes, bytes, int]:
    """(metadata, payload, highest sequence id) of a SEND as pulsar-client might write it."""
    first = rng.choice([0, 7, 2**40])
    metadata = api.MessageMetadata(producer_name=rng.choice(["p", "standalone-0-1", "ποιητής"]),
                                   sequence_id=first, publish_time=rng.choice([0, NOW, 2**62]))
    if rng.random() < 0.2:
        metadata.replicate_to.extend(rng.sample(["east", "west", "__local__"], rng.randint(1, 2)))
    if rng.random() < 0.1:
        metadata.replicated_from = "west"
    if rng.random() < 0.2:
        metadata.schema_version = rng.randbytes(8)
    if rng.random() < 0.2:
        metadata.deliver_at_time = NOW + rng.randint(0, 10_000)
    if rng.random() < 0.3:
        count = rng.randint(1, 40)
        metadata.num_messages_in_batch = count
        items = []
        for i in range(count):
            value = rng.randbytes(rng.choice([0, 1, 100, 1000]))
            single = api.SingleMessageMetadata(payload_size=len(value))
            if rng.random() < 0.5:
                single.sequence_id = first + i
            random_fields(rng, single)
            data = single.SerializeToString()
            items.append(len(data).to_bytes(4, "big") + data + value)
        payload = b"".join(items)
    else:
        count = 1
        random_fields(rng, metadata)
        payload = rng.randbytes(rng.choice([0, 5, 100]))
    codec = rng.choice([api.NONE, api.NONE, api.LZ4, api.ZLIB])
    if codec != api.NONE:
        metadata.compression, metadata.uncompressed_size = codec, len(payload)
        payload = bytes(cramjam.lz4.compress_block(payload, store_size=False)) if codec == api.LZ4 \
            else zlib.compress(payload)
    return metadata.SerializeToString(), payload, first + count - 1 + rng.choice([0, 0, 5])


def test_every_entry_taken_is_stored_as_the_reference_path_stores_it(writers):
    rng = random.Random(31)
    taken = sum(assert_same(*random_entry(rng), writers) for _ in range(1500))
    assert taken > 1200  # (those left: null partition keys mostly; see below for each kind)


def test_damaged_entries_are_refused_or_left_as_the_reference_path_does(writers):
    """Bytes flipped, cut or added anywhere in the metadata or the payload: the native path never stores
    what the reference path would refuse, nor differently from it."""
    rng = random.Random(32)
    for _ in range(3000):
        metadata, payload, highest = random_entry(rng)
        part = bytearray(metadata if rng.random() < 0.5 else payload)
        action = rng.randrange(3)
        if action == 0 and part:
            part[rng.randrange(len(part))] ^= 1 << rng.randrange(8)
        elif action == 1:
            del part[rng.randrange(len(part) + 1):]
        else:
            part[rng.randrange(len(part) + 1):0] = rng.randbytes(rng.randint(1, 4))
        if rng.random() < 0.5:
            metadata = bytes(part)
        else:
            payload = bytes(part)
        assert_same(metadata, payload, highest, writers)


@pytest.mark.parametrize("fields", [
    {"encryption_keys": [api.EncryptionKeys(key="k", value=b"v")], "encryption_algo": "RSA",
     "encryption_param": b"iv"},
    {"uuid": "u", "chunk_id": 0, "num_chunks_from_msg": 2, "total_chunk_msg_size": 10},
    {"marker_type": 10},
    {"txnid_least_bits": 1, "txnid_most_bits": 2},
    {"partition_key": "a2V5", "partition_key_b64_encoded": True},
], ids=["encrypted", "chunk", "marker", "transaction", "base64-key"])
def test_entries_only_the_reference_path_understands_are_left_to_it(fields, writers):
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW, **fields)
    assert unpack_native(metadata.SerializeToString(), b"payload", 0, LIMITS) is None


def test_a_message_with_a_property_twice_is_left_to_the_reference_path(writers):
    """A dict keeps one of the two; which one is the reference path's to say."""
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW)
    metadata.properties.add(key="a", value="1")
    metadata.properties.add(key="a", value="2")
    assert unpack_native(metadata.SerializeToString(), b"v", 0, LIMITS) is None
    assert unpack(metadata, b"v").properties == [{"a": "2"}]


def test_text_that_is_not_utf8_is_left_to_the_reference_path():
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW,
                                   partition_key="key").SerializeToString()
    assert unpack_native(metadata.replace(b"key", b"k\xffy"), b"v", 0, LIMITS) is None
    assert unpack_native(metadata.replace(b"key", b"k\xed\xa0\x80"[:3]), b"v", 0, LIMITS) is None  # a surrogate


def test_a_batch_over_the_message_limit_is_refused_by_the_reference_path(writers):
    single = api.SingleMessageMetadata(payload_size=0).SerializeToString()
    payload = (len(single).to_bytes(4, "big") + single) * 501
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW, num_messages_in_batch=501)
    assert unpack_native(metadata.SerializeToString(), payload, 0, LIMITS) is None
    with pytest.raises(BatchError, match="501 messages, over the 500"):
        unpack(metadata, payload, 0, LIMITS)


def test_a_payload_that_does_not_decompress_is_refused_with_the_reference_paths_message():
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW, compression=api.ZLIB,
                                   uncompressed_size=10)
    with pytest.raises(BatchError) as native:
        unpack_native(metadata.SerializeToString(), b"not zlib", 0, LIMITS)
    with pytest.raises(BatchError) as reference:
        unpack(metadata, b"not zlib", 0, LIMITS)
    assert str(native.value) == str(reference.value)


def send_frame(rng: random.Random, producer_id: int, sequence_id: int) -> bytes:
    metadata, payload, highest = random_entry(rng)
    if rng.random() < 0.5:
        return encode_send(producer_id, sequence_id, rng.randint(1, 5), metadata, payload)
    send = command(Type.SEND, producer_id=producer_id, sequence_id=sequence_id, highest_sequence_id=highest,
                   num_messages=3)
    return encode_payload_command(send, metadata, payload)


def test_sends_are_cut_with_the_fields_the_frame_decoder_reads():
    rng = random.Random(33)
    frames = [send_frame(rng, rng.choice([0, 1, 2**63]), i) for i in range(200)]
    stream = b"".join(frames)
    cut, position = cut_sends(stream, 0, 1 << 20)
    assert position == len(stream) and len(cut) == len(frames)
    for native, frame in zip(cut, FrameDecoder(1 << 20).feed(stream)):
        send = frame.command.send
        assert (native.producer_id, native.sequence_id, native.highest_sequence_id, native.num_messages) == \
               (send.producer_id, send.sequence_id, send.highest_sequence_id, send.num_messages)
        assert (native.checksum_ok, native.metadata, native.payload) == (True, frame.metadata, frame.payload)


def test_cutting_stops_at_anything_but_a_whole_ordinary_send():
    rng = random.Random(34)
    first = send_frame(rng, 1, 1)
    ping = encode_command(command(Type.PING))
    chunk = encode_payload_command(command(Type.SEND, producer_id=1, sequence_id=2, is_chunk=True),
                                   *random_entry(rng)[:2])
    assert cut_sends(first + ping + first, 0, 1 << 20)[1] == len(first)
    assert cut_sends(first + chunk, 0, 1 << 20)[1] == len(first)
    assert cut_sends(first + first[:-1], 0, 1 << 20)[1] == len(first)  # the second cut short
    assert cut_sends(first, 0, len(first) - 5) == ([], 0)  # over the frame limit: frames.py refuses it
    assert cut_sends(first, 3, 1 << 20) == ([], 3)  # (not at a frame's start: a size over the limit)


def test_a_send_whose_checksum_does_not_match_is_cut_with_that_verdict():
    frame = bytearray(send_frame(random.Random(35), 1, 1))
    frame[-1] ^= 0xFF
    (native,), _ = cut_sends(bytes(frame), 0, 1 << 20)
    assert native.checksum_ok is False
    assert FrameDecoder(1 << 20).feed(bytes(frame))[0].checksum_ok is False


@pytest.mark.parametrize("ids", [(0, 0, 0, 0, 0), (1, 2, 3, 0, 77), (2**64 - 1, 2**63, 2**40, 0, 2**50),
                                 (5, 6, 6, UINT64_MINUS_ONE, UINT64_MINUS_ONE)])
def test_a_receipt_is_written_as_protobuf_writes_it(ids):
    producer_id, sequence_id, highest, ledger_id, entry_id = ids
    mid = DUPLICATE_ID if ledger_id == UINT64_MINUS_ONE else message_id(entry_id)
    assert send_receipt(*ids) == encode_command(command(
        Type.SEND_RECEIPT, producer_id=producer_id, sequence_id=sequence_id, highest_sequence_id=highest,
        message_id=mid))


def test_text_that_is_not_utf8_is_refused_naming_its_field():
    """protobuf gives such a field as bytes; the reference path refused nothing and failed further on (a key's
    .encode(), a producer name in the attributes), leaving the SEND unanswered."""
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW, replicate_to=["wXst"])
    with pytest.raises(BatchError, match=r"the message metadata: replicate_to b'w\\xffst' is not UTF-8 text"):
        parse_metadata(metadata.SerializeToString().replace(b"X", b"\xff"))
    single = api.SingleMessageMetadata(payload_size=1, partition_key="kXy").SerializeToString().replace(b"X", b"\xff")
    batch = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW, num_messages_in_batch=1)
    with pytest.raises(BatchError, match=r"batch message 0 of 1: partition_key b'k\\xffy' is not UTF-8 text"):
        unpack(batch, len(single).to_bytes(4, "big") + single + b"v")


def test_a_base64_key_that_is_not_ascii_is_refused_naming_it():
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW, partition_key="🔑",
                                   partition_key_b64_encoded=True)
    with pytest.raises(BatchError, match="partition key '🔑' is not base64"):
        unpack(metadata, b"v")


def test_the_decoder_gives_sends_and_other_frames_in_the_order_they_came():
    """Ordinary SENDs as SendFrames, the rest as Frames (a SEND with a transaction's fields too), whatever the
    reads' boundaries."""
    rng = random.Random(36)
    ordinary = [send_frame(rng, 1, i) for i in range(3)]
    ping = encode_command(command(Type.PING))
    transactional = encode_payload_command(command(Type.SEND, producer_id=1, sequence_id=9, txnid_least_bits=5),
                                           *random_entry(rng)[:2])
    stream = ordinary[0] + ping + ordinary[1] + transactional + ordinary[2]
    for step in (1, 7, len(stream)):
        decoder = FrameDecoder(1 << 20)
        items = [item for start in range(0, len(stream), step)
                 for item in decoder.feed_with_sends(stream[start:start + step])]
        kinds = [(type(item).__name__, getattr(item, "sequence_id", None)) for item in items]
        assert kinds == [("SendFrame", 0), ("Frame", None), ("SendFrame", 1), ("Frame", None), ("SendFrame", 2)]
        assert items[3].command.send.txnid_least_bits == 5
