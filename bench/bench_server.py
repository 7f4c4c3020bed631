"""`seglog serve` under the real pulsar-client (C++ core): producing, the send round trip, receiving and
acknowledging, 100 B values throughout, each next to a baseline measured in the same run.

Group "server: send_async, batched, 1 producer"
  The producer is pulsar-client in a process of its own (producer_worker.py): batching on (a batch is at
  most 1,000 messages or 128 KiB, or 10 ms), at most 10,000 messages waiting for receipts, `send_async`
  with a callback per message, then `flush()` and every callback. A round is 100,000 sends a producer.
  Each producer process is pinned to a CPU (the first to CPU 0, the second to CPU 1; SEGLOG_BENCH_PIN=0
  leaves them unpinned): see `pinned_cpus` for why.
  baseline  do-nothing stub broker   stub_broker.py: seglog's FrameDecoder parses every frame, and a
                                     SEND_RECEIPT goes back at once (nothing unpacked, nothing stored)
            pulsar-lite              a native broker (PyPI pulsar-lite, Rust over RocksDB), for information
  seglog    seglog serve             >= 0.9x the stub (the broker is not the bottleneck), and broker CPU
                                     <= 3 us a message: utime + stime of the server's pid over a round,
                                     divided by the messages (median of the rounds; `server_cpu_us_per_msg`)

Group "server: send_async, batched, 2 producer processes" (the same producer, twice, at once; each on a
topic of its own)
  baselines seglog serve, 1 producer     the seglog figure above, measured again beside the others
            do-nothing stub, 2 producers the ceiling of two client processes on this machine
  seglog    seglog serve, 2 producers    >= 1.6x one producer, where the stub reaches it: the stub's
                                         two producers are paired round by round with one, and their
                                         `paired_ratio` says whether it did in this run

The seglog benchmarks of these two groups are also paired round by round: before each of their rounds
(untimed by pytest-benchmark) a round of the baseline they are held to runs, and the note gives the median
of the per-round ratios (`paired_ratio` in the JSON), which drifting load from other processes distorts
less than a comparison of benchmarks run a minute apart.

Group "server: send() round trip, unbatched": `send()` one message at a time, batching off, each call
timed, 2,000 calls a round; p50 and p99 of all the timed rounds' calls are in the note (and the JSON:
`p50_us`, `p99_us`); the rate is 1 / the mean.
  baselines do-nothing stub broker (the client's and the loopback's own share); pulsar-lite; NATS
            JetStream `js.publish` (waits for the PubAck; file storage); Redis `XADD` (append-only file, no
            fsync)
  seglog    seglog serve (fsync='never', the default: like both, it leaves the disk to the OS): p99 <= 2x
            the stub's, from stub rounds run before each of its rounds (`p99_to_paired`)

Group "server: receive + acknowledge": 50,000 messages written beforehand (untimed); a round
reads them all through a new subscription (or consumer, or group) from the first, acknowledging each.
  baselines pulsar-lite: as seglog serve below (a message received twice is acknowledged and counted
            apart, `repeated_messages`: pulsar-lite 0.2.0 sends some entries twice)
            NATS JetStream: a durable pull consumer, `fetch(1000)`, `msg.ack()` each
            Redis Streams: `XREADGROUP COUNT 1000` + `XACK` of the ids read
  seglog    seglog serve: `subscribe` (receiver queue 1,000), `receive()` + `acknowledge()` each until
            every message id came, and `close()`, which flushes the grouped acks; checked after each
            round: nothing left to receive

Group "server: produce path in-process, SENDs of 1,000 x 100 B": where the broker's CPU time per message
goes, without sockets, asyncio or the thread pool. SEND frames laid out as the C++ client writes a batch
are cut (`FrameDecoder.feed_with_sends`, natively; baseline: `FrameDecoder.feed`, protobuf, all the stub
does), unpacked (`batches.unpack_native`; baseline: the reference path `batches.unpack`), appended
(`BrokerService.append`), and all of it with the receipt's bytes as `seglog serve` runs it (baseline: the
same with the reference path); for information (µs a message in the notes), the end-to-end figures above
being the targets.

The NATS and Redis benchmarks run when nats-server and redis-server (Debian packages) and their Python
clients (nats-py, redis; imported here only when they run) are installed, and are skipped with a line
saying so otherwise. The CPU time of every server process over the rounds is in the notes (µs a message).

Sizes scale with --seglog-scale. With --benchmark-disable (CI) each body runs once on a few thousand
messages and checks that what it measures works: receipts all Ok, messages stored (the last message id),
acks landed, latencies taken."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count

import pytest
from server_processes import (
    Process,
    ProducerWorker,
    start_nats,
    start_pulsar_lite,
    start_redis,
    start_seglog,
    start_stub,
)

from seglog._core._pulsar_send import SendFrame, send_receipt
from seglog.server.connection import READ_SIZE
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import parse_metadata, unpack, unpack_native
from seglog.server.protocol.frames import FrameDecoder, Type, command, encode_command, encode_payload_command
from seglog.server.protocol.message_ids import message_id

pulsar = pytest.importorskip("pulsar")  # the test extra

VALUE_BYTES = 100  # as bench/conftest.py (not imported: tests/conftest.py is `conftest` too in a whole run)
WARMUP_ROUNDS = 1  # bench.run's default (conftest.py), left out of the per-round figures
ONE = "server: send_async, batched, 1 producer"
TWO = "server: send_async, batched, 2 producer processes"
SYNC = "server: send() round trip, unbatched"
RECEIVE = "server: receive + acknowledge"
STUB = "do-nothing stub broker"
LITE = "pulsar-lite"
RECEIVE_TIMEOUT_MS = 30_000
VALUE = bytes(range(VALUE_BYTES))
_topics = count()


@dataclass
class Server:
    process: Process
    url: str


@pytest.fixture(scope="module")
def seglog_server(scratch, logs) -> Iterator[Server]:
    process, url = start_seglog(scratch / "seglog-data", logs)
    yield Server(process, url)
    assert process.stop() == 0, process.tail()


@pytest.fixture(scope="module")
def stub_server(logs) -> Iterator[Server]:
    process, url = start_stub(logs)
    yield Server(process, url)
    process.stop()


@pytest.fixture(scope="module")
def lite_server(scratch, logs) -> Iterator[Server]:
    process, url = start_pulsar_lite(scratch / "pulsar-lite", logs)
    yield Server(process, url)
    process.stop()


@pytest.fixture(scope="module")
def sizes(scale):
    @dataclass(frozen=True)
    class Sizes:
        produce: int = scale(100_000, 2_000)  # send_async per producer per round
        sync: int = scale(2_000, 50)  # send() calls per round
        receive: int = scale(50_000, 1_000)  # messages read and acked per round
    return Sizes()


def topic_name(kind: str) -> str:
    return f"persistent://public/default/bench-{kind}-{next(_topics)}"


@pytest.fixture
def clients():
    """pulsar.Client(url) in this process, closed after the test."""
    made = []

    def make(url: str):
        made.append(pulsar.Client(url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(
            pulsar.LoggerLevel.Warn)))
        return made[-1]

    yield make
    for client in made:
        client.close()


class CpuMeter:
    """The CPU time a server process spends in each round."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.rounds: list[float] = []

    def __enter__(self) -> CpuMeter:
        self._start = self.process.cpu_seconds()
        return self

    def __exit__(self, *exc) -> None:
        self.rounds.append(self.process.cpu_seconds() - self._start)

    def us_per_message(self, messages: int) -> float:
        """The median over the timed rounds (the warm-up left out), in µs a message."""
        timed = self.rounds[WARMUP_ROUNDS:] if len(self.rounds) > WARMUP_ROUNDS else self.rounds
        return statistics.median(timed) / messages * 1e6


# ---------------------------------------------------------------------------------------------------------
# send_async, batched: producer processes

class Producers:
    """Producer workers against one server, each on a topic of its own, pinned to a CPU each (see
    `producers`). `round(n)`: n send_async per worker, all at once; its seconds, and the server's CPU."""

    def __init__(self, server: Server, workers: list[ProducerWorker], topics: list[str]) -> None:
        self.server, self.workers, self.topics = server, workers, topics
        self.meter = CpuMeter(server.process)
        self.client_meters = [CpuMeter(worker) for worker in workers]
        self.seconds: list[float] = []

    def round(self, n: int) -> None:
        with self.meter, contextlib.ExitStack() as clients:
            for meter in self.client_meters:
                clients.enter_context(meter)
            start = time.perf_counter()
            for worker in self.workers:
                worker.request(op="produce", n=n)
            for worker in self.workers:
                worker.answer()  # every receipt Ok, or the round fails
            self.seconds.append(time.perf_counter() - start)
        self.server.process.check_running()

    def cores_used(self) -> float:
        """How many cores the server and the producers kept busy together (median of the rounds): below the
        machine's count while the producers are at full speed, other processes took the rest."""
        busy = [self.meter.rounds[i] + sum(m.rounds[i] for m in self.client_meters) for i in range(len(self.seconds))]
        return statistics.median(b / t for b, t in zip(busy, self.seconds))

    def client_us_per_message(self, n: int) -> float:
        """The producer processes' CPU time a message (median of the rounds)."""
        return statistics.mean(meter.us_per_message(n) for meter in self.client_meters)

    def check_stored(self, clients, n: int) -> None:
        """Against seglog serve: every message of every round is in its topic."""
        if self.server.process.name == "seglog serve":
            client = clients(self.server.url)
            for topic in self.topics:
                assert stored(client, topic) == n * len(self.seconds), topic


def pinned_cpus() -> list[int | None]:
    """The CPU each producer worker is pinned to, in turn: every CPU this process may use, unless
    SEGLOG_BENCH_PIN=0. Pinned, a worker's two busy threads (the sending one, and the client's I/O thread
    that runs the receipt callbacks) share one core and pass the GIL to each other cheaply. Unpinned,
    they fight for it across cores, and the client's cost per message swings between about 19 and 31 µs
    from one round to the next on a 2-core machine: that noise, not the broker, would be measured."""
    if os.environ.get("SEGLOG_BENCH_PIN", "1") == "0":
        return [None]
    return sorted(os.sched_getaffinity(0))


@pytest.fixture
def producers(logs):
    """start(server, count): `count` connected producer workers, pinned to CPUs 0, 1, ... in turn; all
    stopped by their pids after the test."""
    started: list[ProducerWorker] = []
    cpus = pinned_cpus()

    def start(server: Server, count_: int) -> Producers:
        topics = [topic_name("produce") for _ in range(count_)]
        workers = [ProducerWorker(logs, len(started) + i) for i in range(count_)]
        started.extend(workers)
        for i, (worker, topic) in enumerate(zip(workers, topics)):
            worker.request(op="open", url=server.url, topic=topic, batching=True, value_bytes=VALUE_BYTES,
                           cpu=cpus[i % len(cpus)])
        for worker in workers:
            worker.answer()
        return Producers(server, workers, topics)

    yield start
    for worker in started:
        worker.stop()


def stored(client, topic: str) -> int:
    """Messages in a one-partition topic of seglog serve: the offset of its last message + 1, as
    GET_LAST_MESSAGE_ID answers it (docs/SERVER.md, Message ids)."""
    consumer = client.subscribe(topic, "bench-count")
    try:
        return consumer.get_last_message_id().entry_id() + 1  # (entryId is the offset, -1 when empty)
    finally:
        consumer.unsubscribe()


def produce(bench, mine: Producers, clients, n: int, paired: Producers | None = None, paired_label: str = "") -> None:
    """bench.run of `mine`'s rounds; with `paired`, a round of it before each (untimed by the benchmark), so
    that the two are compared round by round as well, under the same load of the machine. Records the
    server's CPU time a message (median of the rounds) and the paired ratio, and checks what was stored."""
    setup = None if paired is None else (lambda: paired.round(n))
    bench.run(lambda: mine.round(n), setup=setup)
    messages = n * len(mine.workers)
    cpu, client = mine.meter.us_per_message(messages), mine.client_us_per_message(n)
    bench.record("server_cpu_us_per_msg", round(cpu, 3))
    bench.record("client_cpu_us_per_msg", round(client, 3))
    # On an idle machine with as many cores as producers, each producer is held back by its own CPU time
    # alone (one core each) while the broker's time comes out of the same cores: the most k producers can
    # get over one is k * client / (client + broker), whatever else runs meanwhile.
    cores = len(os.sched_getaffinity(0))
    ceiling = cores * client / (client + cpu) if len(mine.workers) >= cores and client + cpu > 0 else None
    note = (f"CPU a message: {mine.server.process.name} {cpu:.2f} µs, a producer process {client:.1f} µs "
            f"(medians of the rounds)")
    if ceiling is not None:
        bench.record("cpu_bound_ratio_to_one", round(ceiling, 3))
        note += f"; with these, {cores} producers can get at most {ceiling:.2f}x one on {cores} idle cores"
    if paired is not None:
        ratios = [(messages / t) / (n * len(paired.workers) / p) for t, p in zip(mine.seconds, paired.seconds)]
        ratio = statistics.median(ratios)
        bench.record("paired_ratio", round(ratio, 3))
        note += f"; {ratio:.2f}x {paired_label} paired round by round (median of {len(ratios)})"
        if len(paired.workers) == len(mine.workers) and cpu + client > 0:  # (0: a CI round shorter than a tick)
            # With no core to spare (other processes on the machine), a round costs the sum of the processes'
            # CPU time: the rate ratio then tends to the inverse ratio of the CPU time a message. With a core
            # to spare for the broker, to 1.
            theirs = paired.meter.us_per_message(messages) + paired.client_us_per_message(n)
            model = theirs / (cpu + client)
            bench.record("cpu_model_ratio", round(model, 3))
            note += f"; {model:.2f}x from the CPU time a message alone (a machine with no core to spare)"
        paired.check_stored(clients, n)
    load = os.getloadavg()[0]  # other processes on the machine: what the ratios here are sensitive to
    used = mine.cores_used()
    bench.record("load_average_1min", load)
    bench.record("cores_used", round(used, 2))
    bench.note(f"{note}; these processes kept {used:.2f} of the {cores} cores busy, load average {load:.1f}")
    mine.check_stored(clients, n)


def test_send_async_stub(bench, stub_server, producers, clients, sizes):
    bench.baseline(ONE, STUB, messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES)
    produce(bench, producers(stub_server, 1), clients, sizes.produce)


def test_send_async_pulsar_lite(bench, lite_server, producers, clients, sizes):
    bench.baseline(ONE, LITE, messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES)
    produce(bench, producers(lite_server, 1), clients, sizes.produce)


def test_send_async_seglog(bench, seglog_server, stub_server, producers, clients, sizes):
    bench.seglog(ONE, "seglog serve", messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES,
                 at_least={STUB: 0.9}, at_most={"server_cpu_us_per_msg": 3.0})
    produce(bench, producers(seglog_server, 1), clients, sizes.produce, producers(stub_server, 1), STUB)


def test_send_async_seglog_one_of_two(bench, seglog_server, producers, clients, sizes):
    bench.baseline(TWO, "seglog serve, 1 producer", messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES)
    produce(bench, producers(seglog_server, 1), clients, sizes.produce)


def test_send_async_stub_two(bench, stub_server, producers, clients, sizes):
    bench.baseline(TWO, "do-nothing stub, 2 producers", messages=2 * sizes.produce,
                   nbytes=2 * sizes.produce * VALUE_BYTES)
    # paired with one producer round by round: its paired_ratio says whether the stub reaches 1.6x on this
    # machine now, which the seglog target below assumes
    produce(bench, producers(stub_server, 2), clients, sizes.produce, producers(stub_server, 1), "1 producer")


def test_send_async_seglog_two(bench, seglog_server, producers, clients, sizes):
    bench.seglog(TWO, "seglog serve, 2 producers", messages=2 * sizes.produce,
                 nbytes=2 * sizes.produce * VALUE_BYTES, at_least={"seglog serve, 1 producer": 1.6})
    produce(bench, producers(seglog_server, 2), clients, sizes.produce, producers(seglog_server, 1), "1 producer")


# ---------------------------------------------------------------------------------------------------------
# send() round trip, unbatched

class Latencies:
    """Each call's time over the rounds; p50 and p99 of the timed rounds (the warm-up left out)."""

    def __init__(self) -> None:
        self.rounds: list[list[int]] = []

    def start_round(self) -> list[int]:
        self.rounds.append([])
        return self.rounds[-1]

    def percentiles(self) -> tuple[float, float]:
        """p50 and p99 in µs of the timed rounds' calls."""
        timed = self.rounds[WARMUP_ROUNDS:] if len(self.rounds) > WARMUP_ROUNDS else self.rounds
        samples = sorted(ns for one in timed for ns in one)
        assert samples, "no call was timed"
        return tuple(samples[min(len(samples) - 1, int(q * len(samples)))] / 1e3 for q in (0.5, 0.99))

    def report(self, bench, extra: str = "") -> None:
        p50, p99 = self.percentiles()
        calls = sum(len(one) for one in self.rounds[WARMUP_ROUNDS:]) or sum(len(one) for one in self.rounds)
        bench.record("p50_us", round(p50, 1))
        bench.record("p99_us", round(p99, 1))
        bench.note(f"p50 {p50:.0f} µs, p99 {p99:.0f} µs over {calls:,} calls{extra}")


def timed_calls(latencies: Latencies, n: int, call: Callable[[], object]) -> None:
    times = latencies.start_round()
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        call()
        times.append(clock() - start)


def pulsar_sync_send(bench, server: Server, clients, sizes, paired: Server | None = None) -> None:
    """Rounds of `sizes.sync` send() calls; with `paired`, a round of the same against it before each
    (untimed by the benchmark), and the p99 of ours over its p99 recorded (`p99_to_paired`)."""
    client, topic = clients(server.url), topic_name("sync")
    producer = client.create_producer(topic, batching_enabled=False)
    latencies, meter = Latencies(), CpuMeter(server.process)

    def send_all():
        with meter:
            timed_calls(latencies, sizes.sync, lambda: producer.send(VALUE))

    setup = None
    if paired is not None:
        paired_producer = clients(paired.url).create_producer(topic_name("sync"), batching_enabled=False)
        paired_latencies = Latencies()

        def setup():
            timed_calls(paired_latencies, sizes.sync, lambda: paired_producer.send(VALUE))

    bench.run(send_all, setup=setup)
    extra = f"; {server.process.name} CPU {meter.us_per_message(sizes.sync):.1f} µs a message"
    if paired is not None:
        p99, theirs = latencies.percentiles()[1], paired_latencies.percentiles()[1]
        bench.record("p99_to_paired", round(p99 / theirs, 3))
        extra += (f"; p99 {p99 / theirs:.2f}x the {paired.process.name}'s ({theirs:.0f} µs) in rounds run "
                  f"beside these")
    latencies.report(bench, extra)
    if server.process.name == "seglog serve":
        assert stored(client, topic) == sizes.sync * len(latencies.rounds)


def test_send_round_trip_stub(bench, stub_server, clients, sizes):
    bench.baseline(SYNC, STUB, messages=sizes.sync)
    pulsar_sync_send(bench, stub_server, clients, sizes)


@pytest.fixture(scope="module")
def nats_server(scratch, logs) -> Iterator[Server]:
    process, url = start_nats(scratch / "nats", logs)
    yield Server(process, url)
    process.stop()


@pytest.fixture
def nats_js(nats_server):
    """(run, js, connection): run(coroutine) on the event loop of a nats-py connection, its JetStream
    context, and the connection."""
    import nats  # nats-py, only when nats-server runs

    loop = asyncio.new_event_loop()
    connection = loop.run_until_complete(nats.connect(nats_server.url))
    try:
        yield loop.run_until_complete, connection.jetstream(), connection
    finally:
        loop.run_until_complete(connection.close())
        loop.close()


def test_send_round_trip_nats(bench, nats_server, nats_js, sizes):
    run, js, _ = nats_js
    stream, subject = f"SYNC{next(_topics)}", f"sync.{next(_topics)}"
    run(js.add_stream(name=stream, subjects=[subject]))
    latencies, meter = Latencies(), CpuMeter(nats_server.process)

    async def publish_all():
        times = latencies.start_round()
        clock = time.perf_counter_ns
        for _ in range(sizes.sync):
            start = clock()
            ack = await js.publish(subject, VALUE)
            times.append(clock() - start)
        assert ack.stream == stream

    def send_all():
        with meter:
            run(publish_all())

    bench.baseline(SYNC, "NATS JetStream js.publish", messages=sizes.sync)
    bench.run(send_all)
    latencies.report(bench, f"; nats-server CPU {meter.us_per_message(sizes.sync):.1f} µs a message")
    info = run(js.stream_info(stream))
    assert info.state.messages == sizes.sync * len(latencies.rounds)


@pytest.fixture(scope="module")
def redis_server(scratch, logs) -> Iterator[Server]:
    process, port = start_redis(scratch / "redis", logs)
    yield Server(process, f"redis://127.0.0.1:{port}")
    process.stop()


@pytest.fixture
def redis_client(redis_server):
    import redis  # redis-py, only when redis-server runs

    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def test_send_round_trip_redis(bench, redis_server, redis_client, sizes):
    stream = f"sync-{next(_topics)}"
    latencies, meter = Latencies(), CpuMeter(redis_server.process)

    def send_all():
        with meter:
            timed_calls(latencies, sizes.sync, lambda: redis_client.xadd(stream, {"v": VALUE}))

    bench.baseline(SYNC, "Redis XADD", messages=sizes.sync)
    bench.run(send_all)
    latencies.report(bench, f"; redis-server CPU {meter.us_per_message(sizes.sync):.1f} µs a message")
    assert redis_client.xlen(stream) == sizes.sync * len(latencies.rounds)


def test_send_round_trip_seglog(bench, seglog_server, stub_server, clients, sizes):
    bench.seglog(SYNC, "seglog serve", messages=sizes.sync, at_most={"p99_to_paired": 2.0})
    pulsar_sync_send(bench, seglog_server, clients, sizes, paired=stub_server)


def test_send_round_trip_pulsar_lite(bench, lite_server, clients, sizes):
    bench.baseline(SYNC, LITE, messages=sizes.sync)
    pulsar_sync_send(bench, lite_server, clients, sizes)


# ---------------------------------------------------------------------------------------------------------
# receive + acknowledge

def test_receive_nats(bench, nats_server, nats_js, sizes):
    run, js, connection = nats_js
    stream, subject, n = f"RECEIVE{next(_topics)}", f"receive.{next(_topics)}", sizes.receive
    run(js.add_stream(name=stream, subjects=[subject]))

    async def fill():
        for _ in range(n):
            await connection.publish(subject, VALUE)
        await connection.flush()
        deadline = time.monotonic() + 60
        while (await js.stream_info(stream)).state.messages < n:
            assert time.monotonic() < deadline, "JetStream did not store the messages in 60 s"
            await asyncio.sleep(0.01)

    run(fill())
    names = count()
    meter = CpuMeter(nats_server.process)

    async def consume(durable: str):
        subscription = await js.pull_subscribe(subject, durable=durable, stream=stream)
        got = 0
        while got < n:
            for message in await subscription.fetch(min(1000, n - got), timeout=RECEIVE_TIMEOUT_MS / 1000):
                assert len(message.data) == VALUE_BYTES
                await message.ack()
                got += 1
        await connection.flush()

    async def check(durable: str):
        deadline = time.monotonic() + 10
        while (info := await js.consumer_info(stream, durable)).num_ack_pending:
            assert time.monotonic() < deadline, f"acks not applied: {info}"
            await asyncio.sleep(0.01)
        assert info.num_pending == 0 and info.delivered.stream_seq == n
        await js.delete_consumer(stream, durable)

    def round_():
        with meter:
            run(consume(durable))

    def setup():
        nonlocal durable
        durable = f"reader{next(names)}"

    durable = ""
    bench.baseline(RECEIVE, "NATS JetStream fetch + ack", messages=n, nbytes=n * VALUE_BYTES)
    bench.run(round_, setup=setup, teardown=lambda: run(check(durable)))
    bench.note(f"nats-server CPU {meter.us_per_message(n):.1f} µs a message")


def test_receive_redis(bench, redis_server, redis_client, sizes):
    stream, n = f"receive-{next(_topics)}", sizes.receive
    for start in range(0, n, 1000):
        pipeline = redis_client.pipeline(transaction=False)
        for _ in range(min(1000, n - start)):
            pipeline.xadd(stream, {"v": VALUE})
        pipeline.execute()
    groups = count()
    meter = CpuMeter(redis_server.process)
    group = ""

    def setup():
        nonlocal group
        group = f"group{next(groups)}"
        redis_client.xgroup_create(stream, group, id="0")

    def consume():
        with meter:
            got = 0
            while got < n:
                [(_, entries)] = redis_client.xreadgroup(group, "bench", {stream: ">"}, count=1000,
                                                          block=RECEIVE_TIMEOUT_MS)
                ids = []
                for entry_id, fields in entries:
                    assert len(fields[b"v"]) == VALUE_BYTES
                    ids.append(entry_id)
                redis_client.xack(stream, group, *ids)
                got += len(ids)

    def check():
        assert redis_client.xpending(stream, group)["pending"] == 0
        redis_client.xgroup_destroy(stream, group)

    bench.baseline(RECEIVE, "Redis XREADGROUP + XACK", messages=n, nbytes=n * VALUE_BYTES)
    bench.run(consume, setup=setup, teardown=check)
    bench.note(f"redis-server CPU {meter.us_per_message(n):.1f} µs a message")


def fill_pulsar(client, topic: str, n: int) -> None:
    """n values into a topic through a batching producer (untimed), every receipt Ok."""
    producer = client.create_producer(topic, batching_enabled=True, max_pending_messages=10_000,
                                      block_if_queue_full=True)
    done, failed, left = threading.Event(), [], [n]
    lock = threading.Lock()

    def on_receipt(result, message_id) -> None:
        with lock:
            if result != pulsar.Result.Ok:
                failed.append(result)
            left[0] -= 1
            if left[0] == 0:
                done.set()

    for _ in range(n):
        producer.send_async(VALUE, on_receipt)
    producer.flush()
    assert done.wait(120) and not failed, (left, failed[:3])
    producer.close()


def pulsar_receive(bench, server: Server, clients, sizes) -> None:
    """Rounds reading a topic filled beforehand through a new subscription each, acknowledging each message,
    until every message id of the topic came; checked after each round: the subscription, reopened, gets
    nothing. A message whose id came already in the round is acknowledged too and counted apart
    (`repeated_messages`, a count a round): pulsar-lite 0.2.0 sends some entries twice, and pulsar-client
    hands both copies to the application."""
    client = clients(server.url)
    topic, n = topic_name("receive"), sizes.receive
    fill_pulsar(client, topic, n)
    names = count()
    meter = CpuMeter(server.process)
    subscription = ""
    repeated: list[int] = []

    def setup():
        nonlocal subscription
        subscription = f"reader{next(names)}"

    def consume():
        with meter:
            consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest,
                                        receiver_queue_size=1000)
            receive, acknowledge = consumer.receive, consumer.acknowledge
            seen: set[tuple[int, int, int]] = set()
            add, received = seen.add, 0
            while len(seen) < n:
                message = receive(RECEIVE_TIMEOUT_MS)
                assert len(message.data()) == VALUE_BYTES
                acknowledge(message)
                message_id = message.message_id()
                add((message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()))
                received += 1
            consumer.close()  # flushes the acks the client groups
            repeated.append(received - n)

    def check():
        again = client.subscribe(topic, subscription)
        with pytest.raises(pulsar.Timeout):
            again.receive(200)  # every message acknowledged: nothing comes
        again.unsubscribe()

    bench.run(consume, setup=setup, teardown=check)
    bench.record("repeated_messages", repeated)
    bench.note(f"{server.process.name} CPU {meter.us_per_message(n):.1f} µs a message"
               + (f"; {sum(repeated):,} messages came twice over the rounds" if any(repeated) else ""))


def test_receive_pulsar_lite(bench, lite_server, clients, sizes):
    bench.baseline(RECEIVE, "pulsar-lite, receive() + acknowledge()", messages=sizes.receive,
                   nbytes=sizes.receive * VALUE_BYTES)
    pulsar_receive(bench, lite_server, clients, sizes)


def test_receive_seglog(bench, seglog_server, clients, sizes):
    bench.seglog(RECEIVE, "seglog serve, receive() + acknowledge()", messages=sizes.receive,
                 nbytes=sizes.receive * VALUE_BYTES)
    pulsar_receive(bench, seglog_server, clients, sizes)


# ---------------------------------------------------------------------------------------------------------
# the produce path in-process: where seglog serve's CPU time per message goes, without sockets or threads

def client_batch_frame(producer_id: int, sequence_id: int, n: int) -> bytes:
    """A SEND frame as pulsar-client's C++ core writes one for a batch of n values without key, properties or
    event time: each message's SingleMessageMetadata holds its payload_size and sequence_id, the entry's
    MessageMetadata the producer name, the first sequence id, the publish time and num_messages_in_batch."""
    items = []
    for i in range(n):
        single = api.SingleMessageMetadata(payload_size=VALUE_BYTES, sequence_id=sequence_id + i).SerializeToString()
        items.append(len(single).to_bytes(4, "big") + single + VALUE)
    metadata = api.MessageMetadata(producer_name="standalone-0", sequence_id=sequence_id,
                                   publish_time=int(time.time() * 1000), num_messages_in_batch=n)
    send = command(Type.SEND, producer_id=producer_id, sequence_id=sequence_id,
                   highest_sequence_id=sequence_id + n - 1, num_messages=n)
    return encode_payload_command(send, metadata.SerializeToString(), b"".join(items))


@pytest.fixture(scope="module")
def in_process(scratch, scale):
    """(the service, a producer's handle, the SEND frames of a round: batches of 1,000 messages)."""
    from seglog.broker import Broker
    from seglog.clock import system_clock
    from seglog.server.service import BrokerService, Settings

    broker = Broker.open(scratch / "in-process", clock=system_clock, background=False)
    service = BrokerService(broker, Settings("standalone", "pulsar://127.0.0.1:0", 5 << 20))
    target = service.resolve("persistent://public/default/in-process", True)
    handle = service.open_writer(target, "standalone-0")
    frames = [client_batch_frame(0, i * 1000, 1000) for i in range(scale(100, 3))]
    yield service, handle, frames
    service.close_writer(handle)
    broker.close()


IN_PROCESS = "server: produce path in-process, SENDs of 1,000 x 100 B"


def note_per_message(bench, messages: int) -> None:
    """The time a message in µs of the best round (single-threaded, so its CPU time: other processes only
    ever add to it by preempting this one) and of the median round."""
    stats = getattr(bench.benchmark.stats, "stats", None)
    if stats is not None:  # (None with --benchmark-disable)
        bench.note(f"{stats.min / messages * 1e6:.2f} µs a message in the best round, "
                   f"{stats.median / messages * 1e6:.2f} in the median one")


def decode(frames: list[bytes]) -> list:
    decoder = FrameDecoder()
    return [decoder.feed(frame)[0] for frame in frames]


def cut(frames: list[bytes]) -> list[SendFrame]:
    decoder = FrameDecoder()
    return [decoder.feed_with_sends(frame)[0] for frame in frames]


def test_in_process_decode(bench, in_process):
    _, _, frames = in_process
    messages = len(frames) * 1000
    bench.baseline(IN_PROCESS, "FrameDecoder.feed (protobuf: the stub's work)", messages=messages)
    decoded = bench.run(lambda: decode(frames))
    assert all(frame.checksum_ok and frame.command.type == Type.SEND for frame in decoded)
    note_per_message(bench, messages)


def test_in_process_cut(bench, in_process):
    _, _, frames = in_process
    messages = len(frames) * 1000
    bench.seglog(IN_PROCESS, "FrameDecoder.feed_with_sends (native)", messages=messages)
    sends = bench.run(lambda: cut(frames))
    assert all(isinstance(send, SendFrame) and send.checksum_ok for send in sends)
    note_per_message(bench, messages)


def test_in_process_unpack_reference(bench, in_process):
    _, _, frames = in_process
    decoded = decode(frames)
    bench.baseline(IN_PROCESS, "batches.unpack (the reference path)", messages=len(frames) * 1000)
    unpacked = bench.run(lambda: [unpack(parse_metadata(f.metadata), f.payload) for f in decoded])
    assert all(len(m.values) == 1000 and m.values[-1] == VALUE for m in unpacked)
    note_per_message(bench, len(frames) * 1000)


def test_in_process_unpack(bench, in_process):
    _, _, frames = in_process
    sends = cut(frames)
    bench.seglog(IN_PROCESS, "batches.unpack_native", messages=len(frames) * 1000)
    unpacked = bench.run(lambda: [unpack_native(s.metadata, s.payload, s.highest_sequence_id) for s in sends])
    assert all(m is not None and m.count == 1000 for m in unpacked)
    note_per_message(bench, len(frames) * 1000)


def test_in_process_append(bench, in_process):
    service, handle, frames = in_process
    messages = [unpack_native(s.metadata, s.payload, s.highest_sequence_id) for s in cut(frames)]
    bench.seglog(IN_PROCESS, "BrokerService.append", messages=len(frames) * 1000)
    offsets = bench.run(lambda: [service.append(handle, m, 0) for m in messages])
    assert offsets == sorted(offsets) and offsets[1] - offsets[0] == 1000
    note_per_message(bench, len(frames) * 1000)


def test_in_process_whole_reference(bench, in_process):
    """The produce path before issue 31's native SENDs: protobuf's decode, the reference unpack, append, and
    the SEND_RECEIPT's bytes through protobuf."""
    service, handle, frames = in_process

    def produce_path():
        receipts = []
        for frame in decode(frames):
            send = frame.command.send
            offset = service.append(handle, unpack(parse_metadata(frame.metadata), frame.payload), 0)
            receipts.append(encode_command(command(Type.SEND_RECEIPT, producer_id=send.producer_id,
                                                   sequence_id=send.sequence_id,
                                                   highest_sequence_id=send.highest_sequence_id,
                                                   message_id=message_id(offset))))
        return receipts

    bench.baseline(IN_PROCESS, "decode + unpack + append + receipt, the reference path",
                   messages=len(frames) * 1000)
    assert len(bench.run(produce_path)) == len(frames)
    note_per_message(bench, len(frames) * 1000)


def test_in_process_whole(bench, in_process):
    """What a connection does with what it read, less the asyncio streams: one read (connection.READ_SIZE
    bytes of whole frames) at a time, its SENDs cut natively, unpacked natively, appended together
    (BrokerService.append_all, or one by one where it declines, as ProducerSession._write does) and their
    receipts written natively."""
    service, handle, frames = in_process
    reads: list[bytes] = []
    for frame in frames:
        if reads and len(reads[-1]) + len(frame) <= READ_SIZE:
            reads[-1] += frame
        else:
            reads.append(frame)

    def produce_path():
        decoder, receipts = FrameDecoder(), []
        for data in reads:
            sends = decoder.feed_with_sends(data)
            messages = [unpack_native(s.metadata, s.payload, s.highest_sequence_id) for s in sends]
            offsets = service.append_all(handle, messages)
            if offsets is None:
                offsets = [service.append(handle, m, s.sequence_id) for s, m in zip(sends, messages)]
            receipts += [send_receipt(s.producer_id, s.sequence_id, s.highest_sequence_id, 0, offset)
                         for s, offset in zip(sends, offsets)]
        return receipts

    bench.seglog(IN_PROCESS, "cut + unpack + append + receipt, native", messages=len(frames) * 1000)
    assert len(bench.run(produce_path)) == len(frames)
    note_per_message(bench, len(frames) * 1000)


# ---------------------------------------------------------------------------------------------------------
# the dispatch path in-process: MESSAGE frames of stored batches, what seglog serve's CPU does per message
# delivered once dispatch has chosen the messages (consumers.ConsumerSession._take)

DISPATCH = "server: MESSAGE frames in-process, stored batches of 100 x 100 B"


@pytest.fixture(scope="module")
def dispatched(scratch, scale):
    """(pieces dispatch gives a consumer of a topic of stored batches of 100, a subscription of them, and how
    many messages they hold); written in-process as the server stores a producer's batches."""
    from seglog.broker import Broker
    from seglog.clock import system_clock
    from seglog.subscriptions.delivery import ConsumerState

    broker = Broker.open(scratch / "dispatched", clock=system_clock, background=False)
    ref = broker.create_topic("public/default/dispatched", 1, {})
    writer = broker.store.acquire_writer(ref.name, 0, ref.config)
    now = int(time.time() * 1000)
    for batch in range(scale(1000, 10)):
        writer.append(writer.source(values=[VALUE] * 100, timestamps=[now] * 100, event_times=[None] * 100,
                                    attributes={"pulsar.producer": "standalone-0",
                                                "pulsar.sequence_id": str(batch * 100),
                                                "pulsar.highest_sequence_id": str(batch * 100 + 99)}))
    broker.store.release_writer(ref.name, 0, broker.store.fence(ref.name))
    subscription = broker.subscriptions.open(broker.topic("public/default/dispatched"), "s", "exclusive",
                                             "earliest")
    state = ConsumerState("c", None, lambda partition: None, lambda: None)
    subscription.attach(state, "exclusive")
    pieces = []
    while given := subscription.next_delivery(state, 1000):
        pieces += given
    yield pieces, subscription, sum(len(piece.offsets) for piece in pieces)
    broker.subscriptions.release(subscription)
    broker.close()


def test_dispatch_frames_per_message(bench, dispatched):
    """Each message an unbatched entry built in Python, as seglog serve did before batched delivery: a
    Message object, its redelivery count, its metadata and the frame around the protobuf command."""
    from seglog.server.protocol.metadata import message_metadata

    pieces, subscription, messages = dispatched
    sent = command(Type.MESSAGE, consumer_id=1, message_id=message_id(0), redelivery_count=0)

    def frames():
        out = []
        for piece in pieces:
            for message in piece.messages():
                sent.message.message_id.entry_id = message.offset
                sent.message.redelivery_count = subscription.redelivery_count(message.partition, message.offset)
                out.append(encode_payload_command(sent, message_metadata(message, piece.base), message.value))
        return b"".join(out)

    bench.baseline(DISPATCH, "per message: Message, metadata, protobuf command", messages=messages)
    assert len(bench.run(frames)) > messages * VALUE_BYTES
    note_per_message(bench, messages)


def test_dispatch_frames_native(bench, dispatched):
    """ConsumerSession._take's frames: the batch entries of a read's pieces, built in one native call from
    the map (DeliveryEncoder)."""
    from seglog._core._pulsar_wire import DeliveryEncoder
    from seglog.server.protocol.metadata import DELIVERED_FIELDS, WHOLE_ENTRY

    pieces, _, messages = dispatched
    encoder = DeliveryEncoder(1, -1, 1000, 1 << 20, DELIVERED_FIELDS, WHOLE_ENTRY)

    def frames():
        data, done = encoder.frames(pieces, 0, [])
        assert done == len(pieces)
        return data

    bench.seglog(DISPATCH, "batch entries: _pulsar_wire.DeliveryEncoder", messages=messages)
    assert len(bench.run(frames)) > messages * VALUE_BYTES
    note_per_message(bench, messages)
