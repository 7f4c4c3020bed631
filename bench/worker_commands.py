"""The line protocol of bench/'s worker processes (producer_worker.py, bench_soak.py's workers): one JSON
request a line on stdin, `{"op": name, ...arguments}`, answered by one JSON line on stdout, until
`{"op": "close"}` or the end of input (the benchmark stops a worker by its pid otherwise)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection
from typing import Any


def serve_commands(worker: Any, ops: Collection[str]) -> None:
    """Answer each request with `worker`'s method of the op's name ('-' read as '_'), for the ops in `ops`;
    an error is answered {"ok": false, "error": ...}, which fails the benchmark. `worker.close()` at the end.

    The answers go to the real stdout; pulsar-client's ConsoleLogger writes to file descriptor 1, which from
    here on is stderr (the worker's log), so a warning of the client never reaches the answers."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        for line in sys.stdin:
            request = json.loads(line)
            op = request.pop("op")
            if op == "close":
                break
            try:
                answer = getattr(worker, op.replace("-", "_"))(**request) if op in ops else \
                    {"ok": False, "error": f"unknown op {op!r}"}
            except Exception as error:  # (reported to the benchmark, which fails with it)
                answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
            answers.write(json.dumps(answer) + "\n")
            answers.flush()
    finally:
        worker.close()
