"""Spark writing through `seglog serve` while its processes cannot see the data directory (helpers_hidden), as a
Spark cluster on other hosts: tasks put their rows to the server's Flight port, the driver asks it to publish them.
A batch write's rows arrive once; a streaming query restarted from its checkpoint, and one whose batch Spark runs
again after a driver crash between publishing it and writing its commit log, publish nothing twice; a missing or
refused token fails the write naming the option authToken."""

from __future__ import annotations

from typing import Any

import pytest

import seglog
from helpers_hidden import run_hidden
from helpers_server import start_server
from seglog.storage.staged_writes import STAGING_DIRECTORY

from .conftest import secured_data, spark_environment
from .test_spark_read import make_topic

PROGRAM = '''
import glob, os
from pyspark_seglog.local import local_spark
import pulsar
spark = local_spark("local[2,4]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
url, secured = PARAMETERS["url"], PARAMETERS["secured"]
got = {}

rows = [(b"v%d" % i, b"k%d" % (i % 7) if i % 3 else None, i % 2 if i % 5 == 0 else None) for i in range(500)]
frame = spark.createDataFrame(rows, "value binary, key binary, partition int").repartition(4)
frame.write.format("seglog").option("serviceUrl", url).option("topic", "written").mode("append").save()
back = spark.read.format("seglog").option("serviceUrl", url).option("topic", "written").load().collect()
got["read back"] = sorted(bytes(r.value).decode() for r in back)

def stream(checkpoint):
    query = (spark.readStream.format("seglog").option("serviceUrl", url).option("topic", "events")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300").load()
             .select("key", "value", "properties")
             .writeStream.format("seglog").option("serviceUrl", url).option("topic", "copy")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    return sorted(int(os.path.basename(path)) for path in glob.glob(os.path.join(checkpoint, "commits", "*"))
                  if os.path.basename(path).isdigit())

got["first run"] = stream(PARAMETERS["checkpoint"])
client = pulsar.Client(PARAMETERS["pulsar"])
producer = client.create_producer("persistent://public/default/events-partition-0")
for i in range(100):
    producer.send(b"later-%d" % i)
client.close()
got["second run"] = stream(PARAMETERS["checkpoint"])
# the driver died after the sink published its last batch, before Spark wrote that batch's commit log: Spark
# runs the batch again at the restart (the commit log's entry goes, and its checksum file beside it)
last = got["second run"][-1]
for name in (str(last), f".{last}.crc"):
    os.remove(os.path.join(PARAMETERS["checkpoint"], "commits", name))
got["after the crash"] = stream(PARAMETERS["checkpoint"])

def refusal(**options):
    writer = spark.createDataFrame([(b"x",)], "value binary").write.format("seglog").option("serviceUrl", secured)
    for key, value in options.items():
        writer = writer.option(key, value)
    try:
        writer.option("topic", "events").mode("append").save()
    except Exception as error:
        return str(error)
    return None
got["auth"] = {"none": refusal(), "reader": refusal(authToken=PARAMETERS["reader"]),
               "writer": refusal(authToken=PARAMETERS["writer"])}
answer(got)
'''


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> dict[str, Any]:
    """Two servers over data directories in one hidden folder, and what PROGRAM answered: `plain` serves events
    (1,000 messages over 2 partitions) and written (2 partitions), `secured` (token authentication) events (10
    messages), which role reader may consume and role writer produce to."""
    from seglog.server.auth import create_token
    folder = tmp_path_factory.mktemp("writes-through-server")
    hidden = folder / "hidden"
    make_topic(hidden / "plain", messages=1000)
    with seglog.open(hidden / "plain") as log:
        log.create_topic("written", partitions=2)  # (copy: created by its first write)
    key = secured_data(hidden / "secured", folder / "secret.key", messages=10)
    plain = start_server(hidden / "plain")
    try:
        secured = start_server(hidden / "secured", "--auth-token-secret-key", str(folder / "secret.key"))
        try:
            got = run_hidden(hidden, PROGRAM, {
                "url": plain.http_url, "pulsar": plain.pulsar_url, "secured": secured.http_url,
                "checkpoint": str(folder / "checkpoint"), "reader": create_token(key, "reader"),
                "writer": create_token(key, "writer")}, env=spark_environment())
        finally:
            secured.stop()
    finally:
        plain.stop()
    with seglog.open(hidden / "plain") as log:
        got["stored"] = {name: sorted(m.value for p in range(log.topic(name).partitions)
                                      for m in log.topic(name).reader("earliest", p))
                         for name in ("written", "copy")}
        got["events"] = sorted(m.value for p in range(2) for m in log.topic("events").reader("earliest", p))
    with seglog.open(hidden / "secured") as log:
        got["secured events"] = sum(1 for p in range(2) for _ in log.topic("events").reader("earliest", p))
    got["staged left"] = sorted(str(path.relative_to(hidden)) for name in ("plain", "secured")
                                for path in (hidden / name / STAGING_DIRECTORY).glob("*"))
    return got


def test_a_batch_write_through_the_server_publishes_every_row_once(answered):
    expected = sorted(f"v{i}" for i in range(500))
    assert answered["read back"] == expected
    assert answered["stored"]["written"] == sorted(v.encode() for v in expected)
    assert answered["staged left"] == []


def test_a_streaming_write_restarted_from_its_checkpoint_copies_each_message_once(answered):
    assert answered["first run"] == [0, 1, 2, 3]  # 1,000 messages, at most 300 a micro-batch
    assert answered["second run"] == [0, 1, 2, 3, 4]
    assert answered["stored"]["copy"] == answered["events"]
    assert len(answered["events"]) == 1100


def test_a_micro_batch_run_again_after_a_driver_crash_publishes_nothing_twice(answered):
    assert answered["after the crash"] == [0, 1, 2, 3, 4]  # batch 4 run again, and committed this time
    assert answered["stored"]["copy"] == answered["events"]  # (sorted, with duplicates: none)


def test_a_missing_or_refused_token_fails_the_write_naming_the_option(answered):
    refused = answered["auth"]
    assert "needs a token" in refused["none"] and ".option('authToken', TOKEN)" in refused["none"]
    assert "allowed to produce with .option('authToken', TOKEN)" in refused["reader"], refused["reader"]
    assert refused["writer"] is None
    assert answered["secured events"] == 11
