"""valueSchema 'topic': values decoded with the topic's schema into typed columns (JSON and AVRO as a struct of the
record's fields, STRING and the primitives as their Spark type), in batch and streaming reads; what Pulsar's
client wrote with AvroSchema records, older schema versions included; and the errors."""

from __future__ import annotations

import datetime as dt
import io
import json
import struct

import fastavro
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

import seglog
from helpers_server import pulsar, start_server  # pulsar: skips without the test extra
from pyspark_seglog.batch_reader import SeglogBatchReader
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.source import SeglogDataSource

from .test_spark_read import read
from .test_spark_stream import run_available_now, stream

UTC = dt.timezone.utc
ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["PICKUP", "DELIVERY"]}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}, {"name": "weight", "type": "double"}]}], "default": None},
]}
ORDER_TYPE = ("struct<id:bigint,item:string,tags:array<string>,at:timestamp,day:date,kind:string,"
              "ship:struct<city:string,weight:double>>")
AT = dt.datetime(2024, 3, 1, tzinfo=UTC)


def order(i: int) -> dict:
    return {"id": i, "item": None if i % 3 == 0 else f"item-{i}", "tags": [f"t{i}"] * (i % 3),
            "at": AT + dt.timedelta(milliseconds=i), "day": dt.date(2024, 3, 1) + dt.timedelta(days=i),
            "kind": "PICKUP" if i % 2 else "DELIVERY", "ship": {"city": f"c{i}", "weight": i / 4} if i % 2 else None}


def as_avro(record: dict, schema=ORDER) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema, named_schemas={}), record)
    return buffer.getvalue()


def as_json(record: dict) -> bytes:
    """As pulsar-client's JsonSchema writes it (indented), with dates and timestamps as Jackson's numbers."""
    plain = {**record, "at": int(record["at"].timestamp() * 1000), "day": (record["day"] - dt.date(1970, 1, 1)).days}
    return json.dumps(plain, indent=True).encode()


def make_schema_topic(path, name, schema_type, values, definition=""):
    with seglog.open(path) as log:
        topic = log.create_topic(name, partitions=1)
        log.admin.schemas.create(name, schema_type, definition)
        with topic.producer() as producer:
            producer.send_batch(values)


def decoded(path, name, **options) -> list:
    """The decoded value column, read in-process as Spark's executors read it; each batch's Arrow schema is the
    one PySpark checks the rows against."""
    options = {"path": str(path), "topic": name, "valueSchema": "topic", **options}
    source = SeglogDataSource(options)
    schema = source.schema()
    reader = source.reader(schema)
    values = []
    for piece in reader.partitions():
        for batch in reader.read(piece):
            assert batch.schema.equals(to_arrow_schema(schema, timezone="UTC"))
            values += batch.column("value").to_pylist()
    return values


@pytest.mark.parametrize("encoding", ["AVRO", "JSON"])
def test_avro_and_json_values_read_as_a_struct_of_the_records_fields(spark, tmp_path, encoding):
    records = [order(i) for i in range(50)]
    encode = as_avro if encoding == "AVRO" else as_json
    make_schema_topic(tmp_path, "orders", encoding, [encode(r) for r in records] + [None], json.dumps(ORDER))
    df = read(spark, tmp_path, topic="orders", valueSchema="topic")
    assert df.schema["value"].dataType.simpleString() == ORDER_TYPE
    rows = df.orderBy("offset").collect()
    assert [row.value.asDict(recursive=True) if row.value else None for row in rows] == [
        {**r, "at": r["at"].replace(tzinfo=None)} for r in records] + [None]  # Spark's session time zone: UTC
    assert df.selectExpr("sum(value.ship.weight)").first()[0] == sum(i / 4 for i in range(1, 50, 2))


def test_a_map_in_a_json_record_is_read_value_by_value(tmp_path):
    schema = {"type": "record", "name": "Counts", "fields": [{"name": "n", "type": {"type": "map", "values": "long"}}]}
    make_schema_topic(tmp_path, "counts", "JSON", [json.dumps({"n": {"a": i}}).encode() for i in range(3)],
                      json.dumps(schema))
    assert decoded(tmp_path, "counts") == [{"n": [("a", i)]} for i in range(3)]


@pytest.mark.parametrize(("schema_type", "values", "expected"), [
    ("STRING", [b"caf\xc3\xa9", b""], ["café", ""]),
    ("BOOLEAN", [b"\x01", b"\x00"], [True, False]),
    ("INT8", [b"\xff"], [-1]),
    ("INT16", [struct.pack(">h", -300)], [-300]),
    ("INT32", [struct.pack(">i", 7), struct.pack(">i", -2)], [7, -2]),
    ("INT64", [struct.pack(">q", 1 << 40)], [1 << 40]),
    ("FLOAT", [struct.pack(">f", 1.5)], [1.5]),
    ("DOUBLE", [struct.pack(">d", -0.25)], [-0.25]),
    ("TIMESTAMP", [struct.pack(">q", 1_700_000_000_123)], [dt.datetime(2023, 11, 14, 22, 13, 20, 123000, UTC)]),
    ("DATE", [struct.pack(">q", 86_400_000 * 3 + 5)], [dt.date(1970, 1, 4)]),
    ("INSTANT", [struct.pack(">qi", 1_700_000_000, 123_456_789)], [dt.datetime(2023, 11, 14, 22, 13, 20, 123456, UTC)]),
    ("LOCAL_DATE", [struct.pack(">q", 19_000)], [dt.date(2022, 1, 8)]),
    ("LOCAL_DATE_TIME", [struct.pack(">qq", 19_000, 3_600_000_000_000)], [dt.datetime(2022, 1, 8, 1, 0)]),
    ("BYTES", [b"\x00raw"], [b"\x00raw"]),
])
def test_string_and_primitive_values_read_as_their_spark_type(tmp_path, schema_type, values, expected):
    make_schema_topic(tmp_path, "prim", schema_type, [*values, None])
    assert decoded(tmp_path, "prim") == [*expected, None]


def test_pulsar_clients_avro_records_of_two_schema_versions_read_as_the_latest(spark, tmp_path):
    """pulsar-client's AvroSchema(Record) producers through seglog serve, the record gaining a field in between:
    each message decodes with the version it was written with, into the latest version's struct."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic("public/default/orders", partitions=1)

    class OrderV1(pulsar.schema.Record):
        _avro_namespace = "shop"
        id = pulsar.schema.Long()
        item = pulsar.schema.String()

    class OrderV2(pulsar.schema.Record):
        _avro_namespace = "shop"
        id = pulsar.schema.Long()
        item = pulsar.schema.String()
        qty = pulsar.schema.Integer(required_default=True)  # a new field with a default: FULL compatible

    OrderV1.__name__ = OrderV2.__name__ = "Order"
    server = start_server(data)
    try:
        client = server.client()
        for record_type, records in ((OrderV1, [OrderV1(id=i, item=f"i{i}") for i in range(3)]),
                                     (OrderV2, [OrderV2(id=i, item=f"i{i}", qty=i * 10) for i in range(3, 6)]),
                                     (OrderV1, [OrderV1(id=6, item="i6")])):
            producer = client.create_producer("persistent://public/default/orders",
                                              schema=pulsar.schema.AvroSchema(record_type))
            for record in records:
                producer.send(record)
            producer.close()
        with seglog.open(data) as log:
            assert [v["version"] for v in log.admin.schemas.versions("public/default/orders")] == [0, 1]
        df = read(spark, data, topic="public/default/orders", valueSchema="topic")
        rows = [row.value.asDict() for row in df.orderBy("offset").collect()]
    finally:
        server.stop()
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,item:string,qty:int>"
    assert rows == [{"id": i, "item": f"i{i}", "qty": None if i in (0, 1, 2, 6) else i * 10} for i in range(7)]


def test_a_stream_reads_typed_values(spark, tmp_path):
    make_schema_topic(tmp_path, "orders", "AVRO", [as_avro(order(i)) for i in range(20)], json.dumps(ORDER))
    df = stream(spark, tmp_path, topic="orders", startingOffsets="earliest", valueSchema="topic")
    assert df.schema["value"].dataType.simpleString() == ORDER_TYPE
    out = tmp_path / "out"
    run_available_now(df.select("offset", "value.id", "value.kind"), tmp_path / "checkpoint", out)
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert got == [(i, i, "PICKUP" if i % 2 else "DELIVERY") for i in range(20)]


def test_a_value_that_does_not_decode_fails_the_query_naming_its_offset(spark, tmp_path):
    make_schema_topic(tmp_path, "orders", "AVRO", [as_avro(order(0)), as_avro(order(1)) + b"\x01", as_avro(order(2))],
                      json.dumps(ORDER))
    with pytest.raises(Exception, match="topic orders partition 0 offset 1: the value does not decode as the "
                                        "topic's AVRO schema .*1 bytes left over"):
        read(spark, tmp_path, topic="orders", valueSchema="topic").collect()


@pytest.mark.parametrize(("schema_type", "value", "reason"), [
    ("AVRO", as_avro(order(2))[:-4], r"not Avro of schema version 0 \(IndexError"),
    ("AVRO", as_avro(order(2))[:4], "not Avro of schema version 0"),
    ("JSON", b'{"id": "not a number"}', "does not fit the schema"),
    ("JSON", b"{not json", "not JSON"),
    ("STRING", b"\xff", "not UTF-8"),
    ("INT32", b"\x00\x01", "2 bytes, not the 4 of a INT32"),
])
def test_undecodable_values_are_named_by_offset(tmp_path, schema_type, value, reason):
    definition = json.dumps(ORDER) if schema_type in ("AVRO", "JSON") else ""
    good = {"AVRO": as_avro(order(0)), "JSON": as_json(order(0)), "STRING": b"ok"}.get(schema_type, b"\x00" * 4)
    make_schema_topic(tmp_path, "t", schema_type, [good, None, value], definition)
    with pytest.raises(seglog.errors.SeglogError, match=f"topic t partition 0 offset 2: .*{reason}"):
        decoded(tmp_path, "t")


def test_value_schema_options_and_topics_that_cannot_be_decoded_are_refused(tmp_path):
    with pytest.raises(seglog.errors.InvalidArgumentError,
                       match="invalid valueSchema 'avro'; accepted: 'binary' .* or 'topic'"):
        SourceOptions.parse({"path": str(tmp_path), "topic": "t", "valueSchema": "avro"}, streaming=False)
    with seglog.open(tmp_path) as log:
        log.create_topic("plain")
        log.create_topic("kv")
        log.admin.schemas.create("kv", "KEY_VALUE", struct.pack(">ii", 0, 0),
                                 {"key.schema.type": "STRING", "value.schema.type": "STRING"})
    with pytest.raises(seglog.errors.InvalidArgumentError, match="topic plain has no schema"):
        decoded(tmp_path, "plain")
    with pytest.raises(seglog.errors.InvalidArgumentError, match="topic kv has a KEY_VALUE schema"):
        decoded(tmp_path, "kv")
    with seglog.open(tmp_path) as log:
        log.create_topic("words")
        log.admin.schemas.create("words", "JSON", '"string"')
    with pytest.raises(seglog.errors.InvalidArgumentError, match="a JSON schema whose definition is an Avro record"):
        decoded(tmp_path, "words")
    with seglog.open(tmp_path) as log, log.topic("kv").producer() as producer:  # binary, the default, reads
        producer.send(b"x")                                                     # any topic's values as stored
    reader = SeglogBatchReader(SourceOptions.parse({"path": str(tmp_path), "topic": "kv"}, streaming=False))
    assert [b.column("value").to_pylist() for p in reader.partitions() for b in reader.read(p)] == [[b"x"]]
