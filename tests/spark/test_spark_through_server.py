"""Spark reading and writing through `seglog serve` while its processes cannot see the data directories (a
private mount namespace hides them: helpers_hidden), as a Spark cluster on other hosts: the driver plans through
the admin REST API, the executors read and write through the server's Flight port.

A Spark JVM takes seconds to start, so one hidden program (PROGRAM, one Spark session) runs every scenario, each
against servers of its own (SERVED), and each test asserts on its part of what the program answered:
- reads: every column and offset range, typed values by their own schema versions, a compacted view, a stream
  restarted from its checkpoint (pulsar-client producing between the runs) with a subscription;
- writes: a batch write arriving once, a streaming write restarted from its checkpoint and one whose last batch
  Spark runs again after a driver crash between publishing it and writing its commit log, each message once;
- options: topics, topicsPattern, the topic column, offsets by timestamp, startingTimestamp, endingTimestamp,
  pushed-down filters, minOffsetsPerTrigger with maxTriggerDelay and the latest offsets in a stream's progress (the
  planning they change runs on the driver through the REST API, as in-process);
- credentials: a server with token authentication and TLS refusing no token, a role without the permission and
  no CA file, each naming the option to give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import seglog
from helpers_hidden import run_hidden
from helpers_server import Server, start_server
from seglog.storage.staged_writes import STAGING_DIRECTORY

from .conftest import secured_data, spark_environment
from .test_spark_read import make_topic
from .test_spark_read_compacted import write_prices

BASE_MS = 1_700_000_000_000  # make_topic's first timestamp
SERVED = ("reads", "writes", "options", "secured")

SESSION = '''
import datetime as dt
import glob
import os

import pulsar
from pyspark.sql import functions as F
from pyspark_seglog.local import local_spark
from seglog.remote import Credentials, RemoteAdmin

spark = local_spark("local[2,4]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
urls, got = PARAMETERS["urls"], {}


def source(url, **options):
    return spark.read.format("seglog").option("serviceUrl", url).options(**options).load()


def produce(url, topic, count):
    client = pulsar.Client(url)
    producer = client.create_producer(f"persistent://public/default/{topic}")
    for i in range(count):
        producer.send(b"later-%d" % i)
    client.close()
'''

READS = '''
def stream_to_parquet():
    query = (spark.readStream.format("seglog").option("serviceUrl", urls["reads"]).option("topic", "events")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300")
             .option("subscription", "spark").load()
             .writeStream.format("parquet").option("path", PARAMETERS["output"])
             .option("checkpointLocation", PARAMETERS["read checkpoint"]).trigger(availableNow=True).start())
    query.awaitTermination()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


reads, url = {}, urls["reads"]
admin = RemoteAdmin(url, Credentials())
backlog = lambda: admin.topics.stats("events")["subscriptions"]["spark"]["msgBacklog"]
rows = source(url, topic="events", maxRecordsPerPartition="150").collect()
reads["rows"] = sorted((r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode(), r.properties["i"],
                        r.topic) for r in rows)
reads["by partition"] = {str(r["partition"]): r["count"] for r in source(
    url, topic="events", startingOffsets=\'{"events": {"0": 100, "1": -2}}\').groupBy("partition").count().collect()}
reads["prices"] = [r.value.asDict() for r in
                   source(url, topic="prices", valueSchema="topic").orderBy("offset").collect()]
reads["latest"] = [(bytes(r.key).decode(), r.value.cents) for r in source(
    url, topic="prices", valueSchema="topic", readCompacted="true").orderBy("offset").collect()]
reads["first run"], reads["backlog after the first"] = stream_to_parquet(), backlog()
produce(PARAMETERS["pulsar"]["reads"], "events", 250)
reads["second run"], reads["backlog after the second"] = stream_to_parquet(), backlog()
reads["ends"] = {str(p["partition"]): p["endOffset"] for p in admin.topics.offsets("events")}
reads["streamed"] = sorted((r.partition, r.offset) for r in spark.read.parquet(PARAMETERS["output"]).collect())
got["reads"] = reads
'''

WRITES = '''
def copy_stream(checkpoint):
    query = (spark.readStream.format("seglog").option("serviceUrl", url).option("topic", "events")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300").load()
             .select("key", "value", "properties")
             .writeStream.format("seglog").option("serviceUrl", url).option("topic", "copy")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    return sorted(int(os.path.basename(path)) for path in glob.glob(os.path.join(checkpoint, "commits", "*"))
                  if os.path.basename(path).isdigit())


writes, url = {}, urls["writes"]
rows = [(b"v%d" % i, b"k%d" % (i % 7) if i % 3 else None, i % 2 if i % 5 == 0 else None) for i in range(500)]
frame = spark.createDataFrame(rows, "value binary, key binary, partition int").repartition(4)
frame.write.format("seglog").option("serviceUrl", url).option("topic", "written").mode("append").save()
writes["read back"] = sorted(bytes(r.value).decode() for r in source(url, topic="written").collect())
checkpoint = PARAMETERS["write checkpoint"]
writes["first run"] = copy_stream(checkpoint)
produce(PARAMETERS["pulsar"]["writes"], "events-partition-0", 100)
writes["second run"] = copy_stream(checkpoint)
# the driver died after the sink published its last batch, before Spark wrote that batch's commit log: Spark
# runs the batch again at the restart (the commit log's entry goes, and its checksum file beside it)
last = writes["second run"][-1]
for name in (str(last), f".{last}.crc"):
    os.remove(os.path.join(checkpoint, "commits", name))
writes["after the crash"] = copy_stream(checkpoint)
got["writes"] = writes
'''

OPTIONS = '''
def counts(df):
    return sorted([r.topic, r.partition, r["count"]] for r in df.groupBy("topic", "partition").count().collect())


options, url, base = {}, urls["options"], PARAMETERS["base"]
by_time = source(url, topicsPattern="events-.*", startingOffsetsByTimestamp=\'{"events-a": {"0": %d, "1": %d}, \'
                 \'"events-b": {"0": %d}}\' % (base + 10, base, base + 20), endingTimestamp=str(base + 90))
recent = source(url, topicsPattern="events-.*", maxRecordsPerPartition="5").filter(
    F.col("timestamp") >= F.lit(dt.datetime.fromtimestamp((base + 80) / 1000, dt.timezone.utc)))
options["by time"], options["recent"] = counts(by_time), counts(recent)
options["recent splits"] = recent.rdd.getNumPartitions()
options["partition"] = sorted(r.offset for r in source(url, topics="events-a,other").filter(
    "partition = 0 AND offset >= 45 AND topic = 'events-a'").collect())
options["ending by time"] = counts(source(url, topic="events-a", endingOffsetsByTimestamp=(
    '{"events-a": {"0": %d, "1": %d}}' % (base + 20, base + 41))))
options["starting time"] = counts(source(url, topic="events-b", startingTimestamp=str(base + 25)))
query = (spark.readStream.format("seglog").option("serviceUrl", url).option("topic", "other")
         .option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "10").option("maxTriggerDelay", "1h")
         .load().writeStream.format("memory").queryName("min_offsets").trigger(processingTime="100 milliseconds")
         .option("checkpointLocation", PARAMETERS["options checkpoint"]).start())
seen = []
for more in (0, 3, 7):  # the first micro-batch does not wait; then 3 < 10 waits (up to an hour); 3 + 7 do not
    produce(PARAMETERS["pulsar"]["options"], "other", more)
    query.processAllAvailable()
    seen.append(spark.table("min_offsets").count())
progress = [p for p in query.recentProgress if p["numInputRows"]][-1]["sources"][0]
query.stop()
options["min offsets"], options["progress"] = seen, [progress["endOffset"], progress["latestOffset"]]
got["options"] = options
'''

CREDENTIALS = '''
def read_count(**options):
    try:
        return source(urls["secured"], topic="events", **options).count()
    except Exception as error:
        return str(error)


def write_refusal(**options):
    try:
        (spark.createDataFrame([(b"x",)], "value binary").write.format("seglog")
         .option("serviceUrl", urls["secured"]).options(**options).option("topic", "events").mode("append").save())
    except Exception as error:
        return str(error)
    return None


trusting = {"tlsTrustCertsFilePath": PARAMETERS["ca"]}
reader, writer = PARAMETERS["reader"], PARAMETERS["writer"]
got["credentials"] = {
    "read": {"none": read_count(**trusting), "producer": read_count(authToken=writer, **trusting),
             "no trust": read_count(authToken=reader), "reader": read_count(authToken=reader, **trusting)},
    "write": {"none": write_refusal(**trusting), "reader": write_refusal(authToken=reader, **trusting),
              "writer": write_refusal(authToken=writer, **trusting)}}
answer(got)
'''

PROGRAM = SESSION + READS + WRITES + OPTIONS + CREDENTIALS


def _avro_prices(log) -> None:
    """Topic prices: Avro records of two schema versions (the second adds a field), keys a, b, a, c; compacted."""
    write_prices(log, log.create_topic("prices"))
    log.admin.topics.compact("prices")


def _data(hidden: Path, folder: Path) -> bytes:
    """The data directories of SERVED under `hidden`; the secured server's secret key.
    reads: events (1,000 messages over 2 partitions) and prices (_avro_prices); writes: events (1,000) and
    written (2 partitions); options: events-a (100 over 2), events-b (30), other (5); secured: events (100),
    which role reader may consume and role writer produce to."""
    make_topic(hidden / "reads", messages=1000)
    with seglog.open(hidden / "reads") as log:
        _avro_prices(log)
    make_topic(hidden / "writes", messages=1000)
    with seglog.open(hidden / "writes") as log:
        log.create_topic("written", partitions=2)  # (copy: created by its first write)
    make_topic(hidden / "options", "events-a", partitions=2, messages=100)
    make_topic(hidden / "options", "events-b", partitions=1, messages=30)
    make_topic(hidden / "options", "other", partitions=1, messages=5)
    return secured_data(hidden / "secured", folder / "secret.key", messages=100)


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> dict[str, Any]:
    """What PROGRAM answered, run hidden against a server of each of SERVED (the secured one with token
    authentication and TLS), with what the writes left in their data directory once the servers stopped."""
    from helpers_tls import make_certificates
    from seglog.server.auth import create_token
    folder = tmp_path_factory.mktemp("through-server")
    hidden = folder / "hidden"
    key = _data(hidden, folder)
    certificates = make_certificates(folder / "certs")
    servers: dict[str, Server] = {}
    try:
        for name in SERVED[:-1]:
            servers[name] = start_server(hidden / name)
        servers["secured"] = start_server(hidden / "secured", "--auth-token-secret-key", str(folder / "secret.key"),
                                          "--tls-cert-file", str(certificates.cert), "--tls-key-file",
                                          str(certificates.key), ca=certificates.ca)
        got = run_hidden(hidden, PROGRAM, {
            "urls": {name: server.http_url for name, server in servers.items()},
            "pulsar": {name: server.pulsar_url for name, server in servers.items()}, "base": BASE_MS,
            "ca": str(certificates.ca), "reader": create_token(key, "reader"), "writer": create_token(key, "writer"),
            "output": str(folder / "out"), "read checkpoint": str(folder / "read-checkpoint"),
            "write checkpoint": str(folder / "write-checkpoint"),
            "options checkpoint": str(folder / "options-checkpoint")}, env=spark_environment())
    finally:
        for server in servers.values():
            server.stop()
    with seglog.open(hidden / "writes") as log:
        got["writes"]["stored"] = {name: sorted(m.value for p in range(log.topic(name).partitions)
                                                for m in log.topic(name).reader("earliest", p))
                                   for name in ("written", "copy", "events")}
    with seglog.open(hidden / "secured") as log:
        got["credentials"]["secured events"] = sum(log.topic("events").end_offset(p) for p in range(2))
    got["writes"]["staged left"] = sorted(str(path.relative_to(hidden)) for name in ("writes", "secured")
                                          for path in (hidden / name / STAGING_DIRECTORY).glob("*"))
    return got


# --- reads -----------------------------------------------------------------------------------------------------

def test_a_batch_read_gives_every_row_and_offset_range(answered):
    reads = answered["reads"]
    expected = sorted((i % 2, i // 2, f"k{i % 7}", f"v{i}", str(i), "events") for i in range(1000))
    assert [tuple(row) for row in reads["rows"]] == expected
    assert reads["by partition"] == {"0": 400, "1": 500}


def test_typed_values_decode_with_their_own_schema_versions_and_the_compacted_view_reads(answered):
    """The versions come through the Flight port, the schemas through REST."""
    assert answered["reads"]["prices"] == [{"cents": 1, "currency": None}, {"cents": 2, "currency": None},
                                           {"cents": 3, "currency": "EUR"}, {"cents": 4, "currency": "USD"}]
    assert answered["reads"]["latest"] == [["b", 2], ["a", 3], ["c", 4]]


def test_a_stream_restarts_from_its_checkpoint_without_gap_or_duplicate(answered):
    reads = answered["reads"]
    assert reads["first run"] == [300, 300, 300, 100]
    assert reads["backlog after the first"] == 100  # Spark commits a batch when it plans the next
    assert reads["second run"] == [250]  # what pulsar-client produced between the runs
    assert reads["backlog after the second"] == 250
    ends = reads["ends"]
    assert sum(ends.values()) == 1250
    assert reads["streamed"] == [[int(p), o] for p in sorted(ends) for o in range(ends[p])]


# --- writes ----------------------------------------------------------------------------------------------------

def test_a_batch_write_publishes_every_row_once(answered):
    writes = answered["writes"]
    expected = sorted(f"v{i}" for i in range(500))
    assert writes["read back"] == expected
    assert writes["stored"]["written"] == sorted(v.encode() for v in expected)
    assert writes["staged left"] == []


def test_a_streaming_write_restarted_from_its_checkpoint_copies_each_message_once(answered):
    writes = answered["writes"]
    assert writes["first run"] == [0, 1, 2, 3]  # 1,000 messages, at most 300 a micro-batch
    assert writes["second run"] == [0, 1, 2, 3, 4]
    assert writes["stored"]["copy"] == writes["stored"]["events"]
    assert len(writes["stored"]["events"]) == 1100


def test_a_micro_batch_run_again_after_a_driver_crash_publishes_nothing_twice(answered):
    writes = answered["writes"]
    assert writes["after the crash"] == [0, 1, 2, 3, 4]  # batch 4 run again, and committed this time
    assert writes["stored"]["copy"] == writes["stored"]["events"]  # (sorted, with duplicates: none)


# --- Kafka-source options ------------------------------------------------------------------------------------

def test_a_pattern_by_timestamp_and_pushed_filters(answered):
    options = answered["options"]
    assert options["by time"] == [["events-a", 0, 40], ["events-a", 1, 45], ["events-b", 0, 10]]
    assert options["recent"] == [["events-a", 0, 10], ["events-a", 1, 10]]  # events-b's newest is BASE + 29
    assert options["recent splits"] == 4
    assert options["partition"] == [45, 46, 47, 48, 49]
    assert options["ending by time"] == [["events-a", 0, 10], ["events-a", 1, 20]]  # before i = 20 and i = 41
    assert options["starting time"] == [["events-b", 0, 5]]


def test_min_offsets_per_trigger_and_the_latest_offsets_in_the_progress(answered):
    options = answered["options"]
    assert options["min offsets"] == [5, 5, 15]
    assert [json.loads(offsets) for offsets in options["progress"]] == [{"other": {"0": 15}}] * 2


# --- credentials -----------------------------------------------------------------------------------------------

def test_reads_need_a_token_allowed_to_consume_and_the_servers_ca(answered):
    read = answered["credentials"]["read"]
    assert read["reader"] == 100
    assert "needs a token" in read["none"] and ".option('authToken', TOKEN)" in read["none"]
    assert "refused this token's role" in read["producer"] and "authToken" in read["producer"]
    assert "CERTIFICATE_VERIFY_FAILED" in read["no trust"]
    assert "give the CA certificates that sign the server's with the option tlsTrustCertsFilePath" in read["no trust"]


def test_writes_need_a_token_allowed_to_produce(answered):
    write = answered["credentials"]["write"]
    assert "needs a token" in write["none"] and ".option('authToken', TOKEN)" in write["none"]
    assert "allowed to produce with .option('authToken', TOKEN)" in write["reader"], write["reader"]
    assert write["writer"] is None
    assert answered["credentials"]["secured events"] == 101
