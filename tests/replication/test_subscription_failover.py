"""Replicated subscriptions (PIP-33) between two clusters of `seglog serve`, with the real Pulsar client:
a consumer's acknowledgements on one cluster move its subscription on the other, through snapshots, so a
consumer failing over to the other cluster gets again at most what was written in one snapshot interval
before its last acknowledgement; a subscription the other cluster lacks is made there; markers reach no
consumer; the snapshot metrics count them."""

from __future__ import annotations

import re
import urllib.request

import pytest

from helpers_replication import replicate_namespace, start_clusters, stop_clusters, wait_until
from helpers_server import pulsar

TOPIC = "persistent://public/default/orders"
ROUND = 5  # messages written between two snapshots
FAST = "replicatedSubscriptionsSnapshotFrequencyMillis=100\n"


@pytest.fixture
def pair(tmp_path):
    clusters = start_clusters(tmp_path, "east", "west", broker_conf={"east": FAST, "west": FAST})
    try:
        replicate_namespace(clusters, "public/default", ["east", "west"], on=["east", "west"])
        yield clusters
    finally:
        stop_clusters(clusters)


def _metric(cluster, name: str) -> float:
    with urllib.request.urlopen(f"{cluster.server.http_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{name}{{[^}}]*}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _subscription(cluster, name: str) -> dict | None:
    status, stats = cluster.rest("GET", "/admin/v2/persistent/public/default/orders/stats")
    return stats["subscriptions"].get(name) if status == 200 else None


def _subscribe(cluster, name: str):
    return cluster.client().subscribe(TOPIC, name, replicate_subscription_state_enabled=True,
                                      initial_position=pulsar.InitialPosition.Earliest)


def _receive(consumer, count: int) -> list[bytes]:
    got = []
    for _ in range(count):
        message = consumer.receive(10_000)
        consumer.acknowledge(message)
        got.append(message.data())
    return got


def test_a_consumer_failing_over_gets_again_at_most_one_snapshot_interval(pair):
    east, west = pair["east"], pair["west"]
    _subscribe(west, "app").close()  # (the subscription is on both clusters from the start)
    app, audit = _subscribe(east, "app"), _subscribe(east, "audit")  # audit: only on east
    producer = east.client().create_producer(TOPIC)
    sent = []
    for round_ in range(3):  # each round then a snapshot taken after it: at its last message
        taken = _metric(east, "pulsar_replicated_subscriptions_snapshot_ms_count")
        for i in range(ROUND):
            sent.append(f"{round_}-{i}".encode())
            producer.send(sent[-1])
        wait_until(lambda taken=taken: _metric(east, "pulsar_replicated_subscriptions_snapshot_ms_count") > taken)
    acknowledged = 2 * ROUND + 3  # into the third round: the newest snapshot it passed is the second round's
    assert _receive(app, acknowledged) == sent[:acknowledged]
    assert _receive(audit, len(sent)) == sent
    # west's app moved to the second round's snapshot; audit was made there, at its end, replicated
    wait_until(lambda: (_subscription(west, "app") or {}).get("msgBacklog") == len(sent) - 2 * ROUND)
    wait_until(lambda: _subscription(west, "audit") is not None)
    assert _subscription(west, "audit")["msgBacklog"] == 0
    assert west.ok("GET", "/admin/v2/persistent/public/default/orders/subscription/audit/"
                          "replicatedSubscriptionStatus") == {TOPIC: True}
    assert _metric(east, "pulsar_replicated_subscriptions_timedout_snapshots") == 0
    assert _metric(east, "pulsar_replicated_subscriptions_pending_snapshots") == 0
    east.kill()
    # failover: west delivers from the last snapshot east's acknowledgements passed, markers never
    consumer = _subscribe(west, "app")
    again = _receive(consumer, len(sent) - 2 * ROUND)
    assert again == sent[2 * ROUND:]
    assert len(set(again) & set(sent[:acknowledged])) <= ROUND  # the bound: one interval's messages
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
