"""Spark through `seglog serve` (issue 30): the driver plans through the server's REST API and the executors read
its Arrow Flight port (`.option("serviceUrl", HTTP_URL)`), against the same work through the local `path` option,
the two sides alternating round by round; and the server's anonymous memory while four executors read at once.

The topic: bench_spark.py's (10 M messages of 100 random bytes, keys from a pool of 1,000, 4 partitions), written
once in this module's scratch directory. `seglog serve` runs on that data directory as a subprocess on free
loopback ports (server_processes.start_cluster, which also gives it a free Flight port) and is stopped by its pid.
Spark `local[2]` as in bench_spark.py; the memory group alone runs `local[4]`, so that four tasks (the four
partitions) read at once.

Group "spark through seglog serve: count()"
  baseline  path, count()                 format("seglog").option("path", ...): the executors map the segments
  seglog    serviceUrl, count()           the same query through the server               >= 0.5x
Group "spark through seglog serve: groupBy(key) count, sum(length(value))"
  baseline  path                          bench_spark.py's aggregation
  seglog    serviceUrl                    the same through the server                     >= 0.8x
Group "spark through seglog serve: df.write of 10M rows of 100 B"
  baseline  path                          bench_spark.py's write (tasks stage Arrow files, the driver publishes)
                                          into a fresh data directory's topic
  seglog    serviceUrl                    the same rows through the server (tasks DoPut their staged rows to
                                          the Flight port, the driver's commit asks it to publish) into a fresh
                                          topic on the server                                 >= 0.5x
            each round's topic checked to hold every row, then removed (untimed); 3 rounds after a warm-up
Group "spark through seglog serve: the server's RssAnon, 4 executors reading"
  seglog    the server's RssAnon (/proc/PID/status) sampled every 50 ms by a thread while a `local[4]` count()
            reads 2 M messages (a fifth of each partition, by endingOffsets), then all 10 M, then all 10 M again:
            the idle figure before the first read, each read's peak, and each peak over that idle (what earlier
            reads left allocated counts too); flat: the whole topic's peak growth < 64 MiB, and reading 5x more
            grows it by <= 16 MiB more than the fifth did

Alternation: the seglog test's rounds are timed by pytest-benchmark as usual, and beside each a round of the
baseline runs (before it in even rounds, after it in odd ones), untimed by pytest-benchmark but timed here; the
seglog row records the median and the range of the per-pair ratios (`paired_ratio`, targeted as `at_least` is,
`paired_ratios`) beside the ratio of best rounds the summary prints. The baseline test runs its own rounds too,
for its row. Every round of both sides also records CPU seconds (utime + stime from /proc/PID/stat, reaped
children included): the server's, and Spark's (this process, the JVM, the Python workers: the process tree below
this one, the server left out), so that a missed target shows where the time went. The machine has 2 cores shared
with other work: the figures are noisy, hence the pairs and their range.

With --benchmark-disable (CI) the topic has 20k messages, every body runs once and the memory group keeps the
`local[2]` session (most of what is left is starting Spark and its Python workers).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from bench_spark import PARTITIONS, TOPIC, aggregate, check_aggregate, rows_to_write, write_topic
from server_processes import Process, start_cluster

import seglog
from pyspark_seglog.local import local_spark
from seglog.remote import Credentials, RemoteAdmin

COUNT = "spark through seglog serve: count()"
AGGREGATE = "spark through seglog serve: groupBy(key) count, sum(length(value))"
WRITE = "spark through seglog serve: df.write of 10M rows of 100 B"
MEMORY = "spark through seglog serve: the server's RssAnon, 4 executors reading"
WRITTEN = "written"  # the topic the write groups write, fresh each round
ROUNDS = 5
WRITE_ROUNDS = 3
SAMPLE_S = 0.05
MiB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")
SPARK_CONFIG = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"}


@pytest.fixture(scope="module")
def topic_path(scratch, scale):
    """(data directory, messages) of the benchmark topic."""
    messages = scale(10_000_000, 20_000)
    path = scratch / "data"
    write_topic(path, TOPIC, messages)
    return path, messages


@pytest.fixture(scope="module")
def server(topic_path, logs):
    """`seglog serve` on the topic's data directory: (its process, its HTTP URL)."""
    path, _ = topic_path
    process, _, http_url = start_cluster("standalone", path, logs)
    yield process, http_url
    process.stop()


@pytest.fixture(scope="module")
def spark():
    return local_spark("local[2]", SPARK_CONFIG)


def local_source(spark, path: Path, **options: str):
    return _load(spark.read.format("seglog").option("path", str(path)), options)


def served_source(spark, http_url: str, **options: str):
    return _load(spark.read.format("seglog").option("serviceUrl", http_url), options)


def _load(reader, options: dict[str, str]):
    reader = reader.option("topic", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


# ---------------------------------------------------------------------------------------------------------
# CPU seconds: the server's, and Spark's

def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (the state first), or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of its children it has reaped (cutime + cstime), in seconds."""
    fields = _stat_fields(pid)
    return 0.0 if fields is None else sum(int(f) for f in fields[11:15]) / TICKS


def spark_cpu_seconds(leave_out: int) -> float:
    """process_cpu_seconds over this process and every process below it (the JVM, its Python workers),
    the subtree of `leave_out` (the server) left out."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                parents[int(entry)] = int(fields[1])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, [os.getpid()]
    while stack:
        pid = stack.pop()
        if pid != leave_out:
            total += process_cpu_seconds(pid)
            stack += children.get(pid, [])
    return total


@dataclass
class Side:
    """One side of a comparison: `work`, with the wall seconds of each round it ran and the CPU seconds the
    server and Spark spent in it; `prepare` and `clean`, untimed, before and after each round."""
    work: Callable[[], Any]
    server: Process
    prepare: Callable[[], Any] = lambda: None
    clean: Callable[[], Any] = lambda: None
    wall: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    spark_cpu: list[float] = field(default_factory=list)

    def __call__(self) -> Any:
        server_before, spark_before = process_cpu_seconds(self.server.pid), spark_cpu_seconds(self.server.pid)
        started = time.perf_counter()
        result = self.work()
        self.wall.append(time.perf_counter() - started)
        self.server_cpu.append(process_cpu_seconds(self.server.pid) - server_before)
        self.spark_cpu.append(spark_cpu_seconds(self.server.pid) - spark_before)
        return result

    def round(self) -> Any:
        """A round with its untimed preparation and cleaning."""
        self.prepare()
        try:
            return self()
        finally:
            self.clean()

    def keep_last(self, rounds: int) -> None:
        """Drop all but the last `rounds` rounds (the warm-up's)."""
        for times in (self.wall, self.server_cpu, self.spark_cpu):
            del times[:len(times) - rounds]


def run_paired(bench, served: Side, local: Side, *, rounds: int = ROUNDS) -> Any:
    """bench.run the served side with a local round beside each of its rounds (before it in even rounds, after
    it in odd ones); the warm-up pair dropped; the pairs' figures recorded on the row."""
    turns = count()
    local_first = {}

    def before() -> None:
        local_first["now"] = next(turns) % 2 == 0
        if local_first["now"]:
            local.round()
        served.prepare()

    def after() -> None:
        served.clean()
        if not local_first["now"]:
            local.round()

    result = bench.run(served, setup=before, teardown=after, rounds=rounds)
    for side in (served, local):
        side.keep_last(rounds)
    ratios = [b / s for b, s in zip(local.wall, served.wall)]
    bench.record("paired_ratio", round(statistics.median(ratios), 3))
    bench.record("paired_ratios", [round(r, 3) for r in ratios])
    for role, side in (("served", served), ("local", local)):
        bench.record(f"paired_{role}_wall_seconds", [round(s, 3) for s in side.wall])
        bench.record(f"paired_{role}_spark_cpu_seconds", [round(s, 2) for s in side.spark_cpu])
    bench.record("paired_served_server_cpu_seconds", [round(s, 2) for s in served.server_cpu])
    bench.note(f"paired with the path side round by round: {statistics.median(ratios):.2f}x its rows/s (median; "
               f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} pairs); wall best / median: served "
               f"{min(served.wall):.2f} / {statistics.median(served.wall):.2f} s, local {min(local.wall):.2f} / "
               f"{statistics.median(local.wall):.2f} s; CPU seconds a round (medians): served = server "
               f"{statistics.median(served.server_cpu):.2f} + Spark {statistics.median(served.spark_cpu):.2f}, "
               f"local = Spark {statistics.median(local.spark_cpu):.2f} (server "
               f"{statistics.median(local.server_cpu):.2f})")
    return result


# ---------------------------------------------------------------------------------------------------------
# count()

def test_local_count(bench, spark, topic_path):
    path, messages = topic_path
    bench.baseline(COUNT, "path, count()", messages=messages, unit="row")
    assert bench.run(lambda: local_source(spark, path).count(), rounds=ROUNDS) == messages


def test_served_count(bench, spark, topic_path, server):
    path, messages = topic_path
    process, http_url = server
    bench.seglog(COUNT, "serviceUrl, count()", messages=messages, unit="row", at_least={"path, count()": 0.5},
                 recorded_at_least={"paired_ratio": 0.5})
    served = Side(lambda: served_source(spark, http_url).count(), process)
    local = Side(lambda: local_source(spark, path).count(), process)
    assert run_paired(bench, served, local) == messages


# ---------------------------------------------------------------------------------------------------------
# a grouped aggregation

def test_local_aggregate(bench, spark, topic_path):
    path, messages = topic_path
    bench.baseline(AGGREGATE, "path", messages=messages, unit="row")
    check_aggregate(bench.run(lambda: aggregate(local_source(spark, path)), rounds=ROUNDS), messages)


def test_served_aggregate(bench, spark, topic_path, server):
    path, messages = topic_path
    process, http_url = server
    bench.seglog(AGGREGATE, "serviceUrl", messages=messages, unit="row", at_least={"path": 0.8},
                 recorded_at_least={"paired_ratio": 0.8})
    served = Side(lambda: aggregate(served_source(spark, http_url)), process)
    local = Side(lambda: aggregate(local_source(spark, path)), process)
    check_aggregate(run_paired(bench, served, local), messages)


# ---------------------------------------------------------------------------------------------------------
# writes

def write_rows(spark, messages: int, **where: str) -> None:
    """rows_to_write's rows appended to the topic WRITTEN of `where` (the `path` or `serviceUrl` option)."""
    writer = rows_to_write(spark, messages).write.format("seglog").option("topic", WRITTEN).mode("append")
    for key, value in where.items():
        writer = writer.option(key, value)
    writer.save()


def fresh_directory(out: Path) -> None:
    """A new data directory `out` with an empty topic WRITTEN."""
    shutil.rmtree(out, ignore_errors=True)
    with seglog.open(out) as log:
        log.create_topic(WRITTEN, partitions=PARTITIONS)


def check_and_remove_directory(out: Path, messages: int) -> None:
    with seglog.open(out, background=False) as log:
        assert sum(log.topic(WRITTEN).end_offset(p) for p in range(PARTITIONS)) == messages
    shutil.rmtree(out, ignore_errors=True)


def test_local_write(bench, spark, topic_path, scratch):
    _, messages = topic_path
    out = scratch / "written"
    bench.baseline(WRITE, "path", messages=messages, unit="row")
    bench.run(lambda: write_rows(spark, messages, path=str(out)), setup=lambda: fresh_directory(out),
              teardown=lambda: check_and_remove_directory(out, messages), rounds=WRITE_ROUNDS)


def test_served_write(bench, spark, topic_path, server, scratch):
    _, messages = topic_path
    process, http_url = server
    out = scratch / "written"
    admin = RemoteAdmin(http_url, Credentials(), argument="serviceUrl")

    def check_and_delete_topic() -> None:
        assert sum(p["endOffset"] for p in admin.topics.offsets(WRITTEN)) == messages
        admin.topics.delete(WRITTEN, force=True)

    bench.seglog(WRITE, "serviceUrl", messages=messages, unit="row", at_least={"path": 0.5},
                 recorded_at_least={"paired_ratio": 0.5})
    served = Side(lambda: write_rows(spark, messages, serviceUrl=http_url), process,
                  prepare=lambda: admin.topics.create(WRITTEN, partitions=PARTITIONS), clean=check_and_delete_topic)
    local = Side(lambda: write_rows(spark, messages, path=str(out)), process, prepare=lambda: fresh_directory(out),
                 clean=lambda: check_and_remove_directory(out, messages))
    try:
        run_paired(bench, served, local, rounds=WRITE_ROUNDS)
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------------------------
# the server's memory while four executors read

def rss_anon(pid: int) -> int:
    """RssAnon of process `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no RssAnon in /proc/{pid}/status")


class Sampler:
    """The highest RssAnon of a process, sampled every SAMPLE_S by a thread while inside `with`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.idle = rss_anon(pid)
        self.peak = self.idle
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_anon(self.pid))
            self.samples += 1
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_anon(self.pid))


@pytest.fixture(scope="module")
def four_executors(spark, scale):
    """A `local[4]` session in place of the module's `local[2]` one (the memory group runs last). With
    benchmarks disabled, the `local[2]` one: a new SparkContext and four fresh Python workers would take CI
    longer than the rest of the module."""
    if scale.quick:
        yield spark
        return
    spark.stop()
    session = local_spark("local[4]", SPARK_CONFIG)
    yield session
    session.stop()


def test_server_memory_is_flat_while_four_executors_read(bench, four_executors, topic_path, server):
    path, messages = topic_path
    process, http_url = server
    with seglog.open(path, background=False) as log:
        topic = log.topic(TOPIC)
        fifth = {TOPIC: {str(p): topic.end_offset(p) // 5 for p in range(PARTITIONS)}}
    small = sum(fifth[TOPIC].values())
    reads = (("a fifth", small, {"endingOffsets": json.dumps(fifth)}), ("whole topic", messages, {}),
             ("whole topic again", messages, {}))
    samplers: dict[str, Sampler] = {}

    def read_all() -> None:
        for label, rows, options in reads:
            with Sampler(process.pid) as sampler:
                assert served_source(four_executors, http_url, **options).count() == rows
            samplers[label] = sampler

    bench.seglog(MEMORY, "count() of a fifth, the whole topic, again", messages=small + 2 * messages, unit="row",
                 at_most={"peak growth, whole topic (MiB)": 64, "peak growth, whole minus a fifth (MiB)": 16})
    bench.run(read_all, rounds=1, warmup_rounds=0)
    idle = samplers["a fifth"].idle
    growth = {label: sampler.peak - idle for label, sampler in samplers.items()}
    bench.record("idle (MiB)", round(idle / MiB, 1))
    for label, sampler in samplers.items():
        bench.record(f"peak, {label} (MiB)", round(sampler.peak / MiB, 1))
        bench.record(f"peak growth, {label} (MiB)", round(growth[label] / MiB, 1))
        bench.record(f"samples, {label}", sampler.samples)
    bench.record("peak growth, whole minus a fifth (MiB)",
                 round((growth["whole topic"] - growth["a fifth"]) / MiB, 1))
    bench.note(f"the server's RssAnon: idle {idle / MiB:.1f} MiB before the first read; its peak "
               + ", ".join(f"reading {label} ({rows:,} messages) {samplers[label].peak / MiB:.1f} MiB "
                           f"(+{growth[label] / MiB:.1f})" for label, rows, _ in reads)
               + f"; sampled every {SAMPLE_S * 1000:.0f} ms ({samplers['whole topic'].samples} samples in the "
               "first whole read)")
