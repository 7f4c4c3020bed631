"""What hostile clients send, shared by tests/server/test_hostile_clients.py and bench/bench_soak.py (which loops
them beside well-behaved clients for minutes): raw frames the real client never makes, and the server's
anonymous memory (RssAnon: mapped segments do not count) to judge what they cost."""

from __future__ import annotations

import socket
import struct
import threading
import time
import zlib
from pathlib import Path

import cramjam

from helpers_server import RawConnection
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import FrameDecoder, Type, command, encode_command, encode_send

MiB = 1024 * 1024
TOPIC = "persistent://public/default/hostile"


def rss_anon(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no RssAnon in /proc/{pid}/status")


class AnonPeak:
    """Samples a process's RssAnon every few ms from a thread while the block runs: `growth` is the largest
    rise over `baseline` (what it was at the start, unless given)."""

    def __init__(self, pid: int, baseline: int | None = None) -> None:
        self.pid = pid
        self.growth = 0
        self._given_baseline = baseline
        self._stop = threading.Event()

    def __enter__(self) -> AnonPeak:
        self._baseline = rss_anon(self.pid) if self._given_baseline is None else self._given_baseline
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.growth = max(self.growth, rss_anon(self.pid) - self._baseline)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def closed_within(connection: socket.socket, seconds: float, trickle: bytes) -> float | None:
    """Send `trickle` a byte every 50 ms until the server closes the connection: how long that took, or None
    if it was still open after `seconds`."""
    started = time.monotonic()
    for byte in trickle:
        try:
            connection.sendall(bytes([byte]))
            connection.settimeout(0.05)
            if connection.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        if time.monotonic() - started > seconds:
            return None
    raise AssertionError("the trickle ran out before the time did")


def raw_producer(server, topic: str = TOPIC) -> RawConnection:
    """A raw connection with producer 1 on `topic`; `server` has the binary port as `.port`."""
    raw = RawConnection(server.port)
    raw.connect()
    raw.send(encode_command(command(Type.PRODUCER, topic=topic, producer_id=1, request_id=1)))
    answer = raw.receive()
    assert answer.type == Type.PRODUCER_SUCCESS, answer
    return raw


def metadata(sequence_id: int, **fields) -> bytes:
    return api.MessageMetadata(producer_name="raw", sequence_id=sequence_id, publish_time=1_700_000_000_000,
                               **fields).SerializeToString()


def zlib_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9)
    chunk = bytes(MiB)
    return b"".join([*(compressor.compress(chunk) for _ in range(size // MiB)), compressor.flush()])


def zstd_bomb(size: int) -> bytes:
    compressor = cramjam.zstd.Compressor()
    chunk = bytes(MiB)
    for _ in range(size // MiB):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def empty_messages_batch(size: int = 5 * MiB - 10 * 1024) -> tuple[int, bytes]:
    """A batch payload of as many empty messages as fit in `size` bytes (about 870,000 in 5 MiB): (count, payload)."""
    single = api.SingleMessageMetadata(payload_size=0).SerializeToString()
    item = struct.pack(">I", len(single)) + single
    count = size // len(item)
    return count, item * count


def flood(raw: RawConnection, count: int, receipts: list[api.BaseCommand]) -> None:
    """Send `count` unbatched 8 KiB SENDs at once, and read their receipts only once all are sent."""
    raw.send(b"".join(encode_send(1, i, 1, metadata(i), bytes(8 * 1024)) for i in range(count)))
    receipts.extend(raw.receive(30) for _ in range(count))


def message_payloads(raw: RawConnection, count: int) -> list[bytes]:
    """The payloads of the next `count` MESSAGE frames, read as a client would (each within 10 s)."""
    decoder = FrameDecoder()
    payloads: list[bytes] = []
    raw.socket.settimeout(10)
    while len(payloads) < count:
        data = raw.socket.recv(1 << 20)
        if not data:
            raise ConnectionError(f"closed after {len(payloads)} messages")
        payloads += [frame.payload for frame in decoder.feed(data) if frame.command.type == Type.MESSAGE]
    return payloads
