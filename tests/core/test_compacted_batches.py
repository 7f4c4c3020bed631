"""Compacted batches (format version 3, docs/FORMAT.md): some records of a stored batch with their own offsets
in an offsets column, every other section gathered from the stored batch; read by the same decoders, checked
by the same scans, and refused when damaged."""

import struct

import crc32c as crc32c_reference
import numpy as np
import pytest

from seglog._core import _format
from seglog._core._messages import batch_offsets, messages_from_batch
from seglog.storage.batch import make_source, to_record_batch

HEADER = struct.Struct("<IHHIIqqqiIQq")  # docs/FORMAT.md, Header


def stored(base_offset=10, **columns):
    values = columns.pop("values", [b"v0", None, b"", b"value-3", None, b"v5"])
    source = make_source(values, columns.get("keys"), columns.get("timestamps"), columns.get("properties"),
                         now=1_700_000_000_000, log_append_time=False, ordering_keys=columns.get("ordering_keys"),
                         attributes=columns.get("attributes"))
    buffer = bytearray(source.size(0, source.count))
    source.write(buffer, 0, base_offset, 0, source.count)
    return bytes(buffer)


EVERYTHING = dict(keys=[None, b"k1", b"k2", None, b"k4", b"k5"], timestamps=[1, 2, None, 4, 5, 6],
                  properties=[None, {"p": "q"}, None, {"a": "b", "c": ""}, {"r": "s"}, None],
                  ordering_keys=[b"o0", None, None, b"o3", b"", b"o5"], attributes={"producer": "p-1"})


def scan(data, *, gaps=True, expected=-1):
    arrays = [np.zeros(8, np.int64) for _ in range(4)]
    count, stop, status, _ = _format.scan_batches(data, 0, len(data), expected, True, *arrays[:3], gaps=gaps,
                                                  base_offsets=arrays[3])
    return count, stop, status, arrays[3][:count].tolist(), arrays[0][:count].tolist()


def fields(m):
    return m.offset, m.key, m.value, m.timestamp, m.event_time, m.properties, m.ordering_key, dict(m.batch_attributes)


@pytest.mark.parametrize("rows", [[0], [5], [1, 3], [0, 2, 4, 5], list(range(6))])
def test_selected_records_keep_every_field_and_their_offsets(rows):
    source = stored(**EVERYTHING)
    compacted = _format.selected_records(source, 0, np.array(rows, dtype=np.int64))
    header = HEADER.unpack_from(compacted)
    assert header[1] == 3 and header[4] & _format.OFFSETS and header[5] == 10 and header[8] == len(rows)
    assert header[9] == len(compacted) - 64 and header[3] == crc32c_reference.crc32c(compacted[12:])
    expected = [m for m in messages_from_batch(source, 0, 0, 0, 6) if m.offset - 10 in rows]
    got = messages_from_batch(compacted, 0, 0, 0, len(rows))
    assert [fields(m) for m in got] == [fields(m) for m in expected]
    batch = to_record_batch(compacted, 0)
    assert batch.column("offset").to_pylist() == [10 + r for r in rows]
    assert batch.to_pylist() == to_record_batch(source, 0).take(rows).to_pylist()
    assert batch_offsets(compacted, 0).tolist() == [10 + r for r in rows]
    assert batch_offsets(source, 0).tolist() == list(range(10, 16))
    assert HEADER.unpack_from(compacted)[6:8] == (min(batch.column("timestamp").cast("int64").to_pylist()[:1]),
                                                  max(batch.column("timestamp").cast("int64").to_pylist()))


def test_a_compacted_batch_is_no_larger_than_its_source_plus_eight_bytes_a_record():
    source = stored(**EVERYTHING)
    for rows in ([0], [1, 2], list(range(6))):
        assert len(_format.selected_records(source, 0, np.array(rows, np.int64))) <= len(source) + 8 * len(rows)


def test_a_compacted_batch_of_a_compacted_batch_keeps_the_original_offsets():
    once = _format.selected_records(stored(), 0, np.array([1, 3, 5], np.int64))
    twice = _format.selected_records(once, 0, np.array([1, 2], np.int64))
    assert to_record_batch(twice, 0).column("offset").to_pylist() == [13, 15]


def test_scans_take_gaps_between_compacted_batches_but_never_a_step_back():
    source = stored()
    first = _format.selected_records(source, 0, np.array([0, 2], np.int64))
    second = _format.selected_records(source, 0, np.array([4, 5], np.int64))
    # (both kept from the stored batch of base offset 10, in two compactions: a compaction may stop inside it)
    assert scan(first + second) == (2, len(first + second), _format.ScanStatus.SCAN_END, [10, 10], [13, 16])
    # without gaps allowed (a segment of the log), the second batch does not follow the first
    assert scan(first + second, gaps=False)[2] == _format.ScanStatus.SCAN_BAD_OFFSET
    # a batch that starts before the previous one ended
    overlap = _format.selected_records(source, 0, np.array([1], np.int64))
    assert scan(first + overlap)[:3] == (1, len(first), _format.ScanStatus.SCAN_BAD_OFFSET)


def test_offsets_that_do_not_grow_are_damage():
    compacted = bytearray(_format.selected_records(stored(), 0, np.array([0, 2, 4], np.int64)))
    struct.pack_into("<q", compacted, 64 + 16, 11)  # the third record's offset below the second's
    compacted[8:12] = struct.pack("<I", crc32c_reference.crc32c(bytes(compacted[12:])))
    assert scan(bytes(compacted))[2] == _format.ScanStatus.SCAN_BAD_OFFSET
    assert _format.verify_batch(bytes(compacted), 0, len(compacted)) == _format.ScanStatus.SCAN_BAD_OFFSET


def test_a_first_offset_before_the_base_offset_does_not_fit():
    compacted = bytearray(_format.selected_records(stored(), 0, np.array([0, 2], np.int64)))
    struct.pack_into("<q", compacted, 64, 9)
    compacted[8:12] = struct.pack("<I", crc32c_reference.crc32c(bytes(compacted[12:])))
    assert scan(bytes(compacted))[2] == _format.ScanStatus.SCAN_BAD_LAYOUT
    with pytest.raises(ValueError, match="column sections"):
        to_record_batch(bytes(compacted), 0)


def test_the_offsets_flag_belongs_to_version_3_only():
    batch = bytearray(stored(values=[b"a"]))
    flags = HEADER.unpack_from(batch)[4]
    struct.pack_into("<I", batch, 12, flags | _format.OFFSETS)  # a version-1 batch claiming an offsets column
    batch[8:12] = struct.pack("<I", crc32c_reference.crc32c(bytes(batch[12:])))
    assert scan(bytes(batch))[2] == _format.ScanStatus.SCAN_BAD_FLAGS
    assert _format.VERSION_3_FLAGS == _format.OFFSETS == 1 << 10


@pytest.mark.parametrize("rows, message", [([], "no records"), ([2, 1], "ascending"), ([6], "ascending"),
                                           ([-1], "ascending")])
def test_a_selection_must_name_records_of_the_batch_in_order(rows, message):
    with pytest.raises(ValueError, match=message):
        _format.selected_records(stored(), 0, np.array(rows, np.int64))
