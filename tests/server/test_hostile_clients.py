"""What one careless or hostile client can cost `seglog serve`: bounded memory, no connection held for ever.

Raw sockets make what the real client never sends (partial frames, unbounded permits, decompression bombs, a
flood of SENDs whose receipts are never read); the server's anonymous memory (RssAnon: mapped segments do
not count) is sampled while it happens, and what the client was owed still arrives once it behaves."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from helpers_hostile import (
    TOPIC,
    AnonPeak,
    MiB,
    closed_within,
    flood,
    message_payloads,
    metadata,
    raw_producer,
    zlib_bomb,
    zstd_bomb,
)
from helpers_server import RawConnection, start_server  # pulsar: skips without the test extra
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command, encode_command, encode_send

KEEPALIVE_S = 0.5


@pytest.fixture
def quick_keepalive(tmp_path):
    running = start_server(tmp_path / "data", "--keepalive", str(KEEPALIVE_S))
    yield running
    running.stop()


def test_a_connection_that_never_completes_connect_is_closed_at_the_first_keepalive_tick(quick_keepalive):
    connection = socket.create_connection(("127.0.0.1", quick_keepalive.port), timeout=10)
    try:
        # a frame header announcing 1 MiB, then its bytes one at a time: bytes arrive, no command completes
        took = closed_within(connection, 8 * KEEPALIVE_S, struct.pack(">II", MiB, MiB - 4) + bytes(1000))
    finally:
        connection.close()
    assert took is not None, f"still open after {8 * KEEPALIVE_S}s of trickled bytes"
    assert took < 3 * KEEPALIVE_S


def test_a_connected_client_that_trickles_a_frame_without_answering_pings_is_closed(quick_keepalive):
    raw = RawConnection(quick_keepalive.port)
    try:
        raw.connect()
        took = closed_within(raw.socket, 8 * KEEPALIVE_S, struct.pack(">II", MiB, MiB - 4) + bytes(1000))
    finally:
        raw.close()
    assert took is not None, f"still open after {8 * KEEPALIVE_S}s of trickled bytes"
    assert took < 4 * KEEPALIVE_S  # a PING at the first silent tick, closed at the next


@pytest.mark.parametrize(("compression", "bomb"), [(api.ZLIB, zlib_bomb), (api.ZSTD, zstd_bomb)],
                         ids=["ZLIB", "ZSTD"])
def test_a_decompression_bomb_is_refused_without_inflating_it(server, compression, bomb):
    payload = bomb(256 * MiB)
    assert len(payload) < 300 * 1024
    raw = raw_producer(server)
    try:
        raw.send(encode_send(1, 0, 1, metadata(0), b"warm-up"))
        assert raw.receive().type == Type.SEND_RECEIPT
        with AnonPeak(server.process.pid) as peak:
            raw.send(encode_send(1, 1, 1, metadata(1, compression=compression, uncompressed_size=1000), payload))
            answer = raw.receive()
            # declared over the max message size: refused before anything is inflated
            raw.send(encode_send(1, 2, 1, metadata(2, compression=compression, uncompressed_size=256 * MiB),
                                 payload))
            over = raw.receive()
        raw.send(encode_send(1, 3, 1, metadata(3), b"after"))
        after = raw.receive()
    finally:
        raw.close()
    assert answer.type == Type.SEND_ERROR and answer.send_error.error == api.ChecksumError, answer
    assert "the 1000 bytes its metadata gives" in answer.send_error.message
    assert over.type == Type.SEND_ERROR and over.send_error.error == api.ChecksumError, over
    assert f"declares {256 * MiB} bytes uncompressed, over the {5 * MiB}" in over.send_error.message
    assert after.type == Type.SEND_RECEIPT and after.send_receipt.sequence_id == 3  # the producer goes on
    assert peak.growth < 16 * MiB, f"RssAnon grew {peak.growth / MiB:.0f} MiB"


def test_a_batch_of_more_messages_than_the_limit_is_refused_clearly_and_costs_little(server):
    single = api.SingleMessageMetadata(payload_size=0).SerializeToString()
    item = struct.pack(">I", len(single)) + single
    count = (5 * MiB - 10 * 1024) // len(item)  # about 870,000 empty messages in one frame
    raw = raw_producer(server)
    try:
        raw.send(encode_send(1, 0, 1, metadata(0), b"warm-up"))
        assert raw.receive().type == Type.SEND_RECEIPT
        with AnonPeak(server.process.pid) as peak:
            raw.send(encode_send(1, 1, count, metadata(1, num_messages_in_batch=count), item * count))
            answer = raw.receive()
    finally:
        raw.close()
    assert answer.type == Type.SEND_ERROR and answer.send_error.error == api.ChecksumError, answer
    assert f"the batch holds {count} messages, over the 10000 a batch may hold" in answer.send_error.message
    assert peak.growth < 24 * MiB, f"RssAnon grew {peak.growth / MiB:.0f} MiB"


@pytest.mark.parametrize(("options", "connections", "bound"), [
    ((), 1, 32 * MiB),  # a connection's share, 16 MiB by default
    (("--max-publish-buffer", "8MiB", "--max-connection-publish-buffer", "64MiB"), 2, 24 * MiB),  # the whole
], ids=["connection", "server"])
def test_a_flood_of_sends_whose_receipts_are_not_read_is_held_in_bounded_memory(tmp_path, options, connections,
                                                                                  bound):
    count = 12_000  # about 100 MB of unbatched SENDs a connection
    server = start_server(tmp_path / "data", *options)
    raws = [raw_producer(server, f"{TOPIC}-{i}") for i in range(connections)]
    try:
        for raw in raws:
            raw.send(encode_send(1, count, 1, metadata(count), b"warm-up"))
            assert raw.receive().type == Type.SEND_RECEIPT
        receipts: list[list[api.BaseCommand]] = [[] for _ in raws]
        with AnonPeak(server.process.pid) as peak:
            floods = [threading.Thread(target=flood, args=(raw, count, out), daemon=True)
                      for raw, out in zip(raws, receipts)]
            for thread in floods:
                thread.start()
            for thread in floods:
                thread.join(120)
    finally:
        for raw in raws:
            raw.close()
        server.stop()
    for out in receipts:
        assert [r.send_receipt.sequence_id for r in out] == list(range(count))
        assert [r.send_receipt.message_id.entry_id for r in out] == list(range(1, count + 1))
    assert peak.growth < bound, f"RssAnon grew {peak.growth / MiB:.0f} MiB"


def test_the_limit_on_messages_per_batch_is_a_setting(tmp_path):
    single = api.SingleMessageMetadata(payload_size=1).SerializeToString()
    item = struct.pack(">I", len(single)) + single + b"x"
    server = start_server(tmp_path / "data", "--max-messages-per-batch", "100")
    raw = raw_producer(server)
    try:
        answers = []
        for sequence_id, count in enumerate((100, 101)):
            raw.send(encode_send(1, sequence_id, count, metadata(sequence_id, num_messages_in_batch=count),
                                 item * count))
            answers.append(raw.receive())
    finally:
        raw.close()
        server.stop()
    assert answers[0].type == Type.SEND_RECEIPT
    assert answers[1].type == Type.SEND_ERROR and answers[1].send_error.error == api.ChecksumError
    assert "the batch holds 101 messages, over the 100 a batch may hold" in answers[1].send_error.message


def test_a_consumer_granting_every_permit_and_never_reading_costs_one_read(server, tmp_path):
    count, value = 6_400, bytes(10 * 1024)  # a backlog of 64 MiB
    client = server.client()
    producer = client.create_producer(TOPIC, batching_enabled=False, max_pending_messages=count)
    for i in range(count):
        producer.send_async(value[:-8] + struct.pack(">Q", i), None)
    producer.flush()
    raw = RawConnection(server.port)
    try:
        raw.connect()
        raw.send(encode_command(command(Type.SUBSCRIBE, topic=TOPIC, subscription="greedy", sub_type=0,
                                        consumer_id=1, request_id=2, initial_position=api.CommandSubscribe.Earliest)))
        assert raw.receive().type == Type.SUCCESS
        with AnonPeak(server.process.pid) as peak:
            raw.send(encode_command(command(Type.FLOW, consumer_id=1, message_permits=2**32 - 1)))
            time.sleep(3)  # the server takes what it may, and waits for the socket to drain
        received = message_payloads(raw, count)
    finally:
        raw.close()
    assert [struct.unpack(">Q", payload[-8:])[0] for payload in received] == list(range(count))
    assert peak.growth < 16 * MiB, f"RssAnon grew {peak.growth / MiB:.0f} MiB"
