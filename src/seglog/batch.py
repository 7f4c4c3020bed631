"""Between Python values and the record-batch format: what `send_batch` accepts, normalised into the
encoder's columns, and a stored batch turned into a pyarrow.RecordBatch whose buffers are the segment's.

Inputs are used in place where their memory already has the format's shape (Arrow binary arrays, numpy
fixed-width records); a list of bytes is walked once in C. Decoding wraps slices of the mapped segment,
so key and value columns point into the map and keep it alive for as long as they are referenced."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from seglog._core import _format
from seglog._core._writer import BatchSource, Column
from seglog.errors import InvalidArgumentError, not_utf8

PROPERTIES_TYPE = pa.map_(pa.string(), pa.string())
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
SCHEMA = pa.schema([
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", TIMESTAMP_TYPE, nullable=False),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary(), nullable=False),
    pa.field("properties", PROPERTIES_TYPE),
])
HEADER = struct.Struct("<IHHIIqqqiIQq")
_I32 = struct.Struct("<i")
_MAP_ENTRIES = [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string())]

ACCEPTED_VALUES = ("a list of bytes, a pyarrow Binary/LargeBinary/String/LargeString array, "
                   "or a numpy array of fixed-width records")


def make_source(values: Any, keys: Any, timestamps: Any, properties: Any, *, now: int,
                log_append_time: bool) -> BatchSource:
    """Normalise the arguments of one send_batch call (or one drained accumulator) into a BatchSource.

    Timestamps: without them every message gets `now` (the append time); with them they are the
    messages' CreateTime and event time, or on a log_append_time topic only their event time."""
    value_column = binary_column(values, "values", allow_null=False)
    n = value_column.count
    key_column = None if keys is None else binary_column(keys, "keys", allow_null=True, count=n)
    stamps, event_times, flags = _timestamps(timestamps, n, now, log_append_time)
    if properties is None:
        return BatchSource(value_column, key_column, stamps, event_times, flags)
    entries, prop_keys, prop_values = _properties(properties, n)
    return BatchSource(value_column, key_column, stamps, event_times, flags, entries, prop_keys, prop_values)


def binary_column(data: Any, argument: str, *, allow_null: bool, count: int | None = None) -> Column:
    if isinstance(data, list):
        column = Column.from_list(data, argument, allow_null)
    elif isinstance(data, (pa.Array, pa.ChunkedArray)):
        column = _arrow_column(data, argument, allow_null)
    elif isinstance(data, np.ndarray):
        column = _numpy_column(data, argument)
    elif isinstance(data, tuple):
        column = Column.from_list(list(data), argument, allow_null)
    else:
        raise InvalidArgumentError(argument, type(data).__name__, ACCEPTED_VALUES)
    if count is not None and column.count != count:
        raise InvalidArgumentError(argument, f"{column.count} items", f"one per value ({count})")
    return column


def _arrow_column(array: pa.Array | pa.ChunkedArray, argument: str, allow_null: bool) -> Column:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type in (pa.string(), pa.large_string()):
        array = array.view(pa.binary() if array.type == pa.string() else pa.large_binary())
    if array.type not in (pa.binary(), pa.large_binary()):
        raise InvalidArgumentError(argument, f"pyarrow array of {array.type}", ACCEPTED_VALUES)
    n = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    offset_type = np.int32 if array.type == pa.binary() else np.int64
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type, count=array.offset + n + 1)[array.offset:]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    validity = None
    if array.null_count:
        if not allow_null:
            first = array.is_null().index(True).as_py()
            raise InvalidArgumentError(f"{argument}[{first}]", None, "bytes; only keys may be null")
        validity = np.packbits(array.is_valid().to_numpy(zero_copy_only=False), bitorder="little")
    return Column.from_offsets(offsets, data, argument, validity)


def _numpy_column(array: np.ndarray, argument: str) -> Column:
    if array.dtype == object:
        return Column.from_list(array.tolist(), argument, False)
    if array.ndim not in (1, 2) or array.dtype.hasobject:
        raise InvalidArgumentError(argument, f"numpy array of shape {array.shape} and dtype {array.dtype}",
                                   "a 1-D array of a fixed-size dtype (each element one record) or a 2-D "
                                   "array (each row one record)")
    array = np.ascontiguousarray(array)
    count = array.shape[0]
    width = array.itemsize * (array.shape[1] if array.ndim == 2 else 1)
    return Column.from_fixed(array.reshape(-1).view(np.uint8), width, count, argument)


def _timestamps(timestamps: Any, n: int, now: int, log_append_time: bool):
    flags = _format.LOG_APPEND_TIME if log_append_time else 0
    if timestamps is None:
        return np.full(n, now, dtype=np.int64), None, flags
    if isinstance(timestamps, list) and any(t is None for t in timestamps):
        given = np.array([_format.NO_EVENT_TIME if t is None else t for t in timestamps], dtype=np.int64)
        missing = given == _format.NO_EVENT_TIME
    else:
        given = _timestamp_array(timestamps)
        missing = None
    if len(given) != n:
        raise InvalidArgumentError("timestamps", f"{len(given)} timestamps", f"one per value ({n})")
    if ((given if missing is None else given[~missing]) < 0).any():
        raise InvalidArgumentError("timestamps", "a negative timestamp", "ms since the epoch, >= 0")
    if log_append_time:
        return np.full(n, now, dtype=np.int64), given, flags
    if missing is None:
        return given, None, flags | _format.EVENT_TIME_IS_TIMESTAMP
    return np.where(missing, now, given), given, flags


def _timestamp_array(timestamps: Any) -> np.ndarray:
    if isinstance(timestamps, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_timestamp(timestamps.type):
            timestamps = timestamps.cast(pa.timestamp("ms", tz=timestamps.type.tz)).cast(pa.int64())
        timestamps = timestamps.to_numpy()
    try:
        array = np.asarray(timestamps)
    except (TypeError, ValueError):
        array = None
    if array is None or array.ndim != 1 or array.dtype.kind not in "iu" and len(array):
        raise InvalidArgumentError("timestamps", type(timestamps).__name__,
                                   "a sequence of ints (ms since the epoch), a numpy int array or a pyarrow "
                                   "int64 or timestamp array, one per value")
    return array.astype(np.int64, copy=False)


def _properties(properties: Any, n: int):
    if isinstance(properties, pa.MapArray):
        return _arrow_properties(properties, n)
    if not isinstance(properties, (list, tuple)) or len(properties) != n:
        raise InvalidArgumentError("properties", type(properties).__name__,
                                   f"a list of {n} dicts of str to str (None for none), or a pyarrow map array")
    entries = np.zeros(n + 1, dtype=np.int64)
    keys: list[bytes] = []
    values: list[bytes] = []
    for i, item in enumerate(properties):
        if item:
            if not isinstance(item, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in item.items()):
                raise InvalidArgumentError(f"properties[{i}]", item, "a dict mapping str to str, or None")
            try:
                keys.extend(k.encode() for k in item)
                values.extend(v.encode() for v in item.values())
            except UnicodeEncodeError as error:
                raise not_utf8(f"properties[{i}]", error) from None
        entries[i + 1] = len(keys)
    return entries, Column.from_list(keys, "properties keys"), Column.from_list(values, "properties values")


def _arrow_properties(array: pa.MapArray, n: int):
    if len(array) != n:
        raise InvalidArgumentError("properties", f"{len(array)} maps", f"one per value ({n})")
    offsets = array.offsets.to_numpy().astype(np.int64)
    keys, values = array.keys, array.items
    return (offsets, _arrow_column(keys, "properties keys", False),
            _arrow_column(values.fill_null(""), "properties values", False))


def to_record_batch(whole: pa.Buffer, mapped: Any, position: int) -> pa.RecordBatch:
    """The batch at `position` of a mapped segment as a RecordBatch over the map's own memory.

    `whole` is a pyarrow Buffer over the entire map (it keeps the map alive); `mapped` is the map itself,
    for reading the few integers that locate the columns."""
    header = HEADER.unpack_from(mapped, position)
    base_offset, n = header[5], header[8]
    layout = _format.batch_layout(mapped, position)

    def section(start: int, length: int) -> pa.Buffer:
        return whole.slice(position + start, length)

    def binary(offsets_at: int, data_at: int, count: int, validity: pa.Buffer | None, type_=pa.binary()):
        data_length = _I32.unpack_from(mapped, position + offsets_at + 4 * count)[0]
        return pa.Array.from_buffers(type_, count, [validity, section(offsets_at, 4 * (count + 1)),
                                                    section(data_at, data_length)])

    offsets = pa.array(np.arange(base_offset, base_offset + n, dtype=np.int64))
    timestamps = pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, section(layout["timestamps"], 8 * n)])
    if layout["key_offsets"] >= 0:
        validity = section(layout["key_validity"], (n + 7) // 8) if layout["key_validity"] >= 0 else None
        keys = binary(layout["key_offsets"], layout["key_data"], n, validity)
    else:
        keys = pa.nulls(n, pa.binary())
    values = binary(layout["value_offsets"], layout["value_data"], n, None)
    if layout["property_entries"] >= 0:
        m = layout["property_entry_count"]
        entries = pa.StructArray.from_arrays(
            [binary(layout["property_key_offsets"], layout["property_key_data"], m, None, pa.string()),
             binary(layout["property_value_offsets"], layout["property_value_data"], m, None, pa.string())],
            fields=_MAP_ENTRIES)
        properties = pa.Array.from_buffers(PROPERTIES_TYPE, n, [None, section(layout["property_entries"],
                                                                              4 * (n + 1))],
                                           children=[entries])
    else:
        properties = pa.nulls(n, PROPERTIES_TYPE)
    return pa.RecordBatch.from_arrays([offsets, timestamps, keys, values, properties], schema=SCHEMA)
