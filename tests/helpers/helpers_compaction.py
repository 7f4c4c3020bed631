"""Shared by the compaction crash and concurrency tests (tests/lifecycle/test_compaction_crash.py for
Pulsar's model, test_compaction_crash_kafka.py for Kafka's).

Every message describes itself: message_for(offset) gives the key and value of the message at that offset
(some keyless, some tombstones, the rest keyed values over KEYS keys; no keyless ones for a compacting topic,
which refuses them), so the parent checks any message read back without being told what a killed child
wrote. The reference for compacted reads is computed with dicts, independently of the compaction kernel:
from a plain read of the log (Pulsar's model keeps it whole), or from the messages as written (Kafka's
model compacts the log itself)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from helpers_storage import describe_exit, python_command
from seglog.cli import main
from seglog.errors import ReceiveTimeoutError
from seglog.storage.check import check_log

KEYS = 40
KEYLESS, TOMBSTONE = 0, 1  # message kinds; the other eight of ten are keyed values
# Each run of WINDOW offsets uses 4 of the keys, so a batch of at most 300 messages holds at most 28 keys: a
# compaction with an offset map of MAP_KEYS_SMALL keys can then always cut a range at a batch boundary.
WINDOW = 50
MAP_KEYS_SMALL = 30


def message_for(offset: int, *, keyless: bool = True) -> tuple[bytes | None, bytes | None]:
    """(key, value) of the message at `offset`: a tenth keyless (keyed values too without `keyless`), a
    tenth tombstones (null values)."""
    mixed = offset * 2654435761
    kind = (mixed >> 7) % 10
    value = b"v%d" % offset
    if kind == KEYLESS and keyless:
        return None, value
    key = b"k%d" % ((offset // WINDOW * 3 + (mixed >> 11) % 4) % KEYS)
    return (key, None) if kind == TOMBSTONE else (key, value)


def messages_for(first: int, count: int, *, keyless: bool = True) -> tuple[list[bytes | None], list[bytes | None]]:
    """(keys, values) of `count` messages from offset `first`."""
    pairs = [message_for(offset, keyless=keyless) for offset in range(first, first + count)]
    return [key for key, _ in pairs], [value for _, value in pairs]


# The clock of the tests of Kafka's model: a second per message written, so that time, which the tombstone
# rule reads, goes forward with the log across the crashed children and is known from the end offset alone.
CLOCK_START_MS = 1_704_067_200_000
MS_PER_OFFSET = 1000


def clock_at(end: int) -> int:
    """The time in ms by the tests' clock once `end` messages were written."""
    return CLOCK_START_MS + end * MS_PER_OFFSET


def written(end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every message below `end` of a compacting topic (keyless=False), as written."""
    return [(offset, *message_for(offset, keyless=False)) for offset in range(end)]


def read_rows(reader: Any, max_messages: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of everything `reader` reads from its position to the end, by read_batch."""
    rows: list[tuple[int, bytes | None, bytes | None]] = []
    while (batch := reader.read_batch(max_messages)) is not None and batch.num_rows:
        rows += zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                    batch.column("value").to_pylist())
    return rows


def wrong_messages(rows: Iterable[tuple[int, bytes | None, bytes | None]], *, keyless: bool = True) -> list[int]:
    """The offsets among `rows` whose key or value is not the one written there."""
    return [offset for offset, key, value in rows if (key, value) != message_for(offset, keyless=keyless)]


def latest_per_key(rows: Iterable[tuple[int, bytes | None, bytes | None]], below: int) -> list[tuple]:
    """The compacted view's reference: of `rows` (a plain read) below offset `below`, each key's latest
    message unless it is a tombstone, in offset order; keyless messages are left out."""
    latest: dict[bytes, tuple] = {}
    for row in rows:
        if row[0] < below and row[1] is not None:
            latest[row[1]] = row
    return sorted(row for row in latest.values() if row[2] is not None)


# A reader of a compacted view that checks what it reads while compactions replace the view: a few rows a
# call, so that a read spans swaps. The final offset F is where it stops (nothing more at that moment): every
# key's latest message below F with a value must be among what it read (a read never skips one), offsets
# strictly grow, and every message is the one written at its offset.
def compacted_read_problems(topic: Any, rows_per_call: int) -> list[str]:
    reader = topic.reader(read_compacted=True)
    try:
        read = read_rows(reader, rows_per_call)
        final = reader.offset
    finally:
        reader.close()
    problems = []
    offsets = [row[0] for row in read]
    if any(b <= a for a, b in zip(offsets, offsets[1:])):
        problems.append(f"offsets do not grow: {offsets[:50]}")
    wrong = wrong_messages(read)
    if wrong:
        problems.append(f"messages not as written at offsets {wrong[:10]}")
    plain = topic.reader()
    try:
        log = read_rows(plain)
    finally:
        plain.close()
    seen = set(offsets)
    skipped = [row[0] for row in latest_per_key(log, final) if row[0] not in seen]
    if skipped:
        problems.append(f"keys' latest messages below {final} skipped, at offsets {skipped[:10]}")
    return problems


def final_state_problems(seen: Iterable[tuple[int, bytes | None, bytes | None]], end: int, *,
                         tombstones_may_go: bool, lagging: bool = False) -> list[str]:
    """Kafka's promise to a reader of a compacted topic from its start (keyless=False messages): of every
    key written below `end`, the last message it saw (the one of `seen` with the highest offset) is the
    key's final state, a tombstone included while compaction keeps it. When `tombstones_may_go` (a short
    delete_retention), a final tombstone may be gone: the key is then not seen at all, or, for a reader that
    was `lagging` (a subscription read in turns), seen last at an earlier message."""
    last: dict[bytes | None, tuple] = {}
    for row in sorted(row for row in seen if row[0] < end):
        last[row[1]] = row
    problems = []
    for key, final in {row[1]: row for row in written(end)}.items():
        got = last.get(key)
        if got == final or (tombstones_may_go and final[2] is None and (got is None or lagging)):
            continue
        problems.append(f"key {key!r}: final state {final}, last seen {got}")
    return problems


def order_problems(rows: list[tuple[int, bytes | None, bytes | None]]) -> list[str]:
    """What is wrong with `rows` read from a compacting topic (keyless=False): offsets not strictly
    ascending (each at most once), messages not as written."""
    offsets = [row[0] for row in rows]
    problems = []
    if any(b <= a for a, b in zip(offsets, offsets[1:])):
        problems.append(f"offsets do not grow: {[(a, b) for a, b in zip(offsets, offsets[1:]) if b <= a][:10]}")
    wrong = wrong_messages(rows, keyless=False)
    if wrong:
        problems.append(f"messages not as written at offsets {wrong[:10]}")
    return problems


class CrashingChild:
    """A child running `code` (argv: its data directory and a seed; it can import the test helpers) that
    prints "ack <end>" after every acknowledged write and a word naming each step it begins ("compacting",
    "committed", ...), its stdout drained by a thread: the last acknowledged end offset and the step it is at."""

    def __init__(self, code: str, data: Path, seed: int) -> None:
        self.stderr_path = data.parent / f"child-{seed}.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(python_command(code, str(data), str(seed)),
                                            stdout=subprocess.PIPE, stderr=stderr)
        self.acknowledged = -1
        self.step = "starting"
        self.started = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(b"ack "):
                self.acknowledged = int(line.split()[1])
                self.started.set()
            else:
                self.step = line.decode().strip()
        self.started.set()

    def kill_after(self, delay: float) -> str:
        """SIGKILL the child `delay` s after its first acknowledgement; the step it was at then."""
        assert self.started.wait(60), "the child said nothing in 60 s"
        time.sleep(delay)
        alive = self.process.poll() is None
        step = self.step
        if alive:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._thread.join(30)
        assert self.process.stdout is not None
        self.process.stdout.close()
        stderr = self.stderr_path.read_text(errors="replace")
        assert alive, f"the child ended by itself ({describe_exit(self.process.returncode)}):\n{stderr}"
        assert self.process.returncode == -signal.SIGKILL, stderr
        return step


# What a crash may leave that `seglog check` notes without calling it damage.
NOT_DAMAGE = ("an unfinished append after the last committed batch", "left by a compaction that did not finish",
              "a compacted view's state a compaction did not finish writing")


def assert_no_damage(data: Path) -> None:
    """`seglog check` (the function and the command) finds no damage in `data`: notes at most, of NOT_DAMAGE."""
    report = check_log(data)
    assert report.ok, [str(problem) for problem in report.problems]
    assert all(any(reason in note.reason for reason in NOT_DAMAGE) for note in report.notes), \
        [str(note) for note in report.notes]
    result = CliRunner(env={"SEGLOG_DATA": None, "COLUMNS": "200", "NO_COLOR": "1"}).invoke(
        main, ["--data", str(data), "check"])
    assert result.exit_code == 0 and "OK: no damage" in result.stdout, result.output


def started(code: str, *args: str) -> subprocess.Popen:
    """A child running `code` (it can import the test helpers), once it printed "ready"."""
    child = subprocess.Popen(python_command(code, *args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n", child.communicate(timeout=30)
    return child


def stop_children(*children: subprocess.Popen | None) -> None:
    """Kill (by its pid) and reap each child still running: a test's teardown."""
    for child in children:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()


def drain(consumer: Any, *, ack: bool = True) -> list[Any]:
    """The messages the consumer gets until nothing more comes for a moment, acknowledged when `ack`."""
    got = []
    while True:
        try:
            message = consumer.receive(0.05)
        except ReceiveTimeoutError:
            return got
        got.append(message)
        if ack:
            consumer.ack(message)
