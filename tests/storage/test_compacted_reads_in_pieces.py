"""A compacted view read in pieces of any size, or from any offset, gives what one read of it gives: the reader
keeps its place in the view between calls (storage.reader's cursor), and must take the same messages as when it
looked each batch up afresh. Proposed beside the reader's cursor (bench/RESULTS.md, Compaction)."""

import numpy as np
import pytest

from seglog.lifecycle.compaction import compact_partition


@pytest.mark.parametrize("delete_retention_ms", [None, 10**12], ids=["pulsar", "kafka-tombstones-kept"])
def test_a_view_read_in_pieces_gives_what_one_read_gives(log, delete_retention_ms):
    rng = np.random.default_rng(1)
    topic = log.create_topic("t")
    with topic.producer() as producer:
        for call in range(30):
            n = int(rng.integers(1, 40))
            keys = [f"k{int(k)}".encode() for k in rng.integers(0, 50, n)]
            values = [None if rng.random() < 0.1 else f"v{call}-{i}".encode() for i in range(n)]
            producer.send_batch(values, keys=keys, partition=0)
    view = topic.partition_view(0)
    end = view.end_offset()
    compact_partition(view, horizon=end // 2, now_ms=1, delete_retention_ms=delete_retention_ms)
    compact_partition(view, horizon=end, now_ms=2, delete_retention_ms=delete_retention_ms)
    whole = [(m.offset, m.key, m.value) for m in topic.reader("earliest", read_compacted=True)]
    assert whole and all(value is not None for _, _, value in whole)
    for size in range(1, 9):
        reader, got = topic.reader("earliest", read_compacted=True), []
        while messages := reader.read_messages(size):
            got += [(m.offset, m.key, m.value) for m in messages]
        assert got == whole, size
        reader, got = topic.reader("earliest", read_compacted=True), []
        while (batch := reader.read_batch(size)) is not None:
            got += zip(*(batch.column(name).to_pylist() for name in ("offset", "key", "value")))
        assert got == whole, size
    for start in range(0, end + 1, 7):  # from offsets inside the view's batches
        assert [(m.offset, m.key, m.value) for m in topic.reader(start, read_compacted=True)] == \
            [message for message in whole if message[0] >= start]
