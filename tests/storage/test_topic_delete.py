"""Deleting a topic: refused while producers or consumers use it (here or in another process) unless
forced; then every user, in every process, is fenced: sends, acks and reads raise TopicNotFoundError, no
file is written again, and a topic created again under the name starts empty."""

from __future__ import annotations

import logging
import multiprocessing
import os
from pathlib import Path

import pytest

import seglog
from seglog.catalog.metadata import Metadata
from seglog.errors import TopicInUseError, TopicNotFoundError

TOPIC = "acme/ops/deleted"


def topic_files(data: Path) -> list[str]:
    """Every file under the data directory's topics/ and subscriptions/, relative to it."""
    return sorted(str(p.relative_to(data)) for root in ("topics", "subscriptions")
                  for p in (data / root).rglob("*") if p.is_file())


def assert_fenced(producer, consumer, reader) -> None:
    for call in (lambda: producer.send(b"late"), lambda: producer.send_batch([b"late"]), producer.flush,
                 lambda: consumer.receive(timeout=0), lambda: consumer.receive_batch(), lambda: consumer.ack((0, 0)),
                 lambda: consumer.negative_ack((0, 0)), lambda: consumer.seek("earliest"), reader.read_batch):
        with pytest.raises(TopicNotFoundError, match=f"topic {TOPIC} was deleted"):
            call()


def test_deletion_in_use_is_refused_and_forced_deletion_fences_every_user(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, partitions=2)
        producer = topic.producer()
        producer.send_batch([b"old"] * 5, partition=0)
        producer.send(b"queued, never written", partition=1)
        consumer = topic.subscribe("s", initial_position="earliest")
        reader = topic.reader("earliest")
        with pytest.raises(TopicInUseError, match=r"1 producer\(s\) in this process and consumers of "
                                                  r"subscription 's'; close them first, or delete with force \(the "
                                                  r"force argument, or seglog topics delete --force\), which fences "
                                                  r"them$"):
            log.delete_topic(TOPIC)
        assert log.list_topics() == [TOPIC] and topic.end_offset(0) == 5

        with caplog.at_level(logging.WARNING, logger="seglog"):
            log.delete_topic(TOPIC, force=True)
            assert log.list_topics() == []
            assert_fenced(producer, consumer, reader)
            producer.close()
            consumer.close()
            log.run_maintenance()
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
        assert topic_files(data) == []

        again = log.create_topic(TOPIC)  # starts empty: no old message, no old subscription
        assert (again.end_offset(0), again.subscriptions()) == (0, [])
        with again.producer() as fresh:
            assert fresh.send(b"new") == (0, 0)
        with pytest.raises(TopicNotFoundError):
            topic.reader("earliest")  # the old handle stays fenced
    with seglog.open(data) as log:
        assert [m.value for m in log.topic(TOPIC).reader("earliest")] == [b"new"]


def test_a_stale_handle_cannot_recreate_a_deleted_topics_files(tmp_path: Path) -> None:
    """The reported bug: a process holding a Topic, another deleting it, the first producing anyway."""
    data = tmp_path / "data"
    with seglog.open(data) as holder, seglog.open(data, background=False) as deleter:
        stale = holder.create_topic(TOPIC)
        deleter.delete_topic(TOPIC)
        with pytest.raises(TopicNotFoundError):
            stale.producer()
        with pytest.raises(TopicNotFoundError):
            stale.subscribe("s")
        with pytest.raises(TopicNotFoundError):
            stale.end_offset()
        assert topic_files(data) == [] and holder.list_topics() == []
        deleter.create_topic(TOPIC)
        with pytest.raises(TopicNotFoundError):
            stale.producer()  # the old handle does not write into the new topic either
        assert holder.topic(TOPIC).end_offset() == 0


# --- across processes ---------------------------------------------------------------------------------------

def _user(data: str, commands, answers) -> None:
    """Another process using the topic: a producer and a consumer, then commands from the test."""
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        producer = topic.producer(partitions=[0])
        consumer = topic.subscribe("remote", initial_position="earliest")
        answers.put(("ready", os.getpid()))
        while (command := commands.get(timeout=60)) != "stop":
            try:
                if command == "send":
                    producer.send_batch([b"late"])
                elif command == "ack":
                    consumer.ack((0, 0))
                answers.put(("ok", None))
            except Exception as error:  # noqa: BLE001 - reported to the test
                answers.put((type(error).__name__, str(error)))
        producer.close()
        consumer.close()
    answers.put(("stopped", None))


def test_another_process_using_the_topic_is_named_then_fenced(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic(TOPIC).producer().close()
    context = multiprocessing.get_context("spawn")
    commands, answers = context.Queue(), context.Queue()
    user = context.Process(target=_user, args=(str(data), commands, answers), daemon=True)
    user.start()
    try:
        status, pid = answers.get(timeout=60)
        assert status == "ready"
        with seglog.open(data) as log:
            with pytest.raises(TopicInUseError) as refused:
                log.delete_topic(TOPIC)
            assert f"a producer of partition 0 in process {pid}" in str(refused.value)
            assert "consumers of subscription 'remote'" in str(refused.value)
            log.delete_topic(TOPIC, force=True)
            for command in ("send", "ack"):
                commands.put(command)
                assert answers.get(timeout=60) == ("TopicNotFoundError", f"topic {TOPIC} was deleted")
            log.create_topic(TOPIC)
            commands.put("stop")
            assert answers.get(timeout=60) == ("stopped", None)
            # The fenced process closed its producer and consumer without touching the new topic's files.
            assert topic_files(data) == [f"topics/{TOPIC}/.fence"]
            assert log.topic(TOPIC).end_offset() == 0
    finally:
        user.join(30)
        if user.is_alive():
            user.kill()
            user.join()


def test_a_deletion_interrupted_after_the_fence_is_finished_at_the_next_open(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        with log.create_topic(TOPIC).producer() as producer:
            producer.send(b"doomed")

        def crash(*args, **kwargs):
            raise KeyboardInterrupt("the process died here")

        monkeypatch.setattr(Metadata, "delete_topic", crash)  # the step after the fence
        with pytest.raises(KeyboardInterrupt):
            log.delete_topic(TOPIC)
        assert log.list_topics() == [TOPIC]
        with pytest.raises(TopicNotFoundError):
            log.topic(TOPIC).end_offset()  # fenced already
        assert log.run_maintenance().deleted_segments == []  # the other topics' maintenance goes on
    monkeypatch.undo()
    with seglog.open(data) as log:
        assert log.list_topics() == []
        assert topic_files(data) == []


def test_a_topic_without_a_fence_gets_one_at_open(tmp_path: Path) -> None:
    """Data directories made before fences (or a crash inside create_topic) are given them."""
    data = tmp_path / "data"
    with seglog.open(data) as log, log.create_topic(TOPIC).producer() as producer:
        producer.send(b"kept")
    fence = data.joinpath("topics", *TOPIC.split("/"), ".fence")
    fence.unlink()
    with seglog.open(data, background=False) as log:
        assert fence.read_bytes() == b"\0"
        assert [m.value for m in log.topic(TOPIC).reader("earliest")] == [b"kept"]
