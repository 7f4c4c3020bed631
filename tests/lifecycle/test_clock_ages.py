"""Every age the lifecycle rules measure is the injected clock's, however a segment came to be sealed: a
segment whose writer closed, that a later writer reopened and sealed without writing to it, keeps the last
write its first writer made by the clock (issue 26). A ManualClock that starts in 2024 makes a wall-clock
age look years younger than the clock's, so time retention would never delete the segment."""

import os

import pytest

import seglog
from seglog.storage.segment import list_segments


def segments(topic):
    return list_segments(topic.partition_directory(0))


def reopen_and_roll(topic, clock):
    """Write one message, close; two hours later by the clock, a new producer reopens the segment and its
    first message rolls it (segment_roll_time) without writing into it."""
    with topic.producer() as producer:
        producer.send_batch([b"first"])
    clock.advance(hours=2)
    with topic.producer() as producer:
        producer.send_batch([b"second"])
    assert segments(topic) == [0, 1]


def written_and_killed(data, clock) -> None:
    """A topic (segments rolled after an hour, retention an hour) with one message, left as a SIGKILL leaves
    it: no clean-shutdown marker, and a wall-clock mtime on its log; two hours later by the clock."""
    with seglog.open(data, clock=clock) as log:
        topic = log.create_topic("t", segment_roll_time="1h", retention_time="1h")
        with topic.producer() as producer:
            producer.send_batch([b"first"])
        directory = topic.partition_directory(0)
    (directory / ".clean-shutdown").unlink()
    os.utime(directory / f"{0:020d}.log")
    clock.advance(hours=2)


def test_a_reopened_segment_sealed_later_is_deleted_by_time_retention(log, clock):
    topic = log.create_topic("t", segment_roll_time="1h", retention_time="1h")
    written_at = clock()
    reopen_and_roll(topic, clock)
    assert topic.internal_stats()["partitions"]["0"]["segments"][0]["lastWriteMs"] == written_at
    report = log.run_maintenance()
    assert [base for _, _, base in report.deleted_segments] == [0]
    assert segments(topic) == [1]
    assert topic.earliest_offset() == 1


def test_a_segment_reopened_after_an_unclean_stop_ages_from_its_newest_message(tmp_path, clock):
    """After a crash the clean close set no mtime: the newest timestamp the segment holds is its last
    write, by the clock that stamped it."""
    data = tmp_path / "data"
    written_and_killed(data, clock)
    with seglog.open(data, clock=clock, background=False) as log:
        topic = log.topic("t")
        with topic.producer() as producer:
            producer.send_batch([b"second"])
        assert segments(topic) == [0, 1]
        log.run_maintenance()
        assert segments(topic) == [1]


@pytest.mark.parametrize("background", [True, False])
def test_a_segment_recovered_by_open_ages_from_its_newest_message(tmp_path, clock, background):
    data = tmp_path / "data"
    written_and_killed(data, clock)
    with seglog.open(data, clock=clock, background=background) as log:  # recovers it, or leaves it
        pass
    with seglog.open(data, clock=clock) as log:
        topic = log.topic("t")
        with topic.producer() as producer:
            producer.send_batch([b"second"])
        log.run_maintenance()
        assert segments(topic) == [1]


def active_last_writes(topic):
    """The active segment's last write as internal_stats and explain_retention show it."""
    stats_row = topic.internal_stats()["partitions"]["0"]["segments"][-1]
    explained = topic.explain_retention()["partitions"]["0"][-1]
    assert stats_row["active"] and explained["rule"] == "active"
    return stats_row["lastWriteMs"], explained["lastWriteMs"]


def test_the_active_segment_shows_its_last_write_by_the_clock(tmp_path, clock):
    """The active segment's log is written through a map, so its mtime is the wall clock's: stats and
    explain show its last write by the log's clock, in the writing process and in one that only reads."""
    data = tmp_path / "data"
    with seglog.open(data, clock=clock) as log:
        topic = log.create_topic("t", retention_time="1h")
        with topic.producer(partitions=[0]) as producer:
            assert active_last_writes(topic) == (0, 0)  # its files are made, nothing is written yet
            producer.send_batch([b"first"])
            clock.advance(hours=3)
            producer.send_batch([b"second"])
            written_at = clock()
            clock.advance(minutes=5)
            assert active_last_writes(topic) == (written_at, written_at)
            with seglog.open(data, clock=clock, background=False) as reading:
                assert active_last_writes(reading.topic("t")) == (written_at, written_at)
