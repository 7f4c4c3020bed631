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
from helpers_server import pulsar, received_values

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


def _snapshots(cluster, subscription: str) -> list[tuple[int, dict[str, int]]]:
    """(position here, {remote: its position}) of each snapshot `subscription` has not passed yet, oldest
    first, from internal-stats."""
    status, stats = cluster.rest("GET", "/admin/v2/persistent/public/default/orders/internalStats")
    cursor = stats["cursors"].get(subscription, {}) if status == 200 else {}
    return [(_offset(s["position"]), {remote: _offset(p) for remote, p in s["clusters"].items()})
            for s in cursor.get("replicatedSubscriptionSnapshots", [])]


def _offset(position: str) -> int:
    return int(position.split(":")[1])


def _round(cluster, producer, values: list[bytes]) -> None:
    """Write `values` as one batch (stored at once: no snapshot starts in its middle), then wait for the
    snapshot at its last message and for no other snapshot under way (one that began before the batch would
    end after it and tie it to the remotes' positions before it)."""
    for value in values:
        producer.send_async(value, lambda result, _: None)
    producer.flush()
    last = cluster.ok("GET", "/admin/v2/persistent/public/default/orders/internalStats")["lastConfirmedEntry"]
    wait_until(lambda: _offset(last) in [here for here, _ in _snapshots(cluster, "app")]
               and _metric(cluster, "pulsar_replicated_subscriptions_pending_snapshots") == 0)


def _batching_producer(cluster):
    return cluster.client().create_producer(TOPIC, batching_enabled=True, batching_max_messages=ROUND,
                                            batching_max_publish_delay_ms=60_000)


def test_a_consumer_failing_over_gets_again_at_most_one_snapshot_interval(pair):
    east, west = pair["east"], pair["west"]
    _subscribe(west, "app").close()  # (the subscription is on both clusters from the start)
    app, audit = _subscribe(east, "app"), _subscribe(east, "audit")  # audit: only on east
    producer = _batching_producer(east)
    sent = []
    for round_ in range(3):  # each round, then a snapshot at its last message
        values = [f"{round_}-{i}".encode() for i in range(ROUND)]
        _round(east, producer, values)
        sent.extend(values)
    # a snapshot a round, each at the same message on both (west has east's messages only)
    assert _snapshots(east, "app") == [(end, {"west": end}) for end in range(ROUND - 1, len(sent), ROUND)]
    acknowledged = 2 * ROUND + 3  # into the third round: the second round's snapshot is the newest it passes
    assert received_values(app, acknowledged) == sent[:acknowledged]
    assert received_values(audit, len(sent)) == sent
    # west's app moved to that snapshot; audit was made there at its end, replicated
    wait_until(lambda: (_subscription(west, "app") or {}).get("msgBacklog") == ROUND)
    wait_until(lambda: _subscription(west, "audit") is not None)
    assert _subscription(west, "audit")["msgBacklog"] == 0
    assert west.ok("GET", "/admin/v2/persistent/public/default/orders/subscription/audit/"
                          "replicatedSubscriptionStatus") == {TOPIC: True}
    assert _metric(east, "pulsar_replicated_subscriptions_snapshot_ms_count") >= 3
    assert _metric(east, "pulsar_replicated_subscriptions_timedout_snapshots") == 0
    east.kill()
    # failover: west delivers from there, markers never: again only what came after that snapshot, less than
    # one round (what was written between two snapshots)
    consumer = _subscribe(west, "app")
    again = received_values(consumer, ROUND)
    assert again == sent[2 * ROUND:]
    assert len(set(again) & set(sent[:acknowledged])) == acknowledged - 2 * ROUND < ROUND
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)


def test_with_three_clusters_the_position_reaches_both_others(tmp_path):
    # (two rounds of requests: every snapshot waits for what the remotes sent each other)
    names = ("east", "west", "north")
    clusters = start_clusters(tmp_path, *names, broker_conf=dict.fromkeys(names, FAST))
    try:
        replicate_namespace(clusters, "public/default", list(names), on=list(names))
        for name in ("west", "north"):
            _subscribe(clusters[name], "app").close()
        app = _subscribe(clusters["east"], "app")
        _round(clusters["east"], _batching_producer(clusters["east"]), [b"%d" % i for i in range(ROUND)])
        assert _snapshots(clusters["east"], "app") == [(ROUND - 1, {"west": ROUND - 1, "north": ROUND - 1})]
        received_values(app, ROUND)
        for name in ("west", "north"):
            wait_until(lambda name=name: (_subscription(clusters[name], "app") or {}).get("msgBacklog") == 0)
    finally:
        stop_clusters(clusters)
