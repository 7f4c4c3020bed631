"""Spark reading and writing through `seglog serve` while its processes cannot see the data directory (a private
mount namespace hides it: helpers_hidden), as a Spark cluster on other hosts: the driver plans through the admin
REST API and the executors read the server's Flight port."""

from __future__ import annotations

from helpers_hidden import run_hidden
from helpers_server import start_server

from .conftest import spark_environment
from .test_spark_read import make_topic

SESSION = '''
from pyspark_seglog.local import local_spark
spark = local_spark("local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
def source(**options):
    reader = spark.read.format("seglog").option("serviceUrl", PARAMETERS["url"])
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
'''


def test_a_batch_read_through_the_server_gives_every_row(tmp_path):
    data = tmp_path / "hidden" / "data"
    make_topic(data, messages=1000)
    server = start_server(data)
    try:
        got = run_hidden(data.parent, SESSION + '''
rows = source(topic="events", maxRecordsPerPartition="150").collect()
answer({"rows": sorted((r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode(), r.properties["i"],
                        r.topic) for r in rows),
        "by_partition": {str(r["partition"]): r["count"] for r in
                         source(topic="events", startingOffsets='{"events": {"0": 100, "1": -2}}')
                         .groupBy("partition").count().collect()}})
''', {"url": server.http_url}, env=spark_environment())
    finally:
        server.stop()
    expected = sorted((i % 2, i // 2, f"k{i % 7}", f"v{i}", str(i), "events") for i in range(1000))
    assert [tuple(row) for row in got["rows"]] == expected
    assert got["by_partition"] == {"0": 400, "1": 500}
