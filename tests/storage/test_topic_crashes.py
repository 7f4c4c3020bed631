"""A process killed (SIGKILL) in the middle of creating or deleting a topic (issue 26): `seglog check` reports
what it left, and the next `seglog.open` (background=False too) or `seglog repair` finishes it, so that the
topic is whole or gone and its name can be used again.

Each crash is made in a child process that patches one call of the standard library or of the metadata (the
product carries nothing for the test) to kill itself there, so the point is exact and the test deterministic."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import seglog
from seglog.cli import main
from seglog.errors import TopicNotFoundError

TOPIC = "acme/ops/t"

# The child: open the data directory, arm the kill at the point named by argv[2], then create or delete TOPIC.
CHILD = textwrap.dedent("""
    import os, pathlib, shutil, signal, sys
    import seglog
    from seglog.catalog.metadata import Metadata

    data, point = sys.argv[1], sys.argv[2]

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    log = seglog.open(data)
    real_replace, real_delete = os.replace, Metadata.delete_topic
    if point == "create: directory made":
        real_write = pathlib.Path.write_bytes
        pathlib.Path.write_bytes = lambda path, data: die() if path.name == ".fence.tmp" else real_write(path, data)
    elif point == "create: staging fence written":
        os.replace = lambda src, dst: die() if str(dst).endswith(".fence") else real_replace(src, dst)
    elif point == "create: fence in place":
        os.replace = lambda src, dst: (real_replace(src, dst), die())
    elif point in ("create: committed", "delete: directory moved to the trash"):
        shutil.rmtree = die  # the step after the commit (and after the removal of the deleted topic's directory)
    elif point == "delete: fence set":
        Metadata.delete_topic = die
    elif point == "delete: files moved":  # inside the transaction, before its commit
        def moved_then_killed(self, name, then=None, **kwargs):
            return real_delete(self, name, then=lambda: (then(), die()), **kwargs)
        Metadata.delete_topic = moved_then_killed
    elif point == "delete: committed":
        Metadata.delete_topic = lambda *args, **kwargs: (real_delete(*args, **kwargs), die())
    else:
        raise SystemExit(f"unknown point {point!r}")
    if point.startswith("create"):
        log.create_topic(sys.argv[3], partitions=2)
    else:
        log.delete_topic(sys.argv[3], force=True)
    raise SystemExit("not killed")
""")

CREATE_POINTS = ["create: directory made", "create: staging fence written", "create: fence in place",
                 "create: committed"]
DELETE_POINTS = ["delete: fence set", "delete: files moved", "delete: committed",
                 "delete: directory moved to the trash"]
# where the crash leaves something `seglog check` reports (after the commit only the trash, emptied at open)
REPORTED = {"create: directory made", "create: staging fence written", "create: fence in place",
            "delete: fence set", "delete: files moved", "delete: committed"}


def crash(data: Path, point: str) -> None:
    child = subprocess.run([sys.executable, "-c", CHILD, str(data), point, TOPIC], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -9, f"the child was not killed at {point!r} ({child.returncode}):\n{child.stderr}"


def seglog_cli(data: Path, *args: str) -> Result:
    runner = CliRunner(env={"SEGLOG_DATA": None, "COLUMNS": "300", "NO_COLOR": "1"})
    result = runner.invoke(main, ["--data", str(data), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def topic_directory(data: Path) -> Path:
    return data.joinpath("topics", *TOPIC.split("/"))


def assert_trash_empty(data: Path) -> None:
    assert [p for p in (data / "trash").rglob("*") if not p.is_dir()] == []


def assert_usable(log: seglog.Log, *, expected: list[bytes]) -> None:
    """TOPIC is listed and whole: it holds `expected` on partition 0, and takes and gives a new message."""
    assert TOPIC in log.list_topics()
    topic = log.topic(TOPIC)
    with topic.producer() as producer:
        producer.send(b"after", partition=0)
    assert [m.value for m in topic.reader("earliest")] == [*expected, b"after"]


def recover(data: Path, how: str) -> None:
    """Let the next user of the data directory find the crash: `seglog repair`, or an open of either kind."""
    if how == "repair":
        result = seglog_cli(data, "repair")
        assert result.exit_code == 0, result.output
    else:
        seglog.open(data, background=how == "open").close()


@pytest.mark.parametrize("how", ["open without background", "open", "repair"])
@pytest.mark.parametrize("point", CREATE_POINTS)
def test_a_crash_inside_create_topic_leaves_the_topic_whole_or_gone(tmp_path: Path, point: str, how: str) -> None:
    data = tmp_path / "data"
    seglog.open(data).close()
    crash(data, point)
    check = seglog_cli(data, "check")
    if point in REPORTED:
        assert check.exit_code == 1 and str(topic_directory(data)) in check.output and "no topic owns" in check.output
    else:
        assert check.exit_code == 0, check.output

    recover(data, how)

    assert seglog_cli(data, "check").exit_code == 0
    assert_trash_empty(data)
    with seglog.open(data, background=False) as log:
        if point == "create: committed":
            assert_usable(log, expected=[])
            return
        assert log.list_topics() == []
        assert not topic_directory(data).exists()
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            log.topic(TOPIC)
        log.create_topic(TOPIC, partitions=2)  # the name is free
        assert_usable(log, expected=[])


@pytest.mark.parametrize("how", ["open without background", "open", "repair"])
@pytest.mark.parametrize("point", DELETE_POINTS)
def test_a_crash_inside_delete_topic_leaves_the_topic_gone(tmp_path: Path, point: str, how: str) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, partitions=2)
        with topic.producer() as producer:
            producer.send_batch([b"old"] * 10, partition=0)
            producer.send_batch([b"old"] * 10, partition=1)
        with topic.subscribe("s", initial_position="earliest") as consumer:
            consumer.ack(consumer.receive(timeout=5))
    subscriptions = data.joinpath("subscriptions", *TOPIC.split("/"))
    assert subscriptions.is_dir()
    crash(data, point)
    check = seglog_cli(data, "check")
    if point in REPORTED:
        assert check.exit_code == 1, check.output
        assert f"topic {TOPIC} was being deleted" in check.output or "no topic owns" in check.output
    else:
        assert check.exit_code == 0, check.output

    recover(data, how)

    assert seglog_cli(data, "check").exit_code == 0
    assert_trash_empty(data)
    with seglog.open(data, background=False) as log:
        assert log.list_topics() == []
        assert not topic_directory(data).exists() and not subscriptions.exists()
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            log.topic(TOPIC)
        log.create_topic(TOPIC, partitions=2)  # the name is free, and the topic starts empty
        assert_usable(log, expected=[])


def test_check_names_a_deletion_cut_short_and_repair_says_it_finished_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic(TOPIC)
    crash(data, "delete: fence set")
    check = seglog_cli(data, "check")
    assert check.exit_code == 1
    assert f"{topic_directory(data) / '.fence'}: topic {TOPIC} was being deleted when a crash stopped it" \
           in check.output
    repair = seglog_cli(data, "repair")
    assert repair.exit_code == 0 and f"Finished the deletion of topic {TOPIC}" in repair.output


def test_repair_names_the_directory_of_a_creation_cut_short(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seglog.open(data).close()
    crash(data, "create: fence in place")
    repair = seglog_cli(data, "repair")
    assert repair.exit_code == 0 and f"Removed the directory of topic {TOPIC}, which does not exist" in repair.output
    assert not topic_directory(data).exists()
