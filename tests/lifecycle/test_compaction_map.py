"""Compaction's kernel (seglog._core._compact through lifecycle.compaction_map): each key's latest offset over
a range of a partition and every message's verdict, checked against a plain-Python reference on random
partitions (null keys, b"" keys, null values, empty values, keys spread over many segments, batches split
at segment ends, ranges that start and end inside a batch), plus the bound on keys and damaged batches."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog
from helpers_storage import flip_byte, segment_logs
from seglog._core._compact import OffsetMap, Verdict, capacity_for, key_hash
from seglog.errors import CorruptLogError, InvalidArgumentError
from seglog.lifecycle.compaction_map import build_compaction_map, map_bytes
from seglog.storage.partition_view import PartitionView

SEGMENT_SIZE = "1 KiB"  # a few messages a segment: keys recur across many segments, batches split at their ends
HYPOTHESIS = settings(max_examples=30, deadline=None, database=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow])

keys = st.one_of(st.none(), st.just(b""), st.sampled_from([b"a", b"b", b"key-3", b"k" * 40]),
                 st.binary(min_size=1, max_size=20))
values = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=300))
batches = st.lists(st.lists(st.tuples(keys, values), min_size=1, max_size=12), min_size=1, max_size=10)


def write(data: Path, stored: list[list[tuple[bytes | None, bytes | None]]]) -> PartitionView:
    """The batches as send_batch calls to partition 0 of a new topic; the partition's view."""
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_size=SEGMENT_SIZE)
        with topic.producer() as producer:
            for batch in stored:
                producer.send_batch([v for _, v in batch], keys=[k for k, _ in batch], partition=0)
        return PartitionView(topic.partition_directory(0))


def reference(messages: list[tuple[bytes | None, bytes | None]], start: int, end: int):
    """(sorted latest offsets, verdicts, keyless, tombstones) of offsets [start, end), in plain Python."""
    latest: dict[bytes, int] = {}
    for offset in range(start, end):
        key = messages[offset][0]
        if key is not None:
            latest[key] = offset
    kept = set(latest.values())
    verdicts = []
    for offset in range(start, end):
        key, value = messages[offset]
        if key is None:
            verdicts.append(Verdict.KEYLESS)
        elif offset in kept:
            verdicts.append(Verdict.LATEST if value is not None else Verdict.LATEST_TOMBSTONE)
        else:
            verdicts.append(Verdict.SUPERSEDED)
    keyless = sum(1 for key, _ in messages[start:end] if key is None)
    tombstones = sum(1 for key, value in messages[start:end] if key is not None and value is None)
    return sorted(kept), verdicts, keyless, tombstones


def stored_batch_starts(view: PartitionView) -> list[int]:
    """The first offset of every stored batch, from the segments' indexes."""
    starts = []
    for base in view.bases:
        segment = view.view(base)
        segment.refresh()
        starts += [segment.index.entry(entry)[0] for entry in range(segment.index.count)]
    return starts


@HYPOTHESIS
@given(stored=batches, data=st.data())
def test_latest_offsets_and_verdicts_match_a_python_reference(stored, data):
    messages = [message for batch in stored for message in batch]
    start = data.draw(st.integers(0, len(messages)), label="start")
    end = data.draw(st.integers(start, len(messages)), label="end")
    with tempfile.TemporaryDirectory() as directory:
        view = write(Path(directory) / "data", stored)
        try:
            result = build_compaction_map(view, start, end, max_keys=len(messages))
            latest, verdicts, keyless, tombstones = reference(messages, start, end)
            assert result.latest_offsets.tolist() == latest
            assert (result.messages, result.keyless, result.tombstones) == (end - start, keyless, tombstones)
            segments = list(result.segments())
            got = np.concatenate([s.verdicts for s in segments]) if segments else np.zeros(0, np.uint8)
            assert got.tolist() == verdicts
            # the segments' verdicts cover the range in order, cut where the stored batches are
            assert [s.first_offset for s in segments] == sorted(s.first_offset for s in segments)
            batch_starts = [first for s in segments for first, _ in s.batches()]
            expected = [b for b in stored_batch_starts(view) if start < b < end]
            assert batch_starts == ([start] if start < end else []) + expected
            assert sum(len(v) for s in segments for _, v in s.batches()) == end - start
        finally:
            view.close()


def test_keys_recurring_over_many_segments_keep_only_their_latest(tmp_path):
    """300 messages over 20 keys, a few a segment: the latest of each key is wherever its last write went."""
    rng = np.random.default_rng(7)
    stored = [[(b"key-%d" % rng.integers(20), bytes(rng.integers(0, 256, 60, dtype=np.uint8)))
               for _ in range(10)] for _ in range(30)]
    view = write(tmp_path / "data", stored)
    assert len(view.bases) >= 10
    messages = [message for batch in stored for message in batch]
    result = build_compaction_map(view, 0, len(messages), max_keys=20)
    assert result.latest_offsets.tolist() == reference(messages, 0, len(messages))[0]
    assert result.keys == 20
    assert len(list(result.segments())) == len(view.bases)


def test_empty_keys_and_values_are_keys_and_values(tmp_path):
    """b"" is a key and b"" a value (not a tombstone); a null key is no key, a null value a tombstone."""
    view = write(tmp_path / "data", [[(b"", b"first"), (None, b"x"), (b"k", None), (b"", b""), (b"k", b"")],
                                     [(b"t", b"v"), (b"t", None)]])
    result = build_compaction_map(view, 0, 7, max_keys=10)
    assert result.latest_offsets.tolist() == [3, 4, 6]
    assert (result.keyless, result.tombstones) == (1, 2)
    verdicts = np.concatenate([s.verdicts for s in result.segments()]).tolist()
    assert verdicts == [Verdict.SUPERSEDED, Verdict.KEYLESS, Verdict.SUPERSEDED, Verdict.LATEST, Verdict.LATEST,
                        Verdict.SUPERSEDED, Verdict.LATEST_TOMBSTONE]


def test_messages_without_key_columns_are_keyless(tmp_path):
    view = write(tmp_path / "data", [[(None, b"a"), (None, None)]])
    result = build_compaction_map(view, 0, 2, max_keys=5)
    assert (result.keys, result.keyless, result.tombstones) == (0, 2, 0)
    assert [s.verdicts.tolist() for s in result.segments()] == [[Verdict.KEYLESS, Verdict.KEYLESS]]


def test_more_keys_than_the_bound_is_refused_naming_it(tmp_path):
    view = write(tmp_path / "data", [[(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")]])
    assert build_compaction_map(view, 0, 4, max_keys=3).keys == 3
    with pytest.raises(InvalidArgumentError, match=r"invalid max_keys 2: offset 3 holds key number 3 of the range; "
                       r"accepted: at least the number of distinct keys in offsets 0 to 3"):
        build_compaction_map(view, 0, 4, max_keys=2)
    with pytest.raises(InvalidArgumentError, match="invalid max_keys 0"):
        build_compaction_map(view, 0, 4, max_keys=0)


def test_a_range_outside_the_stored_offsets_is_refused(tmp_path):
    view = write(tmp_path / "data", [[(b"a", b"1"), (b"b", b"2")]])
    with pytest.raises(InvalidArgumentError,
                       match="invalid end 3; accepted: an offset from start, 0, to the end offset, 2"):
        build_compaction_map(view, 0, 3, max_keys=2)
    with pytest.raises(InvalidArgumentError,
                       match="invalid start 3; accepted: an offset from the earliest retained, 0, to the end "):
        build_compaction_map(view, 3, 3, max_keys=2)
    with pytest.raises(InvalidArgumentError, match="invalid end 1; accepted: an offset from start, 2"):
        build_compaction_map(view, 2, 1, max_keys=2)
    empty = build_compaction_map(view, 1, 1, max_keys=2)
    assert (empty.keys, empty.messages, list(empty.segments())) == (0, 0, [])


def test_a_damaged_key_is_reported_not_compacted(tmp_path):
    stored = [[(b"key-%d" % i, b"v" * 50) for i in range(8)] for _ in range(6)]
    view = write(tmp_path / "data", stored)
    first_log = segment_logs(view.directory)[0]
    view.close()
    flip_byte(first_log, first_log.stat().st_size - 20)  # in the first segment's last batch
    view = PartitionView(first_log.parent)
    with pytest.raises(CorruptLogError, match="CRC32C mismatch"):
        build_compaction_map(view, 0, 48, max_keys=48)


def test_the_map_is_sized_from_the_bound_at_most_80_percent_full():
    assert capacity_for(1_000_000) == 1_250_000
    assert map_bytes(1_000_000) == 24 * 1_250_000  # 28.6 MiB: Kafka's cleaner uses 24 bytes a key too
    offset_map = OffsetMap(1_000)
    assert offset_map.nbytes == 24 * 1_250
    offset_map.release()
    assert offset_map.nbytes == 0
    with pytest.raises(ValueError, match="released"):
        offset_map.latest_offsets()


def test_the_key_hash_is_murmur3_x64_128():
    """128 bits (module docstring: why not 64); the values of MurmurHash3_x64_128 with seed 0."""
    assert key_hash(b"") == 0
    assert key_hash(b"key-42") == 0x5104CB540ADF5AFFA7EE0685872B352C
    assert key_hash(bytes(range(40))) == 0xA001CA30974C12ADC3A054D8418C8064
    mmh3 = pytest.importorskip("mmh3")
    for key in [b"a", b"x" * 15, b"y" * 16, b"z" * 17, bytes(range(200))]:
        assert key_hash(key) == mmh3.hash128(key, seed=0, x64arch=True, signed=False)
