"""Spark reading and writing through `seglog serve` while its processes cannot see the data directory (a private
mount namespace hides it: helpers_hidden), as a Spark cluster on other hosts: the driver plans through the admin
REST API and the executors read the server's Flight port."""

from __future__ import annotations

import io
import json

import fastavro

import seglog
from helpers_hidden import run_hidden
from helpers_server import start_server
from helpers_storage import partition_writer
from seglog.storage.range_read import SCHEMA_VERSION_ATTRIBUTE

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


def _avro_prices(log) -> None:
    """Topic prices: Avro records of two schema versions (the second adds a field), keys a, b, a, c; compacted."""
    v0 = {"type": "record", "name": "Price", "fields": [{"name": "cents", "type": "long"}]}
    v1 = {**v0, "fields": [*v0["fields"], {"name": "currency", "type": ["null", "string"], "default": None}]}

    def avro(schema, record):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
        return out.getvalue()

    topic = log.create_topic("prices")
    versions = [log.admin.schemas.create("prices", "AVRO", json.dumps(v)) for v in (v0, v1)]
    with partition_writer(log, topic) as writer:
        for version, schema, key, record in [(0, v0, b"a", {"cents": 1}), (0, v0, b"b", {"cents": 2}),
                                             (1, v1, b"a", {"cents": 3, "currency": "EUR"}),
                                             (1, v1, b"c", {"cents": 4, "currency": "USD"})]:
            writer.append(writer.source([avro(schema, record)], [key],
                                        attributes={SCHEMA_VERSION_ATTRIBUTE: "%016x" % versions[version]}))
    log.admin.topics.compact("prices")


def test_a_batch_read_through_the_server_gives_every_row(tmp_path):
    """Every column and offset range; typed values decoded with the version each was written with (the versions
    come through the Flight port, the schemas through REST); a compacted view."""
    data = tmp_path / "hidden" / "data"
    make_topic(data, messages=1000)
    with seglog.open(data) as log:
        _avro_prices(log)
    server = start_server(data)
    try:
        got = run_hidden(data.parent, SESSION + '''
rows = source(topic="events", maxRecordsPerPartition="150").collect()
prices = source(topic="prices", valueSchema="topic").orderBy("offset").collect()
latest = source(topic="prices", valueSchema="topic", readCompacted="true").orderBy("offset").collect()
answer({"rows": sorted((r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode(), r.properties["i"],
                        r.topic) for r in rows),
        "by_partition": {str(r["partition"]): r["count"] for r in
                         source(topic="events", startingOffsets='{"events": {"0": 100, "1": -2}}')
                         .groupBy("partition").count().collect()},
        "prices": [r.value.asDict() for r in prices],
        "latest": [(bytes(r.key).decode(), r.value.cents) for r in latest]})
''', {"url": server.http_url}, env=spark_environment())
    finally:
        server.stop()
    expected = sorted((i % 2, i // 2, f"k{i % 7}", f"v{i}", str(i), "events") for i in range(1000))
    assert [tuple(row) for row in got["rows"]] == expected
    assert got["by_partition"] == {"0": 400, "1": 500}
    assert got["prices"] == [{"cents": 1, "currency": None}, {"cents": 2, "currency": None},
                             {"cents": 3, "currency": "EUR"}, {"cents": 4, "currency": "USD"}]
    assert got["latest"] == [["b", 2], ["a", 3], ["c", 4]]


STREAM = SESSION + '''
query = (spark.readStream.format("seglog").option("serviceUrl", PARAMETERS["url"]).option("topic", "events")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300")
         .option("subscription", "spark").load()
         .writeStream.format("parquet").option("path", PARAMETERS["output"])
         .option("checkpointLocation", PARAMETERS["checkpoint"]).trigger(availableNow=True).start())
query.awaitTermination()
answer([p["numInputRows"] for p in query.recentProgress if p["numInputRows"]])
'''


def test_a_stream_through_the_server_restarts_from_its_checkpoint_without_gap_or_duplicate(tmp_path):
    import pyarrow.parquet as pq

    from seglog.cli.remote import Credentials, RemoteAdmin
    data, output = tmp_path / "hidden" / "data", tmp_path / "out"
    make_topic(data, messages=1000)
    server = start_server(data)
    parameters = {"url": server.http_url, "output": str(output), "checkpoint": str(tmp_path / "checkpoint")}
    admin = RemoteAdmin(server.http_url, Credentials())
    try:
        backlog = lambda: admin.topics.stats("events")["subscriptions"]["spark"]["msgBacklog"]  # noqa: E731
        assert run_hidden(data.parent, STREAM, parameters, env=spark_environment()) == [300, 300, 300, 100]
        assert backlog() == 100  # Spark commits a batch when it plans the next: the last one is not yet
        producer = server.client().create_producer("persistent://public/default/events")
        for i in range(250):
            producer.send(b"later-%d" % i)
        assert run_hidden(data.parent, STREAM, parameters, env=spark_environment()) == [250]
        assert backlog() == 250
        ends = {p["partition"]: p["endOffset"] for p in admin.topics.offsets("events")}
    finally:
        admin.close()
        server.stop()
    rows = pq.read_table(output, columns=["partition", "offset"]).to_pylist()
    assert sum(ends.values()) == 1250
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(p, o) for p in sorted(ends)
                                                                  for o in range(ends[p])]


AUTHENTICATED = SESSION + '''
def attempt(**options):
    try:
        return source(topic="events", **options).count()
    except Exception as error:
        return str(error)
trusting = {"tlsTrustCertsFilePath": PARAMETERS["ca"]}
answer({"none": attempt(**trusting), "producer": attempt(authToken=PARAMETERS["producer"], **trusting),
        "no trust": attempt(authToken=PARAMETERS["reader"]),
        "reader": attempt(authToken=PARAMETERS["reader"], **trusting)})
'''


def test_authentication_and_tls_through_the_server(tmp_path):
    from helpers_tls import make_certificates
    from seglog.server.auth import create_secret_key, create_token
    data = tmp_path / "hidden" / "data"
    make_topic(data, messages=100)
    with seglog.open(data) as log:
        log.admin.namespaces.grant_permission("public/default", "reader", ["consume"])
        log.admin.namespaces.grant_permission("public/default", "writer", ["produce"])
    key = create_secret_key()
    (tmp_path / "secret.key").write_bytes(key)
    certificates = make_certificates(tmp_path / "certs")
    server = start_server(data, "--auth-token-secret-key", str(tmp_path / "secret.key"), "--tls-cert-file",
                          str(certificates.cert), "--tls-key-file", str(certificates.key), ca=certificates.ca)
    try:
        assert server.http_url.startswith("https://")
        got = run_hidden(data.parent, AUTHENTICATED, {
            "url": server.http_url, "ca": str(certificates.ca), "reader": create_token(key, "reader"),
            "producer": create_token(key, "writer")}, env=spark_environment())
    finally:
        server.stop()
    assert got["reader"] == 100
    assert "needs a token" in got["none"] and ".option('authToken', TOKEN)" in got["none"]
    assert "refused this token's role" in got["producer"] and "authToken" in got["producer"]
    assert "CERTIFICATE_VERIFY_FAILED" in got["no trust"]
    assert "give the CA certificates that sign the server's with the option tlsTrustCertsFilePath" in got["no trust"]
