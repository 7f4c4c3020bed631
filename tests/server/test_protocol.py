"""The protocol layer alone (frames, the committed protobuf modules, batches, message ids), and what a raw
socket that breaks the protocol gets from `seglog serve`: an error or a close, never a server down."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

import seglog
from helpers_server import RawConnection, start_server  # pulsar: skips without the test extra
from seglog._core._format import crc32c
from seglog.replication import markers_pb2
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import unpack
from seglog.server.protocol.frames import (
    MAGIC_CRC32C,
    FrameDecoder,
    FrameError,
    Type,
    command,
    encode_command,
    encode_payload_command,
)
from seglog.server.protocol.message_ids import LEDGER_ID, message_id, offset_of

SRC = Path(__file__).resolve().parents[2] / "src"
NONE_DECLARATION = re.compile(r"\s*None: ")


@pytest.mark.parametrize(("proto", "module"), [("seglog/server/protocol/pulsar_api.proto", api),
                                               ("seglog/replication/markers.proto", markers_pb2)])
def test_the_committed_module_is_generated_from_the_proto(tmp_path, proto, module):
    """pulsar_api_pb2.py and the replication's markers_pb2.py are committed; each must describe exactly what
    its .proto says."""
    pytest.importorskip("grpc_tools")
    out = tmp_path / "descriptor.bin"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{SRC}", f"--descriptor_set_out={out}",
                    str(SRC / proto)], check=True, capture_output=True, timeout=60)
    generated = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    committed = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(committed)
    _without_json_names(generated.message_type)  # derived from the field names; CopyToProto leaves them out
    assert committed == generated


@pytest.mark.parametrize("proto", ["seglog/server/protocol/pulsar_api.proto", "seglog/replication/markers.proto"])
def test_the_committed_stub_is_generated_from_the_proto(tmp_path, proto):
    """The .pyi stubs beside the protobuf modules (what mypy reads for them) are protoc's --pyi_out output, less
    the lines that declare an enum value named `None`: protoc writes the keyword as a name, which no Python
    parser accepts (protocolbuffers/protobuf#20880); code reaches that value as `Schema.Type.Value("None")`."""
    pytest.importorskip("grpc_tools")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{SRC}", f"--pyi_out={tmp_path}", str(SRC / proto)],
                   check=True, capture_output=True, timeout=60)
    stub = Path(proto).with_name(Path(proto).stem + "_pb2.pyi")
    generated = [line for line in (tmp_path / stub).read_text().splitlines() if not NONE_DECLARATION.match(line)]
    assert (SRC / stub).read_text().splitlines() == generated


def _without_json_names(messages) -> None:
    for message in messages:
        for field in message.field:
            field.ClearField("json_name")
        _without_json_names(message.nested_type)


def test_frames_round_trip_and_are_cut_from_a_stream_byte_by_byte():
    ping = encode_command(command(Type.PING))
    send = encode_payload_command(command(Type.SEND, producer_id=1, sequence_id=7), b"metadata", b"payload")
    decoder = FrameDecoder()
    frames = [frame for byte in ping + send for frame in decoder.feed(bytes([byte]))]
    assert [frame.command.type for frame in frames] == [Type.PING, Type.SEND]
    assert (frames[1].metadata, frames[1].payload, frames[1].checksum_ok) == (b"metadata", b"payload", True)
    assert struct.unpack_from(">H", send, 8 + len(command(Type.SEND, producer_id=1, sequence_id=7)
                                                  .SerializeToString()))[0] == MAGIC_CRC32C


def test_a_wrong_checksum_and_a_bad_size_are_reported():
    send = bytearray(encode_payload_command(command(Type.SEND, producer_id=1, sequence_id=1), b"m", b"p"))
    send[-1] ^= 0xFF
    (frame,) = FrameDecoder().feed(bytes(send))
    assert not isinstance(frame, FrameError) and not frame.checksum_ok
    (error,) = FrameDecoder().feed(struct.pack(">I", 0xFFFF_FFF0))
    assert isinstance(error, FrameError) and error.fatal


def test_a_batch_payload_unpacks_into_messages():
    items = b""
    for i in range(3):
        single = api.SingleMessageMetadata(payload_size=2, partition_key=f"k{i}", event_time=i,
                                           properties=[api.KeyValue(key="i", value=str(i))])
        data = single.SerializeToString()
        items += struct.pack(">I", len(data)) + data + b"v%d" % i
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=123, num_messages_in_batch=3)
    messages = unpack(metadata, items)
    assert messages.values == [b"v0", b"v1", b"v2"]
    assert messages.keys == [b"k0", b"k1", b"k2"]
    assert messages.event_times == [None, 1, 2]  # 0 is Pulsar's "no event time"
    assert messages.timestamps == [123, 123, 123]
    assert messages.properties == [{"i": "0"}, {"i": "1"}, {"i": "2"}]


def test_message_ids_round_trip_and_keep_order():
    assert (message_id(42).ledger_id, message_id(42).entry_id) == (LEDGER_ID, 42)
    assert offset_of(42) == 42 and offset_of(42, 0) == 42 and offset_of(42, 5) == 47


def test_the_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283


# a raw socket against the server


def test_ping_is_answered_with_pong(raw):
    connection = raw()
    connected = connection.connect()
    assert connected.server_version.startswith("seglog") and connected.protocol_version == 19
    assert connected.max_message_size > 0
    connection.send(encode_command(command(Type.PING)))
    assert connection.receive().type == Type.PONG


def test_a_silent_client_is_pinged_then_closed(tmp_path):
    server = start_server(tmp_path / "data", "--keepalive", "0.2")
    try:
        connection = RawConnection(server.port)
        connection.connect()
        assert connection.receive().type == Type.PING  # silent for an interval
        assert connection.closed_by_server()  # and no PONG for another
        connection.close()
    finally:
        assert server.stop() == 0


def test_a_command_before_connect_closes_the_connection(raw, server):
    connection = raw()
    connection.send(encode_command(command(Type.PING)))
    assert connection.closed_by_server()
    assert_server_still_serves(server)


def test_a_bad_frame_size_closes_the_connection(raw, server):
    connection = raw()
    connection.connect()
    connection.send(struct.pack(">I", 0x7FFF_FFFF) + b"x" * 64)
    assert connection.closed_by_server()
    assert_server_still_serves(server)


def test_an_unknown_command_closes_the_connection(raw, server):
    connection = raw()
    connection.connect()
    unknown = b"\x08\x63"  # BaseCommand.type = 99
    connection.send(struct.pack(">II", len(unknown) + 4, len(unknown)) + unknown)
    assert connection.closed_by_server()
    assert_server_still_serves(server)


def test_a_wrong_checksum_is_a_checksum_error_for_that_send_only(raw, server):
    connection = raw()
    connection.connect()
    connection.send(encode_command(command(Type.PRODUCER, topic="persistent://public/default/raw", producer_id=1,
                                           request_id=1)))
    assert connection.receive().type == Type.PRODUCER_SUCCESS
    metadata = api.MessageMetadata(producer_name="x", sequence_id=0, publish_time=1).SerializeToString()
    bad = bytearray(encode_payload_command(command(Type.SEND, producer_id=1, sequence_id=0), metadata, b"v"))
    bad[-1] ^= 0xFF
    connection.send(bytes(bad))
    reply = connection.receive()
    assert reply.type == Type.SEND_ERROR and reply.send_error.error == api.ChecksumError
    connection.send(encode_payload_command(command(Type.SEND, producer_id=1, sequence_id=1), metadata, b"ok"))
    reply = connection.receive()
    assert reply.type == Type.SEND_RECEIPT and reply.send_receipt.message_id.entry_id == 0
    with seglog.open(server.data, background=False) as log:
        assert [m.value for m in log.topic("raw").reader("earliest", partition=0)] == [b"ok"]


def test_sends_read_together_are_each_written_and_answered_in_order_before_the_next_command(raw, server):
    """The SENDs of one read are written together (in one append when they can be), but each keeps its own
    answer: two producers' SENDs interleaved with a SEND whose checksum is wrong, then a CLOSE_PRODUCER, all in
    one write, get their receipts in order, the bad one its ChecksumError, then the close its SUCCESS."""
    connection = raw()
    connection.connect()
    for producer_id in (1, 2):
        connection.send(encode_command(command(Type.PRODUCER, topic="persistent://public/default/together",
                                               producer_id=producer_id, request_id=producer_id)))
        assert connection.receive().type == Type.PRODUCER_SUCCESS
    metadata = api.MessageMetadata(producer_name="x", sequence_id=0, publish_time=1).SerializeToString()
    sends = [encode_payload_command(command(Type.SEND, producer_id=1 + i % 2, sequence_id=i), metadata, b"v%d" % i)
             for i in range(6)]
    bad = bytearray(sends[2])
    bad[-1] ^= 0xFF
    sends[2] = bytes(bad)
    close = encode_command(command(Type.CLOSE_PRODUCER, producer_id=1, request_id=9))
    connection.send(b"".join(sends) + close)
    answers = [connection.receive() for _ in range(7)]
    assert sorted(a.type for a in answers[:6]) == sorted([Type.SEND_RECEIPT] * 5 + [Type.SEND_ERROR])
    assert answers[-1].type == Type.SUCCESS and answers[-1].success.request_id == 9
    by_producer: dict[int, list] = {1: [], 2: []}
    for answer in answers[:6]:
        reply = answer.send_receipt if answer.type == Type.SEND_RECEIPT else answer.send_error
        by_producer[reply.producer_id].append(reply.sequence_id)
    assert by_producer == {1: [0, 2, 4], 2: [1, 3, 5]}  # (each producer's answers in the order of its SENDs)
    error = next(a.send_error for a in answers if a.type == Type.SEND_ERROR)
    assert (error.sequence_id, error.error) == (2, api.ChecksumError)
    with seglog.open(server.data, background=False) as log:
        stored = [m.value for m in log.topic("together").reader("earliest", partition=0)]
    assert sorted(stored) == [b"v0", b"v1", b"v3", b"v4", b"v5"]


def test_a_read_gives_a_consumer_at_most_half_its_largest_flow(tmp_path):
    """A read takes at most half the most permits one FLOW granted (a client's first FLOW is its receiver
    queue; at most READ_MESSAGES), so that the client has the first half to process while the second is read.
    Seen in the batch entries under precise flow control: each read's run of a stored batch is an entry of
    its own."""
    server = start_server(tmp_path / "data", "--precise-dispatcher-flow-control")
    try:
        _halves(server)
    finally:
        server.stop()


def _halves(server) -> None:
    producer = server.client().create_producer("persistent://public/default/halves", batching_enabled=True,
                                               batching_max_messages=100, batching_max_publish_delay_ms=60_000)
    for i in range(100):
        producer.send_async(b"m%d" % i, None)
    producer.flush()
    connection = RawConnection(server.port)
    connection.connect()
    connection.send(encode_command(command(Type.SUBSCRIBE, topic="persistent://public/default/halves",
                                           subscription="s", sub_type=api.CommandSubscribe.Exclusive,
                                           consumer_id=1, request_id=1,
                                           initial_position=api.CommandSubscribe.Earliest)))
    assert connection.receive().type == Type.SUCCESS

    def entries(permits: int, count: int) -> list[tuple[int, int]]:
        connection.send(encode_command(command(Type.FLOW, consumer_id=1, message_permits=permits)))
        got = []
        for _ in range(count):
            frame = connection.receive_frame()
            assert frame.command.type == Type.MESSAGE
            metadata = api.MessageMetadata.FromString(frame.metadata)
            got.append((frame.command.message.message_id.entry_id, metadata.num_messages_in_batch))
        return got

    assert entries(10, 2) == [(0, 5), (5, 5)]  # (reads of 5)
    assert entries(4, 1) == [(10, 4)]  # (a smaller FLOW leaves reads of 5)
    assert entries(200, 1) == [(14, 86)]  # (reads of 100 now: the rest of the stored batch at once)
    connection.close()


def assert_server_still_serves(server) -> None:
    producer = server.client().create_producer("still-serving")
    assert producer.send(b"x").entry_id() >= 0
    assert server.process.poll() is None
