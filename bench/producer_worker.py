"""A pulsar-client producer in a process of its own, driven over stdin/stdout by bench_server.py.

One JSON command a line on stdin, one JSON answer a line on stdout:

    {"op": "open", "url": "pulsar://127.0.0.1:PORT", "topic": "t", "batching": true, "value_bytes": 100}
        -> {"ok": true}            a client and a producer, connected (untimed by the benchmark)
    {"op": "produce", "n": 100000}
        -> {"ok": true, "seconds": 0.41, "errors": 0}
                                   send_async of n values, flush(), and every receipt's callback
    {"op": "close"} (or end of input)  -> the producer and the client closed, the process exits

The benchmark starts workers before a round and sends "produce" to each of them at once, so the work of a
round is just the sends: the process start and the connection are outside the timing. Every wait is
bounded (RECEIPT_TIMEOUT_S)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pulsar

RECEIPT_TIMEOUT_S = 120.0
# Messages a producer may have waiting for receipts before send_async blocks: ten batches of 1,000 in
# flight (the client's default of 1,000 would allow one, and a round trip per batch would be measured).
MAX_PENDING = 10_000


class Worker:
    def __init__(self) -> None:
        self.client = None
        self.producer = None
        self.value = b""

    def open(self, url: str, topic: str, batching: bool, value_bytes: int, cpu: int | None = None,
             max_pending: int = MAX_PENDING) -> dict:
        if cpu is not None:  # before the client starts its threads, which inherit it
            os.sched_setaffinity(0, {cpu})
        self.client = pulsar.Client(url, operation_timeout_seconds=30,
                                    logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        self.producer = self.client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=1000, batching_max_publish_delay_ms=10,
            max_pending_messages=max_pending, block_if_queue_full=True)
        self.value = os.urandom(value_bytes)
        return {"ok": True}

    def produce(self, n: int) -> dict:
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

        send_async, value = self.producer.send_async, self.value
        start = time.perf_counter()
        for _ in range(n):
            send_async(value, on_receipt)
        self.producer.flush()
        finished = done.wait(RECEIPT_TIMEOUT_S)
        seconds = time.perf_counter() - start
        return {"ok": finished and state["errors"] == 0, "seconds": seconds, "errors": state["errors"],
                "missing": state["left"]}

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()
        if self.client is not None:
            self.client.close()


def main() -> None:
    # The answers go to the real stdout; the client's ConsoleLogger writes to file descriptor 1, which from
    # here on is stderr (the worker's log), so a warning of the client never reaches the answers.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    worker = Worker()
    try:
        for line in sys.stdin:
            request = json.loads(line)
            op = request.pop("op")
            if op == "close":
                break
            try:
                answer = worker.open(**request) if op == "open" else worker.produce(**request)
            except Exception as error:  # (reported to the benchmark, which fails the round)
                answer = {"ok": False, "error": repr(error)}
            answers.write(json.dumps(answer) + "\n")
            answers.flush()
    finally:
        worker.close()


if __name__ == "__main__":
    main()
