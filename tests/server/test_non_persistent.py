"""Non-persistent topics (`non-persistent://`) with the real Pulsar client: dispatched from the server's memory
to the consumers connected, dropped (and counted) when none can take them, never written to the data
directory; pattern subscriptions list them by mode; the admin REST API creates, lists, deletes them and shows
their stats."""

from __future__ import annotations

import os
import re
import time

import pytest

from helpers_server import pulsar, receive_until, refused_at_once, rest

NP = "non-persistent://public/default"
PREFIX = "/admin/v2/non-persistent/public/default"


def _stats(server, topic: str) -> dict:
    status, stats = rest(server.http_url, "GET", f"{PREFIX}/{topic}/stats")
    assert status == 200, stats
    return stats


def _directory_size(path) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def _rss_anon_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("RssAnon:"))
    return int(line.split()[1])


def test_shared_consumers_share_what_is_produced_and_receipts_are_pulsars_ids(server):
    client = server.client()
    first = client.subscribe(f"{NP}/shared", "s", consumer_type=pulsar.ConsumerType.Shared)
    second = client.subscribe(f"{NP}/shared", "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(f"{NP}/shared", batching_enabled=False)
    receipts = [producer.send(b"m%d" % i) for i in range(20)]
    assert {(r.ledger_id(), r.entry_id()) for r in receipts} == {(0, 0)}  # as Pulsar's broker answers
    got = receive_until([first, second], 20)
    assert sorted(m.data() for share in got for m in share) == sorted(b"m%d" % i for i in range(20))
    assert all(got), "both shared consumers were given messages"
    assert got[0][0].topic_name() == f"{NP}/shared"


def test_an_exclusive_subscription_takes_one_consumer_and_gets_every_message_in_order(server):
    client = server.client()
    consumer = client.subscribe(f"{NP}/exclusive", "s")
    refused_at_once(pulsar.ConsumerBusy, lambda: client.subscribe(f"{NP}/exclusive", "s"))
    producer = client.create_producer(f"{NP}/exclusive")  # batched: entries of several messages
    for i in range(100):
        producer.send_async(b"m%d" % i, None)
    producer.flush()
    assert [consumer.receive(10_000).data() for _ in range(100)] == [b"m%d" % i for i in range(100)]


def test_messages_sent_while_no_consumer_is_connected_are_dropped_and_counted(server):
    client = server.client()
    client.subscribe(f"{NP}/dropped", "s").close()  # the subscription stays, without consumers
    producer = client.create_producer(f"{NP}/dropped", batching_enabled=False)
    for i in range(30):
        producer.send(b"gone %d" % i)
    stats = _stats(server, "dropped")
    assert stats["msgInCounter"] == 30 and stats["msgOutCounter"] == 0
    assert stats["subscriptions"]["s"]["msgDropRate"] > 0  # (30 over the rate window)
    consumer = client.subscribe(f"{NP}/dropped", "s")
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    producer.send(b"kept")
    assert consumer.receive(10_000).data() == b"kept"


def test_a_consumer_without_permits_costs_no_memory_and_nothing_reaches_the_data_directory(server):
    client = server.client()
    slow = client.subscribe(f"{NP}/slow", "s", receiver_queue_size=1)  # never receives: its permits run out
    producer = client.create_producer(f"{NP}/slow", batching_enabled=False, block_if_queue_full=True)
    payload = os.urandom(100 * 1024)
    producer.send(payload)  # (the server's memory once it has served a first message)
    size_before, rss_before = _directory_size(server.data), _rss_anon_kib(server.process.pid)
    for _ in range(2000):  # 200 MB through
        producer.send_async(payload, None)
    producer.flush()
    rss_after = _rss_anon_kib(server.process.pid)
    assert rss_after - rss_before < 40 * 1024, f"RssAnon {rss_before} -> {rss_after} KiB"
    assert _directory_size(server.data) - size_before < 1024 * 1024  # (nothing but the catalog's own writes)
    assert not list(server.data.rglob("*slow*"))
    stats = _stats(server, "slow")
    assert stats["msgInCounter"] == 2001
    subscription = stats["subscriptions"]["s"]
    assert subscription["msgOutCounter"] < 10 and subscription["msgDropRate"] > 0
    assert subscription["consumers"][0]["availablePermits"] <= 0
    assert slow.receive(10_000).data() == payload  # what it was given before its permits ran out


def test_pattern_subscriptions_list_topics_by_mode(server):
    client = server.client()
    for name in ("persistent://public/default/mode-a", f"{NP}/mode-b", "persistent://public/default/other"):
        client.create_producer(name)
    pattern = re.compile("public/default/mode-.*")
    modes = pulsar.RegexSubscriptionMode
    consumers = {mode: client.subscribe(pattern, f"sub-{mode}", regex_subscription_mode=mode)
                 for mode in (modes.AllTopics, modes.PersistentOnly, modes.NonPersistentOnly)}
    client.create_producer("persistent://public/default/mode-a").send(b"a")
    client.create_producer(f"{NP}/mode-b").send(b"b")
    expected = {modes.AllTopics: {b"a", b"b"}, modes.PersistentOnly: {b"a"}, modes.NonPersistentOnly: {b"b"}}
    for mode, consumer in consumers.items():
        (got,) = receive_until([consumer], len(expected[mode]), seconds=10)
        assert {m.data() for m in got} == expected[mode], mode
        with pytest.raises(pulsar.Timeout):
            consumer.receive(200)
    status, listed = rest(server.http_url, "GET", "/admin/v2/namespaces/public/default/topics?mode=ALL")
    assert status == 200 and f"{NP}/mode-b" in listed and "persistent://public/default/mode-a" in listed
    assert rest(server.http_url, "GET", PREFIX) == (200, [f"{NP}/mode-b"])


def test_a_partitioned_non_persistent_topic_made_by_the_admin_api(server):
    assert rest(server.http_url, "PUT", f"{PREFIX}/parts/partitions", 3) == (204, None)
    assert rest(server.http_url, "PUT", f"{PREFIX}/parts/partitions", 3)[0] == 409
    assert rest(server.http_url, "GET", f"{PREFIX}/parts/partitions") == (200, {"partitions": 3})
    assert rest(server.http_url, "GET", f"{PREFIX}/partitioned") == (200, [f"{NP}/parts"])
    client = server.client()
    consumer = client.subscribe(f"{NP}/parts", "s")
    producer = client.create_producer(f"{NP}/parts", batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(30):
        producer.send(b"m%d" % i)
    (got,) = receive_until([consumer], 30)
    assert sorted(m.data() for m in got) == sorted(b"m%d" % i for i in range(30))
    assert {m.topic_name() for m in got} == {f"{NP}/parts-partition-{p}" for p in range(3)}
    status, stats = rest(server.http_url, "GET", f"{PREFIX}/parts/partitioned-stats?perPartition=true")
    assert status == 200 and stats["metadata"] == {"partitions": 3} and stats["msgInCounter"] == 30
    assert stats["subscriptions"]["s"]["msgOutCounter"] == 30 and len(stats["partitions"]) == 3
    assert rest(server.http_url, "DELETE", f"{PREFIX}/parts/partitions")[0] == 412  # clients connected
    consumer.close()
    producer.close()
    assert rest(server.http_url, "DELETE", f"{PREFIX}/parts/partitions") == (204, None)
    assert rest(server.http_url, "GET", f"{PREFIX}/parts/partitions") == (200, {"partitions": 0})


def test_the_admin_api_creates_lists_and_deletes_non_persistent_topics(server):
    assert rest(server.http_url, "PUT", f"{PREFIX}/made") == (204, None)
    assert rest(server.http_url, "PUT", f"{PREFIX}/made")[0] == 409
    assert rest(server.http_url, "GET", PREFIX) == (200, [f"{NP}/made"])
    stats = _stats(server, "made")
    assert stats["publishers"] == [] and stats["subscriptions"] == {} and stats["msgDropRate"] == 0
    assert "nonContiguousDeletedMessagesRanges" not in stats
    assert rest(server.http_url, "DELETE", f"{PREFIX}/made") == (204, None)
    assert rest(server.http_url, "GET", f"{PREFIX}/made/stats")[0] == 404
    assert rest(server.http_url, "GET", "/admin/v2/non-persistent/public/missing")[0] == 404


def test_a_topic_exists_while_it_has_producers_or_subscriptions(server):
    client = server.client()
    producer = client.create_producer(f"{NP}/while-used")
    assert rest(server.http_url, "GET", PREFIX) == (200, [f"{NP}/while-used"])
    producer.close()
    deadline = time.monotonic() + 10
    while rest(server.http_url, "GET", PREFIX)[1] and time.monotonic() < deadline:
        time.sleep(0.05)  # (the close reaches the server after the client's answer)
    assert rest(server.http_url, "GET", PREFIX) == (200, [])


def test_seek_and_last_message_id_are_refused_as_on_pulsar(server):
    client = server.client()
    consumer = client.subscribe(f"{NP}/no-seek", "s")
    with pytest.raises(pulsar.PulsarException):
        consumer.seek(pulsar.MessageId.earliest)


def test_a_missing_namespace_is_refused_at_once(server):
    client = server.client()
    refused_at_once(pulsar.TopicNotFound, lambda: client.create_producer("non-persistent://public/missing/t"))


def test_key_shared_consumers_each_get_whole_keys(server):
    client = server.client()
    consumers = [client.subscribe(f"{NP}/keys", "s", consumer_type=pulsar.ConsumerType.KeyShared,
                                  consumer_name=f"c{i}") for i in range(2)]
    producer = client.create_producer(f"{NP}/keys", batching_enabled=False)
    for i in range(60):
        producer.send(b"%d" % i, partition_key=f"key-{i % 6}")
    got = receive_until(consumers, 60)
    keys = [{m.partition_key() for m in share} for share in got]
    assert sum(map(len, got)) == 60 and not keys[0] & keys[1]


def test_clients_of_the_http_service_url_look_non_persistent_topics_up(server):
    client = server.client(server.http_url)
    consumer = client.subscribe(f"{NP}/over-http", "s")
    client.create_producer(f"{NP}/over-http").send(b"found")
    assert consumer.receive(10_000).data() == b"found"
