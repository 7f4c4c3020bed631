"""Between Python values and the record-batch format: what `send_batch` accepts, normalised into the
encoder's columns, and a stored batch turned into a pyarrow.RecordBatch whose buffers are the segment's.

Inputs are used in place where their memory already has the format's shape (Arrow binary arrays, numpy
fixed-width records); a list of bytes is walked once in C. Decoding (`to_record_batch`, in C: see
_core/_arrow.pyx) wraps sections of the mapped segment, so the columns point into the map and keep it
mapped for as long as they are referenced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from seglog._core import _format
from seglog._core._arrow import SCHEMA  # noqa: F401 (re-exported: decoding)
from seglog._core._arrow import record_batch as to_record_batch  # noqa: F401 (re-exported: decoding)
from seglog._core._writer import BatchSource, Column
from seglog.errors import InvalidArgumentError, not_utf8

ACCEPTED_VALUES = ("a list of bytes, a pyarrow Binary/LargeBinary/String/LargeString array, "
                   "or a numpy array of fixed-width records")
MAX_TIMESTAMP = 2**63 - 1
SHORT_LIST = 16  # timestamps checked item by item in Python up to this many; numpy's whole-array checks beyond
TIMESTAMPS_ACCEPTED = ("one per value, ms since the epoch from 0 to 2**63 - 1: a sequence of ints (None for a "
                       "message without one), a numpy integer array, or a pyarrow integer or timestamp array "
                       "(null for a message without one)")


def make_source(values: Any, keys: Any, timestamps: Any, properties: Any, *, now: int,
                log_append_time: bool, event_times: list[int | None] | None = None, ordering_keys: Any = None,
                attributes: Mapping[str, str] | None = None) -> BatchSource:
    """Normalise the arguments of one send_batch call (or one drained accumulator) into a BatchSource.

    Values and keys may be None (null), each one. Timestamps: without them every message gets `now` (the
    append time); with them they are the messages' CreateTime and event time, or on a log_append_time
    topic only their event time. `event_times` (one per value, None for none given) gives event times apart
    from the timestamps, as Pulsar's messages carry them beside their publish time (the server): then
    `timestamps` is required. `ordering_keys`: one per value, in the forms keys take (None for none).
    `attributes`: a mapping of str to str stored once with the batch (opaque to storage; the server keeps
    its SEND's metadata there). Null values, ordering keys and attributes make a batch of format version 2
    (docs/FORMAT.md)."""
    value_column = binary_column(values, "values", allow_null=True, empty_nulls=True)
    n = value_column.count
    if n == 0:
        raise InvalidArgumentError("values", "no messages", "at least one message: a send_batch call is one "
                                   "record batch, and an empty one would have no MessageId to return")
    key_column = None if keys is None else binary_column(keys, "keys", allow_null=True, count=n)
    if event_times is None:
        stamps, events, flags = _timestamps(timestamps, n, now, log_append_time)
    else:
        stamps, events, flags = _separate_event_times(timestamps, event_times, n, now, log_append_time)
    if properties is None and ordering_keys is None and attributes is None:  # the common call, kept short
        return BatchSource(value_column, key_column, stamps, events, flags, now)
    entries = prop_keys = prop_values = None
    if properties is not None:
        entries, prop_keys, prop_values = _properties(properties, n)
    ordering_key_column = None if ordering_keys is None else binary_column(
        ordering_keys, "ordering_keys", allow_null=True, count=n, empty_nulls=True)
    attribute_keys, attribute_values = _attributes(attributes)
    return BatchSource(value_column, key_column, stamps, events, flags, now, entries, prop_keys, prop_values,
                       ordering_key_column, attribute_keys, attribute_values)


def checked_source(values: Any, keys: Any, timestamps: Any, properties: Any) -> BatchSource:
    """A whole send_batch call checked and normalised before it is split among partitions (an error names
    the element by its index in the call). Not for writing: each partition's part is stamped by its writer."""
    return make_source(values, keys, timestamps, properties, now=0, log_append_time=False)


def binary_column(data: Any, argument: str, *, allow_null: bool, count: int | None = None,
                  empty_nulls: bool = False) -> Column:
    """A column of `data` in any accepted form. `empty_nulls`: a null item of a pyarrow array that spans
    bytes (Arrow allows it) is stored without them, as format version 2 stores a null value or ordering key;
    keys keep version 1's way (the bytes as given), so that a batch of version 1 is written as it was."""
    if isinstance(data, list):
        column = Column.from_list(data, argument, allow_null)
    elif isinstance(data, (pa.Array, pa.ChunkedArray)):
        column = _arrow_column(data, argument, allow_null, empty_nulls)
    elif isinstance(data, np.ndarray):
        column = _numpy_column(data, argument, allow_null)
    elif isinstance(data, tuple):
        column = Column.from_list(list(data), argument, allow_null)
    else:
        raise InvalidArgumentError(argument, type(data).__name__, ACCEPTED_VALUES)
    if count is not None and column.count != count:
        raise InvalidArgumentError(argument, f"{column.count} items", f"one per value ({count})")
    return column


def _arrow_column(array: pa.Array | pa.ChunkedArray, argument: str, allow_null: bool,
                  empty_nulls: bool = False) -> Column:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type in (pa.string(), pa.large_string()):
        array = array.view(pa.binary() if array.type == pa.string() else pa.large_binary())
    if array.type not in (pa.binary(), pa.large_binary()):
        raise InvalidArgumentError(argument, f"pyarrow array of {array.type}", ACCEPTED_VALUES)
    n = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    offset_type = np.int32 if array.type == pa.binary() else np.int64
    # numpy's stubs take only the built-in buffers before Python 3.12 (no PEP 688 protocol)
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type,  # type: ignore[call-overload]
                            count=array.offset + n + 1)[array.offset:]
    data = (np.frombuffer(data_buffer, dtype=np.uint8)  # type: ignore[call-overload]  # (as offsets)
            if data_buffer is not None else np.zeros(0, np.uint8))
    validity = None
    if array.null_count:
        if not allow_null:
            first = array.is_null().index(True).as_py()
            raise InvalidArgumentError(f"{argument}[{first}]", None, "bytes; only keys, values and ordering keys "
                                       "may be null")
        present = array.is_valid().to_numpy(zero_copy_only=False)
        if empty_nulls and np.diff(offsets)[~present].any():  # null items holding bytes, as Arrow allows
            offsets, data = _without_null_bytes(offsets, data, present)
        validity = np.packbits(present, bitorder="little")
    return Column.from_offsets(offsets, data, argument, validity)


def _without_null_bytes(offsets: np.ndarray, data: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The offsets and data of a binary column with the bytes of its null items left out: stored, a null item
    has none (docs/FORMAT.md). A rare input, so a copy."""
    lengths = np.diff(offsets)
    kept = data[offsets[0]:offsets[-1]][np.repeat(present, lengths)]
    new_offsets = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(np.where(present, lengths, 0), out=new_offsets[1:])
    return new_offsets, kept


def _numpy_column(array: np.ndarray, argument: str, allow_null: bool = False) -> Column:
    if array.dtype == object:
        return Column.from_list(array.tolist(), argument, allow_null)
    if array.ndim not in (1, 2) or array.dtype.hasobject:
        raise InvalidArgumentError(argument, f"numpy array of shape {array.shape} and dtype {array.dtype}",
                                   "a 1-D array of a fixed-size dtype (each element one record) or a 2-D "
                                   "array (each row one record)")
    array = np.ascontiguousarray(array)
    count = array.shape[0]
    width = array.itemsize * (array.shape[1] if array.ndim == 2 else 1)
    return Column.from_fixed(array.reshape(-1).view(np.uint8), width, count, argument)


def _timestamps(timestamps: Any, n: int, now: int, log_append_time: bool):
    """(the timestamp column, or None for `now` on every message; the event-time column or None; flags)."""
    flags = _format.LOG_APPEND_TIME if log_append_time else 0
    if timestamps is None:
        return None, None, flags
    given, missing = _given_timestamps(timestamps)
    if len(given) != n:
        raise InvalidArgumentError("timestamps", f"{len(given)} timestamps", f"one per value ({n})")
    event_times = given if missing is None else np.where(missing, _format.NO_EVENT_TIME, given)
    if log_append_time:
        return None, event_times, flags
    if missing is None:
        return given, None, flags | _format.EVENT_TIME_IS_TIMESTAMP
    return np.where(missing, now, given), event_times, flags


def _separate_event_times(timestamps: Any, event_times: list[int | None], n: int, now: int, log_append_time: bool):
    """_timestamps' result for timestamps with event times of their own (the event-time column is written)."""
    if len(event_times) != n:
        raise InvalidArgumentError("event_times", f"{len(event_times)} event times", f"one per value ({n})")
    events = np.array([_format.NO_EVENT_TIME if t is None else t for t in event_times], dtype=np.int64)
    flags = _format.LOG_APPEND_TIME if log_append_time else 0
    if log_append_time:
        return None, events, flags
    if timestamps is None:
        raise InvalidArgumentError("timestamps", None, "one per value when event_times are given")
    given, missing = _given_timestamps(timestamps)
    if len(given) != n:
        raise InvalidArgumentError("timestamps", f"{len(given)} timestamps", f"one per value ({n})")
    return (given if missing is None else np.where(missing, now, given)), events, flags


def _given_timestamps(timestamps: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(the timestamps as int64, a mask of those not given or None if all were): None in a list or a null
    in a pyarrow array stands for a message without one, which gets the append time."""
    if isinstance(timestamps, (list, tuple)) and any(t is None for t in timestamps):
        missing = np.array([t is None for t in timestamps], dtype=bool)
        return _timestamp_array([0 if t is None else t for t in timestamps]), missing
    if isinstance(timestamps, pa.ChunkedArray):
        timestamps = timestamps.combine_chunks()
    if isinstance(timestamps, pa.Array) and timestamps.null_count:
        missing = timestamps.is_null().to_numpy(zero_copy_only=False)
        return _timestamp_array(timestamps.fill_null(0)), missing
    return _timestamp_array(timestamps), None


def _timestamp_array(timestamps: Any) -> np.ndarray:
    if type(timestamps) is list and len(timestamps) <= SHORT_LIST and all(
            type(t) is int and 0 <= t <= MAX_TIMESTAMP for t in timestamps):
        # (a server's SEND of one message comes here for each message: numpy's asarray, max and min of a
        # one-item list cost it 4 us a message, this check a tenth of that)
        return np.array(timestamps, dtype=np.int64)
    if isinstance(timestamps, pa.Array):
        if pa.types.is_timestamp(timestamps.type):
            timestamps = timestamps.cast(pa.timestamp("ms", tz=timestamps.type.tz)).cast(pa.int64())
        timestamps = timestamps.to_numpy(zero_copy_only=False)
    try:
        array = np.asarray(timestamps)
    except (TypeError, ValueError, OverflowError):
        array = None
    if array is None or array.ndim != 1:
        raise InvalidArgumentError("timestamps", type(timestamps).__name__, TIMESTAMPS_ACCEPTED)
    if len(array) and (array.dtype.kind not in "iu" or array.max() > MAX_TIMESTAMP or array.min() < 0):
        items = timestamps if isinstance(timestamps, (list, tuple)) else array.tolist()
        raise _bad_timestamp(items, array.dtype)
    return array.astype(np.int64, copy=False)


def _bad_timestamp(items: Any, dtype: np.dtype) -> InvalidArgumentError:
    """The error naming the first of `items` that is not an int from 0 to MAX_TIMESTAMP."""
    for i, stamp in enumerate(items):
        if isinstance(stamp, bool) or not isinstance(stamp, int) or not 0 <= stamp <= MAX_TIMESTAMP:
            return InvalidArgumentError(f"timestamps[{i}]", stamp, TIMESTAMPS_ACCEPTED)
    return InvalidArgumentError("timestamps", f"an array of {dtype}", TIMESTAMPS_ACCEPTED)


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


def _attributes(attributes: Mapping[str, str] | None) -> tuple[Column | None, Column | None]:
    """The key and value columns of a batch's attributes (None, None for none)."""
    if not attributes:
        return None, None
    if not isinstance(attributes, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in attributes.items()):
        raise InvalidArgumentError("attributes", attributes, "a mapping of str to str, or None")
    try:
        keys = [k.encode() for k in attributes]
        values = [v.encode() for v in attributes.values()]
    except UnicodeEncodeError as error:
        raise not_utf8("attributes", error) from None
    return Column.from_list(keys, "attributes keys"), Column.from_list(values, "attributes values")


def _arrow_properties(array: pa.MapArray, n: int):
    if len(array) != n:
        raise InvalidArgumentError("properties", f"{len(array)} maps", f"one per value ({n})")
    offsets = array.offsets.to_numpy().astype(np.int64)
    keys, values = array.keys, array.items
    return (offsets, _arrow_column(keys, "properties keys", False),
            _arrow_column(values.fill_null(""), "properties values", False))
