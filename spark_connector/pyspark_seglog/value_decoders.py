"""Decoders of a binary column of message values into one typed column, a decoder per Pulsar schema type:
JSON through pyarrow's JSON reader (vectorized), Avro through fastavro (C-accelerated, per value), STRING as
a UTF-8 check, the fixed-width primitives as a NumPy view of the values' bytes (Pulsar writes them big-endian).

A value that does not decode raises UndecodableValue with its row in the column; the caller names its offset."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    TimestampNTZType,
    TimestampType,
)

from pyspark_seglog.avro_types import MappedType, contains_map, mapped_type, plain_logical_types

_DAY_MS = 86_400_000
_DAY_US = 86_400_000_000


class UndecodableValue(Exception):
    """The value in row `row` of the column does not decode: `reason` says why."""

    def __init__(self, row: int, reason: str) -> None:
        super().__init__(reason)
        self.row = row
        self.reason = reason


@dataclass(frozen=True)
class _Primitive:
    """A Pulsar primitive schema: its Spark type, its width in bytes and how the big-endian bytes become Spark's
    Arrow values (Pulsar's Java schemas: DATE, TIME and TIMESTAMP are ms since the epoch; INSTANT seconds and
    nanoseconds; LOCAL_DATE a day number; LOCAL_TIME ns of the day; LOCAL_DATE_TIME a day and ns of that day)."""
    spark: DataType
    width: int
    convert: Callable[[np.ndarray], pa.Array]  # the values' bytes, packed (uint8) -> Arrow values


def _be(dtype: str, arrow: pa.DataType) -> Callable[[np.ndarray], pa.Array]:
    return lambda data: pa.array(data.view(dtype).astype(dtype[1:]), arrow)


def _date_from_ms(data: np.ndarray) -> pa.Array:
    return pa.array((data.view(">i8") // _DAY_MS).astype(np.int32), pa.date32())


def _instant(data: np.ndarray) -> pa.Array:
    pairs = data.view(np.dtype([("seconds", ">i8"), ("nanos", ">i4")]))
    micros = pairs["seconds"].astype(np.int64) * 1_000_000 + pairs["nanos"].astype(np.int64) // 1000
    return pa.array(micros, pa.timestamp("us", tz="UTC"))


def _local_date_time(data: np.ndarray) -> pa.Array:
    pairs = data.view(np.dtype([("day", ">i8"), ("nanos", ">i8")]))
    micros = pairs["day"].astype(np.int64) * _DAY_US + pairs["nanos"].astype(np.int64) // 1000
    return pa.array(micros, pa.timestamp("us"))


def _timestamp_from_ms(data: np.ndarray) -> pa.Array:
    return pa.array(data.view(">i8").astype(np.int64) * 1000, pa.timestamp("us", tz="UTC"))


PRIMITIVES: dict[str, _Primitive] = {
    "BOOLEAN": _Primitive(BooleanType(), 1, lambda data: pa.array(data != 0)),
    "INT8": _Primitive(ByteType(), 1, _be(">i1", pa.int8())),
    "INT16": _Primitive(ShortType(), 2, _be(">i2", pa.int16())),
    "INT32": _Primitive(IntegerType(), 4, _be(">i4", pa.int32())),
    "INT64": _Primitive(LongType(), 8, _be(">i8", pa.int64())),
    "FLOAT": _Primitive(FloatType(), 4, _be(">f4", pa.float32())),
    "DOUBLE": _Primitive(DoubleType(), 8, _be(">f8", pa.float64())),
    "DATE": _Primitive(DateType(), 8, _date_from_ms),
    "TIME": _Primitive(LongType(), 8, _be(">i8", pa.int64())),  # ms: Spark's Arrow path has no time of day
    "TIMESTAMP": _Primitive(TimestampType(), 8, _timestamp_from_ms),
    "INSTANT": _Primitive(TimestampType(), 12, _instant),
    "LOCAL_DATE": _Primitive(DateType(), 8, lambda data: pa.array(data.view(">i8").astype(np.int32), pa.date32())),
    "LOCAL_TIME": _Primitive(LongType(), 8, _be(">i8", pa.int64())),  # ns of the day
    "LOCAL_DATE_TIME": _Primitive(TimestampNTZType(), 16, _local_date_time),
}


def primitive_decoder(schema_type: str) -> Callable[[pa.Array], pa.Array]:
    """Decode values of a fixed-width primitive schema; a value of another width is undecodable."""
    primitive = PRIMITIVES[schema_type]

    def decode(values: pa.Array) -> pa.Array:
        present = values.drop_null()
        lengths = np.diff(_offsets(present))
        wrong = np.flatnonzero(lengths != primitive.width)
        if wrong.size:
            row = _row_of_present(values, int(wrong[0]))
            raise UndecodableValue(row, f"{lengths[wrong[0]]} bytes, not the {primitive.width} of a {schema_type}")
        return with_nulls(primitive.convert(_value_bytes(present)), values)

    return decode


def string_decoder(values: pa.Array) -> pa.Array:
    """UTF-8 text (Pulsar's STRING schema); a value that is not UTF-8 is undecodable."""
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid:
        for row, value in enumerate(values.to_pylist()):
            if value is not None:
                try:
                    value.decode()
                except UnicodeDecodeError as error:
                    raise UndecodableValue(row, f"not UTF-8 ({error.reason} at byte {error.start})") from None
        raise


class JsonDecoder:
    """Pulsar's JSON schema: a JSON object per value, its fields typed by the schema's Avro definition. The
    values become one newline-delimited document (a newline in valid JSON is whitespace, so each value's own
    become spaces) read by pyarrow's JSON reader with the record's Arrow type as explicit schema: no Python per
    value. A record with a map (which that reader cannot build) is read with json.loads per value."""

    def __init__(self, mapped: MappedType) -> None:
        self._mapped = mapped
        self._vectorized = not contains_map(mapped.raw)

    def __call__(self, values: pa.Array) -> pa.Array:
        present = values.drop_null()
        decoded = self._read_all(present) if self._vectorized else None
        if decoded is None:
            decoded = self._read_each(present, values)
        return self._mapped.from_raw(with_nulls(decoded, values))

    def _read_all(self, present: pa.Array) -> pa.Array | None:
        """The values decoded at once; None if any does not decode (each is then decoded alone, to name it)."""
        if not len(present):
            return pa.array([], self._mapped.raw)
        nothing = pa.repeat(pa.scalar(b"", pa.binary()), len(present))
        document = pc.binary_join_element_wise(present, nothing, b"\n")  # type: ignore[call-overload]  # (stubs)
        text = _value_bytes(document).copy()
        text[(text == ord("\n")) | (text == ord("\r"))] = ord(" ")  # in valid JSON, whitespace
        text[_offsets(document)[1:] - _offsets(document)[0] - 1] = ord("\n")  # each value's own line
        fields = [self._mapped.raw.field(i) for i in range(self._mapped.raw.num_fields)]
        try:
            table = pa_json.read_json(
                pa.BufferReader(pa.py_buffer(text)),  # type: ignore[arg-type]  # (stubs: any file, a NativeFile too)
                read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(text), 1 << 20)),
                parse_options=pa_json.ParseOptions(explicit_schema=pa.schema(fields),
                                                   unexpected_field_behavior="ignore"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(present):
            return None
        columns = [table.column(field.name).combine_chunks() for field in fields]
        return pa.StructArray.from_arrays(columns, fields=fields)

    def _read_each(self, present: pa.Array, values: pa.Array) -> pa.Array:
        records = []
        for row, value in enumerate(cast("list[bytes]", present.to_pylist())):  # (present: no nulls)
            try:
                record = json.loads(value)
            except ValueError as error:
                raise UndecodableValue(_row_of_present(values, row), f"not JSON ({error})") from None
            if not isinstance(record, dict):
                raise UndecodableValue(_row_of_present(values, row), f"not a JSON object: {value[:40]!r}")
            records.append(record)
        return _records_array(records, self._mapped.raw, lambda row: _row_of_present(values, row))


class AvroDecoder:
    """Pulsar's AVRO schema: schemaless Avro binary per value, decoded with fastavro. Each value is read with
    the schema version it was written with (`versions`, None for a message written without one: the query's)
    as the writer's schema and the query's version as the reader's, so data written before a compatible schema
    change reads as the query's record, as Pulsar's own consumers resolve it."""

    def __init__(self, mapped: MappedType, definition: str, version: int,
                 writer_definition: Callable[[int], str]) -> None:
        from fastavro import parse_schema
        self._mapped = mapped
        self._version = version
        self._writer_definition = writer_definition
        self._reader = parse_schema(plain_logical_types(json.loads(definition)), named_schemas={})
        self._resolved: dict[int, tuple[Any, Any]] = {version: (self._reader, None)}

    def __call__(self, values: pa.Array, versions: pa.Array | None) -> pa.Array:
        present = values.drop_null()
        rows = np.flatnonzero(pc.is_valid(values).to_numpy(zero_copy_only=False))  # of the present values
        written = np.full(len(rows), self._version, np.int64) if versions is None else \
            versions.fill_null(self._version).to_numpy(zero_copy_only=False)[rows]
        if not len(rows) or (written == written[0]).all():  # one version: the common case
            decoded = self._decode_run(present, int(written[0]) if len(rows) else self._version, rows)
        else:  # each version's values decoded together, then put back in order
            order = np.argsort(written, kind="stable")
            runs = []
            for version in np.unique(written):
                indices = order[written[order] == version]
                runs.append(self._decode_run(present.take(indices), int(version), rows[indices]))
            decoded = pa.concat_arrays(runs).take(np.argsort(order, kind="stable"))
        return self._mapped.from_raw(with_nulls(decoded, values))

    def _decode_run(self, present: pa.Array, version: int, rows: np.ndarray) -> pa.Array:
        """Values (no nulls, in `rows` of the column) all written with `version`, read one after another from
        their packed bytes: each record must end where its value does."""
        from fastavro import schemaless_reader
        if not len(present):
            return pa.array([], self._mapped.raw)
        writer, reader = self._schemas(int(rows[0]), version)
        stream = io.BytesIO(_value_bytes(present).tobytes())
        records: list[Any] = []
        ends = (_offsets(present)[1:] - _offsets(present)[0]).tolist()
        try:
            for end in ends:
                records.append(schemaless_reader(stream, writer, reader))
                if stream.tell() != end:
                    break
        except Exception as error:  # noqa: BLE001 (fastavro raises what its reads meet: EOF, index, unicode)
            raise UndecodableValue(int(rows[len(records)]), f"not Avro of schema version {version} "
                                                            f"({type(error).__name__}: {error})") from None
        index = len(records) - 1
        if stream.tell() != ends[index]:  # the last record read did not end where its value does
            value_end, record_end = ends[index], stream.tell()
            raise UndecodableValue(int(rows[index]), f"{value_end - record_end} bytes left over after a record of "
                                   f"schema version {version}: written with another schema" if record_end < value_end
                                   else f"the record of schema version {version} runs past the value's end: written "
                                   "with another schema")
        return _records_array(records, self._mapped.raw, lambda index: int(rows[index]))

    def _schemas(self, row: int, version: int) -> tuple[Any, Any]:
        """(writer's schema, reader's schema or None when it is the writer's) for values of `version`."""
        if version not in self._resolved:
            from fastavro import parse_schema
            try:
                definition = self._writer_definition(version)
            except LookupError as error:
                raise UndecodableValue(row, str(error)) from None
            self._resolved[version] = (parse_schema(plain_logical_types(json.loads(definition)),
                                                    named_schemas={}), self._reader)
        return self._resolved[version]


def record_type(definition: str) -> MappedType:
    """The Spark type of a JSON or AVRO schema's definition (an Avro schema)."""
    return mapped_type(json.loads(definition))


def with_nulls(decoded: pa.Array, values: pa.Array) -> pa.Array:
    """`decoded`, the values present in `values` decoded, placed back among its nulls."""
    if not values.null_count:
        return decoded
    present = pc.is_valid(values).to_numpy(zero_copy_only=False)
    rows = np.cumsum(present) - 1
    return decoded.take(pa.array(rows, pa.int64(), mask=~present))


def _value_bytes(values: pa.Array) -> np.ndarray:
    """The bytes of a binary array's values (without nulls), one after another: a view of its data buffer."""
    data = values.buffers()[2]
    if data is None or not len(values):
        return np.empty(0, np.uint8)
    offsets = _offsets(values)
    return np.frombuffer(memoryview(data), np.uint8)[offsets[0]:offsets[-1]]


def _offsets(values: pa.Array) -> np.ndarray:
    """A binary array's value offsets (int32: a record batch column's binary is never large)."""
    return np.frombuffer(memoryview(values.buffers()[1] or b""), np.int32, len(values) + 1, offset=values.offset * 4)


def _row_of_present(values: pa.Array, index: int) -> int:
    """The row in `values` of its `index`-th present value."""
    if not values.null_count:
        return index
    return int(np.flatnonzero(pc.is_valid(values).to_numpy(zero_copy_only=False))[index])


def _records_array(records: list, arrow_type: pa.DataType, row_of: Callable[[int], int]) -> pa.Array:
    """Decoded records as an Arrow array; a record whose values do not fit the type is undecodable."""
    try:
        return pa.array(records, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        for row, record in enumerate(records):
            try:
                pa.array([record], arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
                raise UndecodableValue(row_of(row), f"does not fit the schema ({error})") from None
        raise
