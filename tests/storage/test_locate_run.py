"""Reader.locate_run: the dispatcher's way through a segment, a run of batches in one lookup and one native
call (_index.sound_entries), each batch as locate gives it, up to the read's budgets, and never past a batch
that is not sound: that one is left to locate, which reports it."""

from __future__ import annotations

import pytest

import seglog
from helpers_storage import flip_byte
from seglog.errors import CorruptLogError


@pytest.fixture
def reader(log: seglog.Log):
    topic = log.create_topic("run")
    with topic.producer() as producer:
        for i in range(6):
            producer.send_batch([b"value %d" % i] * 10)  # six stored batches of ten
    return topic.reader(verify_crc=True)


def bases(run) -> list[tuple[int, int]]:
    return [(base, count) for _, _, base, count in run]


def test_a_run_takes_the_batches_that_follow_until_the_read_has_its_messages(reader) -> None:
    run = reader.locate_run(3, 25, 1 << 20)
    assert bases(run) == [(0, 10), (10, 10), (20, 10)]  # (7 + 10 < 25: the third reaches it)
    positions = [position for _, position, _, _ in run]
    assert [reader.locate(offset)[1] for offset in (0, 10, 20)] == positions
    assert bases(reader.locate_run(50, 100, 1 << 20)) == [(50, 10)]  # the segment's last
    assert reader.locate_run(60, 100, 1 << 20) is None  # nothing written there yet


def test_a_run_takes_at_least_its_batches_whatever_their_messages_within_its_bytes(reader) -> None:
    assert bases(reader.locate_run(0, 5, 1 << 20, min_batches=4)) == [(0, 10), (10, 10), (20, 10), (30, 10)]
    assert bases(reader.locate_run(0, 25, 1 << 20, min_batches=2)) == [(0, 10), (10, 10), (20, 10)]  # messages
    view, position, _, _ = reader.locate(0)
    batch_bytes = reader.locate(10)[1] - position
    assert bases(reader.locate_run(0, 5, 2 * batch_bytes, min_batches=4)) == [(0, 10), (10, 10)]  # bytes


def test_a_run_stops_at_its_bytes_and_takes_one_batch_whatever_they_are(reader) -> None:
    view, position, _, _ = reader.locate(0)
    batch_bytes = reader.locate(10)[1] - position
    assert bases(reader.locate_run(0, 100, 1)) == [(0, 10)]
    assert bases(reader.locate_run(0, 100, 2 * batch_bytes)) == [(0, 10), (10, 10)]


def test_a_run_ends_before_a_damaged_batch_which_locate_then_reports(reader) -> None:
    view, position, _, _ = reader.locate(30)
    flip_byte(view.paths.log, position + 100, 0x04)  # (a value byte: only the CRC tells)
    assert bases(reader.locate_run(0, 100, 1 << 20)) == [(0, 10), (10, 10), (20, 10)]
    with pytest.raises(CorruptLogError):
        reader.locate(30)


def test_reading_goes_on_where_a_run_ended(reader) -> None:
    reader.locate_run(0, 30, 1 << 20)
    assert reader.locate(30)[2:] == (30, 10)
    assert bases(reader.locate_run(40, 100, 1 << 20)) == [(40, 10), (50, 10)]
