"""Geo-replication between two `seglog serve` clusters on loopback, east -> west, under the real pulsar-client
(C++ core), 100 B values, each figure next to a baseline measured in the same run (docs/REPLICATION.md).

Two clusters, each a `seglog serve --cluster NAME` process of its own on free loopback ports with its own data
directory, registered with each other through the admin REST API, as tests/replication does. Their namespace
`public/repl` replicates both ways (clusters and allowed clusters [east, west] on both: the 2-way set-up of
docs/REPLICATION.md, so west also runs a replicator that reads what arrives and sends none of it back);
`public/local` is east's alone. Producers are producer_worker.py processes pinned to a CPU, as in
bench_server.py (see its `pinned_cpus`: unpinned, the client's GIL traffic would be what is measured).

How many messages west has stored is read beside the server, in this process, from west's data directory:
`seglog.open(west's data).topic(t).end_offset()` (about 50 µs: the partition's files, no request to the
server), polled every POLL_S (1 ms); the timings below are bounded by that.

Groups "replication: throughput, batches of 1,000", "..., batches of 10,000" (the producer's
`batching_max_messages`; a batch is sent when full or after 10 ms, its size limit raised to fit 10,000) and
"..., unbatched" (batching off, pulsar-client's default: every message a stored batch of its own, which the
replicator packs with those that follow it in the same millisecond into one batch entry; 10,000 messages a
round)
  baseline  1 cluster, no replication      the producer's rate into east, topic in public/local: a round is
                                           100,000 send_async, flush() and every receipt's callback, timed
                                           from the request to the worker to its answer (bench_server's
                                           send_async round)
  seglog    east -> west, producer to      the same producer on a topic of public/repl: a round is timed
            stored on west                 from the request to the worker (whose first send_async follows at
                                           once) until west's end offset shows every message of the round
                                           (and the worker has answered: every receipt of east Ok).
                                           Paired: a baseline round (the same producer set-up on a topic
                                           of public/local) runs beside each, untimed by pytest-benchmark,
                                           before it in even rounds and after it in odd ones (whatever a
                                           round leaves to the next weighs on both alike); target: the
                                           median of the 24 per-round ratios
                                           (`paired_ratio`) >= 0.5 ("side by side"). The ratio to the
                                           baseline test above, whose rounds ran minutes earlier, is
                                           printed for information. The replicator is connected before
                                           the first round (its topic made, the remote producer created):
                                           what is timed is the steady flow, not the set-up.
  seglog    catch-up of a backlog          for information, the replicator alone: 100,000 messages stored on
                                           east by the same producer (untimed) in a namespace that does not
                                           replicate yet, with the cursor pulsar.repl.west made at the
                                           earliest message (docs/REPLICATION.md's migration path); timed
                                           from the request that sets the namespace's clusters to
                                           [east, west] until west has every message. A new namespace and
                                           topic each round.
The CPU time (utime + stime) of east, west and the producer process over each round is in the notes, in µs a
message (medians of the rounds), as in bench_server.py. After the rounds, west's copy is read back and
compared with east's: the same values in the same order (each value starts with its index in its round),
nothing missing and nothing twice.

Group "replication: delay at 10,000 msg/s"
  A paced producer (producer_worker.py "paced": the i-th send_async due i / 10,000 s after the first; pulsar-
  client's default batching, at most 1,000 messages or 10 ms a batch) stamps each value with its index and
  the wall-clock time of its send_async call (`time.time_ns()`, the same machine's clock as the receiver's);
  a consumer in this process (receiver queue 1,000, acknowledging each message) takes the time of each
  `receive()` return. The delay of a message is the difference; p50 and p99 of every message of the timed
  rounds (3 s of sending each, the warm-up round left out) are in the note and the JSON (`p50_ms`, `p99_ms`).
  baseline  consumer on east, no replication    producer and consumer on east, topic in public/local: the
                                                 client's batching, east's store and dispatch
  seglog    consumer on west                     producer on east, consumer on west, topic in public/repl;
                                                 target p99 <= 100 ms
  Every message must arrive once, in order; `late_ms` in the JSON says how far behind schedule the producer
  ever got (the rate held if it is small).

Group "replication: snapshot markers' cost, batches of 1,000"
  Replicated subscriptions' snapshots (docs/REPLICATION.md) at the default frequency, 1,000 ms: a partition
  with a replicated subscription takes one every second while messages arrive, a REQUEST to west and
  west's RESPONSE back on the replication streams, and the subscription's position looked at when a snapshot
  may start (no consumer of east holds it).
  baseline  no replicated subscription   east -> west as in the throughput group (producer to stored on
                                         west, 100,000 messages a round), topic in public/repl
  seglog    a replicated subscription    the same on one topic of its own with a subscription (made
                                         through the admin API, no consumer, so it holds every snapshot),
                                         made replicated or not through the admin API before each round:
                                         each timed round with markers is paired with an untimed round
                                         without, before it in every other pair. One topic and one producer
                                         take both roles (two topics, one in each role, differed by up to
                                         13% in a run). Before each round with markers (untimed) the topic
                                         takes its first snapshot (a tick looks for newly replicated
                                         subscriptions once a second), so every round is timed at the
                                         steady frequency. 128 pairs. The target is on
                                         markers_cost = 1 - the geometric mean of the pairs' ratios
                                         (seconds without / with) <= 0.01, the share of the throughput
                                         lost; its standard error (from the spread of the pairs' log
                                         ratios, about 3.5-4.5% a pair) and 95% interval are in the JSON and
                                         the note. The snapshots taken are counted from /metrics
                                         (pulsar_replicated_subscriptions_snapshot_ms_count) and must be
                                         at least one a round. For information, the same estimator on
                                         east's and west's CPU time in the pairs (markers_cpu_cost).

Group "replication: snapshot markers' CPU time, a second"
  What the markers cost the servers, measured where the rest costs little, against what the servers spend at
  full rate: the markers' group above measures throughput, which on this machine the producer sets (its
  process takes a core; east and west about a third of one), to about +-1% at 95%. On a second pair of
  clusters of their own (`quiet_clusters`: the idle replicators of the other tests' topics look for work
  once a second each, which would add to what is measured), one topic. CPU times are read from each
  process's CPU-time clock (clock_getcpuclockid), to the nanosecond.
  baseline  east and west producing at    the servers' CPU seconds a second (east's and west's CPU time
            full rate                     over a round, over the round's seconds; median of the rounds)
                                          while the producer of the markers' group sends 100,000 messages
                                          to a replicated topic
  seglog    snapshots every 1,000 ms,     a producer paced at 5 unbatched messages a second onto one
            5 msg/s                       replicated topic with a subscription (no consumer), made
                                          replicated in every other round (6 s each; the untimed round
                                          without markers before it in half the pairs, after it in the
                                          others; a replicated round starts once the first snapshot is
                                          taken). The servers' CPU seconds a second with markers less
                                          without, a pair at a time, is what the markers take a second
                                          (mean of 8 pairs, with its 95% interval), and markers_cpu_share
                                          that over the baseline's figure (markers_cpu_share_upper_95: the
                                          upper end of its 95% interval). For information, and an upper
                                          bound: at 5 messages a second every event pays for its own
                                          thread wake-ups, which at full rate are shared. Every round
                                          with markers must take a snapshot.
Sizes scale with --seglog-scale. With --benchmark-disable (CI) each body runs once on small sizes (2 batches a
round, 200 messages unbatched; 2,000 paced messages) and checks what it measures: every receipt Ok, west
holding exactly east's messages in east's order, the backlog sent, every paced message received once."""

from __future__ import annotations

import json
import math
import os
import statistics
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from server_processes import Process, ProducerWorker, start_cluster, wait_until_ready

import seglog
from seglog.errors import TopicNotFoundError

pulsar = pytest.importorskip("pulsar")  # the test extra

VALUE_BYTES = 100  # as bench/conftest.py
WARMUP_ROUNDS = 1  # bench.run's default (conftest.py), left out of the per-round figures
# timed rounds of a paired throughput test (the warm-up's pair counts too: 24 ratios): the median of 8 moved
# +-0.04 between runs of the same code, as much as the margin to the target
PAIRED_ROUNDS = 23
EAST, WEST = "east", "west"
REPLICATED, LOCAL = "public/repl", "public/local"
POLL_S = 0.001  # how often west's end offset is looked at while a round waits for it
WAIT_S = 120.0  # the longest a round waits for replication (a hang fails it)
REST_TIMEOUT_S = 10.0
RECEIVE_TIMEOUT_MS = 30_000
DELAY_RATE = 10_000  # messages a second of the paced producer
BATCHES = (1, 1_000, 10_000)  # the producer's batching_max_messages (1: batching off): each its own group
DELAY = "replication: delay at 10,000 msg/s"
BASELINE = "1 cluster, no replication"
_names = count()


# ---------------------------------------------------------------------------------------------------------
# the two clusters

@dataclass
class Cluster:
    name: str
    process: Process
    url: str  # pulsar://
    http: str  # http:// of the admin API
    data: Path
    log: Any = None  # seglog.open(data) in this process: end offsets and reads beside the server
    _topics: dict[str, Any] = field(default_factory=dict)

    def rest(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(f"{self.http}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REST_TIMEOUT_S) as response:
                text = response.read()
                return response.status, _json(text)
        except urllib.error.HTTPError as error:
            return error.code, _json(error.read())

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.rest(method, path, body)
        assert status in (200, 204), (self.name, method, path, status, answer)
        return answer

    def stored(self, topic: str) -> int:
        """Messages in the one-partition topic (its end offset), read from the data directory; 0 while the
        topic does not exist here yet."""
        handle = self._topics.get(topic)
        if handle is None:
            try:
                handle = self._topics[topic] = self.log.topic(topic)
            except TopicNotFoundError:
                return 0
        return handle.end_offset()

    def values(self, topic: str) -> list[bytes]:
        return [message.value for message in self.log.topic(topic).reader("earliest", partition=0)]

    def replication(self, topic: str) -> dict[str, Any]:
        """The topic's stats' replication entry for the other cluster (docs/REPLICATION.md, Stats)."""
        other = WEST if self.name == EAST else EAST
        return self.ok("GET", f"/admin/v2/persistent/{topic}/stats").get("replication", {}).get(other, {})

    def namespace(self, namespace: str, clusters: list[str] | None) -> None:
        """Create `namespace` here; with `clusters`, they are its allowed clusters and its clusters."""
        self.ok("PUT", f"/admin/v2/namespaces/{namespace}", {})
        if clusters:
            self.ok("POST", f"/admin/v2/namespaces/{namespace}/allowedClusters", clusters)
            self.ok("POST", f"/admin/v2/namespaces/{namespace}/replication", clusters)


def _json(text: bytes) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text.decode(errors="replace")


@dataclass
class Clusters:
    east: Cluster
    west: Cluster


def _start(name: str, root: Path, logs: Path, prefix: str = "") -> Cluster:
    data = root / name
    process, url, http = start_cluster(name, data, logs, f"seglog-serve-{prefix}{name}.log")
    cluster = Cluster(name, process, url, http, data)

    def healthy() -> Cluster | None:
        return cluster if cluster.rest("GET", "/admin/v2/brokers/health")[0] == 200 else None

    return wait_until_ready(process, healthy, "did not answer its health check")


@pytest.fixture(scope="module")
def clusters(scratch, logs) -> Iterator[Clusters]:
    """east and west, registered with each other; public/repl replicated both ways, public/local east's alone.
    Stopped by their pids after the module (each must exit 0)."""
    yield from _clusters(scratch, logs)


@pytest.fixture(scope="module")
def quiet_clusters(scratch, logs) -> Iterator[Clusters]:
    """Another east and west, set up as `clusters`, for the markers' CPU test alone: without the replicators
    of the other tests' topics, which look for work once a second each while idle."""
    yield from _clusters(scratch / "quiet", logs, "quiet-")


def _clusters(root: Path, logs: Path, prefix: str = "") -> Iterator[Clusters]:
    started: list[Cluster] = []
    try:
        for name in (EAST, WEST):
            started.append(_start(name, root, logs, prefix))
        east, west = started
        for cluster, other in ((east, west), (west, east)):
            cluster.ok("PUT", f"/admin/v2/clusters/{other.name}",
                       {"serviceUrl": other.http, "brokerServiceUrl": other.url})
            cluster.namespace(REPLICATED, [EAST, WEST])
        east.namespace(LOCAL, None)
        for cluster in started:
            cluster.log = seglog.open(cluster.data, background=False)
        yield Clusters(east, west)
    finally:
        for cluster in started:
            if cluster.log is not None:
                cluster.log.close()
        for cluster in started:
            assert cluster.process.stop() == 0, cluster.process.tail()


def topic_name(namespace: str, kind: str) -> str:
    return f"{namespace}/bench-{kind}-{next(_names)}"


def wait_until(condition, what: str, seconds: float = WAIT_S, poll_s: float = POLL_S) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(poll_s)


def wait_connected(east: Cluster, topic: str) -> None:
    """The replicator of `topic` toward west is connected (its remote producer created)."""
    wait_until(lambda: east.replication(topic).get("connected"), f"replicator of {topic} connected", 30, 0.02)


# ---------------------------------------------------------------------------------------------------------
# CPU time of the processes over each round

class CpuMeters:
    """utime + stime of several processes over each round; µs a message, medians of the timed rounds."""

    def __init__(self, processes: dict[str, Process]) -> None:
        self.processes = processes
        self.rounds: list[dict[str, float]] = []

    def __enter__(self) -> CpuMeters:
        self._start = {name: p.cpu_seconds() for name, p in self.processes.items()}
        return self

    def __exit__(self, *exc) -> None:
        self.rounds.append({name: p.cpu_seconds() - self._start[name] for name, p in self.processes.items()})

    def us_per_message(self, messages: int) -> dict[str, float]:
        timed = self.rounds[WARMUP_ROUNDS:] if len(self.rounds) > WARMUP_ROUNDS else self.rounds
        return {name: round(statistics.median(r[name] for r in timed) / messages * 1e6, 2) for name in self.processes}


def cpu_note(cpu: dict[str, float]) -> str:
    return "CPU a message: " + ", ".join(f"{name} {us:.1f} µs" for name, us in cpu.items())


def machine_note(bench) -> str:
    load = os.getloadavg()[0]
    bench.record("load_average_1min", load)
    return f"load average {load:.1f}"


# ---------------------------------------------------------------------------------------------------------
# producers

def pinned_cpu() -> int | None:
    """The CPU the producer workers are pinned to (bench_server.py's `pinned_cpus`: the first this process
    may use), or None with SEGLOG_BENCH_PIN=0."""
    if os.environ.get("SEGLOG_BENCH_PIN", "1") == "0":
        return None
    return min(os.sched_getaffinity(0))


@pytest.fixture
def workers(logs):
    """open(url, topic, **options): a connected producer worker (producer_worker.py), pinned; all stopped by
    their pids after the test."""
    started: list[ProducerWorker] = []

    def open_(url: str, topic: str, **options) -> ProducerWorker:
        worker = ProducerWorker(logs, len(started))
        started.append(worker)
        options.setdefault("batching", True)
        worker.request(op="open", url=url, topic=f"persistent://{topic}", value_bytes=VALUE_BYTES,
                       cpu=pinned_cpu(), **options)
        worker.answer()
        return worker

    yield open_
    for worker in started:
        worker.stop()


def batch_options(batch: int) -> dict[str, Any]:
    """A numbered producer batching `batch` messages (1: batching off), with ten batches (at least 10,000
    messages) waiting for receipts at most, as bench_server's producer."""
    return {"batching": batch > 1, "batch_messages": max(batch, 2), "max_pending": 10 * max(batch, 1_000),
            "numbered": True}


def throughput_group(batch: int) -> str:
    return "replication: throughput, unbatched" if batch == 1 else f"replication: throughput, batches of {batch:,}"


@pytest.fixture(scope="module", params=BATCHES, ids=["unbatched", "batch1k", "batch10k"])
def batch(request) -> int:
    return request.param


@pytest.fixture(scope="module")
def produced(scale, batch) -> int:
    """Messages a round of the throughput groups: 100,000 (two batches with --benchmark-disable); unbatched,
    10,000 (200)."""
    return scale(10_000, 200) if batch == 1 else scale(100_000, 2 * batch)


@pytest.fixture(scope="module")
def paced(scale) -> int:
    """Messages a round of the delay group: 3 s at 10,000 msg/s (2,000 with --benchmark-disable)."""
    return scale(3 * DELAY_RATE, 2_000)


def check_copy(east: Cluster, west: Cluster, topic: str, rounds: int, n: int) -> None:
    """west holds exactly east's messages of `topic`, in east's order, and east holds each round's
    numbered values once, in order: nothing lost, nothing twice."""
    ours = check_same_on_west(east, west, topic)
    assert len(ours) == rounds * n, (len(ours), rounds, n)
    assert [struct.unpack_from(">q", v)[0] for v in ours] == list(range(n)) * rounds


def check_same_on_west(east: Cluster, west: Cluster, topic: str) -> list[bytes]:
    """west holds exactly east's messages of `topic`, in east's order (returned), and east's replication
    cursor has acknowledged them all."""
    wait_until(lambda: west.stored(topic) >= east.stored(topic), f"{topic} on west", 30, 0.01)
    ours, theirs = east.values(topic), west.values(topic)
    assert len(theirs) == len(ours) and theirs == ours, (len(theirs), len(ours))
    # (the cursor is acknowledged once west's receipts come back, which may be a moment after west has stored)
    wait_until(lambda: east.replication(topic).get("replicationBacklog") == 0, f"{topic}'s backlog sent", 30, 0.01)
    return ours


def snapshots_taken(east: Cluster) -> int:
    """Snapshots east completed since it started (its /metrics' pulsar_replicated_subscriptions_snapshot_ms)."""
    with urllib.request.urlopen(f"{east.http}/metrics", timeout=REST_TIMEOUT_S) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("pulsar_replicated_subscriptions_snapshot_ms_count{"):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def set_replicated(east: Cluster, topic: str, replicated: bool) -> None:
    """Make the `failover` subscription of east's `topic` replicated, or not (the admin API)."""
    east.ok("POST", f"/admin/v2/persistent/{topic}/subscription/failover/replicatedSubscriptionStatus", replicated)


def wait_for_a_snapshot(east: Cluster, topic: str) -> None:
    """Until the replicated `failover` subscription of east's `topic` holds a snapshot (a tick looks for newly
    replicated subscriptions once a second)."""
    wait_until(lambda: cached_snapshots(east, topic, "failover"), f"a snapshot on {topic}", 30, 0.02)


def cached_snapshots(east: Cluster, topic: str, subscription: str) -> int:
    """The snapshots a replicated subscription of east holds (internal-stats; none once it is not
    replicated: a subscription made replicated again starts with none)."""
    cursor = east.ok("GET", f"/admin/v2/persistent/{topic}/internalStats")["cursors"].get(subscription, {})
    return len(cursor.get("replicatedSubscriptionSnapshots", []))


# ---------------------------------------------------------------------------------------------------------
# throughput

class Rounds:
    """The rounds of one producer worker on one topic: `run()` produces n and waits until `target` holds
    everything produced so far; seconds and CPU time of each round."""

    def __init__(self, worker: ProducerWorker, topic: str, n: int, target: Cluster | None,
                 meters: CpuMeters) -> None:
        self.worker, self.topic, self.n, self.target, self.meters = worker, topic, n, target, meters
        self.seconds: list[float] = []
        self.producer_seconds: list[float] = []

    def run(self) -> None:
        with self.meters:
            start = time.perf_counter()
            self.worker.request(op="produce", n=self.n)
            if self.target is not None:
                expected = self.n * (len(self.seconds) + 1)
                wait_until(lambda: self.target.stored(self.topic) >= expected, f"{self.topic} on {self.target.name}")
            answer = self.worker.answer()  # every receipt Ok, or the round fails
            self.seconds.append(time.perf_counter() - start)
        self.producer_seconds.append(answer["seconds"])


def run_paired(bench, mine: Rounds, paired: Rounds) -> float:
    """Time mine's rounds, each beside an untimed round of `paired` on the same machine a moment apart:
    before it in even rounds, after it in odd ones (whatever the first of two rounds leaves to the second,
    its data's writeback for one, weighs on both alike); the median of the per-round ratios, paired's time
    over mine's."""
    def before() -> None:  # (an even round: the paired one goes first)
        if len(mine.seconds) % 2 == 0:
            paired.run()

    def after() -> None:  # (an odd round: it follows)
        if len(paired.seconds) < len(mine.seconds):
            paired.run()

    bench.run(mine.run, setup=before, teardown=after, rounds=PAIRED_ROUNDS)
    assert len(paired.seconds) == len(mine.seconds), "a paired round for each"
    ratios = [p / t for t, p in zip(mine.seconds, paired.seconds)]
    bench.record("paired_ratios", [round(ratio, 3) for ratio in ratios])
    return statistics.median(ratios)


def test_throughput_local(bench, clusters, workers, produced, batch):
    east, n = clusters.east, produced
    topic = topic_name(LOCAL, "local")
    worker = workers(east.url, topic, **batch_options(batch))
    meters = CpuMeters({"east": east.process, "west": clusters.west.process, "producer": worker})
    rounds = Rounds(worker, topic, n, None, meters)
    bench.baseline(throughput_group(batch), BASELINE, messages=n, nbytes=n * VALUE_BYTES)
    bench.run(rounds.run)
    cpu = meters.us_per_message(n)
    bench.record("cpu_us_per_msg", cpu)
    bench.note(f"{cpu_note(cpu)}; {machine_note(bench)}")
    assert east.stored(topic) == n * len(rounds.seconds)


def test_throughput_replicated(bench, clusters, workers, produced, batch):
    east, west, n = clusters.east, clusters.west, produced
    topic = topic_name(REPLICATED, "throughput")
    worker = workers(east.url, topic, **batch_options(batch))
    wait_connected(east, topic)
    meters = CpuMeters({"east": east.process, "west": west.process, "producer": worker})
    mine = Rounds(worker, topic, n, west, meters)
    local = topic_name(LOCAL, "paired")
    paired_worker = workers(east.url, local, **batch_options(batch))
    paired = Rounds(paired_worker, local, n, None, CpuMeters({}))

    # the target is on the paired rounds ("measured side by side"): the baseline test's rounds ran minutes
    # before, and this machine's rate for the same code drifts more than the margin between them
    bench.seglog(throughput_group(batch), "east -> west, producer to stored on west", messages=n,
                 nbytes=n * VALUE_BYTES, recorded_at_least={"paired_ratio": 0.5})
    ratio = run_paired(bench, mine, paired)
    cpu = meters.us_per_message(n)
    bench.record("cpu_us_per_msg", cpu)
    bench.record("paired_ratio", round(ratio, 3))
    # the producer's own rate beside replication (first send to last receipt of east), and how long west took
    # after it: the replicator keeps pace when that is near 0
    lag = statistics.median(t - p for t, p in zip(mine.seconds, mine.producer_seconds)) * 1e3
    producer_rate = n / statistics.median(mine.producer_seconds)
    bench.record("producer_msg_per_s", round(producer_rate))
    bench.record("west_after_last_receipt_ms", round(lag, 1))
    bench.note(f"{ratio:.2f}x {BASELINE} paired round by round (median of {len(mine.seconds)}); the producer's own "
               f"rate {producer_rate / 1e3:.1f}k msg/s, west complete {lag:.0f} ms after its last receipt "
               f"(medians); {cpu_note(cpu)}; {machine_note(bench)}")
    check_copy(east, west, topic, len(mine.seconds), n)


MARKERS = "replication: snapshot markers' cost, batches of 1,000"
NO_REPLICATED_SUBSCRIPTION = "no replicated subscription"
# rounds of the markers' test beside the warm-up: 128 pairs of a round with markers and one without, 64 of each
# order. A pair's log ratio spreads 3.5-4.5%, so the estimate's standard error is 0.30-0.39%: a cost of 0.46%
# (seven runs pooled, 95% interval +0.15% to +0.77%: bench/RESULTS.md) reads over 1% in one run of 12 to 28 (with 64
# pairs, one in 6 to 10)
MARKER_ROUNDS = 127


@pytest.fixture(scope="module")
def marker_round(scale) -> int:
    """Messages a round of the markers' group: 100,000 (2,000 with --benchmark-disable)."""
    return scale(100_000, 2_000)


def test_markers_baseline(bench, clusters, workers, marker_round):
    east, west, n = clusters.east, clusters.west, marker_round
    topic = topic_name(REPLICATED, "plain")
    worker = workers(east.url, topic, **batch_options(1_000))
    wait_connected(east, topic)
    rounds = Rounds(worker, topic, n, west, CpuMeters({}))
    bench.baseline(MARKERS, NO_REPLICATED_SUBSCRIPTION, messages=n, nbytes=n * VALUE_BYTES)
    bench.run(rounds.run)
    bench.note(machine_note(bench))


@dataclass
class Paired:
    """The rounds of a paired test by role: the seconds and the servers' CPU seconds of each."""
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def mean_and_error(values: list[float]) -> tuple[float, float | None]:
    """The mean of per-pair figures and its standard error (None with a single pair)."""
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def share_added(timed: list[float], paired: list[float]) -> tuple[float, float | None]:
    """The share of the timed rounds' seconds (or CPU seconds) that their paired rounds did without: 1 less the
    geometric mean of the per-pair ratios paired / timed (of seconds, the share of the throughput lost), and
    its standard error from the spread of the pairs' log ratios (None with a single pair)."""
    mean_log, log_error = mean_and_error([math.log(p / t) for t, p in zip(timed, paired)])
    kept = math.exp(mean_log)
    return 1 - kept, None if log_error is None else kept * log_error


def interval(estimate: float, error: float | None, form: str = "{:+.2%}") -> str:
    """' (95% interval A to B)' of an estimate with its standard error, each end written by `form`, for a
    note; '' without an error."""
    if error is None:
        return ""
    return f" (95% interval {form.format(estimate - 1.96 * error)} to {form.format(estimate + 1.96 * error)})"


@pytest.mark.timeout(1200)  # (its 128 pairs take about 7 minutes, past pyproject's 300 s a test)
def test_markers_cost(bench, clusters, workers, marker_round):
    east, west, n = clusters.east, clusters.west, marker_round
    topic = topic_name(REPLICATED, "snapshots")
    worker = workers(east.url, topic, **batch_options(1_000))
    wait_connected(east, topic)
    east.ok("PUT", f"/admin/v2/persistent/{topic}/subscription/failover")
    rounds = Rounds(worker, topic, n, west, CpuMeters({"east": east.process, "west": west.process}))
    with_markers, without = Paired(), Paired()
    turns = count()
    turn: dict[str, bool] = {}

    def set_up(replicated: bool) -> None:
        # (one topic and one producer take both roles, made replicated or not through the admin API before each
        # round: two topics, one in each role, differed by up to 13% in a run, far more than what is measured)
        set_replicated(east, topic, replicated)
        if replicated:  # (its first snapshot: a tick looks for newly replicated subscriptions once a second)
            wait_for_a_snapshot(east, topic)

    def run_round(replicated: bool) -> None:
        rounds.run()
        side = with_markers if replicated else without
        side.seconds.append(rounds.seconds[-1])
        side.cpu.append(sum(rounds.meters.rounds[-1].values()))

    def before() -> None:  # (untimed: the round without markers first in every other pair, then the set-up)
        turn["without_first"] = next(turns) % 2 == 0
        if turn["without_first"]:
            set_up(False)
            run_round(False)
        set_up(True)

    def after() -> None:
        if not turn["without_first"]:
            set_up(False)
            run_round(False)

    taken = snapshots_taken(east)
    bench.seglog(MARKERS, "a replicated subscription, snapshots every 1,000 ms", messages=n,
                 nbytes=n * VALUE_BYTES, at_most={"markers_cost": 0.01})
    bench.run(lambda: run_round(True), setup=before, teardown=after, rounds=MARKER_ROUNDS)
    # (a round may be shorter than the frequency with --benchmark-disable: the snapshot follows it)
    wait_until(lambda: snapshots_taken(east) - taken >= len(with_markers.seconds), "a snapshot a round", 30, 0.05)
    cost, error = share_added(with_markers.seconds, without.seconds)
    # (the same estimator on the servers' CPU time: 1 - without / with is the markers' share of it)
    cpu_share, cpu_error = share_added(with_markers.cpu, without.cpu)
    bench.record("paired_ratios", [round(p / t, 3) for t, p in zip(with_markers.seconds, without.seconds)])
    bench.record("markers_cost", round(cost, 4))
    bench.record("markers_cost_standard_error", error and round(error, 4))
    bench.record("markers_cpu_cost", round(cpu_share, 4))
    bench.record("markers_cpu_cost_standard_error", cpu_error and round(cpu_error, 4))
    snapshots = snapshots_taken(east) - taken
    bench.record("snapshots", snapshots)
    bench.note(f"{cost:+.2%} of the throughput without markers lost{interval(cost, error)} (geometric mean of "
               f"{len(without.seconds)} pairs); the markers' share of east's and west's CPU time {cpu_share:+.2%}"
               f"{interval(cpu_share, cpu_error)}, for information; {snapshots} snapshots in "
               f"{sum(with_markers.seconds):.1f} s; {machine_note(bench)}")
    check_copy(east, west, topic, len(rounds.seconds), n)


MARKERS_CPU = "replication: snapshot markers' CPU time, a second"
# the one topic of the quiet clusters (both tests of the markers' CPU: no other topic's replicators there)
QUIET_TOPIC = f"{REPLICATED}/bench-markers-cpu"
TRICKLE_RATE = 5  # messages a second in the rounds of the markers' CPU test: enough for a snapshot a second
# timed rounds of the markers' CPU test, each beside a round without markers (the warm-up's pair counts too)
TRICKLE_ROUNDS = 7


@pytest.fixture(scope="module")
def full_rate_cpu() -> dict[str, float]:
    """The baseline test's measurement, for the markers' CPU test after it: east's and west's CPU seconds a
    second while a producer sends to a replicated topic as fast as it can."""
    return {}


@pytest.fixture(scope="module")
def trickle(scale) -> int:
    """Messages a round of the markers' CPU test: 6 s at TRICKLE_RATE (2 s with --benchmark-disable: a
    round takes a snapshot, one a second)."""
    return scale(6 * TRICKLE_RATE, 2 * TRICKLE_RATE)


def test_markers_cpu_baseline(bench, quiet_clusters, workers, marker_round, full_rate_cpu):
    east, west, n = quiet_clusters.east, quiet_clusters.west, marker_round
    topic = QUIET_TOPIC
    worker = workers(east.url, topic, **batch_options(1_000))
    wait_connected(east, topic)
    meters = CpuMeters({"east": east.process, "west": west.process})
    rounds = Rounds(worker, topic, n, west, meters)
    bench.baseline(MARKERS_CPU, "east and west producing at full rate", messages=n, nbytes=n * VALUE_BYTES)
    bench.run(rounds.run, rounds=4)
    per_second = [sum(cpu.values()) / seconds for cpu, seconds in zip(meters.rounds, rounds.seconds)]
    full_rate_cpu["seconds_a_second"] = statistics.median(per_second[WARMUP_ROUNDS:] or per_second)
    bench.record("cpu_seconds_a_second", round(full_rate_cpu["seconds_a_second"], 3))
    bench.note(f"east's and west's CPU {full_rate_cpu['seconds_a_second']:.2f} s a second (median); "
               f"{machine_note(bench)}")


def test_markers_cpu(bench, quiet_clusters, workers, trickle, full_rate_cpu):
    """What snapshots at the default frequency cost east and west, measured where the rest costs little: a
    producer trickles TRICKLE_RATE messages a second onto one topic whose subscription is replicated in every
    other round, and the CPU seconds a second of the rounds with markers less those without are taken as a
    share of what the servers spend a second at full rate (the baseline test)."""
    east, west, n = quiet_clusters.east, quiet_clusters.west, trickle
    topic = QUIET_TOPIC
    worker = workers(east.url, topic, batching=False)
    wait_connected(east, topic)
    east.ok("PUT", f"/admin/v2/persistent/{topic}/subscription/failover")
    meters = CpuMeters({"east": east.process, "west": west.process})
    a_second: dict[bool, list[float]] = {True: [], False: []}
    turns = count()
    taken: list[int] = []

    def side(replicated: bool) -> None:
        set_replicated(east, topic, replicated)
        if replicated:  # (its first snapshot, untimed: a tick looks for newly replicated subscriptions each second)
            worker.request(op="paced", n=TRICKLE_RATE, rate=TRICKLE_RATE)
            wait_for_a_snapshot(east, topic)
            worker.answer()
        before = snapshots_taken(east)
        with meters:
            start = time.perf_counter()
            worker.request(op="paced", n=n, rate=TRICKLE_RATE)
            worker.answer()
            seconds = time.perf_counter() - start
        if replicated:
            taken.append(snapshots_taken(east) - before)
        a_second[replicated].append(sum(meters.rounds[-1].values()) / seconds)

    def before() -> None:  # (without markers first in half the rounds: on, off, off, on, on, off, ...)
        if next(turns) % 2 == 1:
            side(False)

    def after() -> None:
        if len(a_second[False]) < len(a_second[True]):
            side(False)

    bench.seglog(MARKERS_CPU, f"snapshots every 1,000 ms, {TRICKLE_RATE} msg/s", messages=n, nbytes=n * VALUE_BYTES)
    bench.run(lambda: side(True), setup=before, teardown=after, rounds=TRICKLE_ROUNDS)
    # (pairs: a round with markers and the round without beside it)
    markers, error = mean_and_error([with_ - without for with_, without in zip(a_second[True], a_second[False])])
    full_rate = full_rate_cpu["seconds_a_second"]
    share = markers / full_rate
    bench.record("markers_cpu_ms_a_second", round(markers * 1e3, 2))
    bench.record("markers_cpu_ms_a_second_standard_error", error and round(error * 1e3, 2))
    bench.record("markers_cpu_share", round(share, 4))
    bench.record("markers_cpu_share_upper_95", error and round((markers + 1.96 * error) / full_rate, 4))
    bench.record("snapshots_a_round", taken)
    bench.record("cpu_ms_a_second", {"with": [round(x * 1e3, 2) for x in a_second[True]],
                                     "without": [round(x * 1e3, 2) for x in a_second[False]]})
    without = statistics.fmean(a_second[False])
    ms_interval = interval(markers * 1e3, error and error * 1e3, "{:+.1f}")
    bench.note(f"the servers' CPU {markers * 1e3:+.2f} ms a second with markers{ms_interval}, {without * 1e3:.0f} ms "
               f"a second without; {share:+.2%} of their {full_rate:.2f} s a second at full rate"
               f"{interval(share, error and error / full_rate)}; snapshots a round {taken}; {machine_note(bench)}")
    assert all(taken), f"a round without a snapshot: {taken}"
    check_same_on_west(east, west, topic)


def test_catch_up(bench, clusters, workers, produced, batch):
    """The replicator alone: a backlog stored beforehand, sent once the namespace's clusters are set."""
    east, west, n = clusters.east, clusters.west, produced
    meters = CpuMeters({"east": east.process, "west": west.process})
    done: list[tuple[str, int]] = []

    def setup():
        namespace = f"public/catchup-{next(_names)}"
        topic = f"{namespace}/backlog"
        west.namespace(namespace, [EAST, WEST])
        east.namespace(namespace, None)
        east.ok("POST", f"/admin/v2/namespaces/{namespace}/allowedClusters", [EAST, WEST])
        worker = workers(east.url, topic, **batch_options(batch))
        worker.request(op="produce", n=n)
        worker.answer()
        worker.stop()
        east.ok("PUT", f"/admin/v2/persistent/{topic}/subscription/pulsar.repl.{WEST}", "earliest")
        return namespace, topic

    def catch_up(namespace: str, topic: str) -> None:
        with meters:
            east.ok("POST", f"/admin/v2/namespaces/{namespace}/replication", [EAST, WEST])
            wait_until(lambda: west.stored(topic) >= n, f"{topic} on west")
        done.append((namespace, topic))

    bench.seglog(throughput_group(batch), "catch-up of a backlog (replicator alone)", messages=n,
                 nbytes=n * VALUE_BYTES)
    bench.run(catch_up, setup=setup)
    cpu = meters.us_per_message(n)
    bench.record("cpu_us_per_msg", cpu)
    bench.note(f"{cpu_note(cpu)}; {machine_note(bench)}")
    for _, topic in done:
        check_copy(east, west, topic, 1, n)


# ---------------------------------------------------------------------------------------------------------
# end-to-end delay at a steady rate

class Delays:
    """The delay of every message of each round (ns), and whether each arrived once and in order."""

    def __init__(self) -> None:
        self.rounds: list[list[int]] = []
        self.late_ms: list[float] = []

    def receive_round(self, consumer, n: int) -> None:
        delays: list[int] = []
        self.rounds.append(delays)
        receive, acknowledge, clock = consumer.receive, consumer.acknowledge, time.time_ns
        unpack = struct.Struct(">qq").unpack_from
        for expected in range(n):
            message = receive(RECEIVE_TIMEOUT_MS)
            now = clock()
            index, sent = unpack(message.data())
            assert index == expected, f"message {index} arrived where {expected} was due (lost or twice)"
            delays.append(now - sent)
            acknowledge(message)

    def report(self, bench) -> tuple[float, float, float, float, int]:
        timed = self.rounds[WARMUP_ROUNDS:] if len(self.rounds) > WARMUP_ROUNDS else self.rounds
        samples = sorted(ns for one in timed for ns in one)
        assert samples, "no message was timed"
        p50, p99, top = (samples[min(len(samples) - 1, int(q * len(samples)))] / 1e6 for q in (0.5, 0.99, 1.0))
        bench.record("p50_ms", round(p50, 2))
        bench.record("p99_ms", round(p99, 2))
        bench.record("max_ms", round(top, 2))
        late = max(self.late_ms[WARMUP_ROUNDS:] or self.late_ms)
        bench.record("late_ms", late)
        return p50, p99, top, late, len(samples)


def paced_delays(bench, producer_cluster: Cluster, consumer_cluster: Cluster, topic: str, workers, n: int,
                 replicated: bool) -> None:
    with ExitStack() as stack:
        client = pulsar.Client(consumer_cluster.url, operation_timeout_seconds=30,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        stack.callback(client.close)
        consumer = client.subscribe(f"persistent://{topic}", "delay", receiver_queue_size=1000)
        worker = workers(producer_cluster.url, topic)  # pulsar-client's default batching (1,000 or 10 ms)
        if replicated:
            wait_connected(producer_cluster, topic)
        meters = CpuMeters({"east": producer_cluster.process, "producer": worker} |
                           ({"west": consumer_cluster.process} if replicated else {}))
        delays = Delays()

        def round_() -> None:
            with meters:
                worker.request(op="paced", n=n, rate=DELAY_RATE)
                delays.receive_round(consumer, n)
                delays.late_ms.append(worker.answer()["late_ms"])

        bench.run(round_, rounds=4)
        p50, p99, top, late, samples = delays.report(bench)
        cpu = meters.us_per_message(n)
        bench.record("cpu_us_per_msg", cpu)
        bench.note(f"publish to receipt: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {top:.1f} ms over {samples:,} "
                   f"messages; the producer at most {late:.1f} ms behind its schedule; {cpu_note(cpu)}; "
                   f"{machine_note(bench)}")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(200)  # nothing more: no message twice
        consumer.close()


def test_delay_local(bench, clusters, workers, paced):
    bench.baseline(DELAY, "consumer on east, no replication", messages=paced)
    paced_delays(bench, clusters.east, clusters.east, topic_name(LOCAL, "delay"), workers, paced, False)


def test_delay_replicated(bench, clusters, workers, paced):
    bench.seglog(DELAY, "consumer on west", messages=paced, at_most={"p99_ms": 100})
    paced_delays(bench, clusters.east, clusters.west, topic_name(REPLICATED, "delay"), workers, paced, True)
