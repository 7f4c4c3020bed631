"""Spark reading and writing through `seglog serve` while its processes cannot see the data directory (a private
mount namespace hides it: helpers_hidden), as a Spark cluster on other hosts: the driver plans through the admin
REST API and the executors read the server's Flight port."""

from __future__ import annotations

import seglog
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
