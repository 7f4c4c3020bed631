"""The record-batch format: what is encoded is what is decoded, byte for byte, through every input
form and both format versions; the header fields, sections and CRC match docs/FORMAT.md; invalid batches
are found by the checks every scan and reader runs; the checksum and hash match their references."""

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
from seglog._core._messages import batch_attributes, messages_from_batch
from seglog._core._writer import message_size
from seglog.errors import InvalidArgumentError
from seglog.storage.batch import SCHEMA, make_source, to_record_batch

HEADER = struct.Struct("<IHHIIqqqiIQq")  # docs/FORMAT.md, Header

NOW = 1_700_000_000_000


def encode(values, keys=None, timestamps=None, properties=None, log_append_time=False, base_offset=0, *,
           ordering_keys=None, attributes=None):
    source = make_source(values, keys, timestamps, properties, now=NOW, log_append_time=log_append_time,
                         ordering_keys=ordering_keys, attributes=attributes)
    buffer = bytearray(source.size(0, source.count))
    assert source.write(buffer, 0, base_offset, 0, source.count) == len(buffer)
    return buffer


def reseal(buffer: bytearray) -> bytearray:
    """The batch at the start of `buffer` with its CRC32C made right again after an edit."""
    struct.pack_into("<I", buffer, 8, crc32c_reference.crc32c(bytes(buffer[12:])))
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


def test_version_2_layout_matches_format_doc():
    """Every section of docs/FORMAT.md, Body, found where the document puts it, by a parser written from the
    document: positions, bitmaps, offsets and bytes."""
    buffer = encode([b"v0", None, b"", b"value-3", None], keys=[None, b"k1", None, None, b"k4"],
                    timestamps=[1, 2, 3, 4, 5], properties=[None, {"p": "q"}, None, None, {"r": "s", "t": ""}],
                    ordering_keys=[b"o0", None, None, b"o3", b""], attributes={"producer": "p-1", "sequence": "42"},
                    base_offset=9)
    magic, version, header_size, crc, flags, base, first_ts, max_ts, count, body, _, _ = HEADER.unpack_from(buffer)
    assert (magic, version, header_size, base, first_ts, max_ts, count) == (0x424C4753, 2, 64, 9, 1, 5, 5)
    assert crc == crc32c_reference.crc32c(bytes(buffer[12:])) and body == len(buffer) - 64
    assert flags == (_format.HAS_KEYS | _format.KEY_NULLS | _format.HAS_PROPERTIES | _format.EVENT_TIME_IS_TIMESTAMP
                     | _format.VALUE_NULLS | _format.ORDERING_KEYS | _format.ORDERING_KEY_NULLS
                     | _format.BATCH_ATTRIBUTES)
    assert (_format.VALUE_NULLS, _format.ORDERING_KEYS, _format.ORDERING_KEY_NULLS, _format.BATCH_ATTRIBUTES) == \
        (1 << 5, 1 << 6, 1 << 7, 1 << 9)
    n, position, sections = count, 64, {}

    def pad8(p):
        assert bytes(buffer[p:(p + 7) & ~7]) == bytes((-p) % 8), f"padding before {p} is not zeros"
        return (p + 7) & ~7

    def fixed(name, size):
        nonlocal position
        sections[name] = position
        position = pad8(position + size)

    def binary(name, items):
        nonlocal position
        sections[name + "_offsets"] = position
        offsets = struct.unpack_from(f"<{items + 1}i", buffer, position)
        assert offsets[0] == 0
        position = pad8(position + 4 * (items + 1))
        sections[name + "_data"] = position
        data = bytes(buffer[position:position + offsets[-1]])
        position = pad8(position + offsets[-1])
        return [data[a:b] for a, b in zip(offsets, offsets[1:])]

    def bitmap(name):
        nonlocal position
        bits = [bool(buffer[position + i // 8] >> (i % 8) & 1) for i in range(n)]
        fixed(name, (n + 7) // 8)
        return bits

    fixed("timestamps", 8 * n)
    assert struct.unpack_from("<5q", buffer, sections["timestamps"]) == (1, 2, 3, 4, 5)
    assert bitmap("key_validity") == [False, True, False, False, True]
    assert binary("key", n) == [b"", b"k1", b"", b"", b"k4"]
    assert bitmap("value_validity") == [True, False, True, True, False]
    assert binary("value", n) == [b"v0", b"", b"", b"value-3", b""]  # a null value has no bytes
    sections["property_entries"] = position
    entries = struct.unpack_from(f"<{n + 1}i", buffer, position)
    assert entries == (0, 0, 1, 1, 1, 3)
    position = pad8(position + 4 * (n + 1))
    assert binary("property_key", 3) == [b"p", b"r", b"t"] and binary("property_value", 3) == [b"q", b"s", b""]
    assert bitmap("ordering_key_validity") == [True, False, False, True, True]
    assert binary("ordering_key", n) == [b"o0", b"", b"", b"o3", b""]
    sections["attributes"] = position
    assert struct.unpack_from("<2i", buffer, position) == (2, 0)  # attribute_count, then 4 zero bytes
    position += 8
    assert binary("attribute_key", 2) == [b"producer", b"sequence"]
    assert binary("attribute_value", 2) == [b"p-1", b"42"]
    assert position == len(buffer), "the attribute sections end the batch"

    layout = _format.batch_layout(bytes(buffer), 0)
    assert {name: layout[name] for name in sections} == sections
    assert (layout["attribute_count"], layout["property_entry_count"], layout["end"]) == (2, 3, len(buffer))
    assert layout["event_times"] == -1


def test_a_batch_using_nothing_of_version_2_is_written_as_version_1():
    plain = encode([b"a", b""], keys=[None, b"k"], timestamps=[1, None], properties=[{"x": "y"}, None],
                   attributes={})  # an empty map is no attributes
    assert HEADER.unpack_from(plain)[1] == 1
    assert HEADER.unpack_from(plain)[4] & _format.VERSION_2_FLAGS == 0
    assert make_source([b"a"], None, None, None, now=NOW, log_append_time=False).version == 1
    for extra in ({"values": [b"a", None]}, {"values": [b"a", b"b"], "ordering_keys": [None, None]},
                  {"values": [b"a", b"b"], "attributes": {"k": "v"}}):
        batch = encode(**extra)
        version, flags = HEADER.unpack_from(batch)[1], HEADER.unpack_from(batch)[4]
        assert version == 2 and flags & _format.VERSION_2_FLAGS, extra
    assert _format.VERSION == 2


values_strategy = st.lists(st.binary(max_size=64), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_round_trip_every_column(data):
    """Both versions: null values among present and empty ones, ordering keys with and without nulls,
    attributes; through the Arrow columns and through Message objects."""
    values = data.draw(st.lists(st.none() | st.binary(max_size=64), min_size=1, max_size=40))
    n = len(values)
    keys = data.draw(st.none() | st.lists(st.none() | st.binary(max_size=16), min_size=n, max_size=n))
    timestamps = data.draw(st.none() | st.lists(st.integers(0, 2**62), min_size=n, max_size=n))
    properties = data.draw(st.none() | st.lists(
        st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3), min_size=n, max_size=n))
    ordering_keys = data.draw(st.none() | st.lists(st.none() | st.binary(max_size=16), min_size=n, max_size=n))
    attributes = data.draw(st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=5))
    log_append_time = data.draw(st.booleans())
    encoded = encode(values, keys, timestamps, properties, log_append_time, base_offset=7,
                     ordering_keys=ordering_keys, attributes=attributes)
    version_2 = None in values or ordering_keys is not None or bool(attributes)
    assert HEADER.unpack_from(encoded)[1] == (2 if version_2 else 1)
    batch = decode(encoded)
    assert batch.schema == SCHEMA
    assert batch.column("offset").to_pylist() == list(range(7, 7 + n))
    assert batch.column("value").to_pylist() == values
    assert batch.column("key").to_pylist() == (keys or [None] * n)
    stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == (timestamps if timestamps is not None and not log_append_time else [NOW] * n)
    expected_properties = [sorted(p.items()) if p else None for p in (properties or [None] * n)]
    got = [sorted(p) if p else None for p in batch.column("properties").to_pylist()]
    assert got == [p if p else None for p in expected_properties]
    messages = messages_from_batch(bytes(encoded), 0, 3, 0, n)
    assert [m.offset for m in messages] == list(range(7, 7 + n))
    assert [m.value for m in messages] == values
    assert [m.key for m in messages] == (keys or [None] * n)
    assert [m.ordering_key for m in messages] == (ordering_keys or [None] * n)
    assert [m.properties for m in messages] == [p or {} for p in (properties or [None] * n)]
    assert all(m.batch_attributes == (attributes or {}) for m in messages)
    assert len({id(m.batch_attributes) for m in messages}) == 1, "one mapping for the messages of a batch"
    assert batch_attributes(bytes(encoded), 0) == (attributes or {})


def test_null_values_are_accepted_in_every_input_form_and_differ_from_empty_ones():
    values = [b"a", None, b"", None]
    for form in (values, tuple(values), pa.array(values, pa.binary()), pa.array(values, pa.large_binary()),
                 pa.array([None if v is None else v.decode() for v in values], pa.string()),
                 pa.chunked_array([pa.array(values[:1], pa.binary()), pa.array(values[1:], pa.binary())]),
                 np.array(values, dtype=object), pa.array([b"pad"] + values, pa.binary()).slice(1)):
        encoded = encode(form)
        assert encoded == encode(values), type(form)
        assert decode(encoded).column("value").to_pylist() == values
    assert decode(encode([None])).column("value").null_count == 1
    # keys as a numpy object array may hold None too, as keys in a list always could
    assert decode(encode([b"a", b"b"], keys=np.array([None, b"k"], dtype=object))).column("key").to_pylist() == \
        [None, b"k"]


def test_a_null_item_holding_bytes_in_an_arrow_input_is_stored_without_them():
    """Arrow lets a null slot span bytes; stored, a null value or ordering key has none (FORMAT.md). Keys
    keep them, as version 1 kept them, so a version-1 batch is written as it always was."""
    offsets = pa.py_buffer(np.array([0, 2, 5, 6], dtype=np.int32).tobytes())
    validity = pa.py_buffer(np.packbits([True, False, True], bitorder="little").tobytes())
    odd = pa.Array.from_buffers(pa.binary(), 3, [validity, offsets, pa.py_buffer(b"abXYZc")])
    assert odd.to_pylist() == [b"ab", None, b"c"]
    encoded = encode(odd, ordering_keys=odd)
    assert encoded == encode([b"ab", None, b"c"], ordering_keys=[b"ab", None, b"c"])
    assert b"XYZ" not in encoded
    keyed = encode([b"v"] * 3, keys=odd)
    assert HEADER.unpack_from(keyed)[1] == 1 and b"abXYZc" in keyed
    assert decode(keyed).column("key").to_pylist() == [b"ab", None, b"c"]


def test_arrow_value_column_with_nulls_is_zero_copy():
    """The value column's validity, offsets and data buffers are the batch's own sections."""
    encoded = encode([b"one", None, b"", b"four"] * 5, keys=[b"k"] * 20)
    memory = np.frombuffer(bytes(encoded), dtype=np.uint8)
    base = memory.ctypes.data
    batch = to_record_batch(memory, 0)
    layout = _format.batch_layout(memory, 0)
    value = batch.column("value")
    validity, offsets, data = value.buffers()
    assert (validity.address, offsets.address, data.address) == \
        (base + layout["value_validity"], base + layout["value_offsets"], base + layout["value_data"])
    assert value.null_count == 5 and value.to_pylist() == [b"one", None, b"", b"four"] * 5
    assert batch.schema.field("value").nullable
    plain = to_record_batch(np.frombuffer(bytes(encode([b"x", b"y"])), dtype=np.uint8), 0).column("value")
    assert plain.buffers()[0] is None and plain.null_count == 0


def test_attributes_are_whole_in_every_batch_a_source_is_split_into():
    """A source split where a segment is full writes each part with the whole map."""
    source = make_source([b"a", None, b"c", b"d"], None, None, None, now=NOW, log_append_time=False,
                         ordering_keys=[b"x", None, None, b"y"], attributes={"producer": "p", "sequence": "7"})
    parts = []
    for start, stop in ((0, 2), (2, 4)):
        buffer = bytearray(source.size(start, stop))
        assert source.write(buffer, 0, 100 + start, start, stop) == len(buffer)
        parts.append(bytes(buffer))
    assert [m.value for p in parts for m in messages_from_batch(p, 0, 0, 0, 2)] == [b"a", None, b"c", b"d"]
    assert [m.ordering_key for p in parts for m in messages_from_batch(p, 0, 0, 0, 2)] == [b"x", None, None, b"y"]
    assert [dict(batch_attributes(p, 0)) for p in parts] == [{"producer": "p", "sequence": "7"}] * 2
    assert source.fit(0, len(parts[0])) == 2, "fit counts the attributes in each part"


def test_batch_attributes_are_read_only():
    (message,) = messages_from_batch(bytes(encode([b"a"], attributes={"k": "v"})), 0, 0, 0, 1)
    with pytest.raises(TypeError):
        message.batch_attributes["k"] = "w"  # type: ignore[index]
    (plain,) = messages_from_batch(bytes(encode([b"a"])), 0, 0, 0, 1)
    assert plain.batch_attributes == {} and plain.ordering_key is None
    with pytest.raises(TypeError):
        plain.batch_attributes["k"] = "w"  # type: ignore[index]


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
    ([b"a", 3], "values[1] 'int'"),
    (pa.array([1, 2]), "pyarrow array of int64"),
    (np.array([[[1]]], dtype=np.uint8), "numpy array of shape"),
    (np.array([b"a", 3], dtype=object), "values[1] 'int'"),
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


@pytest.mark.parametrize("ordering_keys, attributes, message", [
    ([b"o"], None, "ordering_keys"),
    ([b"o", 3], None, r"ordering_keys\[1\] 'int'"),
    (None, {"k": 1}, "attributes"),
    (None, {1: "v"}, "attributes"),
    (None, [("k", "v")], "attributes"),
    (None, {"k": "\ud800"}, "attributes"),
    (None, {"p": "q"} | {"\udfff": "v"}, "attributes"),
])
def test_bad_ordering_keys_and_attributes_are_refused(ordering_keys, attributes, message):
    with pytest.raises(InvalidArgumentError, match=message):
        make_source([b"a", b"b"], None, None, None, now=NOW, log_append_time=False, ordering_keys=ordering_keys,
                    attributes=attributes)


def version_2_batch() -> bytearray:
    return encode([b"alpha", None, b""], keys=[None, b"k", b"k"], ordering_keys=[b"o", None, b"p"],
                  properties=[{"a": "b"}, None, None], attributes={"producer": "p", "sequence": "1"}, base_offset=3)


def statuses(buffer) -> tuple[int, int, int]:
    """What a scan, verify_batch and a reader's entry check (with CRC) make of the batch at 0."""
    data = bytes(buffer)
    arrays = [np.zeros(2, np.int64) for _ in range(3)]
    count = HEADER.unpack_from(data)[8]
    return (_format.scan_batches(data, 0, len(data), -1, True, *arrays)[2], _format.verify_batch(data, 0, len(data)),
            _format.check_entry(data, 0, len(data), 3, count, True))


@pytest.mark.parametrize("flag", ["VALUE_NULLS", "ORDERING_KEYS", "ORDERING_KEY_NULLS", "BATCH_ATTRIBUTES"])
def test_a_version_2_flag_in_a_version_1_batch_is_invalid(flag):
    batch = encode([b"a", b"b"], base_offset=3)
    assert statuses(batch) == (_format.ScanStatus.SCAN_END,) * 3
    struct.pack_into("<I", batch, 12, HEADER.unpack_from(batch)[4] | getattr(_format, flag))
    assert statuses(reseal(batch)) == (_format.ScanStatus.SCAN_BAD_FLAGS,) * 3
    with pytest.raises(ValueError, match="column sections"):
        _format.batch_layout(bytes(batch), 0)
    with pytest.raises(ValueError, match="column sections"):
        to_record_batch(bytes(batch), 0)
    with pytest.raises(ValueError, match="column sections"):
        messages_from_batch(bytes(batch), 0, 0, 0, 2)
    # the same batch, sections and all, marked as version 1
    v2 = version_2_batch()
    struct.pack_into("<H", v2, 4, 1)
    assert statuses(reseal(v2)) == (_format.ScanStatus.SCAN_BAD_FLAGS,) * 3
    assert _format.SCAN_REASONS[_format.ScanStatus.SCAN_BAD_FLAGS] == "flags not valid for the batch's format version"


def test_unknown_versions_and_contradicting_flags_are_invalid():
    for version in (0, 4, 0xFFFF):
        batch = version_2_batch()
        struct.pack_into("<H", batch, 4, version)
        assert statuses(reseal(batch)) == (_format.ScanStatus.SCAN_BAD_VERSION,) * 3
    batch = encode([b"a", b"b"], ordering_keys=[b"x", None], attributes={"k": "v"}, base_offset=3)
    assert HEADER.unpack_from(batch)[4] & _format.ORDERING_KEY_NULLS
    struct.pack_into("<I", batch, 12, HEADER.unpack_from(batch)[4] & ~_format.ORDERING_KEYS)  # nulls of no column
    assert statuses(reseal(batch)) == (_format.ScanStatus.SCAN_BAD_FLAGS,) * 3
    # a version-2 batch without a flag of version 2 is valid, and read as version 1 would be
    plain = encode([b"a", b"b"], base_offset=3)
    struct.pack_into("<H", plain, 4, 2)
    assert statuses(reseal(plain)) == (_format.ScanStatus.SCAN_END,) * 3
    assert decode(plain).column("value").to_pylist() == [b"a", b"b"]


NEW_SECTIONS = ["value_validity", "ordering_key_validity", "ordering_key_offsets", "ordering_key_data", "attributes",
                "attribute_key_offsets", "attribute_key_data", "attribute_value_offsets", "attribute_value_data"]


@pytest.mark.parametrize("section", NEW_SECTIONS)
def test_the_crc_covers_the_new_sections(section):
    batch = version_2_batch()
    position = _format.batch_layout(bytes(batch), 0)[section]
    assert position > 0
    for bit in (0, 3):
        damaged = bytearray(batch)
        damaged[position] ^= 1 << bit
        assert statuses(damaged) == (_format.ScanStatus.SCAN_BAD_CRC,) * 3, (section, bit)


def damage(section: str, index: int, value: int) -> bytearray:
    """version_2_batch with int32 `index` of `section` set to `value`, its CRC made right again."""
    batch = version_2_batch()
    struct.pack_into("<i", batch, _format.batch_layout(bytes(batch), 0)[section] + 4 * index, value)
    return reseal(batch)


@pytest.mark.parametrize("section, index, value", [
    ("ordering_key_offsets", 0, 1),           # does not start at 0
    ("ordering_key_offsets", 3, 1 << 20),     # ends past the batch
    ("ordering_key_offsets", 3, -4),          # a negative length
    ("attributes", 0, -1),                    # a negative attribute_count
    ("attributes", 0, 1 << 28),               # more attributes than the batch holds
    ("attributes", 0, 1),                     # fewer: the sections end before the batch does
    ("attribute_key_offsets", 2, 1 << 16),
    ("attribute_value_offsets", 0, 8),
    ("value_offsets", 3, 1 << 16),            # version 1's sections, as before
])
def test_damaged_offsets_of_a_section_are_invalid_even_with_a_sound_crc(section, index, value):
    batch = damage(section, index, value)
    assert statuses(batch) == (_format.ScanStatus.SCAN_BAD_LAYOUT,) * 3
    assert "column sections" in _format.SCAN_REASONS[_format.ScanStatus.SCAN_BAD_LAYOUT]
    arrays = [np.zeros(2, np.int64) for _ in range(3)]
    assert _format.scan_batches(bytes(batch), 0, len(batch), -1, False, *arrays)[2] == \
        _format.ScanStatus.SCAN_BAD_LAYOUT, "found without the CRC check as well"
    assert _format.check_entry(bytes(batch), 0, len(batch), 3, 3, False) == _format.ScanStatus.SCAN_BAD_LAYOUT
    with pytest.raises(ValueError, match="column sections do not fit"):
        _format.batch_layout(bytes(batch), 0)
    with pytest.raises(ValueError, match="column sections do not fit"):
        to_record_batch(bytes(batch), 0)
    with pytest.raises(ValueError, match="column sections do not fit"):
        batch_attributes(bytes(batch), 0)


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
@given(value=st.none() | st.binary(max_size=300), key=st.none() | st.binary(max_size=40),
       timestamp=st.none() | st.integers(0, 2**62), log_append_time=st.booleans(),
       properties=st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4))
def test_message_size_is_the_encoders_size_of_a_one_message_batch(value, key, timestamp, log_append_time,
                                                                  properties):
    """send()'s backlog-quota check counts a message by message_size: exactly what the encoder writes."""
    source = make_source([value], None if key is None else [key], None if timestamp is None else [timestamp],
                         None if properties is None else [properties], now=1, log_append_time=log_append_time)
    event_time_column = timestamp is not None and log_append_time
    assert message_size(value, key, event_time_column, properties) == source.size(0, 1)
