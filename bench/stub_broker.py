"""A do-nothing Pulsar broker: the baseline of bench_server.py's produce benchmarks.

It parses every frame with seglog's own `FrameDecoder` (the BaseCommand parsed, a SEND's metadata and
payload cut out and its CRC32C checked), on the same asyncio streams and read size as `seglog serve`, and
answers what pulsar-client needs to produce: CONNECT, PARTITIONED_METADATA (0 partitions), LOOKUP
(Connect, here), PRODUCER, SEND (a SEND_RECEIPT at once: nothing is unpacked or stored), CLOSE_PRODUCER
and PING. Anything else is ignored. So a client's rate against it is the client's own ceiling with a
Python broker that does the least any broker must: what `seglog serve` does on top (unpacking batches,
writing segments) is what the ratio measures.

    python bench/stub_broker.py [--port 0]

prints `pulsar://127.0.0.1:PORT` on its first line once it listens, and serves until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from itertools import count

from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import MAX_FRAME_SIZE, FrameDecoder, FrameError, Type, command, encode_command

READ_SIZE = 1 << 16  # as seglog serve (server/connection.py)
PROTOCOL_VERSION = 19


class StubConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, url: str, names: count) -> None:
        self.reader, self.writer, self.url, self.names = reader, writer, url, names
        self.entries: dict[int, int] = {}  # producer id -> the next entry id of its receipts

    async def serve(self) -> None:
        decoder = FrameDecoder(MAX_FRAME_SIZE + 10 * 1024)
        try:
            while True:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    return
                for frame in decoder.feed(data):
                    if isinstance(frame, FrameError):
                        return
                    self.answer(frame.command)
                await self.writer.drain()
        except ConnectionError:
            return
        finally:
            self.writer.close()

    def answer(self, base: api.BaseCommand) -> None:
        kind = base.type
        if kind == Type.SEND:
            send = base.send
            entry = self.entries.get(send.producer_id, 0)
            self.entries[send.producer_id] = entry + 1
            self.reply(command(Type.SEND_RECEIPT, producer_id=send.producer_id, sequence_id=send.sequence_id,
                               highest_sequence_id=send.highest_sequence_id,
                               message_id=api.MessageIdData(ledger_id=0, entry_id=entry)))
        elif kind == Type.PING:
            self.reply(command(Type.PONG))
        elif kind == Type.CONNECT:
            self.reply(command(Type.CONNECTED, server_version="seglog-bench-stub",
                               protocol_version=min(PROTOCOL_VERSION, base.connect.protocol_version),
                               max_message_size=MAX_FRAME_SIZE))
        elif kind == Type.PARTITIONED_METADATA:
            self.reply(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=base.partition_metadata.request_id,
                               response=api.CommandPartitionedTopicMetadataResponse.Success, partitions=0))
        elif kind == Type.LOOKUP:
            self.reply(command(Type.LOOKUP_RESPONSE, request_id=base.lookup_topic.request_id,
                               response=api.CommandLookupTopicResponse.Connect, broker_service_url=self.url,
                               authoritative=True))
        elif kind == Type.PRODUCER:
            request = base.producer
            self.entries[request.producer_id] = 0
            self.reply(command(Type.PRODUCER_SUCCESS, request_id=request.request_id,
                               producer_name=request.producer_name or f"stub-{next(self.names)}",
                               last_sequence_id=-1))
        elif kind == Type.CLOSE_PRODUCER:
            self.entries.pop(base.close_producer.producer_id, None)
            self.reply(command(Type.SUCCESS, request_id=base.close_producer.request_id))

    def reply(self, base: api.BaseCommand) -> None:
        if not self.writer.is_closing():
            self.writer.write(encode_command(base))


async def main(port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    names = count()
    url = ""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await StubConnection(reader, writer, url, names).serve()

    server = await asyncio.start_server(on_connection, "127.0.0.1", port)
    url = f"pulsar://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    print(url, flush=True)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(main(parser.parse_args().port))
    sys.exit(0)
