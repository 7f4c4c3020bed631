"""Kafka's rule on a compacted topic over `seglog serve` (issue 29): a SEND whose message has no partition key,
to a topic whose cleanup_policy compacts, fails that send at once with the real pulsar-client (SEND_ERROR
ChecksumError: the client fails that message alone and keeps its producer and connection), and nothing of it is
written; keyed sends and topics that do not compact are untouched."""

from __future__ import annotations

import httpx
import pulsar
import pytest

import seglog
from helpers_server import refused_at_once, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("compacted-keys") / "data")
    yield running
    running.stop()


def create(server, topic: str, **settings) -> None:
    response = httpx.put(f"{server.http_url}/seglog/v1/topics/public/default/{topic}", json={"settings": settings},
                         timeout=30)
    assert response.status_code == 200, response.text


def stored(server, topic: str) -> list[tuple[bytes | None, bytes]]:
    with seglog.open(server.data, background=False) as log:
        return [(m.key, m.value) for m in log.topic(topic).reader("earliest")]


def test_a_keyless_send_fails_alone_and_writes_nothing(server):
    create(server, "table", cleanup_policy="compact")
    client = server.client()
    producer = client.create_producer("persistent://public/default/table", batching_enabled=False,
                                      send_timeout_millis=30_000)
    producer.send(b"first", partition_key="k1")
    refused_at_once(pulsar.ChecksumError, lambda: producer.send(b"no key"))
    producer.send(b"second", partition_key="k2")  # the same producer goes on
    assert stored(server, "table") == [(b"k1", b"first"), (b"k2", b"second")]


def test_a_batch_with_a_keyless_message_fails_whole(server):
    create(server, "batched", cleanup_policy="compact,delete")
    client = server.client()
    producer = client.create_producer("persistent://public/default/batched", batching_enabled=True,
                                      batching_max_publish_delay_ms=60_000)
    results: list = []
    for value, key in ((b"a", "k"), (b"b", None), (b"c", "m")):  # one SEND of three messages
        producer.send_async(value, lambda result, _id: results.append(result),
                            **({} if key is None else {"partition_key": key}))
    with pytest.raises(pulsar.ChecksumError):
        producer.flush()
    assert results == [pulsar.Result.ChecksumError] * 3
    producer.send_async(b"d", lambda result, _id: results.append(result), partition_key="k")
    producer.flush()  # (the producer goes on, and sends at once: its batch delay is a minute)
    assert results[3:] == [pulsar.Result.Ok]
    assert stored(server, "batched") == [(b"k", b"d")]


def test_a_topic_that_does_not_compact_takes_keyless_messages(server):
    create(server, "events")
    producer = server.client().create_producer("persistent://public/default/events", batching_enabled=False)
    producer.send(b"no key")
    assert stored(server, "events") == [(None, b"no key")]


def test_a_topic_made_compacted_while_its_producer_is_open(server):
    create(server, "changed")
    producer = server.client().create_producer("persistent://public/default/changed", batching_enabled=False)
    producer.send(b"before")
    response = httpx.post(f"{server.http_url}/seglog/v1/topics/public/default/changed/settings",
                          json={"cleanup_policy": "compact"}, timeout=30)
    assert response.status_code == 204, response.text
    refused_at_once(pulsar.ChecksumError, lambda: producer.send(b"after"))
    producer.send(b"keyed", partition_key="k")
    assert stored(server, "changed") == [(None, b"before"), (b"k", b"keyed")]
