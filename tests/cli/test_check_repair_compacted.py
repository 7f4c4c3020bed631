"""`seglog check` and `seglog repair` on compacted views (docs/LIFECYCLE.md, Compaction): a damaged view is
damage that repair removes (the next compaction makes it again from the log); an unfinished compaction's
files are notes that repair removes; a running compaction makes repair refuse before changing anything."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

import seglog
from helpers_cli import one_line, run
from seglog.lifecycle.compaction import LOCK_NAME
from seglog.storage.compacted import STATE_NAME, compacted_directory
from seglog.storage.lock import ExclusiveFileLock

FIRST, SECOND = "00000000000000000001.compacted", "00000000000000000002.compacted"


def compacted_topic(data: Path) -> Path:
    """Topic t: a0, b0, a1 compacted once (a1 and b0 kept); its view's directory."""
    with seglog.open(data) as log:
        topic = log.create_topic("t")
        with topic.producer() as producer:
            for key, value in [(b"a", b"a0"), (b"b", b"b0"), (b"a", b"a1")]:
                producer.send(value, key=key)
        log.admin.topics.compact("t")
        return compacted_directory(topic.partition_view(0).directory)


def compacted_read(data: Path) -> list[tuple[int, bytes]]:
    with seglog.open(data) as log:
        return [(m.offset, m.value) for m in log.topic("t").reader(read_compacted=True)]


def test_repair_removes_a_damaged_view_and_the_next_compaction_makes_it_again(runner: CliRunner, data: Path) -> None:
    directory = compacted_topic(data)
    damaged = bytearray((directory / FIRST).read_bytes())
    damaged[-3] ^= 0xFF
    (directory / FIRST).write_bytes(bytes(damaged))

    result = run(runner, data, "check", code=1)
    assert f"{directory / FIRST}: byte 0: CRC32C mismatch" in result.stdout
    assert "removes damaged compacted views" in one_line(result.stdout)

    result = run(runner, data, "repair")
    assert f"Removed a damaged compacted view, made again by the next compaction: {directory / FIRST}: byte 0: " \
           "CRC32C mismatch" in one_line(result.stdout)
    assert "OK: no damage remains" in result.stdout
    assert sorted(os.listdir(directory)) == [LOCK_NAME]
    assert compacted_read(data) == [(0, b"a0"), (1, b"b0"), (2, b"a1")]  # no view: the log
    run(runner, data, "check")
    with seglog.open(data) as log:
        log.admin.topics.compact("t")
    assert compacted_read(data) == [(1, b"b0"), (2, b"a1")]


def test_repair_removes_a_view_whose_state_is_not_json(runner: CliRunner, data: Path) -> None:
    directory = compacted_topic(data)
    (directory / STATE_NAME).write_text("{")
    assert f"{directory / STATE_NAME}: byte 0: not a compacted view's state (not JSON)" in \
        run(runner, data, "check", code=1).stdout
    run(runner, data, "repair")
    assert sorted(os.listdir(directory)) == [LOCK_NAME]
    run(runner, data, "check")


def test_repair_removes_what_unfinished_compactions_left(runner: CliRunner, data: Path) -> None:
    directory = compacted_topic(data)
    (directory / SECOND).write_bytes(b"half a batch")
    (directory / (STATE_NAME + ".tmp")).write_text('{"vers')
    result = run(runner, data, "check")
    assert "Not damage" in result.stdout and f"{directory / SECOND}: a compacted view's data file" in result.stdout
    result = run(runner, data, "repair")
    assert "Removed 2 files that unfinished compactions left" in result.stdout
    assert sorted(os.listdir(directory)) == [LOCK_NAME, FIRST, STATE_NAME]
    assert compacted_read(data) == [(1, b"b0"), (2, b"a1")]
    assert "Not damage" not in run(runner, data, "check").stdout


def test_repair_refuses_while_a_compaction_runs_and_changes_nothing(runner: CliRunner, data: Path) -> None:
    directory = compacted_topic(data)
    (directory / STATE_NAME).write_text("{")
    held = ExclusiveFileLock(directory / LOCK_NAME)
    try:
        result = run(runner, data, "repair", code=1)
    finally:
        held.release()
    assert f"a compaction of this partition is running by process {os.getpid()}" in one_line(result.output)
    assert "Traceback" not in result.output
    assert (directory / STATE_NAME).read_text() == "{"
    run(runner, data, "repair")
    run(runner, data, "check")


def test_repair_removes_a_view_whose_horizon_is_past_the_logs_end(runner: CliRunner, data: Path) -> None:
    directory = compacted_topic(data)
    state = (directory / STATE_NAME).read_text()
    (directory / STATE_NAME).write_text(state.replace('"horizon": 3', '"horizon": 100'))
    assert "the compacted view's horizon, 100, is past the log's end offset, 3" in \
        one_line(run(runner, data, "check", code=1).stdout)
    assert "is past the log's end offset, 3" in one_line(run(runner, data, "repair").stdout)
    assert sorted(os.listdir(directory)) == [LOCK_NAME]
