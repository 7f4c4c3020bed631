"""PartitionWriter.append_all: several sources written whole, one batch each, in one call (the server's
SENDs of one read), exactly as the same sources appended one by one; or nothing written when they do not fit
in the active segment as it is, for the caller to append one by one."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from helpers_storage import partition_writer
from seglog._core._format import Prefaulter
from seglog._core._index import IndexView
from seglog._core._writer import append_all


def sources_of(writer, counts: list[int], tag: bytes = b"") -> list:
    """One source per count, with keys, properties and attributes, as a server SEND's."""
    made = []
    for n, count in enumerate(counts):
        values = [tag + b"value %d.%d" % (n, i) for i in range(count)]
        made.append(writer.source(values, keys=[b"k%d" % i for i in range(count)],
                                  properties=[{"i": str(i)} for i in range(count)],
                                  attributes={"pulsar.producer": "p", "n": str(n)}))
    return made


def partition_files(topic) -> dict[str, bytes]:
    directory = topic.partition_directory(0)
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())
            if path.suffix in (".log", ".index", ".timeindex")}


def test_sources_appended_in_one_call_are_stored_as_if_appended_one_by_one(log, clock):
    counts = [3, 1, 100, 7]
    one_call, one_by_one = log.create_topic("all"), log.create_topic("each")
    with partition_writer(log, one_call) as writer:
        sources = sources_of(writer, [2] + counts)
        assert writer.append_all(sources[:1]) == 0
        assert writer.append_all(sources[1:]) == 2
        assert writer.end_offset == 2 + sum(counts)
    with partition_writer(log, one_by_one) as writer:
        assert [writer.append(source) for source in sources_of(writer, [2] + counts)] == [0, 2, 5, 6, 106]
    assert partition_files(one_call) == partition_files(one_by_one)
    batches = list(iter(one_call.reader("earliest").read_batch, None))
    assert [batch.num_rows for batch in batches] == [2] + counts  # (one batch a source)


def test_what_the_call_wrote_is_counted_and_read_at_once(log):
    topic = log.create_topic("t")
    reader = topic.reader("earliest")
    values = [b"value %d.%d" % (n, i) for n, c in enumerate([4, 5]) for i in range(c)]
    with partition_writer(log, topic) as writer:
        assert writer.append_all(sources_of(writer, [4, 5])) == 0
        assert [m.value for m in reader] == values
    stats = topic.stats()
    assert (stats["msgInCounter"], stats["bytesInCounter"]) == (9, sum(map(len, values)))


@pytest.mark.parametrize("settings, first, why", [
    ({"segment_size": 4096}, [20], "a source of 20 more does not fit the segment's room"),
    ({"segment_max_messages": 25}, [20], "25 messages a segment: 40 would pass it"),
])
def test_sources_that_do_not_fit_the_active_segment_are_left_whole_to_the_caller(log, settings, first, why):
    topic = log.create_topic("t", **settings)
    tag = b"x" * 100  # (110-byte values: 20 messages take 3 KiB of a 4 KiB segment)
    with partition_writer(log, topic) as writer:
        writer.append_all(sources_of(writer, first, tag))
        before = partition_files(topic)
        assert writer.append_all(sources_of(writer, [5, 20], tag)) is None, why
        assert partition_files(topic) == before and writer.end_offset == 20
        # (rolls where it must)
        assert [writer.append(source) for source in sources_of(writer, [5, 20], tag)] == [20, 25]
    assert [m.offset for m in topic.reader("earliest")] == list(range(45))


def test_a_segment_due_to_roll_by_time_is_left_to_the_caller(log, clock):
    topic = log.create_topic("t", segment_roll_time="1h")
    with partition_writer(log, topic) as writer:
        assert writer.append_all(sources_of(writer, [2])) == 0
        clock.advance(minutes=59)
        assert writer.append_all(sources_of(writer, [2])) == 2
        clock.advance(minutes=1)
        assert writer.append_all(sources_of(writer, [2])) is None
        assert writer.append(sources_of(writer, [2])[0]) == 4
        assert writer.append_all(sources_of(writer, [2])) == 6  # (the new segment takes them)


def test_messages_queued_by_send_go_first_through_the_one_by_one_path(log):
    topic = log.create_topic("t")
    with partition_writer(log, topic) as writer, topic.producer(batch_size=1000) as producer:
        producer.send(b"queued")
        assert writer.append_all(sources_of(writer, [2])) is None
        assert writer.append(sources_of(writer, [2])[0]) == 1
    assert [m.value for m in topic.reader("earliest")] == [b"queued", b"value 0.0", b"value 0.1"]


def test_a_full_disk_writes_nothing_and_numbering_goes_on_from_the_end(log, monkeypatch):
    topic = log.create_topic("t")
    with partition_writer(log, topic) as writer:
        writer.append_all(sources_of(writer, [3]))
        before = partition_files(topic)
        sources = sources_of(writer, [300, 300], b"x" * 100)  # (more than the log's first allocation step)

        def full(fd, offset, length):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "posix_fallocate", full)
        with pytest.raises(OSError, match="No space left"):
            writer.append_all(sources)
        assert writer.end_offset == 3 and writer.accumulator.next_offset == 3
        assert partition_files(topic) == before
        monkeypatch.undo()
        assert writer.append_all(sources) == 3
    assert topic.end_offset() == 603


def test_the_native_loop_refuses_before_writing_what_does_not_fit(log):
    topic = log.create_topic("t")
    with partition_writer(log, topic) as writer:
        sources = sources_of(writer, [10, 10])
        data = bytearray(200)  # room for less than one batch
        index = IndexView(np.zeros((4, 2), np.int64), np.zeros((4, 2), np.int64), 0, writable=True)
        prefaulter = Prefaulter()
        try:
            with pytest.raises(ValueError, match="do not fit at position 0 of 200"):
                append_all(sources, data, index, prefaulter, 0)
            small = IndexView(np.zeros((1, 2), np.int64), np.zeros((1, 2), np.int64), 0, writable=True)
            with pytest.raises(ValueError, match="2 batches do not fit in the 1 free index slots"):
                append_all(sources, bytearray(1 << 16), small, prefaulter, 0)
            with pytest.raises(ValueError, match="no message"):
                append_all([writer.source([])], bytearray(1 << 16), index, prefaulter, 0)
        finally:
            prefaulter.close()
        assert data == bytearray(200) and index.count == 0
