"""valueSchema 'topic': the value column typed by the topic's schema (seglog's schema registry, Pulsar's).

The query plans with one version of the schema, the latest when it starts (a streaming query keeps it until
it is started again): its Spark type is the value column's. Messages written with an older version (the
stored batch's `pulsar.schema_version`) are decoded with that version as the writer's schema and the query's
as the reader's, so data from before a compatible change is read into the query's type (Avro resolution; a
JSON object's missing fields are null, its extra ones left out). Messages written without a version, in-process
for example, are decoded with the query's version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, DataType, StringType

from pyspark_seglog.avro_types import MappedType
from pyspark_seglog.value_decoders import (
    PRIMITIVES,
    AvroDecoder,
    JsonDecoder,
    UndecodableValue,
    primitive_decoder,
    record_type,
    string_decoder,
)
from seglog.errors import InvalidArgumentError, NotFoundError, SeglogError
from seglog.storage.range_read import VERSION_COLUMN  # read for the Avro decoder, never given to Spark

DECODED_TYPES = ("AVRO", "JSON", "STRING", *PRIMITIVES)
UNDECODED_TYPES = ("BYTES", "NONE")  # their values are bytes: the value column stays binary


class ValueDecodeError(SeglogError):
    """A message's value does not decode with the topic's schema: names the topic, partition and offset."""


@dataclass(frozen=True)
class TopicValueSchema:
    """The version of a topic's schema a query reads values with: its Pulsar type and definition."""
    topic: str
    type: str
    definition: str
    version: int

    @classmethod
    def latest(cls, schemas: Any, topic: str) -> TopicValueSchema:
        """The topic's latest schema in `schemas` (an admin API's); InvalidArgumentError if it has none or one
        Spark cannot read as columns."""
        try:
            kept = schemas.get(topic)
        except NotFoundError:
            raise InvalidArgumentError("valueSchema", "topic", "'binary' for a topic without a schema",
                                       f"topic {topic} has no schema") from None
        schema = cls(topic, kept["type"], kept["data"], kept["version"])
        schema.value_type()  # refused here, on the driver, rather than in every task
        return schema

    @classmethod
    def matching(cls, schemas: Any, topic: str, value_type: DataType) -> TopicValueSchema:
        """The newest version whose value type is `value_type` (the type the query was planned with: the latest
        when it was, an older one if the schema changed since); InvalidArgumentError if none is."""
        for kept in reversed(schemas.versions(topic)):
            schema = cls(topic, kept["type"], kept["data"], kept["version"])
            try:
                if schema.value_type() == value_type:
                    return schema
            except InvalidArgumentError:
                continue
        latest = cls.latest(schemas, topic)
        raise InvalidArgumentError("schema", value_type.simpleString(), f"a value of the type of the topic's schema, "
                                   f"{latest.value_type().simpleString()} (leave .schema() out)")

    def value_type(self) -> DataType:
        """The value column's Spark type."""
        if self.type in ("AVRO", "JSON"):
            return self._record().spark
        if self.type == "STRING":
            return StringType()
        if self.type in PRIMITIVES:
            return PRIMITIVES[self.type].spark
        if self.type in UNDECODED_TYPES:
            return BinaryType()
        raise InvalidArgumentError("valueSchema", "topic", f"a topic whose schema is {', '.join(DECODED_TYPES)} "
                                   f"or {' or '.join(UNDECODED_TYPES)} (read as bytes); or 'binary'",
                                   f"topic {self.topic} has a {self.type} schema")

    @property
    def needs_versions(self) -> bool:
        """Whether decoding needs each message's schema version (Avro binary is not self-describing)."""
        return self.type == "AVRO"

    def column(self, schemas: Any) -> ValueColumn:
        """The decoder of this schema's values, in an executor; older versions are looked up in `schemas`."""
        if self.type == "AVRO":
            avro = AvroDecoder(self._record(), self.definition, self.version, self._writer_definition(schemas))
            return ValueColumn(self, lambda batch: avro(batch.column("value"), _versions(batch)))
        if self.type == "JSON":
            json_values = JsonDecoder(self._record())
            return ValueColumn(self, lambda batch: json_values(batch.column("value")))
        if self.type == "STRING":
            return ValueColumn(self, lambda batch: string_decoder(batch.column("value")))
        if self.type in PRIMITIVES:
            primitive = primitive_decoder(self.type)
            return ValueColumn(self, lambda batch: primitive(batch.column("value")))
        return ValueColumn(self, lambda batch: batch.column("value"))

    def _record(self) -> MappedType:
        try:
            mapped = record_type(self.definition)
        except ValueError as error:
            if isinstance(error, InvalidArgumentError):
                raise
            raise InvalidArgumentError("valueSchema", "topic", "a topic whose schema's definition is an Avro schema",
                                       f"topic {self.topic}'s is not JSON ({error})") from None
        if self.type == "JSON" and not isinstance(mapped.raw, pa.StructType):  # a JSON schema holds an object
            raise InvalidArgumentError("valueSchema", "topic", "a JSON schema whose definition is an Avro record",
                                       f"topic {self.topic}'s is {self.definition[:80]!r}")
        return mapped

    def _writer_definition(self, schemas: Any) -> Callable[[int], str]:
        def definition(version: int) -> str:
            try:
                kept = schemas.get(self.topic, version)
            except NotFoundError:
                raise LookupError(f"written with schema version {version}, which the topic no longer keeps") from None
            if kept["type"] != self.type:
                raise LookupError(f"written with schema version {version}, of type {kept['type']}, not {self.type}")
            return str(kept["data"])
        return definition


@dataclass(frozen=True)
class ValueColumn:
    """The decoded value column of read batches (columns offset, value and, for Avro, schema_version)."""
    schema: TopicValueSchema
    _decode: Callable[[pa.RecordBatch], pa.Array]

    def decode(self, batch: pa.RecordBatch, partition: int) -> pa.Array:
        """The values as the schema's Spark type; ValueDecodeError naming the first that does not decode."""
        try:
            return self._decode(batch)
        except UndecodableValue as error:
            offset = batch.column("offset")[error.row].as_py()
            raise ValueDecodeError(f"topic {self.schema.topic} partition {partition} offset {offset}: the value does "
                                   f"not decode as the topic's {self.schema.type} schema (version "
                                   f"{self.schema.version}): {error.reason}. Read it with valueSchema 'binary' to "
                                   "see its bytes") from None


def _versions(batch: pa.RecordBatch) -> pa.Array | None:
    index = batch.schema.get_field_index(VERSION_COLUMN)
    return None if index < 0 else batch.column(index)

