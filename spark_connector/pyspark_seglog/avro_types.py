"""Avro schemas as Spark types, as Spark's own Avro source maps them (spark-avro's SchemaConverters), and as
the Arrow types the decoders build before the final cast to Spark's.

    Avro                                       Spark
    null                                       void
    boolean, int, long, float, double          boolean, int, bigint, float, double
    string (uuid too), enum                    string
    bytes, fixed                               binary
    decimal (bytes or fixed)                   decimal(precision, scale)
    date (int)                                 date
    timestamp-millis, timestamp-micros (long)  timestamp
    local-timestamp-millis, -micros (long)     timestamp_ntz
    time-millis, time-micros, other logical    the underlying int or bigint, as in Spark
    record                                     struct of its fields
    array, map                                 array, map<string, ...>
    union of null and one type                 that type (nullable)
    union of int and long / float and double   bigint / double

Every field is nullable: a JSON message may leave any field out. Unions of other types (Spark makes a struct
of members) and recursive records are refused with an error naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from seglog.errors import InvalidArgumentError

_PRIMITIVES: dict[str, tuple[DataType, pa.DataType]] = {
    "null": (NullType(), pa.null()),
    "boolean": (BooleanType(), pa.bool_()),
    "int": (IntegerType(), pa.int32()),
    "long": (LongType(), pa.int64()),
    "float": (FloatType(), pa.float32()),
    "double": (DoubleType(), pa.float64()),
    "bytes": (BinaryType(), pa.binary()),
    "string": (StringType(), pa.string()),
}
# logical types decoded as their underlying int and long, then cast in Arrow: (underlying, Spark type, Arrow type
# the integers are cast to, which is in the schema's unit)
_TIME_LOGICAL: dict[tuple[str, str], tuple[DataType, pa.DataType]] = {
    ("int", "date"): (DateType(), pa.date32()),
    ("long", "timestamp-millis"): (TimestampType(), pa.timestamp("ms", tz="UTC")),
    ("long", "timestamp-micros"): (TimestampType(), pa.timestamp("us", tz="UTC")),
    ("long", "local-timestamp-millis"): (TimestampNTZType(), pa.timestamp("ms")),
    ("long", "local-timestamp-micros"): (TimestampNTZType(), pa.timestamp("us")),
}
_MAX_DECIMAL_PRECISION = 38  # Spark's


@dataclass(frozen=True)
class MappedType:
    """An Avro schema's Spark type, and the Arrow types its values pass through: `raw` is what a decoder
    builds (dates and timestamps as integers), `unit` the same with them as dates and timestamps in the
    schema's units, and `arrow` Spark's own Arrow type, which PySpark checks the rows against."""
    spark: DataType
    raw: pa.DataType
    unit: pa.DataType

    @property
    def arrow(self) -> pa.DataType:
        return to_arrow_type(self.spark, timezone="UTC")  # PySpark builds a read's Arrow schema in UTC

    def from_raw(self, decoded: pa.Array) -> pa.Array:
        """Decoded values (of type `raw`) as Spark's Arrow type: casts that reinterpret integers as dates and
        timestamps, then convert timestamps to microseconds."""
        if self.unit != self.raw:
            decoded = decoded.cast(self.unit)
        return decoded if decoded.type == self.arrow else decoded.cast(self.arrow)


def mapped_type(schema: Any) -> MappedType:
    """The Spark type of an Avro schema (parsed JSON); InvalidArgumentError naming the field that Spark has
    no type for."""
    return _Mapper().map(schema, "value", "")


def plain_logical_types(schema: Any) -> Any:
    """The schema without the logical types the decoders leave to Arrow (all but decimal): the Avro decoder
    then yields plain integers and strings, not datetime and UUID objects."""
    if isinstance(schema, list):
        return [plain_logical_types(member) for member in schema]
    if not isinstance(schema, Mapping):
        return schema
    plain = {key: value for key, value in schema.items()
             if key != "logicalType" or value == "decimal"}
    for key in ("type", "items", "values"):
        if key in plain:
            plain[key] = plain_logical_types(plain[key])
    if "fields" in plain:
        plain["fields"] = [{**field, "type": plain_logical_types(field["type"])} for field in plain["fields"]]
    return plain


def contains_map(arrow_type: pa.DataType) -> bool:
    """Whether a map is anywhere in the type (pyarrow's JSON reader has no conversion to maps)."""
    if isinstance(arrow_type, pa.MapType):
        return True
    if isinstance(arrow_type, pa.ListType):
        return contains_map(arrow_type.value_type)
    if isinstance(arrow_type, pa.StructType):
        return any(contains_map(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    return False


class _Mapper:
    """One walk of a schema: the named types seen so far, the records being mapped (a record inside itself
    is recursive: Spark has no type for it)."""

    def __init__(self) -> None:
        self._named: dict[str, Any] = {}
        self._open: set[str] = set()

    def map(self, schema: Any, path: str, namespace: str) -> MappedType:
        if isinstance(schema, list):
            return self._union(schema, path, namespace)
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _primitive(schema)
            return self._reference(schema, path, namespace)
        if not isinstance(schema, Mapping) or "type" not in schema:
            raise _unsupported(path, schema, "an Avro schema")
        kind = schema["type"]
        if isinstance(kind, (list, Mapping)):  # {"type": {...}}: a schema wrapped in another
            return self.map(kind, path, namespace)
        if kind in _PRIMITIVES or kind == "fixed":
            return self._logical(schema, path, namespace)
        if kind == "enum":
            self._name(schema, namespace)
            return _primitive("string")
        if kind == "array":
            items = self.map(schema.get("items"), f"{path}[]", namespace)
            return MappedType(ArrayType(items.spark, True), pa.list_(items.raw), pa.list_(items.unit))
        if kind == "map":
            values = self.map(schema.get("values"), f"{path}{{}}", namespace)
            return MappedType(MapType(StringType(), values.spark, True), pa.map_(pa.string(), values.raw),
                              pa.map_(pa.string(), values.unit))
        if kind in ("record", "error"):
            return self._record(schema, path, namespace)
        return self._reference(kind, path, namespace)

    def _record(self, schema: Mapping, path: str, namespace: str) -> MappedType:
        name = self._name(schema, namespace)
        self._open.add(name)
        inner = name.rpartition(".")[0]
        fields = [(field["name"], self.map(field["type"], f"{path}.{field['name']}", inner))
                  for field in schema.get("fields", [])]
        self._open.discard(name)
        return MappedType(StructType([StructField(n, t.spark, True) for n, t in fields]),
                          pa.struct([(n, t.raw) for n, t in fields]), pa.struct([(n, t.unit) for n, t in fields]))

    def _logical(self, schema: Mapping, path: str, namespace: str) -> MappedType:
        kind, logical = schema["type"], schema.get("logicalType")
        if kind == "fixed":
            self._name(schema, namespace)
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = schema.get("precision"), schema.get("scale", 0)
            if not isinstance(precision, int) or not 0 < precision <= _MAX_DECIMAL_PRECISION \
                    or not isinstance(scale, int) or not 0 <= scale <= precision:
                raise _unsupported(path, schema, f"a decimal of precision 1 to {_MAX_DECIMAL_PRECISION} (Spark's)")
            decimal = pa.decimal128(precision, scale)
            return MappedType(DecimalType(precision, scale), decimal, decimal)
        if (kind, str(logical)) in _TIME_LOGICAL:
            spark, unit = _TIME_LOGICAL[(kind, str(logical))]
            return MappedType(spark, _PRIMITIVES[kind][1], unit)
        return _primitive("bytes" if kind == "fixed" else kind)

    def _union(self, members: list, path: str, namespace: str) -> MappedType:
        mapped = [self.map(member, path, namespace) for member in members if member != "null"]
        if not mapped:
            return _primitive("null")
        kinds = {type(m.spark) for m in mapped}
        if len(mapped) == 1:
            return mapped[0]
        if kinds == {IntegerType, LongType}:  # Spark widens these unions
            return _primitive("long")
        if kinds == {FloatType, DoubleType}:
            return _primitive("double")
        raise _unsupported(path, members, "a union of null and one type, of int and long, or of float and double "
                                          "(Spark's Avro source makes a struct of members: not done here)")

    def _name(self, schema: Mapping, namespace: str) -> str:
        """Register a named type under its full name."""
        name = schema.get("name", "")
        space = schema.get("namespace", namespace)
        full = name if "." in name or not space else f"{space}.{name}"
        self._named[full] = schema
        return full

    def _reference(self, name: str, path: str, namespace: str) -> MappedType:
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        for candidate in (full, name):
            if candidate in self._open:
                raise _unsupported(path, name, "a schema without recursive records (Spark has no type for one)")
            if candidate in self._named:
                schema = self._named[candidate]
                if schema.get("type") in ("record", "error"):  # mapped again, each use a struct of its own
                    return self._record(schema, path, candidate.rpartition(".")[0])
                return self.map(schema, path, candidate.rpartition(".")[0])
        raise _unsupported(path, name, "a type defined before it is used")


def _primitive(name: str) -> MappedType:
    spark, arrow = _PRIMITIVES[name]
    return MappedType(spark, arrow, arrow)


def _unsupported(path: str, schema: Any, accepted: str) -> InvalidArgumentError:
    return InvalidArgumentError("valueSchema", "topic", accepted, f"the topic's schema at {path} is {schema!r}")
