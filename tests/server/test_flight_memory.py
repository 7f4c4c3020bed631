"""The Flight port's memory stays bounded whatever its clients do: `seglog serve` in a subprocess serving a topic
of about 200 MB, its anonymous memory (RssAnon: the heap, not the mapped segments, which are the page cache's)
sampled while four pyarrow.flight clients read all of it at once, and while a client holds a stream without
reading it (gRPC's flow control stops the server's writes: nothing of the rest is buffered)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pyarrow import flight

import seglog
from helpers_hostile import AnonPeak, rss_anon
from helpers_server import start_server

MESSAGES = 200_000
VALUE = 1_000  # bytes: 200 MB in all
PER_BATCH = 10_000  # 10 MB stored batches: each goes out in two slices (the 8 MiB bound)
CLIENTS = 4
MIB = 1 << 20
# Four streams hold at most a batch each (8 MiB, as views of the mapped segment: not anonymous) and what gRPC
# queues per stream within its flow-control window (64 KiB to a few MiB as it tunes it), plus the offsets
# arrays rebuilt for slices (4 bytes a row); 64 MiB bounds that with room for the allocator's slack, where
# buffering the ranges (800 MB over four clients) would go far past it.
BOUND = 64 * MIB
STALLED_BOUND = 16 * MIB
STALLED_BATCHES = 10  # 100 MB
READ_TIMEOUT_S = 60.0


def ticket(end: int) -> flight.Ticket:
    return flight.Ticket(json.dumps({"topic": "public/default/big", "partition": 0, "start": 0,
                                     "end": end}).encode())


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    data = tmp_path_factory.mktemp("flight-memory") / "data"
    with seglog.open(data) as log:
        topic = log.create_topic("big", segment_size="256MiB")
        value = b"v" * VALUE
        with topic.producer() as producer:
            for _ in range(MESSAGES // PER_BATCH):
                producer.send_batch([value] * PER_BATCH)
    server = start_server(data)
    client = flight.connect(server.flight_url)
    client.do_get(ticket(PER_BATCH)).read_all()  # gRPC's and pyarrow's allocations of a first call, made
    yield server, client
    client.close()
    server.stop()


def test_four_clients_reading_everything_keep_the_servers_memory_flat(big):
    server, _ = big
    idle = rss_anon(server.process.pid)
    rows: list[int] = []
    errors: list[BaseException] = []

    def read_all() -> None:
        try:
            with flight.connect(server.flight_url) as client:
                options = flight.FlightCallOptions(timeout=READ_TIMEOUT_S)
                rows.append(sum(chunk.data.num_rows for chunk in client.do_get(ticket(MESSAGES), options)))
        except BaseException as error:  # (reported by the test thread)
            errors.append(error)

    readers = [threading.Thread(target=read_all) for _ in range(CLIENTS)]
    with AnonPeak(server.process.pid, idle) as peak:
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(READ_TIMEOUT_S)
    assert not errors and rows == [MESSAGES] * CLIENTS, errors
    grown = peak.growth
    assert grown < BOUND, f"RssAnon grew by {grown / MIB:.1f} MiB over idle ({idle / MIB:.1f} MiB)"


def test_a_client_that_stops_reading_does_not_make_the_server_buffer_its_range(big):
    server, client = big
    idle = rss_anon(server.process.pid)
    reader = client.do_get(ticket(MESSAGES))
    reader.read_chunk()  # one batch, then the client holds the stream without reading
    with AnonPeak(server.process.pid, idle) as peak:
        time.sleep(1.5)  # (what is measured is the server's memory while nothing is read: time must pass)
    grown = peak.growth
    assert grown < STALLED_BOUND, f"RssAnon grew by {grown / MIB:.1f} MiB over idle while the client held its stream"
    reader.cancel()
    assert client.do_get(ticket(PER_BATCH)).read_all().num_rows == PER_BATCH  # the server serves on


def test_sigterm_ends_the_server_even_while_a_client_holds_a_stream_unread(tmp_path):
    """pyarrow cannot cancel a call whose client stopped reading (its write waits on gRPC's flow control), and
    the interpreter's exit would wait for it for ever: past the Flight port's bound the server, everything
    written and closed, ends its process, as Pulsar's broker past brokerShutdownTimeoutMs."""
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("big", segment_size="256MiB")
        with topic.producer() as producer:
            for _ in range(STALLED_BATCHES):  # more than gRPC's windows and the sockets' buffers hold
                producer.send_batch([b"v" * VALUE] * PER_BATCH)
    server = start_server(tmp_path / "data")
    with flight.connect(server.flight_url) as client:
        reader = client.do_get(ticket(STALLED_BATCHES * PER_BATCH))
        reader.read_chunk()  # then held unread
        time.sleep(1.0)  # (the server writes on until gRPC's flow control blocks it: time must pass)
        started = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - started < 15
    assert "Traceback" not in server.log()  # (it logs "the Flight port did not stop within 5 s" when stalled)
    with seglog.open(tmp_path / "data") as log:  # the data directory was closed and released
        assert log.topic("big").end_offset(0) == STALLED_BATCHES * PER_BATCH
