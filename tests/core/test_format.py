"""The record-batch format: what is encoded is what is decoded, byte for byte, through every input
form; the header fields and CRC match docs/FORMAT.md; the checksum and hash match their references."""

import random
import re
import struct

import crc32c as crc32c_reference
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog._core import _format
from seglog._core._writer import message_size
from seglog.errors import InvalidArgumentError
from seglog.storage.batch import SCHEMA, make_source, to_record_batch

HEADER = struct.Struct("<IHHIIqqqiIQq")  # docs/FORMAT.md, Header

NOW = 1_700_000_000_000


def encode(values, keys=None, timestamps=None, properties=None, log_append_time=False, base_offset=0):
    source = make_source(values, keys, timestamps, properties, now=NOW, log_append_time=log_append_time)
    buffer = bytearray(source.size(0, source.count))
    assert source.write(buffer, 0, base_offset, 0, source.count) == len(buffer)
    return buffer


def decode(buffer):
    return to_record_batch(bytes(buffer), 0)


@pytest.mark.parametrize("data", [b"", b"123456789", bytes(range(256)) * 17, b"x" * 1001])
def test_crc32c_matches_reference_in_hardware_and_software(data):
    assert _format.crc32c(data) == crc32c_reference.crc32c(data)
    assert _format.crc32c_software(data) == crc32c_reference.crc32c(data)


@pytest.mark.parametrize("length", [767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 13, 100_003])
def test_crc32c_three_stream_block_boundaries(length):
    data = bytes((i * 131 + 7) % 251 for i in range(length))
    for skew in (0, 3):
        view = memoryview(b"\0" * skew + data)[skew:]
        assert _format.crc32c(view) == crc32c_reference.crc32c(data)


@given(st.binary(max_size=300), st.integers(0, 7))
def test_crc32c_unaligned_and_chained(data, skew):
    view = memoryview(b"\0" * skew + data)[skew:]
    assert _format.crc32c(view) == crc32c_reference.crc32c(data)
    half = len(data) // 2
    assert _format.crc32c(data[half:], _format.crc32c(data[:half])) == crc32c_reference.crc32c(data)


# Every CRC32C implementation this CPU can run (the dispatcher picks one; the others must agree with it).
CRC_TIERS = _format.crc32c_tiers()
# Lengths where the implementations change strategy: the avx512 tier's minimum (64) and its 64- and 256-byte
# rounds, the pclmul tier's pieces (5120 bytes), the three-stream path's short and long blocks (3 x 256,
# 3 x 8192).
CRC_EDGE_LENGTHS = sorted(set(range(0, 1100)) | {n + d for n in (3 * 8192, 6 * 8192, 4096, 8192, 16384)
                                                  for d in range(-80, 80)}
                          | {k * 5120 + d for k in (1, 2, 3) for d in range(-300, 300)})


def aligned_view(data: bytes, alignment: int) -> memoryview:
    """`data` copied to an address that is `alignment` bytes past a 64-byte boundary."""
    base = np.zeros(len(data) + 128, dtype=np.uint8)
    start = (-base.ctypes.data) % 64 + alignment
    base[start:start + len(data)] = np.frombuffer(data, dtype=np.uint8)
    view = memoryview(base)[start:start + len(data)]
    assert (np.frombuffer(view, dtype=np.uint8).ctypes.data % 64) == alignment
    return view


def test_crc32c_tiers_are_known_and_the_fastest_is_used():
    assert CRC_TIERS[0] == "software"
    assert set(CRC_TIERS) <= {"software", "sse42", "pclmul", "avx512", "armv8"}
    assert _format.crc32c_selected_tier() in CRC_TIERS
    data = bytes(range(256)) * 40
    assert _format.crc32c(data) == _format.crc32c_tier(_format.crc32c_selected_tier(), data)
    with pytest.raises(ValueError, match="no CRC32C tier"):
        _format.crc32c_tier("abacus", b"")


@pytest.mark.parametrize("tier", CRC_TIERS)
@settings(max_examples=300, deadline=None)
@given(length=st.integers(0, 12_000), seed=st.integers(0, 2**32 - 1), alignment=st.integers(0, 63),
       crc=st.integers(0, 2**32 - 1))
def test_crc32c_tier_matches_reference(tier, length, seed, alignment, crc):
    data = random.Random(seed).randbytes(length)
    view = aligned_view(data, alignment)
    assert _format.crc32c_tier(tier, view) == crc32c_reference.crc32c(data)
    assert _format.crc32c_tier(tier, view, crc) == crc32c_reference.crc32c(data, crc)


@pytest.mark.parametrize("tier", CRC_TIERS)
def test_crc32c_tier_at_every_edge_length_and_alignment(tier):
    data = random.Random(7).randbytes(CRC_EDGE_LENGTHS[-1])
    wrong = []
    for alignment in (0, 1, 7, 8, 15, 16, 33, 63):
        view = aligned_view(data, alignment)
        wrong += [(length, alignment) for length in CRC_EDGE_LENGTHS
                  if _format.crc32c_tier(tier, view[:length]) != crc32c_reference.crc32c(data[:length])]
    assert wrong == []


@pytest.mark.parametrize("tier", CRC_TIERS)
@settings(max_examples=200, deadline=None)
@given(length=st.integers(0, 12_000), seed=st.integers(0, 2**32 - 1), cuts=st.lists(st.integers(0, 12_000), max_size=3),
       other=st.sampled_from(CRC_TIERS))
def test_crc32c_tier_chained(tier, length, seed, cuts, other):
    """A CRC continued from a previous call, in pieces cut anywhere, by this tier or mixed with another."""
    data = random.Random(seed).randbytes(length)
    bounds = [0, *sorted(min(c, length) for c in cuts), length]
    crc = 0
    for i, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        crc = _format.crc32c_tier(tier if i % 2 == 0 else other, data[start:stop], crc)
    assert crc == crc32c_reference.crc32c(data)


@pytest.fixture(scope="module")
def random_64_mib():
    return np.random.default_rng(64).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("tier", CRC_TIERS)
def test_crc32c_tier_on_64_mib(tier, random_64_mib):
    expected = crc32c_reference.crc32c(random_64_mib)
    assert _format.crc32c_tier(tier, random_64_mib) == expected
    odd = memoryview(random_64_mib)[5:-3]
    assert _format.crc32c_tier(tier, odd) == crc32c_reference.crc32c(odd)


@pytest.mark.parametrize("key, expected", [  # Kafka's UtilsTest.testMurmur2
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829), (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107)])
def test_murmur2_matches_kafka(key, expected):
    assert _format.murmur2(key) == expected


def test_header_layout_matches_format_doc():
    buffer = encode([b"a", b"bc"], timestamps=[5, 9], base_offset=42)
    magic, version, header_size, crc, flags, base, first_ts, max_ts, count, body, origin, origin_base = \
        HEADER.unpack_from(buffer, 0)
    assert bytes(buffer[:4]) == b"SGLB" and magic == 0x424C4753
    assert (version, header_size, base, first_ts, max_ts, count) == (1, 64, 42, 5, 9, 2)
    assert body == len(buffer) - 64 and body % 8 == 0
    assert crc == crc32c_reference.crc32c(bytes(buffer[12:]))
    assert flags == _format.EVENT_TIME_IS_TIMESTAMP and (origin, origin_base) == (0, 0)
    # body: timestamps, then value offsets (int32, padded to 8), then value data (padded to 8)
    assert struct.unpack_from("<2q", buffer, 64) == (5, 9)
    assert struct.unpack_from("<3i", buffer, 80) == (0, 1, 3)
    assert bytes(buffer[96:99]) == b"abc"


values_strategy = st.lists(st.binary(max_size=64), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_round_trip_every_column(data):
    values = data.draw(values_strategy)
    n = len(values)
    keys = data.draw(st.none() | st.lists(st.none() | st.binary(max_size=16), min_size=n, max_size=n))
    timestamps = data.draw(st.none() | st.lists(st.integers(0, 2**62), min_size=n, max_size=n))
    properties = data.draw(st.none() | st.lists(
        st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3), min_size=n, max_size=n))
    log_append_time = data.draw(st.booleans())
    batch = decode(encode(values, keys, timestamps, properties, log_append_time, base_offset=7))
    assert batch.schema == SCHEMA
    assert batch.column("offset").to_pylist() == list(range(7, 7 + n))
    assert batch.column("value").to_pylist() == values
    assert batch.column("key").to_pylist() == (keys or [None] * n)
    stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == (timestamps if timestamps is not None and not log_append_time else [NOW] * n)
    expected_properties = [sorted(p.items()) if p else None for p in (properties or [None] * n)]
    got = [sorted(p) if p else None for p in batch.column("properties").to_pylist()]
    assert got == [p if p else None for p in expected_properties]


@pytest.mark.parametrize("make", [
    lambda v: v,
    lambda v: pa.array(v, pa.binary()),
    lambda v: pa.array(v, pa.large_binary()),
    lambda v: pa.array([x.decode() for x in v], pa.string()),
    lambda v: pa.chunked_array([pa.array(v[:2], pa.binary()), pa.array(v[2:], pa.binary())]),
    lambda v: pa.array([b"pad"] + v, pa.binary()).slice(1),
])
def test_input_forms_encode_identically(make):
    values = [b"alpha", b"", b"gamma", b"delta"]
    assert decode(encode(make(values))).column("value").to_pylist() == values
    assert encode(make(values)) == encode(values)


def test_numpy_fixed_width_records():
    records = np.arange(12, dtype=np.uint8).reshape(4, 3)
    batch = decode(encode(records))
    assert batch.column("value").to_pylist() == [bytes(row) for row in records]
    structured = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "<i4"), ("b", "<f8")])
    assert decode(encode(structured)).column("value").to_pylist() == [r.tobytes() for r in structured]


def test_event_time_column_when_only_some_timestamps_given():
    batch_bytes = encode([b"a", b"b"], timestamps=[None, 5])
    flags = HEADER.unpack_from(batch_bytes, 0)[4]
    assert flags & _format.EVENT_TIME_COLUMN
    assert decode(batch_bytes).column("timestamp").cast(pa.int64()).to_pylist() == [NOW, 5]


@pytest.mark.parametrize("values, message", [
    ([b"a", None], "values[1]"),
    ([b"a", 3], "values[1] 'int'"),
    (pa.array([1, 2]), "pyarrow array of int64"),
    (pa.array([b"a", None]), "values[1]"),
    (np.array([[[1]]], dtype=np.uint8), "numpy array of shape"),
    ({"a": 1}, "accepted"),
])
def test_bad_values_are_refused_with_the_argument_named(values, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        make_source(values, None, None, None, now=NOW, log_append_time=False)


@pytest.mark.parametrize("keys, timestamps, properties, message", [
    ([b"k"], None, None, "keys"),
    (None, [1], None, "timestamps"),
    (None, [-1, 2], None, "timestamps"),
    (None, ["x", "y"], None, "timestamps"),
    (None, None, [{"a": 1}, None], r"properties\[0\]"),
    (None, None, [None], "properties"),
])
def test_bad_companion_columns_are_refused(keys, timestamps, properties, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make_source([b"a", b"b"], keys, timestamps, properties, now=NOW, log_append_time=False)


def test_scan_detects_each_kind_of_damage():
    one, two = encode([b"first"], base_offset=0), encode([b"second"], base_offset=1)
    good = bytes(one + two)
    arrays = [np.zeros(4, np.int64) for _ in range(3)]

    def scan(data, expected=0):
        return _format.scan_batches(data, 0, len(data), expected, True, *arrays)

    assert scan(good)[:3] == (2, len(good), _format.ScanStatus.SCAN_END)
    assert scan(good + bytes(64))[2] == _format.ScanStatus.SCAN_END  # pre-sized zeros are a clean end
    assert scan(good[:-3])[1:3] == (len(one), _format.ScanStatus.SCAN_TORN)
    flipped = bytearray(good)
    flipped[len(one) + 70] ^= 1
    assert scan(bytes(flipped))[1:3] == (len(one), _format.ScanStatus.SCAN_BAD_CRC)
    assert scan(good, expected=5)[2] == _format.ScanStatus.SCAN_BAD_OFFSET
    assert scan(b"JUNK" + good[4:])[2] == _format.ScanStatus.SCAN_BAD_MAGIC


@settings(max_examples=300, deadline=None)
@given(value=st.binary(max_size=300), key=st.none() | st.binary(max_size=40),
       timestamp=st.none() | st.integers(0, 2**62), log_append_time=st.booleans(),
       properties=st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4))
def test_message_size_is_the_encoders_size_of_a_one_message_batch(value, key, timestamp, log_append_time,
                                                                  properties):
    """send()'s backlog-quota check counts a message by message_size: exactly what the encoder writes."""
    source = make_source([value], None if key is None else [key], None if timestamp is None else [timestamp],
                         None if properties is None else [properties], now=1, log_append_time=log_append_time)
    event_time_column = timestamp is not None and log_append_time
    assert message_size(value, key, event_time_column, properties) == source.size(0, 1)
