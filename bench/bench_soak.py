"""The soak of issue 26: `seglog serve` for 10 minutes under 100 producers and 100 consumers of the real
pulsar-client, a third of the consumers slow or stalled, and hostile raw-socket clients looping beside them. The
server's anonymous memory, open descriptors and disk must stay flat after a warm-up, and every message a
producer got a receipt for must reach each subscription of its topic exactly once.

The server: one `seglog serve` (server_processes.start_cluster: 127.0.0.1, free ports, stopped by its pid), its
data directory's broker.conf setting `maintenance_interval=10s` (the default 60 s would only make the disk's saw
teeth six times taller: the lifecycle rules are the same). Namespace `public/soak` has retention 0/0, Pulsar's
default (acknowledged data goes; seglog's broker default keeps it 7 days), and every topic is made through the
admin API with 1 MiB segments (`segment_size`), so a partition holds its unacknowledged messages plus one segment.

The clients, in WORKERS (4) processes of this file (`python bench_soak.py clients`, driven over stdin/stdout),
each one pulsar.Client (its C++ core is threaded) with 25 producers and 25 consumers, one thread a consumer:
- TOPICS (20) topics, each with 5 producers spread over the workers. Each producer sends PRODUCER_RATE (5)
  messages a second, of 100 to 2,000 bytes (1 KiB on average): the even ones batched (a burst of 5 send_async
  a second, one batch), the odd ones unbatched (one send_async every 200 ms). In all 500 msg/s, 0.5 MB/s.
- 3 subscriptions a topic, 5 consumers, each pair in two different workers: `exclusive` (1 consumer),
  `failover` (2: one active, one standby) and `shared` (2). Made at earliest through the admin API, and every
  consumer of every worker subscribed before the first send (a failover subscription whose standby joins
  later may switch its active consumer, which then gets again what the first had not acknowledged yet: at
  least once, as in Pulsar, and not what is measured here). Every consumer acknowledges each message.
- A third of the consumers misbehave: one in six is slow (sleeps SLOW_SLEEP_S, 20 ms, after each message: 50
  msg/s at most, twice its topic's rate), one in six stalls (receives for 30-60 s, then stops for 20-40 s, its
  receiver queue of 1,000 filling and the rest of its backlog left on the server, then drains), so backlogs
  rise and fall (sampled every 5 s from the topics' stats: the per-minute maximum is in the summary).

The hostile clients, in one more process (`python bench_soak.py hostile`), raw sockets through the helpers of
tests/helpers/helpers_hostile.py (those of test_hostile_clients.py), each a thread looping until the producers
stop, bounded in count and time:
- two connections trickling a frame (a header announcing 1 MiB, then a byte every 50 ms), one before CONNECT,
  one after; the server must close each within 4 keep-alive intervals (30 s each by default), then again;
- a consumer granting 2^32-1 permits on a topic holding 32 MiB (8 KiB messages) and never reading its
  socket, reconnected every 30 s;
- decompression bombs every 15 s: ZLIB and ZSTD payloads declaring 1000 bytes that inflate to 256 MiB
  (refused with SEND_ERROR, then a normal send on the same producer gets its receipt);
- a 5 MiB batch of about 870,000 empty messages every 15 s (refused);
- a flood every 20 s of 3,000 unbatched 8 KiB SENDs (24 MiB, over a connection's 16 MiB publish buffer)
  whose receipts are read only once all are sent: all 3,000 must come, in order. Its topic has no
  subscription, so retention deletes it.

Measured every second from this process: the server's RssAnon (/proc/PID/status: not RSS, which the mapped
segments inflate), its open descriptors (/proc/PID/fd) and the disk held by its data directory (the sum of
st_blocks * 512 of its files). The first fifth of the run (2 minutes of 10) is the warm-up. As bench/'s rule
asks for a baseline measured in the same run, the baseline here is the server itself right after the warm-up:
the maximum of each series over the window from the end of the warm-up to half-time (minutes 2-5), and the
ratio is the maximum over the last half (minutes 5-10) to it. Each must stay within its tolerance (asserted):
- RssAnon: 10%, or 16 MiB if more (one connection's publish buffer, the most one hostile flood may hold by
  design, can come and go at any second: a spike in one window and not the other is not growth);
- descriptors: 10%, or 16 if more (the hostile loop opens and closes up to 7 connections, and a topic's
  segment files come and go with rolls and deletions);
- disk: 10%, or 48 MiB if more (a flood's 24 MiB may be on disk or already deleted at either maximum,
  depending on where the 10 s maintenance pass falls, plus a 1 MiB segment a topic rolling in between).
A real leak grows without bound: over 5 minutes at these rates it passes these margins. The per-minute
min/median/max of each series is printed and kept in extra_info (`series`).

Then: the producers stop (every receipt in), the hostile loop stops, the slow and stalled consumers drain at full
speed until every subscription's backlog is 0 (bounded: DRAIN_TIMEOUT_S), and the workers report what each
producer had receipted and each consumer received. Per subscription, the messages delivered by its consumers
must be exactly the receipted messages of its topic: none missing, none twice (the first few of each are
printed). A message delivered that had no receipt (its send failed or timed out) is counted apart.

Duration: SEGLOG_SOAK_SECONDS (default 600). With --benchmark-disable (CI) the body runs once as a smoke test
of a few seconds (SMOKE_SECONDS, one worker with 10 producers and 10 consumers over 2 topics, the hostile
loop's first iterations; about 13 s in all): the delivery checks apply, the flatness ones are only printed
(too short to mean anything). The full run:

    python -m pytest -p no:cacheprovider bench/bench_soak.py --benchmark-only -s
    SEGLOG_SOAK_SECONDS=60 python -m pytest -p no:cacheprovider bench/bench_soak.py --benchmark-only -s  # a look
"""

from __future__ import annotations

import json
import os
import random
import statistics
import struct
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from server_processes import Process, ProducerWorker, spawn, start_cluster
from worker_commands import serve_commands

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))  # helpers_hostile, for this file run as a worker

from helpers_hostile import (  # noqa: E402
    closed_within,
    empty_messages_batch,
    flood,
    metadata,
    raw_producer,
    zlib_bomb,
    zstd_bomb,
)
from helpers_server import RawConnection, rest  # noqa: E402  (its pulsar import skips without the test extra)
from seglog.server.protocol import pulsar_api_pb2 as api  # noqa: E402
from seglog.server.protocol.frames import Type, command, encode_command, encode_send  # noqa: E402

pulsar = pytest.importorskip("pulsar")

MiB = 1024 * 1024
GROUP = "soak: seglog serve, 100 producers, 100 consumers, hostile clients"
SOAK_SECONDS = float(os.environ.get("SEGLOG_SOAK_SECONDS", "600"))
SMOKE_SECONDS = 8.0
WARMUP_SHARE = 0.2  # the first fifth of the run: 2 minutes of 10
NAMESPACE = "public/soak"
SEGMENT_SIZE = "1 MiB"
MAINTENANCE_INTERVAL = "10s"
WORKERS, TOPICS, PRODUCERS_PER_TOPIC = 4, 20, 5
SUBSCRIPTIONS = (("exclusive", "Exclusive", 1), ("failover", "Failover", 2), ("shared", "Shared", 2))
PRODUCER_RATE = 5  # messages a second per producer
SLOW_SLEEP_S = 0.02
RUN_S, STALL_S = (30.0, 60.0), (20.0, 40.0)  # a stalled consumer's receiving and stalled periods
DRAIN_TIMEOUT_S = 180.0
BACKLOG_EVERY_S = 5.0
TOLERANCE = {"rss_anon": (0.10, 16 * MiB), "fds": (0.10, 16), "disk": (0.10, 48 * MiB)}
KEEPALIVE_S = 30.0  # seglog serve's default
TIMEOUT_S = SOAK_SECONDS + DRAIN_TIMEOUT_S + 600  # the run, the drain, start and stop of every process


# ---------------------------------------------------------------------------------------------------------
# The plan: which worker runs which producer and consumer


@dataclass
class Plan:
    seconds: float
    workers: int
    topics: int
    producers_per_topic: int
    hostile_pauses: dict[str, float] = field(default_factory=lambda: {"bombs": 15.0, "batch": 15.0,
                                                                        "flood": 20.0})
    greedy_hold_s: float = 30.0  # how long the greedy consumer keeps its connection before it reconnects
    flood_count: int = 3_000
    greedy_count: int = 4_096  # 8 KiB messages: 32 MiB the greedy consumer may take

    @classmethod
    def for_session(cls, quick: bool) -> Plan:
        if quick:
            return cls(SMOKE_SECONDS, 1, 2, 5, {"bombs": 5.0, "batch": 5.0, "flood": 5.0}, 5.0, 300, 256)
        return cls(SOAK_SECONDS, WORKERS, TOPICS, PRODUCERS_PER_TOPIC)

    def topic(self, t: int) -> str:
        return f"persistent://{NAMESPACE}/t{t:02d}"

    def producers(self) -> list[dict]:
        """Producer p writes to topic p % topics, in worker p * workers // count: each topic's producers spread."""
        count = self.topics * self.producers_per_topic
        return [{"index": p, "topic": self.topic(p % self.topics), "batching": p % 2 == 0,
                 "worker": p * self.workers // count} for p in range(count)]

    def consumers(self) -> list[dict]:
        """Five consumers a topic over its three subscriptions; consumer j of topic t in worker (t + j) % workers
        (the two of a failover or shared subscription in different workers); one in six slow, one in six
        stalled."""
        made = []
        for t in range(self.topics):
            j = 0
            for subscription, kind, count in SUBSCRIPTIONS:
                for _ in range(count):
                    c = len(made)
                    behaviour = {1: "slow", 4: "stalled"}.get(c % 6, "normal")
                    made.append({"index": c, "name": f"c{c:03d}-{behaviour}", "topic": self.topic(t),
                                 "subscription": subscription, "type": kind, "behaviour": behaviour,
                                 "worker": (t + j) % self.workers, "seed": c})
                    j += 1
        return made


def value_size(producer: int, seq: int) -> int:
    return 100 + (seq * 7919 + producer * 104729) % 1901


def value(producer: int, seq: int) -> bytes:
    head = b"%d:%d:" % (producer, seq)
    return head + b"v" * (value_size(producer, seq) - len(head))


# ---------------------------------------------------------------------------------------------------------
# The clients' worker process: `python bench_soak.py clients`, one JSON command a line on stdin, one JSON
# answer a line on stdout:
#   {"op": "subscribe", "url": ..., "producers": [...], "consumers": [...]}
#       -> {"ok": true}   consumers subscribed and producers created
#   {"op": "start", "seconds": s} -> {"ok": true}   consuming and producing have begun
#   {"op": "stop-producing"} -> {"ok": true, "receipted": n, "failed": n}   producers flushed, every callback in
#   {"op": "drain"}          -> {"ok": true}   slow and stalled consumers go at full speed
#   {"op": "finish", "out": path} -> {"ok": true}   consumers stopped; receipts and deliveries written to `path`
#   {"op": "close"} (or end of input) -> the client closed, the process exits


WORKER_OPS = {"clients": ("subscribe", "start", "stop-producing", "drain", "finish"), "hostile": ("start", "stop")}


class ClientsWorker:
    RECEIVE_MS = 200

    def __init__(self) -> None:
        self.client = None
        self.producers: list[tuple[dict, Any]] = []
        self.consumers: list[tuple[dict, Any]] = []
        self.receipted: dict[int, list[int]] = {}
        self.failed: dict[int, list[int]] = {}
        self.delivered: dict[str, list[list[int]]] = {}
        self.stalls: dict[str, list[float]] = {}
        self.producing = threading.Event()
        self.draining = threading.Event()
        self.stopping = threading.Event()
        self.sent: dict[int, int] = {}
        self.threads: list[threading.Thread] = []
        self.producer_thread: threading.Thread | None = None

    def subscribe(self, url: str, producers: list[dict], consumers: list[dict]) -> dict:
        """The client, every consumer subscribed and every producer created; nothing sent yet (every worker
        subscribes before any produces: a failover subscription whose second consumer came after the first
        messages would switch its active consumer, and redeliver what the first had not yet acknowledged)."""
        self.client = pulsar.Client(url, operation_timeout_seconds=30, io_threads=2, message_listener_threads=1,
                                    logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        for spec in consumers:
            consumer = self.client.subscribe(spec["topic"], spec["subscription"],
                                             consumer_type=getattr(pulsar.ConsumerType, spec["type"]),
                                             consumer_name=spec["name"],
                                             initial_position=pulsar.InitialPosition.Earliest)
            self.consumers.append((spec, consumer))
            self.delivered[spec["name"]] = []
            self.stalls[spec["name"]] = []
        for spec in producers:
            producer = self.client.create_producer(spec["topic"], producer_name=f"p{spec['index']:03d}",
                                                   batching_enabled=spec["batching"], batching_max_publish_delay_ms=10,
                                                   block_if_queue_full=True, send_timeout_millis=60_000)
            self.producers.append((spec, producer))
            self.receipted[spec["index"]] = []
            self.failed[spec["index"]] = []
            self.sent[spec["index"]] = 0
        return {"ok": True}

    def start(self, seconds: float) -> dict:
        """Consuming and producing begin."""
        for spec, consumer in self.consumers:
            self.threads.append(threading.Thread(target=self._consume, args=(spec, consumer), daemon=True))
        self.producing.set()
        self.producer_thread = threading.Thread(target=self._produce, args=(seconds,), daemon=True)
        for thread in (*self.threads, self.producer_thread):
            thread.start()
        return {"ok": True}

    def _produce(self, seconds: float) -> None:
        """Each producer PRODUCER_RATE messages a second: batched ones a burst a second, the others evenly spread;
        bounded by time (the run's seconds and a margin) and by count."""
        started = time.monotonic()
        deadline, most = started + seconds + 300, int((seconds + 300) * PRODUCER_RATE) + 1
        sent = self.sent
        n = len(self.producers)
        tick = 1.0 / PRODUCER_RATE
        step = 0
        while self.producing.is_set() and time.monotonic() < deadline:
            due = started + step * tick
            for k, (spec, producer) in enumerate(self.producers):
                p = spec["index"]
                if not self.producing.is_set() or sent[p] >= most:
                    break
                wait = due + k * tick / n - time.monotonic()  # the producers of a tick spread over it
                if wait > 0:
                    time.sleep(wait)
                burst = (PRODUCER_RATE if step % PRODUCER_RATE == 0 else 0) if spec["batching"] else 1
                for _ in range(burst):
                    seq = sent[p]
                    sent[p] += 1
                    producer.send_async(value(p, seq), self._on_receipt(p, seq))
            step += 1

    def _on_receipt(self, producer: int, seq: int):
        def callback(result, message_id) -> None:
            (self.receipted if result == pulsar.Result.Ok else self.failed)[producer].append(seq)
        return callback

    def _consume(self, spec: dict, consumer: Any) -> None:
        rng = random.Random(spec["seed"])
        behaviour = spec["behaviour"]
        got = self.delivered[spec["name"]]
        stall_at = time.monotonic() + rng.uniform(*RUN_S)
        most = 10_000_000  # bounded in count as well as by the stop event
        while not self.stopping.is_set() and len(got) < most:
            if behaviour == "stalled" and not self.draining.is_set() and time.monotonic() >= stall_at:
                stall = rng.uniform(*STALL_S)
                self.stalls[spec["name"]].append(round(stall, 1))
                self.draining.wait(stall)  # a drain ends the stall
                stall_at = time.monotonic() + rng.uniform(*RUN_S)
                continue
            try:
                message = consumer.receive(self.RECEIVE_MS)
            except pulsar.Timeout:
                continue
            head = message.data().split(b":", 2)
            got.append([int(head[0]), int(head[1]), len(message.data())])
            consumer.acknowledge(message)
            if behaviour == "slow" and not self.draining.is_set():
                time.sleep(SLOW_SLEEP_S)

    def stop_producing(self) -> dict:
        self.producing.clear()
        self.producer_thread.join(60)
        for _, producer in self.producers:
            producer.flush()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self._outstanding():
            time.sleep(0.1)
        return {"ok": True, "receipted": sum(map(len, self.receipted.values())),
                "failed": sum(map(len, self.failed.values())), "outstanding": self._outstanding()}

    def _outstanding(self) -> int:
        """Messages sent whose callback has not come yet."""
        return sum(n - len(self.receipted[p]) - len(self.failed[p]) for p, n in self.sent.items())

    def drain(self) -> dict:
        self.draining.set()
        return {"ok": True}

    def finish(self, out: str) -> dict:
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        for _, consumer in self.consumers:
            consumer.close()
        for _, producer in self.producers:
            producer.close()
        Path(out).write_text(json.dumps({"receipted": self.receipted, "failed": self.failed,
                                         "delivered": self.delivered, "stalls": self.stalls}))
        return {"ok": True}

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


# ---------------------------------------------------------------------------------------------------------
# The hostile clients' process: `python bench_soak.py hostile`, the same protocol:
#   {"op": "start", "port": p, "topics": {...}, "pauses": {...}, "seconds": s, ...} -> {"ok": true}
#       the greedy consumer's topic filled (untimed), the bombs made; every loop started
#   {"op": "stop"} -> {"ok": true, "iterations": {...}, "errors": [...], "trickle_closed_s": [...]}


class HostileWorker:
    # a trickling connection must be closed by then: test_hostile_clients.py's bound (a connected one is at the
    # third tick: the CONNECT counts as activity in the first interval, the second sends a PING, the third closes)
    TRICKLE_BOUND_S = 4 * KEEPALIVE_S

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.iterations: Counter[str] = Counter()
        self.errors: list[str] = []
        self.trickle_closed_s: list[float] = []

    def start(self, port: int, topics: dict[str, str], pauses: dict[str, float], seconds: float,
              flood_count: int, greedy_count: int, greedy_hold_s: float) -> dict:
        self.server, self.topics = types.SimpleNamespace(port=port), topics
        self.pauses, self.flood_count, self.greedy_hold_s = pauses, flood_count, greedy_hold_s
        self.deadline = time.monotonic() + seconds
        raw = raw_producer(self.server, topics["greedy"])
        try:
            receipts: list = []
            flood(raw, greedy_count, receipts)  # the greedy consumer's backlog: 8 KiB messages
            assert all(r.type == Type.SEND_RECEIPT for r in receipts), receipts[:3]
        finally:
            raw.close()
        self.bombs = [("ZLIB", api.ZLIB, zlib_bomb(256 * MiB)), ("ZSTD", api.ZSTD, zstd_bomb(256 * MiB))]
        self.batch = empty_messages_batch()
        loops = {"trickle-unconnected": (self._trickle, False), "trickle-connected": (self._trickle, True),
                 "greedy": (self._greedy, None), "bombs": (self._bombs, None), "batch": (self._batch, None),
                 "flood": (self._flood, None)}
        for name, (body, argument) in loops.items():
            self.threads.append(threading.Thread(target=self._loop, args=(name, body, argument), daemon=True))
            self.threads[-1].start()
        return {"ok": True}

    def _loop(self, name: str, body, argument) -> None:
        """`body` again and again until stopped or past the deadline, pausing between (bounded in count too)."""
        pause = self.pauses.get(name, 0.5)
        most = int((self.deadline - time.monotonic()) / max(pause, 1.0)) + 2
        for _ in range(most):
            if self.stopping.is_set() or time.monotonic() > self.deadline:
                return
            try:
                body() if argument is None else body(argument)
                self.iterations[name] += 1
            except Exception as error:  # counted and reported: the test fails on any
                self.errors.append(f"{name}: {type(error).__name__}: {error}"[:500])
            self.stopping.wait(pause)

    def _trickle(self, connected: bool) -> None:
        raw = RawConnection(self.server.port)
        try:
            if connected:
                raw.connect()
            bound = min(self.TRICKLE_BOUND_S, self.deadline - time.monotonic())
            trickle = struct.pack(">II", MiB, MiB - 4) + bytes(int(self.TRICKLE_BOUND_S / 0.05) + 100)
            took = closed_within(raw.socket, bound, trickle)
        finally:
            raw.close()
        if took is not None:
            self.trickle_closed_s.append(round(took, 1))
        elif bound >= self.TRICKLE_BOUND_S:
            raise AssertionError(f"a trickling connection was still open after {bound:.0f} s")

    def _greedy(self) -> None:
        raw = RawConnection(self.server.port)
        try:
            raw.connect()
            raw.send(encode_command(command(Type.SUBSCRIBE, topic=self.topics["greedy"], subscription="greedy",
                                               sub_type=api.CommandSubscribe.Shared, consumer_id=1, request_id=2,
                                               initial_position=api.CommandSubscribe.Earliest)))
            answer = raw.receive()
            assert answer.type == Type.SUCCESS, answer
            raw.send(encode_command(command(Type.FLOW, consumer_id=1, message_permits=2**32 - 1)))
            self.stopping.wait(min(self.greedy_hold_s, max(0.0, self.deadline - time.monotonic())))
        finally:
            raw.close()

    def _bombs(self) -> None:
        raw = raw_producer(self.server, self.topics["bombs"])
        try:
            for sequence_id, (name, compression, payload) in enumerate(self.bombs):
                raw.send(encode_send(1, 2 * sequence_id, 1, metadata(2 * sequence_id, compression=compression,
                                                                         uncompressed_size=1000), payload))
                answer = raw.receive(30)
                assert answer.type == Type.SEND_ERROR and answer.send_error.error == api.ChecksumError, \
                    f"{name} bomb: {answer}"
                raw.send(encode_send(1, 2 * sequence_id + 1, 1, metadata(2 * sequence_id + 1), b"after"))
                answer = raw.receive(30)
                assert answer.type == Type.SEND_RECEIPT, f"after the {name} bomb: {answer}"
        finally:
            raw.close()

    def _batch(self) -> None:
        count, payload = self.batch
        raw = raw_producer(self.server, self.topics["batch"])
        try:
            raw.send(encode_send(1, 0, count, metadata(0, num_messages_in_batch=count), payload))
            answer = raw.receive(30)
            assert answer.type == Type.SEND_ERROR and answer.send_error.error == api.ChecksumError, answer
        finally:
            raw.close()

    def _flood(self) -> None:
        raw = raw_producer(self.server, self.topics["flood"])
        try:
            receipts: list = []
            flood(raw, self.flood_count, receipts)
        finally:
            raw.close()
        got = [r.send_receipt.sequence_id for r in receipts if r.type == Type.SEND_RECEIPT]
        assert got == list(range(self.flood_count)), f"flood receipts: {len(got)} of {self.flood_count}"

    def stop(self) -> dict:
        self.stopping.set()
        for thread in self.threads:
            thread.join(2 * self.TRICKLE_BOUND_S)
        return {"ok": True, "iterations": dict(self.iterations), "errors": self.errors,
                "trickle_closed_s": self.trickle_closed_s, "alive": [t.name for t in self.threads if t.is_alive()]}

    def close(self) -> None:
        pass



# ---------------------------------------------------------------------------------------------------------
# The benchmark's side: the server, the worker processes, the samples, the checks


class SoakProcess(ProducerWorker):
    """A worker process of this file (`role`: clients or hostile), driven as producer_worker.py is (request,
    answer, stop by its pid)."""

    def __init__(self, logs: Path, role: str, number: int) -> None:
        started = spawn(f"soak {role} worker {number}", [sys.executable, str(Path(__file__).resolve()), role],
                         logs / f"soak-{role}-{number}.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        Process.__init__(self, started.name, started.popen, started.log)


def each_answer(workers: list[SoakProcess], **command) -> list[dict]:
    """Send `command` to every worker at once, then collect their answers."""
    for worker in workers:
        worker.request(**command)
    return [worker.answer() for worker in workers]


class Sampler:
    """Every second, from a thread: the server's RssAnon, its open descriptors and the disk its data directory
    holds, at seconds since `start()`. Bounded by `most` samples and stop()."""

    def __init__(self, pid: int, data: Path, most: int) -> None:
        self.pid, self.data, self.most = pid, data, most
        self.samples: list[tuple[float, int, int, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        for k in range(self.most):
            if self._stop.wait(max(0.0, self.started + k - time.monotonic())):
                return
            try:
                self.samples.append((time.monotonic() - self.started, rss_anon(self.pid), open_fds(self.pid),
                                     disk_held(self.data)))
            except OSError as error:  # the server gone: the test fails on its exit anyway
                self.errors.append(str(error))
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def disk_held(directory: Path) -> int:
    """Bytes of disk the files under `directory` hold (st_blocks * 512: preallocated blocks count, holes do not)."""
    held = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                held += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # deleted by a maintenance pass meanwhile
                pass
    return held


SERIES = {"rss_anon": (1, "RssAnon", MiB, "MiB"), "fds": (2, "open descriptors", 1, ""),
          "disk": (3, "disk held", MiB, "MiB")}


def per_minute(samples: list[tuple], column: int, unit: float) -> list[dict]:
    minutes: dict[int, list[float]] = {}
    for sample in samples:
        minutes.setdefault(int(sample[0] // 60), []).append(sample[column] / unit)
    return [{"minute": m, "min": round(min(v), 1), "median": round(statistics.median(v), 1),
             "max": round(max(v), 1)} for m, v in sorted(minutes.items())]


def flatness(samples: list[tuple], seconds: float) -> dict[str, dict]:
    """Per series: the maximum from the end of the warm-up to half-time (the baseline), the maximum of the last
    half, their ratio, what the tolerance allows, and the per-minute summary."""
    warmup, half = WARMUP_SHARE * seconds, seconds / 2
    verdicts = {}
    for key, (column, _, unit, _) in SERIES.items():
        baseline = [s[column] for s in samples if warmup <= s[0] < half]
        last = [s[column] for s in samples if half <= s[0] <= seconds]
        relative, absolute = TOLERANCE[key]
        reference, peak = (max(baseline) if baseline else 0), (max(last) if last else 0)
        allowed = reference + max(relative * reference, absolute)
        verdicts[key] = {"after_warmup_max": round(reference / unit, 1), "last_half_max": round(peak / unit, 1),
                         "ratio": round(peak / reference, 3) if reference else None,
                         "allowed": round(allowed / unit, 1), "flat": bool(baseline and last and peak <= allowed),
                         "per_minute": per_minute([s for s in samples if s[0] <= seconds], column, unit)}
    return verdicts


def rss_anon(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no RssAnon in /proc/{pid}/status")


def backlogs(http: str, topics: list[str]) -> dict[str, int]:
    """msgBacklog of every subscription of `topics`, by "topic/subscription"."""
    found = {}
    for topic in topics:
        status, stats = rest(http, "GET", f"/admin/v2/{topic.replace('://', '/')}/stats")
        assert status == 200, (topic, status, stats)
        for name, sub in stats["subscriptions"].items():
            found[f"{topic.rsplit('/', 1)[1]}/{name}"] = sub["msgBacklog"]
    return found


def set_up(http: str, plan: Plan, hostile_topics: dict[str, str]) -> None:
    """Namespace public/soak with retention 0/0, every topic with 1 MiB segments, the subscriptions at earliest."""
    def ok(status_body, *wanted):
        assert status_body[0] in (wanted or (200, 204)), status_body

    ok(rest(http, "PUT", f"/admin/v2/namespaces/{NAMESPACE}"))
    ok(rest(http, "POST", f"/admin/v2/namespaces/{NAMESPACE}/retention",
            {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}))
    for topic in [plan.topic(t) for t in range(plan.topics)] + list(hostile_topics.values()):
        path = topic.split("://", 1)[1]
        ok(rest(http, "PUT", f"/seglog/v1/topics/{path}", {"settings": {"segment_size": SEGMENT_SIZE}}))
    for t in range(plan.topics):
        for subscription, _, _ in SUBSCRIPTIONS:
            ok(rest(http, "PUT", f"/seglog/v1/topics/{plan.topic(t).split('://', 1)[1]}/subscriptions/{subscription}",
                    "earliest"))
    ok(rest(http, "PUT", f"/seglog/v1/topics/{hostile_topics['greedy'].split('://', 1)[1]}/subscriptions/greedy",
            "earliest"))


def check_deliveries(plan: Plan, results: list[dict]) -> dict:
    """Per subscription, the messages delivered by its consumers against the receipted messages of its topic."""
    topic_of = {spec["index"]: spec["topic"] for spec in plan.producers()}
    receipted: dict[str, set] = {plan.topic(t): set() for t in range(plan.topics)}
    failed: set = set()
    for result in results:
        for p, seqs in result["receipted"].items():
            receipted[topic_of[int(p)]].update((int(p), s) for s in seqs)
        for p, seqs in result["failed"].items():
            failed.update((int(p), s) for s in seqs)
    consumers = {spec["name"]: spec for spec in plan.consumers()}
    delivered: dict[tuple[str, str], Counter] = {}
    wrong_size = []
    for result in results:
        for name, messages in result["delivered"].items():
            spec = consumers[name]
            counter = delivered.setdefault((spec["topic"], spec["subscription"]), Counter())
            for p, seq, size in messages:
                counter[(p, seq)] += 1
                if size != value_size(p, seq):
                    wrong_size.append((name, p, seq, size))
    report: dict[str, Any] = {"produced": sum(map(len, receipted.values())), "failed_sends": len(failed),
                              "delivered": 0, "expected": 0, "duplicates": 0, "missing": 0, "unreceipted": 0,
                              "foreign": 0, "wrong_size": len(wrong_size), "examples": []}
    for t in range(plan.topics):
        topic = plan.topic(t)
        for subscription, _, _ in SUBSCRIPTIONS:
            counter = delivered.get((topic, subscription), Counter())
            expected = receipted[topic]
            twice = sorted(k for k, n in counter.items() if n > 1)
            missing = sorted(expected - counter.keys())
            unreceipted = counter.keys() - expected
            foreign = sorted(k for k in unreceipted if k not in failed)
            report["delivered"] += sum(counter.values())
            report["expected"] += len(expected)
            report["duplicates"] += sum(counter[k] - 1 for k in twice)
            report["missing"] += len(missing)
            report["unreceipted"] += len(unreceipted)
            report["foreign"] += len(foreign)
            where = f"{topic.rsplit('/', 1)[1]}/{subscription}"
            for label, items in (("twice", twice), ("missing", missing), ("never sent", foreign)):
                if items and len(report["examples"]) < 12:
                    report["examples"].append(f"{where}: {len(items)} {label}, first {items[:3]} (producer, seq)")
    report["examples"] += [f"{n}: producer {p} seq {s}: {size} bytes, not {value_size(p, s)}"
                           for n, p, s, size in wrong_size[:3]]
    return report


def run_soak(plan: Plan, scratch: Path, logs: Path, found: dict) -> None:
    """The soak, start to finish, its figures into `found`; every process it starts is stopped by its pid before it
    returns or raises."""
    data = scratch / "data"
    data.mkdir()
    (data / "broker.conf").write_text(f"maintenance_interval={MAINTENANCE_INTERVAL}\n")
    hostile_topics = {role: f"persistent://{NAMESPACE}/hostile-{role}"
                      for role in ("greedy", "bombs", "batch", "flood")}
    topics = [plan.topic(t) for t in range(plan.topics)]
    started: list[Process] = []
    sampler = None
    try:
        server, url, http = start_cluster("standalone", data, logs, "seglog-serve-soak.log")
        started.append(server)
        port = int(url.rsplit(":", 1)[1])
        set_up(http, plan, hostile_topics)
        workers = [SoakProcess(logs, "clients", w) for w in range(plan.workers)]
        started += workers
        hostile = SoakProcess(logs, "hostile", 0)
        started.append(hostile)
        sampler = Sampler(server.pid, data, int(plan.seconds + DRAIN_TIMEOUT_S + 600)).start()
        producers, consumers = plan.producers(), plan.consumers()
        for w, worker in enumerate(workers):
            worker.request(op="subscribe", url=url, producers=[p for p in producers if p["worker"] == w],
                           consumers=[c for c in consumers if c["worker"] == w])
        for worker in workers:
            worker.answer()
        each_answer(workers, op="start", seconds=plan.seconds)
        hostile.request(op="start", port=port, topics=hostile_topics, pauses=plan.hostile_pauses,
                        seconds=max(1.0, plan.seconds - (time.monotonic() - sampler.started)),
                        flood_count=plan.flood_count, greedy_count=plan.greedy_count,
                        greedy_hold_s=plan.greedy_hold_s)
        hostile.answer()
        print(f"\nsoak: clients and hostile loop running {time.monotonic() - sampler.started:.1f} s after the start;"
              f" {plan.seconds:.0f} s in all", flush=True)
        backlog_series: list[tuple[float, int, int]] = []
        end = sampler.started + plan.seconds
        next_backlog = time.monotonic()
        while time.monotonic() < end:
            for process in started:
                process.check_running()
            if time.monotonic() >= next_backlog:
                now = backlogs(http, topics)
                backlog_series.append((time.monotonic() - sampler.started, sum(now.values()), max(now.values())))
                next_backlog += BACKLOG_EVERY_S
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        stopped = each_answer(workers, op="stop-producing")
        hostile_report = each_answer([hostile], op="stop")[0]
        each_answer(workers, op="drain")
        drain_started = time.monotonic()
        left = backlogs(http, topics)
        while any(left.values()) and time.monotonic() - drain_started < DRAIN_TIMEOUT_S:
            time.sleep(1.0)
            left = backlogs(http, topics)
        drain_seconds = time.monotonic() - drain_started
        time.sleep(1.0)  # the acks' group time (100 ms) and a consumer's last receive
        outs = [scratch / f"results-{w}.json" for w in range(plan.workers)]
        for worker, out in zip(workers, outs):
            worker.request(op="finish", out=str(out))
        for worker in workers:
            worker.answer()
        sampler.stop()
        results = [json.loads(out.read_text()) for out in outs]
        stalls = [s for result in results for stalls in result["stalls"].values() for s in stalls]
        found.update({"samples": sampler.samples, "sampler_errors": sampler.errors, "backlogs": backlog_series,
                "stopped": stopped, "hostile": hostile_report, "drain_seconds": drain_seconds,
                "left_after_drain": {k: v for k, v in left.items() if v}, "results": results, "stalls": stalls,
                "server_cpu_s": server.cpu_seconds(), "server_pid": server.pid})
    finally:
        if sampler is not None:
            sampler.stop()
        codes = {}
        for process in reversed(started):  # the clients first, the server last
            codes[process.name] = process.stop()
        if started:  # the server's log: its records and each traceback's exception line (the rest is frames)
            log = started[0].log.read_text(errors="replace")
            found["server_log"] = [line for line in log.splitlines() if line and not line[0].isspace()
                                   and line != "Traceback (most recent call last):"]
            print(f"soak: exit codes {codes}; server log: {len(log.splitlines())} lines, "
                  f"{log.count('Traceback')} tracebacks", *found["server_log"][:40], sep="\n  ")


@pytest.mark.timeout(TIMEOUT_S)
def test_soak(bench, scale, scratch, logs):
    plan = Plan.for_session(scale.quick)
    bench.seglog(GROUP, f"{plan.seconds:.0f} s soak: RssAnon, descriptors, disk (last half max / after warm-up)")
    found: dict = {}

    def soak() -> None:
        run_soak(plan, scratch, logs, found)

    bench.run(soak, rounds=1, warmup_rounds=0)
    flat = flatness(found["samples"], plan.seconds)
    deliveries = check_deliveries(plan, found["results"])
    backlog_minutes: dict[int, int] = {}
    for at, total, _ in found["backlogs"]:
        backlog_minutes[int(at // 60)] = max(backlog_minutes.get(int(at // 60), 0), total)
    for key, verdict in flat.items():
        for name in ("after_warmup_max", "last_half_max", "ratio", "allowed"):
            bench.record(f"{key}_{name}", verdict[name])
    bench.record("series", {key: verdict["per_minute"] for key, verdict in flat.items()})
    bench.record("deliveries", {k: v for k, v in deliveries.items() if k != "examples"})
    bench.record("hostile", found["hostile"])
    bench.record("drain_seconds", round(found["drain_seconds"], 1))
    bench.record("backlog_max_per_minute", backlog_minutes)
    bench.record("server_cpu_s", round(found["server_cpu_s"], 1))
    bench.record("server_log", found["server_log"][:40])
    bench.record("seconds", plan.seconds)
    bench.note(" ".join(f"{key} {v['after_warmup_max']} -> {v['last_half_max']} ({v['ratio']}x)"
                        for key, v in flat.items()))

    print(f"\nsoak of {plan.seconds:.0f} s (warm-up {WARMUP_SHARE * plan.seconds:.0f} s; baseline: the maximum from "
          f"then to half-time; compared: the maximum of the last half)")
    for key, verdict in flat.items():
        _, title, _, unit = SERIES[key]
        print(f"  {title}: {verdict['after_warmup_max']} {unit} after warm-up, {verdict['last_half_max']} {unit} "
              f"last half, ratio {verdict['ratio']} (allowed up to {verdict['allowed']} {unit}): "
              f"{'flat' if verdict['flat'] else 'GREW'}")
        for row in verdict["per_minute"]:
            print(f"    minute {row['minute']:2d}: min {row['min']:8.1f}  median {row['median']:8.1f}  "
                  f"max {row['max']:8.1f}")
    print(f"  backlog (messages, all subscriptions), max per minute: {backlog_minutes}")
    print(f"  stalls: {len(found['stalls'])}, {min(found['stalls'], default=0)}-{max(found['stalls'], default=0)} s")
    print(f"  drain: {found['drain_seconds']:.1f} s; left: {found['left_after_drain']}")
    print(f"  messages: {deliveries['produced']} receipted, {deliveries['failed_sends']} failed sends; "
          f"{deliveries['delivered']} delivered of {deliveries['expected']} owed to the subscriptions; "
          f"{deliveries['duplicates']} twice, {deliveries['missing']} missing, {deliveries['unreceipted']} "
          f"delivered without a receipt ({deliveries['foreign']} never sent), {deliveries['wrong_size']} wrong sizes")
    for example in deliveries["examples"]:
        print(f"    {example}")
    print(f"  hostile loop: {found['hostile']}")
    print(f"  server CPU: {found['server_cpu_s']:.0f} s; its log's records: {len(found['server_log'])}")

    assert not found["hostile"]["errors"], found["hostile"]["errors"]
    assert not found["sampler_errors"], found["sampler_errors"]
    assert all(s["outstanding"] == 0 for s in found["stopped"]), found["stopped"]
    assert deliveries["duplicates"] == deliveries["missing"] == deliveries["foreign"] == 0, deliveries["examples"]
    assert deliveries["wrong_size"] == 0, deliveries["examples"]
    assert deliveries["produced"] > 0 and deliveries["delivered"] == deliveries["expected"] + deliveries["unreceipted"]
    if not scale.quick:  # a smoke run of seconds says nothing about flatness
        grew = {key: v for key, v in flat.items() if not v["flat"]}
        assert not grew, {key: (v["after_warmup_max"], v["last_half_max"], v["allowed"]) for key, v in grew.items()}



if __name__ == "__main__":
    role = sys.argv[1]
    serve_commands({"clients": ClientsWorker, "hostile": HostileWorker}[role](), WORKER_OPS[role])
