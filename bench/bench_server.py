"""`seglog serve` under the real pulsar-client (C++ core): producing, the send round trip, receiving and
acknowledging, 100 B values throughout, each next to a baseline measured in the same run.

Group "server: send_async, batched, 1 producer"
  The producer is pulsar-client in a process of its own (producer_worker.py): batching on (a batch is at
  most 1,000 messages or 128 KiB, or 10 ms), at most 10,000 messages waiting for receipts, `send_async`
  with a callback per message, then `flush()` and every callback. A round is PRODUCE_MESSAGES sends.
  baseline  do-nothing stub broker   stub_broker.py: seglog's FrameDecoder parses every frame, and a
                                     SEND_RECEIPT goes back at once (nothing unpacked, nothing stored)
  seglog    seglog serve             >= 0.9x the stub (the broker is not the bottleneck), and broker CPU
                                     <= 3 us a message: utime + stime of the server's pid over a round,
                                     divided by the messages (median of the rounds; `server_cpu_us_per_msg`)

Group "server: send_async, batched, 2 producer processes" (the same producer, twice, at once; each on a
topic of its own)
  baselines seglog serve, 1 producer     the seglog figure above, measured again beside the others
            do-nothing stub, 2 producers the ceiling of two client processes on this machine
  seglog    seglog serve, 2 producers    >= 1.6x one producer

Group "server: send() round trip, unbatched": `send()` one message at a time, batching off, each call
timed; p50 and p99 are in the note (and the JSON: `p50_us`, `p99_us`); the rate is 1 / the mean.
  baselines do-nothing stub broker (the client's and the loopback's own share); NATS JetStream
            `js.publish` (waits for the PubAck; file storage); Redis `XADD` (append-only file, no fsync)
  seglog    seglog serve (fsync='never', the default: like both, it leaves the disk to the OS)

Group "server: receive + acknowledge": RECEIVE_MESSAGES messages written beforehand (untimed); a round
reads them all through a new subscription (or consumer, or group) from the first, acknowledging each.
  baselines NATS JetStream: a durable pull consumer, `fetch(1000)`, `msg.ack()` each
            Redis Streams: `XREADGROUP COUNT 1000` + `XACK` of the ids read
  seglog    seglog serve: `subscribe` (receiver queue 1,000), `receive()` + `acknowledge()` each, and
            `close()`, which flushes the grouped acks; checked after each round: nothing left to receive

The NATS and Redis benchmarks run when nats-server and redis-server (Debian packages) and their Python
clients (nats-py, redis; imported here only when they run) are installed, and are skipped with a line
saying so otherwise. The CPU time of every server process over the rounds is in the notes (µs a message).

With --benchmark-disable (CI) each body runs once on a few thousand messages and checks what it measures
works: receipts all Ok, messages stored (the last message id), acks landed, latencies taken."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count

import pytest
from servers import Process, ProducerWorker, start_nats, start_redis, start_seglog, start_stub

from conftest import VALUE_BYTES, WARMUP_ROUNDS

pulsar = pytest.importorskip("pulsar")  # the test extra

ONE = "server: send_async, batched, 1 producer"
TWO = "server: send_async, batched, 2 producer processes"
SYNC = "server: send() round trip, unbatched"
RECEIVE = "server: receive + acknowledge"
STUB = "do-nothing stub broker"
RECEIVE_TIMEOUT_MS = 30_000
VALUE = bytes(range(VALUE_BYTES))
_topics = count()


@dataclass
class Server:
    process: Process
    url: str


@pytest.fixture(scope="module")
def logs(scratch):
    path = scratch / "logs"
    path.mkdir()
    return path


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


def cpu_note(process: Process, cpu: list[float], messages: int) -> float:
    """Median CPU time of `process` per message over the timed rounds (the warm-up left out), in µs."""
    timed = cpu[WARMUP_ROUNDS:] if len(cpu) > WARMUP_ROUNDS else cpu
    return statistics.median(timed) / messages * 1e6


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
        return cpu_note(self.process, self.rounds, messages)


# ---------------------------------------------------------------------------------------------------------
# send_async, batched: producer processes

@pytest.fixture
def producers(logs):
    """start(url, topics): a connected producer worker per topic; stopped by their pids after the test."""
    started: list[ProducerWorker] = []

    def start(url: str, topics: list[str]) -> list[ProducerWorker]:
        workers = [ProducerWorker(logs, len(started) + i) for i in range(len(topics))]
        started.extend(workers)
        for worker, topic in zip(workers, topics):
            worker.request(op="open", url=url, topic=topic, batching=True, value_bytes=VALUE_BYTES)
        for worker in workers:
            worker.answer()
        return workers

    yield start
    for worker in started:
        worker.stop()


def run_producers(bench, server: Server, workers: list[ProducerWorker], n: int) -> CpuMeter:
    """bench.run of rounds of `n` send_async per worker, all at once; the server's CPU time per round."""
    meter = CpuMeter(server.process)

    def round_():
        with meter:
            for worker in workers:
                worker.request(op="produce", n=n)
            for worker in workers:
                worker.answer()  # every receipt Ok, or the round fails

    bench.run(round_)
    server.process.check_running()
    return meter


def stored(client, topic: str) -> int:
    """Messages in a one-partition topic of seglog serve: the offset of its last message + 1, as
    GET_LAST_MESSAGE_ID answers it (docs/SERVER.md, Message ids)."""
    consumer = client.subscribe(topic, "bench-count")
    try:
        return consumer.get_last_message_id().entry_id() + 1  # (entryId is the offset, -1 when empty)
    finally:
        consumer.unsubscribe()


def produce(bench, server: Server, producers, clients, sizes, count_: int) -> float:
    """Run the rounds against `server` with `count_` producers; CPU µs a message, recorded and noted."""
    topics = [topic_name("produce") for _ in range(count_)]
    meter = run_producers(bench, server, producers(server.url, topics), sizes.produce)
    cpu = meter.us_per_message(sizes.produce * count_)
    bench.record("server_cpu_us_per_msg", round(cpu, 3))
    bench.note(f"{server.process.name} CPU {cpu:.2f} µs a message, median of the rounds")
    if server.process.name == "seglog serve":
        client = clients(server.url)
        for topic in topics:
            assert stored(client, topic) == sizes.produce * len(meter.rounds)
    return cpu


def test_send_async_stub(bench, stub_server, producers, clients, sizes):
    bench.baseline(ONE, STUB, messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES)
    produce(bench, stub_server, producers, clients, sizes, 1)


def test_send_async_seglog(bench, seglog_server, producers, clients, sizes):
    bench.seglog(ONE, "seglog serve", messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES,
                 at_least={STUB: 0.9}, at_most={"server_cpu_us_per_msg": 3.0})
    produce(bench, seglog_server, producers, clients, sizes, 1)


def test_send_async_seglog_one_of_two(bench, seglog_server, producers, clients, sizes):
    bench.baseline(TWO, "seglog serve, 1 producer", messages=sizes.produce, nbytes=sizes.produce * VALUE_BYTES)
    produce(bench, seglog_server, producers, clients, sizes, 1)


def test_send_async_stub_two(bench, stub_server, producers, clients, sizes):
    bench.baseline(TWO, "do-nothing stub, 2 producers", messages=2 * sizes.produce,
                   nbytes=2 * sizes.produce * VALUE_BYTES)
    produce(bench, stub_server, producers, clients, sizes, 2)


def test_send_async_seglog_two(bench, seglog_server, producers, clients, sizes):
    bench.seglog(TWO, "seglog serve, 2 producers", messages=2 * sizes.produce,
                 nbytes=2 * sizes.produce * VALUE_BYTES, at_least={"seglog serve, 1 producer": 1.6})
    produce(bench, seglog_server, producers, clients, sizes, 2)


# ---------------------------------------------------------------------------------------------------------
# send() round trip, unbatched

class Latencies:
    """Each call's time over the rounds; p50 and p99 of the timed rounds (the warm-up left out)."""

    def __init__(self) -> None:
        self.rounds: list[list[int]] = []

    def start_round(self) -> list[int]:
        self.rounds.append([])
        return self.rounds[-1]

    def report(self, bench, extra: str = "") -> None:
        timed = self.rounds[WARMUP_ROUNDS:] if len(self.rounds) > WARMUP_ROUNDS else self.rounds
        samples = sorted(ns for one in timed for ns in one)
        assert samples, "no call was timed"
        p50, p99 = (samples[min(len(samples) - 1, int(q * len(samples)))] / 1e3 for q in (0.5, 0.99))
        bench.record("p50_us", round(p50, 1))
        bench.record("p99_us", round(p99, 1))
        bench.note(f"p50 {p50:.0f} µs, p99 {p99:.0f} µs over {len(samples):,} calls{extra}")


def timed_calls(latencies: Latencies, n: int, call: Callable[[], object]) -> None:
    times = latencies.start_round()
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        call()
        times.append(clock() - start)


def pulsar_sync_send(bench, server: Server, clients, sizes) -> None:
    producer = clients(server.url).create_producer(topic_name("sync"), batching_enabled=False)
    latencies, meter = Latencies(), CpuMeter(server.process)

    def send_all():
        with meter:
            timed_calls(latencies, sizes.sync, lambda: producer.send(VALUE))

    bench.run(send_all)
    latencies.report(bench, f"; {server.process.name} CPU {meter.us_per_message(sizes.sync):.1f} µs a message")


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
    """(run, js): a nats-py connection's JetStream context and run(coroutine) on its event loop."""
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


def test_send_round_trip_seglog(bench, seglog_server, clients, sizes):
    bench.seglog(SYNC, "seglog serve", messages=sizes.sync)
    pulsar_sync_send(bench, seglog_server, clients, sizes)


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


def test_receive_seglog(bench, seglog_server, clients, sizes):
    client = clients(seglog_server.url)
    topic, n = topic_name("receive"), sizes.receive
    fill_pulsar(client, topic, n)
    names = count()
    meter = CpuMeter(seglog_server.process)
    subscription = ""

    def setup():
        nonlocal subscription
        subscription = f"reader{next(names)}"

    def consume():
        with meter:
            consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest,
                                        receiver_queue_size=1000)
            receive, acknowledge = consumer.receive, consumer.acknowledge
            for _ in range(n):
                message = receive(RECEIVE_TIMEOUT_MS)
                assert len(message.data()) == VALUE_BYTES
                acknowledge(message)
            consumer.close()  # flushes the acks the client groups

    def check():
        again = client.subscribe(topic, subscription)
        with pytest.raises(pulsar.Timeout):
            again.receive(200)  # every message acknowledged: nothing comes
        again.unsubscribe()

    bench.seglog(RECEIVE, "seglog serve, receive() + acknowledge()", messages=n, nbytes=n * VALUE_BYTES)
    bench.run(consume, setup=setup, teardown=check)
    bench.note(f"seglog serve CPU {meter.us_per_message(n):.1f} µs a message")
