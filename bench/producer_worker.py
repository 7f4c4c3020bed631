"""A pulsar-client producer in a process of its own, driven over stdin/stdout by bench_server.py.

One JSON command a line on stdin, one JSON answer a line on stdout:

    {"op": "open", "url": "pulsar://127.0.0.1:PORT", "topic": "t", "batching": true, "value_bytes": 100}
        -> {"ok": true}            a client and a producer, connected (untimed by the benchmark)
    {"op": "produce", "n": 100000}
        -> {"ok": true, "seconds": 0.41, "errors": 0}
                                   send_async of n values, flush(), and every receipt's callback
    {"op": "paced", "n": 30000, "rate": 10000}
        -> {"ok": true, "seconds": 3.0, "errors": 0, "late_ms": 0.4}
                                   send_async of n values at `rate` a second, each stamped (below)

Options of "open" beyond those: "batch_messages" (a batch's most messages, default 1,000; the batch's size
limit is raised to fit them), "max_pending", and "numbered": each value of "produce" then starts with its
index in the round (8 bytes, big-endian), so that a benchmark can check every message arrived once and in
order. The values of "paced" always start with their index and the wall-clock time (`time.time_ns()`) of
their send_async call (8 bytes each, big-endian), for end-to-end delays measured on the same machine.
    {"op": "close"} (or end of input)  -> the producer and the client closed, the process exits

The benchmark starts workers before a round and sends "produce" to each of them at once, so the work of a
round is just the sends: the process start and the connection are outside the timing. Every wait is
bounded (RECEIPT_TIMEOUT_S)."""

from __future__ import annotations

import os
import struct
import threading
import time

import pulsar
from worker_commands import serve_commands

RECEIPT_TIMEOUT_S = 120.0
# Messages a producer may have waiting for receipts before send_async blocks: ten batches of 1,000 in
# flight (the client's default of 1,000 would allow one, and a round trip per batch would be measured).
MAX_PENDING = 10_000
PACE_SLEEP_S = 0.0005  # a paced producer sleeps when it is this far ahead of its schedule
BATCH_BYTES = 128 * 1024  # the client's default limit of a batch's size, raised for batches of more messages


class Worker:
    def __init__(self) -> None:
        self.client = None
        self.producer = None
        self.value = b""
        self.numbered = False

    def open(self, url: str, topic: str, batching: bool, value_bytes: int, cpu: int | None = None,
             max_pending: int = MAX_PENDING, batch_messages: int = 1000, numbered: bool = False) -> dict:
        if cpu is not None:  # before the client starts its threads, which inherit it
            os.sched_setaffinity(0, {cpu})
        self.client = pulsar.Client(url, operation_timeout_seconds=30,
                                    logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        self.producer = self.client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=batch_messages,
            batching_max_allowed_size_in_bytes=max(BATCH_BYTES, 2 * batch_messages * value_bytes),
            batching_max_publish_delay_ms=10, max_pending_messages=max_pending, block_if_queue_full=True)
        self.value = os.urandom(value_bytes)
        self.numbered = numbered
        return {"ok": True}

    def produce(self, n: int) -> dict:
        done, state, on_receipt = _receipts(n)
        send_async, value = self.producer.send_async, self.value
        start = time.perf_counter()
        if self.numbered:
            pack, tail = struct.Struct(">q").pack, value[8:]
            for i in range(n):
                send_async(pack(i) + tail, on_receipt)
        else:
            for _ in range(n):
                send_async(value, on_receipt)
        self.producer.flush()
        finished = done.wait(RECEIPT_TIMEOUT_S)
        seconds = time.perf_counter() - start
        return {"ok": finished and state["errors"] == 0, "seconds": seconds, "errors": state["errors"],
                "missing": state["left"]}

    def paced(self, n: int, rate: float) -> dict:
        """n send_async at `rate` a second: the i-th is due at i / rate seconds after the first, and sent as
        soon as it is due (the loop sleeps while it is ahead by PACE_SLEEP_S or more, so values go out in
        bursts of a few; a late one is sent at once). `late_ms`: how far behind its due time the latest one
        went out, which says whether the rate was held."""
        done, state, on_receipt = _receipts(n)
        send_async, pack, tail = self.producer.send_async, struct.Struct(">qq").pack, self.value[16:]
        clock, wall, sleep = time.perf_counter, time.time_ns, time.sleep
        start = clock()
        late = 0.0
        for i in range(n):
            ahead = start + i / rate - clock()
            if ahead >= PACE_SLEEP_S:
                sleep(ahead)
            late = max(late, -ahead)
            send_async(pack(i, wall()) + tail, on_receipt)
        self.producer.flush()
        finished = done.wait(RECEIPT_TIMEOUT_S)
        seconds = clock() - start
        return {"ok": finished and state["errors"] == 0, "seconds": seconds, "errors": state["errors"],
                "missing": state["left"], "late_ms": round(late * 1e3, 3)}

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()
        if self.client is not None:
            self.client.close()


def _receipts(n: int):
    """(an event set once n receipts came back, the count of those left and of errors, the callback)."""
    done = threading.Event()
    state = {"left": n, "errors": 0}
    lock = threading.Lock()

    def on_receipt(result, message_id) -> None:
        with lock:
            if result != pulsar.Result.Ok:
                state["errors"] += 1
            state["left"] -= 1
            if state["left"] == 0:
                done.set()

    return done, state, on_receipt


if __name__ == "__main__":
    serve_commands(Worker(), ("open", "produce", "paced"))
