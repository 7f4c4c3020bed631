"""`seglog topics compact` and `seglog topics compaction-status` (issue 29), pulsar-admin's commands: on a data
directory and with --url on a `seglog serve` (free loopback ports), what each prints, the exit codes (an ERROR
status exits with 1 and says what failed), and --wait-complete waiting while the status is RUNNING."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import one_line, run
from helpers_server import Server, rest, start_server
from seglog.cli import compaction as compaction_cli
from seglog.lifecycle.compaction import CompactionRunningError
from seglog.names import TopicName
from seglog.remote import RemoteTopics
from seglog.storage.check import topic_directory
from seglog.storage.compacted import compacted_directory
from seglog.storage.lock import ExclusiveFileLock

PRICES = [(b"apple", b"101"), (b"apple", b"99"), (b"pear", b"7"), (b"pear", None), (b"fig", b"1")]


def produce(data: Path, topic: str, pairs: list[tuple[bytes, bytes | None]], partitions: int = 1) -> None:
    with seglog.open(data, background=False) as log:
        created = log.create_topic(topic, partitions=partitions)
        with created.producer() as producer:
            for index, (key, value) in enumerate(pairs):
                producer.send(value, key=key, partition=index % partitions)


def hold_compaction_lock(data: Path, topic: str, partition: int = 0) -> ExclusiveFileLock:
    """The partition's compaction lock, held by this process: a compaction elsewhere fails meanwhile."""
    directory = compacted_directory(topic_directory(data, TopicName.parse(topic)) / str(partition))
    directory.mkdir(exist_ok=True)
    return ExclusiveFileLock(directory / ".lock", busy=CompactionRunningError)


# --- on a data directory ---------------------------------------------------------------------------------------

def test_compact_prints_what_was_done_per_partition(runner: CliRunner, data: Path) -> None:
    produce(data, "prices", PRICES + [(b"kiwi", b"3")], partitions=2)
    printed = run(runner, data, "topics", "compact", "prices").output
    lines = printed.splitlines()
    # partition 0: apple 101, pear 7, fig 1 (3 read, all kept); partition 1: apple 99, pear None, kiwi 3
    assert lines[0] == "Compacted topic public/default/prices: 5 messages kept, 1 left out"
    assert lines[1].split() == ["PARTITION", "HORIZON", "READ", "KEPT", "REMOVED", "TOOK"]
    assert lines[2].split()[:5] == ["0", "3", "3", "3", "0"] and lines[3].split()[:5] == ["1", "3", "3", "2", "1"]
    with seglog.open(data, background=False) as log:
        assert sorted(m.key for p in (0, 1) for m in log.topic("prices").reader(partition=p, read_compacted=True)) == \
            [b"apple", b"apple", b"fig", b"kiwi", b"pear"]

    again = json.loads(run(runner, data, "topics", "compact", "prices", "--json").output)
    assert again == {"partitions": [{"partition": p, "horizon": 3, "read": 0, "kept": 0, "removed": 0,
                                     "durationMs": 0} for p in (0, 1)]}


def test_status_on_a_data_directory_is_this_process(runner: CliRunner, data: Path) -> None:
    produce(data, "prices", PRICES)
    run(runner, data, "topics", "compact", "prices")
    printed = run(runner, data, "topics", "compaction-status", "prices").output
    assert printed == "Compaction has not been run for public/default/prices since broker startup\n"


def test_a_missing_topic_is_a_usage_error(runner: CliRunner, data: Path) -> None:
    produce(data, "prices", PRICES)
    for command in ("compact", "compaction-status"):
        refused = run(runner, data, "topics", command, "nope", code=2)
        assert "public/default/nope does not exist" in one_line(refused.output)


def test_compact_while_another_process_compacts_fails_with_one_line(runner: CliRunner, data: Path) -> None:
    produce(data, "prices", PRICES)
    held = hold_compaction_lock(data, "public/default/prices")
    try:
        refused = run(runner, data, "topics", "compact", "prices", code=1)
    finally:
        held.release()
    assert "a compaction of this partition is running" in one_line(refused.output)
    assert "Traceback" not in refused.output


# --- on a server -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("compaction-cli") / "data"
    produce(data, "served", PRICES)
    produce(data, "waited", PRICES)
    produce(data, "locked", PRICES)
    running = start_server(data)
    yield running
    running.stop()


def on(server: Server, *args: str, code: int = 0) -> str:
    runner = CliRunner(env={"SEGLOG_DATA": None, "SEGLOG_URL": None, "SEGLOG_TOKEN": None, "COLUMNS": "200",
                            "NO_COLOR": "1"})
    return run(runner, None, "--url", server.http_url, *args, code=code).output


def test_compact_on_a_server_runs_there_and_the_status_says_so(server: Server) -> None:
    assert on(server, "topics", "compaction-status", "served") == \
        "Compaction has not been run for public/default/served since broker startup\n"
    printed = on(server, "topics", "compact", "served").splitlines()
    assert printed[0] == "Compacted topic public/default/served: 2 messages kept, 3 left out"
    assert printed[2].split()[:5] == ["0", "5", "5", "2", "3"]
    assert on(server, "topics", "compaction-status", "served") == "Compaction was a success\n"


def test_status_waits_for_a_compaction_asked_over_rest(server: Server) -> None:
    status, _ = rest(server.http_url, "PUT", "/admin/v2/persistent/public/default/waited/compaction")
    assert status == 204
    assert on(server, "topics", "compaction-status", "waited", "--wait-complete") == "Compaction was a success\n"


def test_an_error_exits_with_1_and_says_what_failed(server: Server) -> None:
    held = hold_compaction_lock(server.data, "public/default/locked")
    try:
        refused = on(server, "topics", "compact", "locked", code=1)
        assert "a compaction of this partition is running" in one_line(refused)
        failed = on(server, "topics", "compaction-status", "locked", code=1)
    finally:
        held.release()
    assert failed.startswith("Error in compaction\n")
    assert "Error compacting: " in one_line(failed) and "a compaction of this partition is running" in one_line(failed)
    on(server, "topics", "compact", "locked")
    assert on(server, "topics", "compaction-status", "locked") == "Compaction was a success\n"


def test_wait_complete_asks_again_while_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """-w (pulsar-admin's --wait-complete, --wait too) asks again, pausing longer each time up to a second, until
    the status is not RUNNING; without it, RUNNING is printed as it is."""
    answers = iter(["RUNNING", "RUNNING", "RUNNING", "SUCCESS"])
    pauses: list[float] = []
    monkeypatch.setattr(RemoteTopics, "compaction_status",
                        lambda self, topic: {"status": next(answers), "lastError": ""})
    asking, sleep = threading.get_ident(), time.sleep

    def pause(seconds: float) -> None:  # (time.sleep is the process's: another test's thread may sleep too)
        if threading.get_ident() == asking:
            pauses.append(seconds)
        else:
            sleep(seconds)

    monkeypatch.setattr(compaction_cli.time, "sleep", pause)
    runner = CliRunner(env={"SEGLOG_DATA": None, "SEGLOG_URL": None, "SEGLOG_TOKEN": None})
    url = ["--url", "http://127.0.0.1:9"]  # (never asked: the status comes from the patched method)
    assert run(runner, None, *url, "topics", "compaction-status", "t", "--wait").output == "Compaction was a success\n"
    assert pauses == [compaction_cli.FIRST_POLL_S, 2 * compaction_cli.FIRST_POLL_S, 4 * compaction_cli.FIRST_POLL_S]
    answers = iter(["RUNNING"])
    assert run(runner, None, *url, "topics", "compaction-status", "t").output == "Compaction is currently running\n"
