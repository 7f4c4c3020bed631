"""Brokers driven by pre-encoded Pulsar frames over raw sockets (wire_load.py), so that the broker and not the
client is the bottleneck (issue 31): `seglog serve` beside pulsar-lite (PyPI pulsar-lite 0.2.0, a Rust broker
speaking Pulsar's protocol over RocksDB) and the do-nothing stub broker (stub_broker.py), 100-byte values.

Each group's seglog test alternates the brokers round by round: in even rounds the other brokers run first,
in odd rounds after (ABAB), each round timed the same way, so that the load other processes put on this
shared machine falls on every broker alike. No round is a warm-up: the first counts, and is reported apart
too (`first_msg_s`), beside the best and the median of the rounds. The seglog row records, per broker, the
best, median and first rounds' messages a second and broker CPU a message (`alternated`), and the median
of the per-round ratios to pulsar-lite (`paired_ratio_pulsar_lite`); the targets are judged on those, and
the summary's best-against-best ratio to the baselines' own tests (run just before, without alternating)
is printed beside them. The broker's CPU a round is its process's CPU-time clock (clock_getcpuclockid:
utime + stime to the nanosecond; /proc/PID/stat counts 10 ms ticks) over the timed part; µs a message is
the median over the rounds. The generator's own CPU a round (this process's `time.process_time()`) is
recorded too, as `generator_busy` (its CPU seconds a wall second): well under 1, the generator is not the
limit.

Group "wire: produce, batches of 100 x 100 B" -- one SEND a batch entry of 100 messages (as pulsar-client
  writes one), 1,000 SENDs in flight at most, every receipt read and checked; a fresh topic and producer
  each round (untimed). 6 M messages a round (about 1 s at pulsar-lite's rate).
  baselines pulsar-lite; the stub (Python: it parses every frame, so it is no ceiling here: see RESULTS.md)
  seglog    >= 1.0x pulsar-lite; broker CPU <= 1 µs a message
Group "wire: produce, unbatched" -- one message a SEND, the same window; 200,000 messages a round. For
  information (the issue's figure of the thread-pool trip per SEND).
Group "wire: consume, batches of 100, cumulative acks" -- a topic filled once per broker (4 M messages in
  batches of 100, untimed), read from the earliest by a fresh Exclusive subscription each round: FLOW 1,000
  permits, then FLOW what arrived each time half of them did, a cumulative ACK of the highest id received
  every 300 messages or so; checked after each round (untimed): the subscription, reopened, gets nothing.
  What each broker sends for one FLOW of 1,000 is recorded too (`messages_for_one_flow`): seglog, as Pulsar's
  broker by default, whole stored batches for the permits, at most 100 a read; pulsar-lite a batch a permit.
  The stub does not consume: pulsar-lite is the baseline.
  seglog    >= 1.0x pulsar-lite; broker CPU <= 1.5 µs a message
Group "wire: send round trip, unbatched" -- one SEND at a time, each waiting for its receipt, 10,000 calls
  a round: p50 and p99 over all rounds' calls, and each round's.
  baselines the stub (the loopback's and a Python event loop's share), pulsar-lite
  seglog    p99 <= 2x the stub's: each round's p99 over the stub's in the round beside it, the median of
            those (`paired_p99_to_stub`; `p99_to_stub` over all calls, for information)

Sizes scale with --seglog-scale. With --benchmark-disable (CI) each test runs one round of each broker on a
few thousand messages, still checking every receipt, every delivered message and the acks: a broken
generator or broker fails CI."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import pytest
from server_processes import Process, start_pulsar_lite, start_seglog, start_stub
from wire_load import (
    SendPool,
    WireConnection,
    answered_to_one_flow,
    batch_sends,
    consume,
    nothing_delivered,
    produce,
    round_trips,
    single_sends,
)

VALUE = bytes(range(100))
BATCH = 100  # messages a SEND in the batched groups
WINDOW = 1_000  # SENDs waiting for their receipts at most (pulsar-client's default maxPendingMessages)
POOL = 1_000  # distinct pre-encoded SENDs a round cycles over
PERMITS = 1_000  # a consumer's first FLOW (pulsar-client's default receiver queue)
ACK_EVERY = 300  # messages between cumulative ACKs
ROUNDS = 5  # a broker's rounds in a test, the first counted
SEGLOG, LITE, STUB = "seglog serve", "pulsar-lite", "do-nothing stub broker"
KEYS = {SEGLOG: "seglog", LITE: "pulsar_lite", STUB: "stub"}  # the brokers in extra_info's keys
PRODUCE = "wire: produce, batches of 100 x 100 B"
UNBATCHED = "wire: produce, unbatched"
CONSUME = "wire: consume, batches of 100, cumulative acks"
ROUND_TRIP = "wire: send round trip, unbatched"
_names = count()


@dataclass
class Broker:
    name: str
    process: Process
    url: str


@pytest.fixture(scope="module")
def seglog_broker(scratch, logs) -> Iterator[Broker]:
    process, url = start_seglog(scratch / "seglog-data", logs)
    yield Broker(SEGLOG, process, url)
    assert process.stop() == 0, process.tail()


@pytest.fixture(scope="module")
def lite_broker(scratch, logs) -> Iterator[Broker]:
    process, url = start_pulsar_lite(scratch / "pulsar-lite", logs)
    yield Broker(LITE, process, url)
    process.stop()


@pytest.fixture(scope="module")
def stub_broker(logs) -> Iterator[Broker]:
    process, url = start_stub(logs)
    yield Broker(STUB, process, url)
    process.stop()


@pytest.fixture(scope="module")
def sizes(scale):
    @dataclass(frozen=True)
    class Sizes:
        batched: int = scale(6_000_000, 20_000)  # messages a round, in SENDs of BATCH
        unbatched: int = scale(200_000, 2_000)
        consume: int = scale(4_000_000, 20_000)
        calls: int = scale(10_000, 200)
    return Sizes()


@pytest.fixture(scope="module")
def pools() -> dict[str, SendPool]:
    return {"batched": batch_sends(BATCH, VALUE, pool=POOL), "unbatched": single_sends(VALUE, pool=POOL),
            "round trip": single_sends(VALUE, pool=POOL, per_write=1)}


def topic_name(kind: str) -> str:
    return f"persistent://public/default/wire-{kind}-{next(_names)}"


# ---------------------------------------------------------------------------------------------------------
# one broker's rounds

@dataclass
class Side:
    """One broker's rounds of one figure: `prepare` (untimed) returns a round's state, `work(state)` is the
    timed part and returns the messages it moved, `clean(state)` (untimed) checks and closes."""

    broker: Broker
    prepare: Callable[[], Any]
    work: Callable[[Any], int]
    clean: Callable[[Any], None]
    seconds: list[float] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)
    broker_cpu: list[float] = field(default_factory=list)
    generator_cpu: list[float] = field(default_factory=list)
    latencies: list[list[int]] = field(default_factory=list)  # the round trips' nanoseconds, a list a round

    def timed(self, state: Any) -> None:
        broker_before, generator_before = self.broker.process.cpu_seconds(), time.process_time()
        started = time.perf_counter()
        messages = self.work(state)
        self.seconds.append(time.perf_counter() - started)
        self.broker_cpu.append(self.broker.process.cpu_seconds() - broker_before)
        self.generator_cpu.append(time.process_time() - generator_before)
        self.messages.append(messages)

    def round(self) -> None:
        state = self.prepare()
        try:
            self.timed(state)
        finally:
            self.clean(state)

    def rates(self) -> list[float]:
        return [m / s for m, s in zip(self.messages, self.seconds)]

    def figures(self) -> dict[str, float]:
        rates = self.rates()
        cpu = statistics.median(c / m * 1e6 for c, m in zip(self.broker_cpu, self.messages))
        busy = statistics.median(g / s for g, s in zip(self.generator_cpu, self.seconds))
        return {"first_msg_s": round(rates[0]), "best_msg_s": round(max(rates)),
                "median_msg_s": round(statistics.median(rates)), "cpu_us_per_msg": round(cpu, 3),
                "generator_busy": round(busy, 3)}

    def summary(self) -> str:
        f = self.figures()
        return (f"{self.broker.name} best {_si(f['best_msg_s'])} / median {_si(f['median_msg_s'])} / first "
                f"{_si(f['first_msg_s'])} msg/s, {f['cpu_us_per_msg']:.2f} µs CPU a message")


def _si(rate: float) -> str:
    return f"{rate / 1e6:.3g}M" if rate >= 1e6 else f"{rate / 1e3:.3g}k"


def run_alone(bench, side: Side) -> None:
    """A baseline's own rounds (no alternation), its figures recorded."""
    bench.run(side.timed, setup=lambda: (side.prepare(),), teardown=side.clean, rounds=ROUNDS, warmup_rounds=0)
    record_side(bench, side)
    bench.note(side.summary() + f"; generator busy {side.figures()['generator_busy']:.2f} of a core")


def record_side(bench, side: Side) -> None:
    figures = side.figures()
    bench.record("server_cpu_us_per_msg", figures["cpu_us_per_msg"])
    for key in ("first_msg_s", "median_msg_s", "generator_busy"):
        bench.record(key, figures[key])
    bench.record("round_msg_s", [round(r) for r in side.rates()])
    bench.record("load_average_1min", round(os.getloadavg()[0], 2))  # other processes: what moves the figures


def run_alternated(bench, mine: Side, others: list[Side]) -> str:
    """bench.run of `mine`'s rounds, each beside a round of every other side: before it in even rounds,
    after it in odd ones. Records every side's figures (`alternated`) and the per-round ratios; returns
    them as a note."""
    turns = count()
    others_first: dict[str, bool] = {}

    def before() -> tuple[Any]:
        others_first["now"] = next(turns) % 2 == 0
        if others_first["now"]:
            for other in others:
                other.round()
        return (mine.prepare(),)

    def after(state: Any) -> None:
        mine.clean(state)
        if not others_first["now"]:
            for other in reversed(others):
                other.round()

    bench.run(mine.timed, setup=before, teardown=after, rounds=ROUNDS, warmup_rounds=0)
    record_side(bench, mine)
    bench.record("alternated", {side.broker.name: side.figures() for side in [mine, *others]})
    notes = [mine.summary()]
    for other in others:
        ratios = [a / b for a, b in zip(mine.rates(), other.rates())]
        key = "paired_ratio_" + KEYS[other.broker.name]
        bench.record(key, round(statistics.median(ratios), 3))
        bench.record(key + "s", [round(r, 3) for r in ratios])
        notes.append(f"{other.summary()}: {statistics.median(ratios):.3f}x round by round "
                     f"({min(ratios):.3f}-{max(ratios):.3f}x)")
    busy = max(side.figures()["generator_busy"] for side in [mine, *others])
    notes.append(f"generator busy at most {busy:.2f} of a core")
    return "; ".join(notes)


# ---------------------------------------------------------------------------------------------------------
# produce

def producing(broker: Broker, pool: SendPool, messages: int) -> Side:
    sends = messages // pool.messages_per_send

    def prepare() -> WireConnection:
        connection = WireConnection.open(broker.url)
        connection.producer(topic_name("produce"), pool.producer_id)
        return connection

    def clean(connection: WireConnection) -> None:
        connection.close()
        broker.process.check_running()

    return Side(broker, prepare, lambda connection: produce(connection, pool, sends, WINDOW), clean)


def test_produce_batched_stub(bench, stub_broker, pools, sizes):
    bench.baseline(PRODUCE, STUB, messages=sizes.batched, nbytes=sizes.batched * len(VALUE))
    run_alone(bench, producing(stub_broker, pools["batched"], sizes.batched))


def test_produce_batched_pulsar_lite(bench, lite_broker, pools, sizes):
    bench.baseline(PRODUCE, LITE, messages=sizes.batched, nbytes=sizes.batched * len(VALUE))
    run_alone(bench, producing(lite_broker, pools["batched"], sizes.batched))


def test_produce_batched_seglog(bench, seglog_broker, lite_broker, stub_broker, pools, sizes):
    bench.seglog(PRODUCE, SEGLOG, messages=sizes.batched, nbytes=sizes.batched * len(VALUE),
                 at_least={LITE: 1.0}, at_most={"server_cpu_us_per_msg": 1.0},
                 recorded_at_least={"paired_ratio_pulsar_lite": 1.0})
    pool = pools["batched"]
    bench.note(run_alternated(bench, producing(seglog_broker, pool, sizes.batched),
                              [producing(lite_broker, pool, sizes.batched),
                               producing(stub_broker, pool, sizes.batched)]))


def test_produce_unbatched_stub(bench, stub_broker, pools, sizes):
    bench.baseline(UNBATCHED, STUB, messages=sizes.unbatched)
    run_alone(bench, producing(stub_broker, pools["unbatched"], sizes.unbatched))


def test_produce_unbatched_pulsar_lite(bench, lite_broker, pools, sizes):
    bench.baseline(UNBATCHED, LITE, messages=sizes.unbatched)
    run_alone(bench, producing(lite_broker, pools["unbatched"], sizes.unbatched))


def test_produce_unbatched_seglog(bench, seglog_broker, lite_broker, stub_broker, pools, sizes):
    bench.seglog(UNBATCHED, SEGLOG, messages=sizes.unbatched)
    pool = pools["unbatched"]
    bench.note(run_alternated(bench, producing(seglog_broker, pool, sizes.unbatched),
                              [producing(lite_broker, pool, sizes.unbatched),
                               producing(stub_broker, pool, sizes.unbatched)]))


# ---------------------------------------------------------------------------------------------------------
# consume

@pytest.fixture(scope="module")
def filled(pools, sizes) -> Callable[[Broker], str]:
    """filled(broker): a topic of `sizes.consume` messages in batches of BATCH on that broker (written once
    a module, untimed, every receipt checked)."""
    topics: dict[str, str] = {}

    def fill(broker: Broker) -> str:
        if broker.name not in topics:
            topic = topic_name("consume")
            with WireConnection.open(broker.url) as connection:
                connection.producer(topic)
                produce(connection, pools["batched"], sizes.consume // BATCH, WINDOW)
            topics[broker.name] = topic
        return topics[broker.name]

    return fill


def consuming(broker: Broker, topic: str, messages: int, repeated: list[int]) -> Side:
    """A fresh Exclusive subscription from the earliest each round; after it (untimed) the subscription is
    reopened and must get nothing (every message acknowledged), then removed. The frames repeating an entry
    already received (pulsar-lite's) go to `repeated`, one count a round."""

    def prepare() -> tuple[WireConnection, str]:
        connection, subscription = WireConnection.open(broker.url), f"wire-{next(_names)}"
        connection.subscribe(topic, subscription, consumer_id=0)
        return connection, subscription

    def work(state: tuple[WireConnection, str]) -> int:
        consumed = consume(state[0], 0, messages, permits=PERMITS, ack_every=ACK_EVERY)
        repeated.append(consumed.repeated_frames)
        return consumed.messages

    def clean(state: tuple[WireConnection, str]) -> None:
        connection, subscription = state
        with connection:
            connection.close_consumer(0)
            connection.subscribe(topic, subscription, consumer_id=1)
            assert nothing_delivered(connection, 1, 0.3), f"{broker.name} redelivered acknowledged messages"
            connection.unsubscribe(1)
        broker.process.check_running()

    return Side(broker, prepare, work, clean)


def test_consume_pulsar_lite(bench, lite_broker, filled, sizes):
    bench.baseline(CONSUME, LITE, messages=sizes.consume, nbytes=sizes.consume * len(VALUE))
    repeated: list[int] = []
    run_alone(bench, consuming(lite_broker, filled(lite_broker), sizes.consume, repeated))
    bench.record("repeated_frames", repeated)


def one_flow(broker: Broker, topic: str) -> int:
    """The messages `broker` sends a fresh subscription of `topic` for one FLOW of PERMITS (untimed): seglog
    and Pulsar's broker send whole stored batches for the permits (at most 100 a read), pulsar-lite a stored
    batch a permit."""
    with WireConnection.open(broker.url) as connection:
        connection.subscribe(topic, f"flow-{next(_names)}", consumer_id=0)
        received = answered_to_one_flow(connection, 0, PERMITS, 0.5)
        connection.close_consumer(0)
    return received


def test_consume_seglog(bench, seglog_broker, lite_broker, filled, sizes):
    bench.seglog(CONSUME, SEGLOG, messages=sizes.consume, nbytes=sizes.consume * len(VALUE),
                 at_least={LITE: 1.0}, at_most={"server_cpu_us_per_msg": 1.5},
                 recorded_at_least={"paired_ratio_pulsar_lite": 1.0})
    bench.record("messages_for_one_flow", {broker.name: one_flow(broker, filled(broker))
                                           for broker in (seglog_broker, lite_broker)})
    mine, theirs = [], []
    bench.note(run_alternated(bench, consuming(seglog_broker, filled(seglog_broker), sizes.consume, mine),
                              [consuming(lite_broker, filled(lite_broker), sizes.consume, theirs)]))
    bench.record("repeated_frames", {SEGLOG: mine, LITE: theirs})
    assert not any(mine), f"seglog serve sent entries twice: {mine}"


# ---------------------------------------------------------------------------------------------------------
# send round trip

def round_tripping(broker: Broker, pool: SendPool, calls: int) -> Side:
    side = producing(broker, pool, calls)

    def work(connection: WireConnection) -> int:
        side.latencies.append(round_trips(connection, pool, calls))
        return calls

    side.work = work
    return side


def percentiles(side: Side) -> tuple[float, float]:
    """p50 and p99 in µs of every call of every round."""
    samples = sorted(ns for one in side.latencies for ns in one)
    return tuple(samples[min(len(samples) - 1, int(q * len(samples)))] / 1e3 for q in (0.5, 0.99))


def round_p99s(side: Side) -> list[float]:
    """Each round's p99 in µs."""
    return [sorted(one)[int(0.99 * len(one))] / 1e3 for one in side.latencies]


def record_latencies(bench, side: Side) -> tuple[float, float]:
    p50, p99 = percentiles(side)
    bench.record("p50_us", round(p50, 1))
    bench.record("p99_us", round(p99, 1))
    bench.record("round_p99_us", [round(p, 1) for p in round_p99s(side)])
    return p50, p99


def test_round_trip_stub(bench, stub_broker, pools, sizes):
    bench.baseline(ROUND_TRIP, STUB, messages=sizes.calls)
    side = round_tripping(stub_broker, pools["round trip"], sizes.calls)
    run_alone(bench, side)
    p50, p99 = record_latencies(bench, side)
    bench.note(f"p50 {p50:.0f} µs, p99 {p99:.0f} µs over {sum(map(len, side.latencies)):,} calls")


def test_round_trip_pulsar_lite(bench, lite_broker, pools, sizes):
    bench.baseline(ROUND_TRIP, LITE, messages=sizes.calls)
    side = round_tripping(lite_broker, pools["round trip"], sizes.calls)
    run_alone(bench, side)
    p50, p99 = record_latencies(bench, side)
    bench.note(f"p50 {p50:.0f} µs, p99 {p99:.0f} µs over {sum(map(len, side.latencies)):,} calls")


def test_round_trip_seglog(bench, seglog_broker, lite_broker, stub_broker, pools, sizes):
    """The target is judged round by round: a round's p99 over the stub's p99 in the round beside it, the
    median of those (`paired_p99_to_stub`); a p99 is a tail, and the load of other processes on this machine
    moves it from one round to the next more than it moves a median."""
    bench.seglog(ROUND_TRIP, SEGLOG, messages=sizes.calls, at_most={"paired_p99_to_stub": 2.0})
    pool = pools["round trip"]
    sides = [round_tripping(broker, pool, sizes.calls) for broker in (seglog_broker, lite_broker, stub_broker)]
    rates = run_alternated(bench, sides[0], sides[1:])
    (p50, p99), (lite50, lite99), (stub50, stub99) = (percentiles(side) for side in sides)
    record_latencies(bench, sides[0])
    paired = [mine / stub for mine, stub in zip(round_p99s(sides[0]), round_p99s(sides[2]))]
    bench.record("paired_p99_to_stub", round(statistics.median(paired), 3))
    bench.record("paired_p99s_to_stub", [round(r, 3) for r in paired])
    bench.record("p99_to_stub", round(p99 / stub99, 3))
    bench.record("alternated_latencies_us",
                 {side.broker.name: {"p50": round(percentiles(side)[0]), "p99": round(percentiles(side)[1]),
                                     "round_p99": [round(p) for p in round_p99s(side)]} for side in sides})
    bench.note(f"p50 / p99 µs over the alternated rounds: seglog serve {p50:.0f} / {p99:.0f}, pulsar-lite "
               f"{lite50:.0f} / {lite99:.0f}, stub {stub50:.0f} / {stub99:.0f}: p99 {p99 / stub99:.2f}x the stub's, "
               f"round by round {statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f}x); {rates}")
