"""The Kafka-source options through `seglog serve` while Spark cannot see the data directory (helpers_hidden): the
planning they change runs on the driver through the admin REST API, as it runs in-process."""

from __future__ import annotations

from helpers_hidden import run_hidden
from helpers_server import start_server

from .conftest import spark_environment
from .test_spark_read import make_topic

BASE_MS = 1_700_000_000_000


def test_a_pattern_by_timestamp_and_pushed_filters_through_the_server(tmp_path):
    data = tmp_path / "hidden" / "data"
    make_topic(data, "events-a", partitions=2, messages=100)
    make_topic(data, "events-b", partitions=1, messages=30)
    make_topic(data, "other", partitions=1, messages=5)
    server = start_server(data)
    try:
        got = run_hidden(data.parent, '''
import datetime as dt
from pyspark.sql import functions as F
from pyspark_seglog.local import local_spark
spark = local_spark("local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                 "spark.sql.python.filterPushdown.enabled": "true"})
base = PARAMETERS["base"]
def source(**options):
    return spark.read.format("seglog").options(serviceUrl=PARAMETERS["url"], **options).load()
def counts(df):
    return sorted([r.topic, r.partition, r["count"]] for r in df.groupBy("topic", "partition").count().collect())
by_time = source(topicsPattern="events-.*", startingOffsetsByTimestamp='{"events-a": {"0": %d, "1": %d}, '
                 '"events-b": {"0": %d}}' % (base + 10, base, base + 20), endingTimestamp=str(base + 90))
recent = source(topicsPattern="events-.*", maxRecordsPerPartition="5").filter(
    F.col("timestamp") >= F.lit(dt.datetime.fromtimestamp((base + 80) / 1000, dt.timezone.utc)))
answer({"by_time": counts(by_time), "recent": counts(recent), "recent_splits": recent.rdd.getNumPartitions(),
        "partition": sorted(r.offset for r in source(topics="events-a,other").filter(
            "partition = 0 AND offset >= 45 AND topic = 'events-a'").collect())})
''', {"url": server.http_url, "base": BASE_MS}, env=spark_environment())
    finally:
        server.stop()
    assert got["by_time"] == [["events-a", 0, 40], ["events-a", 1, 45], ["events-b", 0, 10]]
    assert got["recent"] == [["events-a", 0, 10], ["events-a", 1, 10]]  # events-b's newest is BASE + 29
    assert got["recent_splits"] == 4
    assert got["partition"] == [45, 46, 47, 48, 49]
