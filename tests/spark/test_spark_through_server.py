"""Spark reading and writing through `seglog serve` while its processes cannot see the data directory (a private
mount namespace hides it: helpers_hidden), as a Spark cluster on other hosts: the driver plans through the admin
REST API and the executors read the server's Flight port.

A Spark JVM takes seconds to start, so one hidden program (PROGRAM, one Spark session) runs every scenario against
two servers, a plain one and one with token authentication and TLS, and each test asserts on its part of what the
program answered."""

from __future__ import annotations

import json
from typing import Any

import pytest

import seglog
from helpers_hidden import run_hidden
from helpers_server import start_server
from helpers_storage import partition_writer
from seglog.storage.range_read import SCHEMA_VERSION_ATTRIBUTE

from .conftest import secured_data, spark_environment
from .test_spark_read import make_topic
from .test_spark_read_compacted import PRICE_V0, PRICE_V1, avro


def _avro_prices(log) -> None:
    """Topic prices: Avro records of two schema versions (the second adds a field), keys a, b, a, c; compacted."""
    v0, v1 = PRICE_V0, PRICE_V1
    topic = log.create_topic("prices")
    versions = [log.admin.schemas.create("prices", "AVRO", json.dumps(v)) for v in (v0, v1)]
    with partition_writer(log, topic) as writer:
        for version, schema, key, record in [(0, v0, b"a", {"cents": 1}), (0, v0, b"b", {"cents": 2}),
                                             (1, v1, b"a", {"cents": 3, "currency": "EUR"}),
                                             (1, v1, b"c", {"cents": 4, "currency": "USD"})]:
            writer.append(writer.source([avro(schema, record)], [key],
                                        attributes={SCHEMA_VERSION_ATTRIBUTE: "%016x" % versions[version]}))
    log.admin.topics.compact("prices")


PROGRAM = '''
from pyspark_seglog.local import local_spark
from seglog.remote import Credentials, RemoteAdmin
spark = local_spark("local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
plain = PARAMETERS["plain"]


def source(url=plain, **options):
    reader = spark.read.format("seglog").option("serviceUrl", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def attempt(**options):
    try:
        return source(PARAMETERS["secured"], topic="events", **options).count()
    except Exception as error:
        return str(error)


def stream_once():
    query = (spark.readStream.format("seglog").option("serviceUrl", plain).option("topic", "events")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300")
             .option("subscription", "spark").load()
             .writeStream.format("parquet").option("path", PARAMETERS["output"])
             .option("checkpointLocation", PARAMETERS["checkpoint"]).trigger(availableNow=True).start())
    query.awaitTermination()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


admin = RemoteAdmin(plain, Credentials())
backlog = lambda: admin.topics.stats("events")["subscriptions"]["spark"]["msgBacklog"]
got = {}
rows = source(topic="events", maxRecordsPerPartition="150").collect()
got["rows"] = sorted((r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode(), r.properties["i"],
                      r.topic) for r in rows)
got["by_partition"] = {str(r["partition"]): r["count"] for r in source(
    topic="events", startingOffsets=\'{"events": {"0": 100, "1": -2}}\').groupBy("partition").count().collect()}
got["prices"] = [r.value.asDict() for r in source(topic="prices", valueSchema="topic").orderBy("offset").collect()]
got["latest"] = [(bytes(r.key).decode(), r.value.cents) for r in source(
    topic="prices", valueSchema="topic", readCompacted="true").orderBy("offset").collect()]

trusting = {"tlsTrustCertsFilePath": PARAMETERS["ca"]}
got["auth"] = {"none": attempt(**trusting), "producer": attempt(authToken=PARAMETERS["producer"], **trusting),
               "no trust": attempt(authToken=PARAMETERS["reader"]),
               "reader": attempt(authToken=PARAMETERS["reader"], **trusting)}

got["first run"], got["backlog after the first"] = stream_once(), backlog()
import pulsar
client = pulsar.Client(PARAMETERS["pulsar"])
producer = client.create_producer("persistent://public/default/events")
for i in range(250):
    producer.send(b"later-%d" % i)
client.close()
got["second run"], got["backlog after the second"] = stream_once(), backlog()
got["ends"] = {str(p["partition"]): p["endOffset"] for p in admin.topics.offsets("events")}
got["streamed"] = sorted((r.partition, r.offset) for r in spark.read.parquet(PARAMETERS["output"]).collect())
answer(got)
'''


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> dict[str, Any]:
    """Two servers over data directories in one hidden folder, and what PROGRAM answered: `plain` serves topics
    events (1,000 messages over 2 partitions) and prices (_avro_prices); `secured` (token authentication and TLS)
    serves events (100 messages), which role reader may consume and role writer only produce."""
    from helpers_tls import make_certificates
    from seglog.server.auth import create_token
    folder = tmp_path_factory.mktemp("through-server")
    hidden = folder / "hidden"
    make_topic(hidden / "plain", messages=1000)
    with seglog.open(hidden / "plain") as log:
        _avro_prices(log)
    key = secured_data(hidden / "secured", folder / "secret.key", messages=100)
    certificates = make_certificates(folder / "certs")
    plain = start_server(hidden / "plain")
    try:
        secured = start_server(hidden / "secured", "--auth-token-secret-key", str(folder / "secret.key"),
                               "--tls-cert-file", str(certificates.cert), "--tls-key-file", str(certificates.key),
                               ca=certificates.ca)
        try:
            assert secured.http_url.startswith("https://")
            return run_hidden(hidden, PROGRAM, {
                "plain": plain.http_url, "pulsar": plain.pulsar_url, "secured": secured.http_url,
                "ca": str(certificates.ca), "reader": create_token(key, "reader"),
                "producer": create_token(key, "writer"), "output": str(folder / "out"),
                "checkpoint": str(folder / "checkpoint")}, env=spark_environment())
        finally:
            secured.stop()
    finally:
        plain.stop()


def test_a_batch_read_gives_every_row_and_offset_range(answered):
    expected = sorted((i % 2, i // 2, f"k{i % 7}", f"v{i}", str(i), "events") for i in range(1000))
    assert [tuple(row) for row in answered["rows"]] == expected
    assert answered["by_partition"] == {"0": 400, "1": 500}


def test_typed_values_decode_with_their_own_schema_versions_and_the_compacted_view_reads(answered):
    """The versions come through the Flight port, the schemas through REST."""
    assert answered["prices"] == [{"cents": 1, "currency": None}, {"cents": 2, "currency": None},
                                  {"cents": 3, "currency": "EUR"}, {"cents": 4, "currency": "USD"}]
    assert answered["latest"] == [["b", 2], ["a", 3], ["c", 4]]


def test_a_stream_restarts_from_its_checkpoint_without_gap_or_duplicate(answered):
    assert answered["first run"] == [300, 300, 300, 100]
    assert answered["backlog after the first"] == 100  # Spark commits a batch when it plans the next
    assert answered["second run"] == [250]  # what pulsar-client produced between the runs
    assert answered["backlog after the second"] == 250
    ends = answered["ends"]
    assert sum(ends.values()) == 1250
    assert answered["streamed"] == [[int(p), o] for p in sorted(ends) for o in range(ends[p])]


def test_authentication_and_tls(answered):
    got = answered["auth"]
    assert got["reader"] == 100
    assert "needs a token" in got["none"] and ".option('authToken', TOKEN)" in got["none"]
    assert "refused this token's role" in got["producer"] and "authToken" in got["producer"]
    assert "CERTIFICATE_VERIFY_FAILED" in got["no trust"]
    assert "give the CA certificates that sign the server's with the option tlsTrustCertsFilePath" in got["no trust"]
