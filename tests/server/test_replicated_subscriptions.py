"""Which subscriptions are replicated (PIP-33, docs/REPLICATION.md "Replicated subscriptions"), with the real
pulsar-client against `seglog serve`: a consumer asking for it (replicate_subscription_state_enabled) marks its
partition of the subscription, as Pulsar's broker does, and a restart keeps it; REST replicatedSubscriptionStatus
reads and sets it by topic or partition name, stats show it, and every refusal says why."""

from __future__ import annotations

import httpx
import pytest

from helpers_server import pulsar, start_server

BASE = "/admin/v2/persistent/public/default"
EARLIEST = pulsar.InitialPosition.Earliest


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        yield client


def status(http: httpx.Client, topic: str, subscription: str) -> dict[str, bool]:
    response = http.get(f"{BASE}/{topic}/subscription/{subscription}/replicatedSubscriptionStatus")
    assert response.status_code == 200, response.text
    return response.json()


def set_status(http: httpx.Client, topic: str, subscription: str, body: object) -> httpx.Response:
    return http.post(f"{BASE}/{topic}/subscription/{subscription}/replicatedSubscriptionStatus", json=body)


def is_replicated(http: httpx.Client, topic: str, subscription: str) -> bool:
    stats = http.get(f"{BASE}/{topic}/stats").json()
    return stats["subscriptions"][subscription]["isReplicated"]


def test_a_consumer_asking_for_it_makes_its_subscription_replicated_across_a_restart(tmp_path):
    server = start_server(tmp_path / "data")
    try:
        client = server.client()
        client.subscribe("kept", "replicated", replicate_subscription_state_enabled=True).close()
        client.subscribe("kept", "plain").close()
        with httpx.Client(base_url=server.http_url, timeout=30) as http:
            assert status(http, "kept", "replicated") == {"persistent://public/default/kept": True}
            assert status(http, "kept", "plain") == {"persistent://public/default/kept": False}
            assert is_replicated(http, "kept", "replicated") and not is_replicated(http, "kept", "plain")
    finally:
        server.stop()
    server = start_server(tmp_path / "data")
    try:
        with httpx.Client(base_url=server.http_url, timeout=30) as http:
            assert status(http, "kept", "replicated") == {"persistent://public/default/kept": True}
    finally:
        server.stop()


def test_a_later_consumer_that_does_not_ask_leaves_it_replicated_and_one_that_asks_upgrades_it(server, http):
    """Pulsar's broker flips the flag on when a consumer asks, never off (ReplicatedSubscriptionConfigTest)."""
    client = server.client()
    client.subscribe("upgraded", "s").close()
    assert not is_replicated(http, "upgraded", "s")
    client.subscribe("upgraded", "s", replicate_subscription_state_enabled=True).close()
    assert is_replicated(http, "upgraded", "s")
    consumer = client.subscribe("upgraded", "s", consumer_type=pulsar.ConsumerType.Shared)
    assert is_replicated(http, "upgraded", "s")
    consumer.close()


def test_a_partitioned_topics_consumer_marks_each_partition_and_rest_toggles_one(server, http):
    assert http.put(f"{BASE}/orders/partitions", json=3).status_code == 204
    consumer = server.client().subscribe("orders", "billing", replicate_subscription_state_enabled=True)
    names = [f"persistent://public/default/orders-partition-{p}" for p in range(3)]
    assert status(http, "orders", "billing") == dict.fromkeys(names, True)
    assert set_status(http, "orders-partition-1", "billing", False).status_code == 204
    assert status(http, "orders", "billing") == {names[0]: True, names[1]: False, names[2]: True}
    assert status(http, "orders-partition-1", "billing") == {names[1]: False}
    partitions = http.get(f"{BASE}/orders/partitioned-stats").json()["partitions"]
    assert [partitions[name]["subscriptions"]["billing"]["isReplicated"] for name in names] == [True, False, True]
    assert http.get(f"{BASE}/orders/partitioned-stats").json()["subscriptions"]["billing"]["isReplicated"]
    assert set_status(http, "orders", "billing", False).status_code == 204
    assert status(http, "orders", "billing") == dict.fromkeys(names, False)
    consumer.close()


@pytest.mark.parametrize(("topic", "subscription", "body", "code", "reason"), [
    ("refused", "s", "yes", 400, "expected true or false: whether the subscription's position is replicated"),
    ("refused", "s", None, 400, "the request has no body; expected true or false"),
    ("refused", "nope", True, 404, "subscription nope of public/default/refused does not exist (it has s)"),
    ("missing", "s", True, 404, "topic public/default/missing does not exist"),
])
def test_a_refused_status_says_why_and_changes_nothing(server, http, topic, subscription, body, code, reason):
    server.client().subscribe("refused", "s").close()
    path = f"{BASE}/{topic}/subscription/{subscription}/replicatedSubscriptionStatus"
    response = http.post(path, json=body) if body is not None else http.post(path)
    assert response.status_code == code, response.text
    assert reason in response.json()["reason"]
    assert status(http, "refused", "s") == {"persistent://public/default/refused": False}


def test_with_replicated_subscriptions_disabled_a_consumer_asking_subscribes_unreplicated(tmp_path):
    """Pulsar's broker since 2.8 (apache/pulsar#9523): the consumer is not refused (2.6.2 refused it with
    NotAllowed, which locked every such consumer out once the setting was turned off); its subscription is not
    made replicated, and the server says so in its log. Enabling it through REST is refused."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "broker.conf").write_text("enableReplicatedSubscriptions=false\n")
    server = start_server(data)
    try:
        client = server.client()
        consumer = client.subscribe("off", "s", replicate_subscription_state_enabled=True, initial_position=EARLIEST)
        client.create_producer("off").send(b"still consumed")
        assert consumer.receive(10_000).data() == b"still consumed"
        with httpx.Client(base_url=server.http_url, timeout=30) as http:
            assert not is_replicated(http, "off", "s")
            response = set_status(http, "off", "s", True)
            assert response.status_code == 400
            assert "replicated subscriptions are disabled on this cluster (broker.conf " \
                   "enableReplicatedSubscriptions=false)" in response.json()["reason"]
            assert set_status(http, "off", "s", False).status_code == 204
    finally:
        server.stop()
    assert "asks for a replicated subscription, and replicated subscriptions are disabled" in server.log()
