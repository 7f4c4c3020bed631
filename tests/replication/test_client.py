"""The replicator's connection (replication/client.py) against a scripted broker on loopback: receipts that
come interleaved between producers, several in one read, each counted for its own producer, in order; a
marker's receipt repeats the sequence id of the message before it and counts once."""

from __future__ import annotations

import asyncio

from seglog.replication.client import RemoteCluster, RemoteConnection
from seglog.server.protocol.frames import FrameDecoder, Type, command, encode_command

WAIT_S = 10.0


async def _scripted_broker(receipts: list[tuple[int, int]], sends: int):
    """A broker that accepts CONNECT and PRODUCERs, waits for `sends` SENDs, then answers with `receipts`,
    (which producer, in the order they were made; sequence id), in one write."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder, received, producers = FrameDecoder(), 0, []
        while received < sends:
            data = await reader.read(1 << 16)
            if not data:
                return
            for frame in decoder.feed(data):
                kind = frame.command.type
                if kind == Type.CONNECT:
                    writer.write(encode_command(command(Type.CONNECTED, server_version="scripted")))
                elif kind == Type.PRODUCER:
                    ask = frame.command.producer
                    producers.append(ask.producer_id)
                    writer.write(encode_command(command(Type.PRODUCER_SUCCESS, request_id=ask.request_id,
                                                        producer_name=ask.producer_name, last_sequence_id=-1)))
                elif kind == Type.SEND:
                    received += 1
        writer.write(b"".join(encode_command(command(Type.SEND_RECEIPT, producer_id=producers[which],
                                                     sequence_id=sequence))
                              for which, sequence in receipts))
        await writer.drain()
        await reader.read()  # (until the replicator closes)
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_interleaved_receipts_count_for_their_own_producers_in_order():
    async def run() -> tuple[int, int]:
        # the first producer sends 5, a marker after it (sequence id 5 again) and 6; the second sends 9 and
        # 10; the receipts interleave, and 10's never comes
        receipts = [(0, 5), (1, 9), (0, 5), (0, 6)]
        server = await _scripted_broker(receipts, sends=5)
        port = server.sockets[0].getsockname()[1]
        connection = await RemoteConnection.open(RemoteCluster("west", f"pulsar://127.0.0.1:{port}"))
        try:
            first = await connection.create_producer("persistent://public/default/t-partition-0", "a")
            second = await connection.create_producer("persistent://public/default/t-partition-1", "b")
            first.send([(5, b"m", b"", 1), (5, b"marker", b"", 0), (6, b"m", b"", 1)])
            second.send([(9, b"m", b"", 1), (10, b"m", b"", 1)])
            counts = await asyncio.wait_for(asyncio.gather(first.receipts_beyond(2), second.receipts_beyond(0)),
                                            WAIT_S)
            return counts[0], counts[1]
        finally:
            await connection.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(run()) == (3, 1)
