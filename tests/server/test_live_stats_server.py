"""Live rates and counters of `seglog serve` with the real pulsar-client: what a producer sends and a consumer
receives is counted exactly in Pulsar's TopicStats (REST, the CLI with --url) and in /metrics, with Pulsar's
fields for publishers and consumers; messages a consumer gives back are counted in msgRateRedeliver."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from helpers_server import pulsar, rest

TOPIC = "persistent://public/default/counted"
STATS = "/admin/v2/persistent/public/default/counted/stats"
COUNT = 500
SIZE = 37
LABELS = 'cluster="standalone",namespace="public/default",topic="persistent://public/default/counted"'


def stats(server) -> dict:
    status, answer = rest(server.http_url, "GET", STATS)
    assert status == 200, answer
    return answer


def metrics(server) -> dict[str, float]:
    with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines if line and line[0] != "#"}


def wait_for(condition, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_sends_and_deliveries_are_counted_exactly(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "s", consumer_name="the-consumer",
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(TOPIC, producer_name="the-producer", batching_enabled=True)
    for i in range(COUNT):
        producer.send_async(bytes([i % 256]) * SIZE, None)
    producer.flush()

    topic = stats(server)
    assert (topic["msgInCounter"], topic["bytesInCounter"]) == (COUNT, COUNT * SIZE)
    assert topic["msgRateIn"] > 0 and topic["averageMsgSize"] == pytest.approx(SIZE)
    (publisher,) = topic["publishers"]
    assert publisher["producerName"] == "the-producer" and publisher["accessMode"] == "Shared"
    assert publisher["msgRateIn"] > 0 and publisher["msgThroughputIn"] == pytest.approx(SIZE * publisher["msgRateIn"])
    assert publisher["averageMsgSize"] == pytest.approx(SIZE)
    assert publisher["address"].startswith("/127.0.0.1:") and isinstance(publisher["connectedSince"], str)
    figures = metrics(server)
    assert figures[f"pulsar_in_messages_total{{{LABELS}}}"] == COUNT
    assert figures[f"pulsar_in_bytes_total{{{LABELS}}}"] == COUNT * SIZE
    assert figures[f"pulsar_rate_in{{{LABELS}}}"] > 0 and figures[f"pulsar_producers_count{{{LABELS}}}"] == 1

    for _ in range(COUNT):
        consumer.acknowledge(consumer.receive(10_000))
    topic = stats(server)
    sub = topic["subscriptions"]["s"]
    (entry,) = sub["consumers"]
    for figures_of in (topic, sub, entry):
        assert (figures_of["msgOutCounter"], figures_of["bytesOutCounter"]) == (COUNT, COUNT * SIZE)
        assert figures_of["msgRateOut"] > 0
        assert figures_of["msgThroughputOut"] == pytest.approx(SIZE * figures_of["msgRateOut"])
    assert entry["consumerName"] == "the-consumer" and entry["address"].startswith("/127.0.0.1:")
    for key, kind in (("msgRateRedeliver", float), ("unackedMessages", int), ("availablePermits", int),
                      ("blockedConsumerOnUnackedMsgs", bool), ("connectedSince", str)):
        assert isinstance(entry[key], kind), key
    sub_labels = LABELS.replace(',topic=', ',subscription="s",topic=')
    figures = metrics(server)
    assert figures[f"pulsar_out_messages_total{{{sub_labels}}}"] == COUNT
    assert figures[f"pulsar_out_bytes_total{{{sub_labels}}}"] == COUNT * SIZE
    assert figures[f"pulsar_subscription_msg_rate_out{{{sub_labels}}}"] > 0

    seglog_stats = json.loads(subprocess.run(
        [sys.executable, "-m", "seglog", "--url", server.http_url, "topics", "stats", "public/default/counted"],
        check=True, capture_output=True, text=True, timeout=60).stdout)
    assert (seglog_stats["msgInCounter"], seglog_stats["bytesOutCounter"]) == (COUNT, COUNT * SIZE)
    assert seglog_stats["publishers"][0]["producerName"] == "the-producer"


def test_negative_acks_are_counted_as_redelivery(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "shared", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(10):
        producer.send(b"m%d" % i)
    for _ in range(10):
        consumer.negative_acknowledge(consumer.receive(10_000))

    def redelivering():
        sub = stats(server)["subscriptions"]["shared"]
        return sub if sub["msgRateRedeliver"] > 0 else None
    sub = wait_for(redelivering)
    assert sub is not None, stats(server)
    assert sub["consumers"][0]["msgRateRedeliver"] > 0
    sub_labels = LABELS.replace(',topic=', ',subscription="shared",topic=')
    assert metrics(server)[f"pulsar_subscription_msg_rate_redeliver{{{sub_labels}}}"] > 0
    for _ in range(10):  # given again: counted out again
        consumer.acknowledge(consumer.receive(10_000))
    assert wait_for(lambda: stats(server)["subscriptions"]["shared"]["msgOutCounter"] == 20)
