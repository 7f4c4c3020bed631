"""The rows Spark gets: seglog's record batches in the exact Arrow schema PySpark accepts from a Python data
source (it compares the first batch's schema with its own, so every batch is built with ROWS).

The key, value, offset and properties columns are the segment's own buffers; topic and partition are
constants; only the timestamps are converted (ms to µs, vectorised). Batches of about ROWS_PER_BATCH rows:
a larger stored batch is sliced (no copy), smaller ones are combined (one vectorised copy)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

import pyarrow as pa

ROWS_PER_BATCH = 65536
MAX_COMBINED_BYTES = 64 << 20

SPARK_SCHEMA = ("topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
                "properties map<string,string>")
READ_SCHEMA = ("struct<topic:string,partition:int,offset:bigint,timestamp:timestamp,key:binary,value:binary,"
               "properties:map<string,string>>")  # SPARK_SCHEMA as Spark's StructType.simpleString() says it
_ROW_FIELDS: list[pa.Field] = [  # a list of Fields: each pa.field() call is typed by its own type
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("properties", pa.map_(pa.string(), pa.string())),
]
ROWS = pa.schema(_ROW_FIELDS)


def spark_rows(batch: pa.RecordBatch, topic: str, partition: int, value: pa.Array | None = None) -> pa.RecordBatch:
    """A seglog RecordBatch (offset, timestamp, key, value, properties) as Spark's rows; `value`, when given,
    is the value column decoded (valueSchema 'topic'), of Spark's Arrow type for it."""
    n = batch.num_rows
    topics, partitions = _constant_columns(topic, partition)
    if n > len(topics):
        topics, partitions = (pa.repeat(pa.scalar(topic, pa.string()), n),
                              pa.repeat(pa.scalar(partition, pa.int32()), n))
    return pa.RecordBatch.from_arrays(
        [topics.slice(0, n), partitions.slice(0, n), batch.column("offset"),
         batch.column("timestamp").cast(ROWS.field("timestamp").type),
         batch.column("key"), batch.column("value") if value is None else value, batch.column("properties")],
        schema=ROWS if value is None else rows_with_value(value.type))


@lru_cache(maxsize=16)
def rows_with_value(value_type: pa.DataType) -> pa.Schema:
    """ROWS with the value column of another type (a decoded value)."""
    return ROWS.set(ROWS.get_field_index("value"), pa.field("value", value_type))


@lru_cache(maxsize=64)
def _constant_columns(topic: str, partition: int) -> tuple[pa.Array, pa.Array]:
    """The topic and partition columns of a full batch, made once and sliced for each batch."""
    return (pa.repeat(pa.scalar(topic, pa.string()), ROWS_PER_BATCH),
            pa.repeat(pa.scalar(partition, pa.int32()), ROWS_PER_BATCH))


def rebatched(batches: Iterable[pa.RecordBatch], rows: int = ROWS_PER_BATCH,
              max_bytes: int = MAX_COMBINED_BYTES) -> Iterator[pa.RecordBatch]:
    """The same rows in batches of about `rows`: big ones sliced, small ones combined (up to `max_bytes`,
    so that large messages neither pile up in memory nor overflow a binary column's int32 offsets)."""
    pending: list[pa.RecordBatch] = []
    pending_rows = pending_bytes = 0
    for batch in batches:
        if batch.num_rows >= rows:
            if pending:
                yield _combined(pending)
                pending, pending_rows, pending_bytes = [], 0, 0
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)
            continue
        if pending and (pending_rows + batch.num_rows > rows or pending_bytes + batch.nbytes > max_bytes):
            yield _combined(pending)
            pending, pending_rows, pending_bytes = [], 0, 0
        pending.append(batch)
        pending_rows += batch.num_rows
        pending_bytes += batch.nbytes
    if pending:
        yield _combined(pending)


def _combined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
