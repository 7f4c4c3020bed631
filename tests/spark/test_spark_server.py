"""The Spark connector on the data directory of a running `seglog serve`: it reads what the real Pulsar client
sent, and what it writes is received by that client, with the same fields (one data model, docs/SERVER.md)."""

from __future__ import annotations

import datetime as dt
import time

from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

import seglog
from helpers_server import pulsar, start_server  # pulsar: skips without the test extra

from .test_spark_read import read
from .test_spark_write import write

UTC = dt.timezone.utc
TOPIC = "public/default/orders"


def test_spark_reads_what_pulsar_clients_sent_while_the_server_runs(spark, tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic(TOPIC, partitions=2)
    server = start_server(data)
    try:
        producer = server.client().create_producer(f"persistent://{TOPIC}", batching_max_messages=10)
        before = int(time.time() * 1000)
        for i in range(100):
            producer.send_async(b"v%d" % i, None, partition_key=f"k{i % 10}", properties={"i": str(i)},
                                event_timestamp=1_700_000_000_000 + i)
        producer.flush()
        after = int(time.time() * 1000)
        rows = read(spark, data, topic=TOPIC).collect()  # beside the server, which holds the writer locks
    finally:
        server.stop()
    assert len(rows) == 100
    partition_of_key: dict[bytes, int] = {}
    for row in rows:
        i = int(bytes(row.value)[1:])
        assert (bytes(row.key), row.properties) == (b"k%d" % (i % 10), {"i": str(i)})
        assert partition_of_key.setdefault(bytes(row.key), row.partition) == row.partition  # routed by key
        published = int(row.timestamp.replace(tzinfo=UTC).timestamp() * 1000)
        assert before <= published <= after  # the publish time is the stored timestamp
    assert {row.partition for row in rows} == {0, 1}
    for partition in (0, 1):  # each producer's order kept within a partition
        values = [int(bytes(r.value)[1:]) for r in sorted(rows, key=lambda r: r.offset) if r.partition == partition]
        assert values == sorted(values)


def test_what_spark_writes_is_received_by_the_pulsar_client_with_the_same_fields(spark, tmp_path):
    data = tmp_path / "data"
    seglog.open(data).close()
    sent_at = dt.datetime(2026, 1, 1, tzinfo=UTC)
    frame = spark.createDataFrame([(f"v{i}", f"k{i % 3}", sent_at + dt.timedelta(milliseconds=i), {"i": str(i)})
                                   for i in range(30)], "value string, key string, timestamp timestamp, "
                                                        "properties map<string,string>")
    write(frame.select(F.col("value").cast("binary").alias("value"), "key", "timestamp", "properties"), data,
          topic=TOPIC)
    server = start_server(data)
    try:
        reader = server.client().create_reader(f"persistent://{TOPIC}", pulsar.MessageId.earliest)
        got = [reader.read_next(10_000) for _ in range(30)]
        assert not reader.has_message_available()
    finally:
        server.stop()
    base = int(sent_at.timestamp() * 1000)
    assert sorted((m.data(), m.partition_key(), m.properties(), m.publish_timestamp()) for m in got) == sorted(
        (b"v%d" % i, f"k{i % 3}", {"i": str(i)}, base + i) for i in range(30))
    # the timestamp a writer gives is its CreateTime, the event time too (Message.event_time)
    assert all(m.event_timestamp() == m.publish_timestamp() for m in got)
