"""Geo-replication between seglog clusters with the real Pulsar client: 1-way, 2-way and a full mesh of three
with no loops and no duplicates, message-level restrictions, and clusters killed and restarted."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections import Counter

import pytest
from click.testing import CliRunner

from helpers_replication import WAIT_S, read_all, replicate_namespace, start_clusters, stop_clusters, wait_until
from helpers_server import pulsar, receive_until, refused_at_once
from seglog.cli import main

TOPIC = "persistent://public/default/orders"


def _values(messages) -> Counter:
    return Counter(m.data() for m in messages)


def test_two_way_replication_delivers_each_message_once_everywhere(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    east = two["east"].client().create_producer(TOPIC)
    west = two["west"].client().create_producer(TOPIC)
    for i in range(20):
        east.send(b"e%d" % i)
        west.send(b"w%d" % i)
    expected = Counter([b"e%d" % i for i in range(20)] + [b"w%d" % i for i in range(20)])
    for name in ("east", "west"):
        got = read_all(two[name], TOPIC, expected=40)
        assert _values(got) == expected, name
    replicated = [m for m in read_all(two["west"], TOPIC, expected=40) if m.data().startswith(b"e")]
    assert [m.data() for m in replicated] == [b"e%d" % i for i in range(20)]  # in the producer's order


def test_one_way_replication_sends_only_from_the_cluster_that_lists_the_other(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east"])  # west keeps its default [west]
    two["east"].client().create_producer(TOPIC).send(b"from east")
    two["west"].client().create_producer(TOPIC).send(b"from west")
    assert _values(read_all(two["west"], TOPIC, expected=2)) == Counter([b"from east", b"from west"])
    assert _values(read_all(two["east"], TOPIC, expected=1)) == Counter([b"from east"])


def test_a_full_mesh_of_three_has_no_loops_and_no_duplicates(three):
    names = ["east", "west", "north"]
    replicate_namespace(three, "public/default", names, on=names)
    producers = {name: three[name].client().create_producer(TOPIC, batching_max_messages=5) for name in names}
    for i in range(10):
        for name, producer in producers.items():
            producer.send_async(f"{name}-{i}".encode(), None)
    for producer in producers.values():
        producer.flush()
    expected = Counter(f"{name}-{i}".encode() for name in names for i in range(10))
    for name in names:
        assert _values(read_all(three[name], TOPIC, expected=30)) == expected, name


def test_message_level_replication_clusters_and_disable_replication(three):
    names = ["east", "west", "north"]
    replicate_namespace(three, "public/default", names, on=names)
    producer = three["east"].client().create_producer(TOPIC)
    producer.send(b"local only", disable_replication=True)
    producer.send(b"east and north", replication_clusters=["east", "north"])
    producer.send(b"everywhere")
    assert _values(read_all(three["east"], TOPIC, expected=3)) == Counter([b"local only", b"east and north",
                                                                           b"everywhere"])
    assert _values(read_all(three["north"], TOPIC, expected=2)) == Counter([b"east and north", b"everywhere"])
    assert _values(read_all(three["west"], TOPIC, expected=1)) == Counter([b"everywhere"])


def test_a_killed_remote_gets_everything_once_after_it_restarts(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    producer = two["east"].client().create_producer(TOPIC)
    producer.send(b"before")
    assert _values(read_all(two["west"], TOPIC, expected=1)) == Counter([b"before"])
    two["west"].kill()
    for i in range(50):  # east keeps taking messages while west is down
        producer.send(b"m%d" % i)
    two["west"].restart()
    expected = Counter([b"before"] + [b"m%d" % i for i in range(50)])
    assert _values(read_all(two["west"], TOPIC, expected=51)) == expected


def test_a_killed_origin_resumes_from_its_cursor_without_duplicates(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    producer = two["east"].client().create_producer(TOPIC, batching_max_messages=10, block_if_queue_full=True)
    for i in range(2000):
        producer.send_async(b"m%d" % i, None)
    producer.flush()
    two["east"].kill()  # mid-replication: some sent and not yet acknowledged on east's cursor
    two["east"].restart()
    assert _values(read_all(two["west"], TOPIC, expected=2000)) == Counter(b"m%d" % i for i in range(2000))


def test_a_partitioned_topic_is_made_on_the_remote_with_its_partitions(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].ok("PUT", "/admin/v2/persistent/public/default/spread/partitions", 3)
    producer = two["east"].client().create_producer("persistent://public/default/spread",
                                                   message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
                                                   batching_enabled=False)
    for i in range(30):
        producer.send(b"p%d" % i)
    consumer = two["west"].client().subscribe("persistent://public/default/spread", "s",
                                             initial_position=pulsar.InitialPosition.Earliest)
    (got,) = receive_until([consumer], 30, seconds=WAIT_S)
    assert Counter(m.data() for m in got) == Counter(b"p%d" % i for i in range(30))
    assert two["west"].ok("GET", "/admin/v2/persistent/public/default/spread/partitions") == {"partitions": 3}
    # each message kept its partition
    assert {m.topic_name().rsplit("-", 1)[1] for m in got} == {"0", "1", "2"}


SPREAD = "persistent://public/default/spread"
SPREAD_PARTITIONS = "/admin/v2/persistent/public/default/spread/partitions"


def _round_robin(cluster):
    return cluster.client().create_producer(SPREAD, batching_enabled=False,
                                            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)


def test_growing_a_replicated_topic_grows_it_on_the_remote_first_and_replicates_the_new_partitions(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].ok("PUT", SPREAD_PARTITIONS, 2)
    before = _round_robin(two["east"])
    for i in range(4):
        before.send(b"before%d" % i)
    # (replicators read it here and write it there)
    wait_until(lambda: _replication_to(two["east"], "west").get("replicationBacklog") == 0
               and _replication_to(two["east"], "west").get("connected"))
    before.close()
    two["east"].ok("POST", SPREAD_PARTITIONS, 4)
    assert two["west"].ok("GET", SPREAD_PARTITIONS) == {"partitions": 4}  # grown there before here
    assert two["east"].ok("GET", SPREAD_PARTITIONS) == {"partitions": 4}
    after = _round_robin(two["east"])
    for i in range(20):
        after.send(b"after%d" % i)
    from_west = _round_robin(two["west"])  # (both ways: west's replicators were paused and started again too)
    for i in range(8):
        from_west.send(b"west%d" % i)
    expected = Counter([b"before%d" % i for i in range(4)] + [b"after%d" % i for i in range(20)]
                       + [b"west%d" % i for i in range(8)])
    for cluster in two.values():
        consumer = cluster.client().subscribe(SPREAD, "s", initial_position=pulsar.InitialPosition.Earliest)
        (got,) = receive_until([consumer], 32, seconds=WAIT_S)
        assert Counter(m.data() for m in got) == expected
        assert {m.topic_name().rsplit("-", 1)[1] for m in got if m.data().startswith(b"after")} == {"0", "1", "2", "3"}
    # (what came from west is acknowledged on east's cursor toward west at its next look, unread)
    wait_until(lambda: _replication_to(two["east"], "west")["replicationBacklog"] == 0)


def test_a_growth_this_cluster_refuses_grows_no_remote(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].ok("PUT", SPREAD_PARTITIONS, 2)
    producer = _round_robin(two["east"])
    producer.send(b"x")
    wait_until(lambda: two["west"].answer(SPREAD_PARTITIONS) == {"partitions": 2})
    status, answer = two["east"].rest("POST", SPREAD_PARTITIONS, 4)
    assert status == 412 and "producer" in answer["reason"]
    assert two["west"].ok("GET", SPREAD_PARTITIONS) == {"partitions": 2}
    producer.close()
    two["west"].kill()
    status, answer = two["east"].rest("POST", SPREAD_PARTITIONS, 4)
    assert status == 503 and "west" in answer["reason"] and "not grown here" in answer["reason"]
    assert two["east"].ok("GET", SPREAD_PARTITIONS) == {"partitions": 2}
    # replication to it goes on: its replicators were started again
    two["west"].restart()
    _round_robin(two["east"]).send(b"y")
    consumer = two["west"].client().subscribe(SPREAD, "s", initial_position=pulsar.InitialPosition.Earliest)
    (got,) = receive_until([consumer], 2, seconds=WAIT_S)
    assert sorted(m.data() for m in got) == [b"x", b"y"]


def _asked(connection: socket.socket, request: bytes) -> bool:
    """Whether what came on `connection` so far starts with `request` (read without taking it)."""
    try:
        return connection.recv(len(request), socket.MSG_PEEK | socket.MSG_DONTWAIT) == request
    except BlockingIOError:
        return False


def test_a_growth_does_not_wait_for_a_remote_that_does_not_answer(tmp_path):
    """The replication service's look sends global policies to a remote that takes connections and never
    answers (30 s until the request times out): a growth of a topic meanwhile does not wait for it."""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(silent.accept()[0])
            except OSError:  # (closed: the test is over)
                return

    threading.Thread(target=accept, daemon=True).start()
    clusters = start_clusters(tmp_path, "east")
    east = clusters["east"]
    try:
        port = silent.getsockname()[1]
        east.ok("PUT", "/admin/v2/clusters/ghost", {"serviceUrl": f"http://127.0.0.1:{port}",
                                                     "brokerServiceUrl": f"pulsar://127.0.0.1:{port}"})
        replicate_namespace(clusters, "public/default", ["east", "ghost"], on=["east"])
        east.ok("PUT", "/admin/v2/persistent/public/default/orders")
        east.ok("POST", "/admin/v2/persistent/public/default/orders/replication?isGlobal=true", ["east", "ghost"])
        east.ok("PUT", "/admin/v2/namespaces/public/here")  # (its own topics replicate nowhere)
        east.ok("PUT", "/admin/v2/persistent/public/here/spread/partitions", 2)
        wait_until(lambda: any(_asked(connection, b"PUT /seglog/v1/topics/") for connection in list(accepted)))
        started = time.monotonic()
        east.ok("POST", "/admin/v2/persistent/public/here/spread/partitions", 4)
        assert time.monotonic() - started < 5
        assert east.ok("GET", "/admin/v2/persistent/public/here/spread/partitions") == {"partitions": 4}
    finally:
        stop_clusters(clusters)
        silent.close()
        for connection in accepted:
            connection.close()


def test_changing_the_namespace_clusters_stops_replication_at_once_and_drops_the_cursor(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    producer = two["east"].client().create_producer(TOPIC)
    producer.send(b"replicated")
    assert _values(read_all(two["west"], TOPIC, expected=1)) == Counter([b"replicated"])
    two["east"].ok("POST", "/admin/v2/namespaces/public/default/replication", ["east"])
    wait_until(lambda: "pulsar.repl.west" not in two["east"].ok("GET", "/admin/v2/persistent/public/default/orders"
                                                                       "/subscriptions"))
    producer.send(b"stays on east")
    assert _values(read_all(two["west"], TOPIC, expected=1)) == Counter([b"replicated"])


def test_stats_show_the_replication_both_ways(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    producer = two["east"].client().create_producer(TOPIC)
    for i in range(10):
        producer.send(b"%d" % i)
    read_all(two["west"], TOPIC, expected=10)
    stats_path = "/admin/v2/persistent/public/default/orders/stats"
    # (receipted first, then acknowledged on the replication cursor: the backlog follows the counter)
    wait_until(lambda: two["east"].ok("GET", stats_path)["replication"]["west"]["msgOutCounter"] == 10)
    wait_until(lambda: two["east"].ok("GET", stats_path)["replication"]["west"]["replicationBacklog"] == 0)
    out = two["east"].ok("GET", stats_path)["replication"]["west"]
    assert out["connected"] is True and out["msgRateOut"] > 0
    assert out["outboundConnection"] and out["outboundConnectedSince"]
    inbound = two["west"].ok("GET", stats_path)
    assert inbound["replication"]["east"]["msgInCounter"] == 10 and inbound["replication"]["east"]["inboundConnection"]
    assert inbound["publishers"] == []  # the replicator is not a publisher
    cursors = two["east"].ok("GET", "/admin/v2/persistent/public/default/orders/internalStats")["cursors"]
    assert "pulsar.repl.west" in cursors
    two["east"].ok("PUT", "/admin/v2/namespaces/public/quiet")  # (a topic that does not replicate: no metrics)
    two["east"].client().create_producer("persistent://public/quiet/t").send(b"stays")
    with urllib.request.urlopen(f"{two['east'].server.http_url}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert not [line for line in metrics.splitlines()
                if line.startswith("pulsar_replication_") and "public/quiet" in line]
    labels = ('{cluster="east",namespace="public/default",remote_cluster="west",'
              'topic="persistent://public/default/orders"}')
    assert f"pulsar_replication_connected_count{labels} 1.0" in metrics
    assert f"pulsar_replication_disconnected_count{labels} 0.0" in metrics
    assert f"pulsar_replication_backlog{labels} 0.0" in metrics


def test_clients_may_not_subscribe_with_the_replicators_prefix(two):
    with pytest.raises(pulsar.NotAllowedError):
        two["east"].client().subscribe(TOPIC, "pulsar.repl.west")


def test_a_remote_that_is_down_holds_backlog_and_the_ttl_expires_it_as_counted(tmp_path):
    clusters = start_clusters(tmp_path, "east", "west", broker_conf={"east": "maintenance_interval=200ms\n"})
    try:
        replicate_namespace(clusters, "public/default", ["east", "west"], on=["east", "west"])
        clusters["east"].ok("POST", "/admin/v2/namespaces/public/default/messageTTL", 1)
        clusters["east"].client().create_producer(TOPIC).send(b"first")
        read_all(clusters["west"], TOPIC, expected=1)
        clusters["west"].kill()
        clusters["east"].client().create_producer(TOPIC, producer_name="second").send(b"expires")
        stats_path = "/admin/v2/persistent/public/default/orders/stats"
        wait_until(lambda: clusters["east"].ok("GET", stats_path)["replication"]["west"]["msgRateExpired"] > 0)
        assert clusters["east"].ok("GET", stats_path)["replication"]["west"]["replicationBacklog"] == 0
    finally:
        stop_clusters(clusters)


def test_a_message_cannot_escape_the_allowed_clusters_and_is_counted(three):
    names = ["east", "west", "north"]
    replicate_namespace(three, "public/default", names, on=["west", "north"])
    replicate_namespace(three, "public/default", ["east", "west"], on=["east"])  # north not allowed on east
    producer = three["east"].client().create_producer(TOPIC)
    producer.send(b"for north", replication_clusters=["east", "north"])  # stored, and not refused: no retries
    producer.send(b"for all")
    assert _values(read_all(three["west"], TOPIC, expected=1)) == Counter([b"for all"])
    assert _values(read_all(three["north"], TOPIC, expected=0)) == Counter()
    stats = three["east"].ok("GET", "/admin/v2/persistent/public/default/orders/stats")
    assert stats["replicationNotAllowed"] == {"north": 1}
    # (north replicates its own messages here, so it has an entry: inbound only)
    assert stats["replication"]["north"]["outboundConnection"] is None


def test_a_global_topic_policy_travels_and_one_that_leaves_a_cluster_out_deletes_the_topic_there(three):
    names = ["east", "west", "north"]
    replicate_namespace(three, "public/default", names, on=names)
    three["east"].client().create_producer(TOPIC).send(b"everywhere")
    for name in names:
        assert _values(read_all(three[name], TOPIC, expected=1)) == Counter([b"everywhere"])
    # north protects its copy with a local policy that keeps it (the local policy wins over the global one)
    three["north"].ok("POST", "/admin/v2/persistent/public/default/orders/replication", ["east", "north"])
    three["east"].ok("POST", "/admin/v2/persistent/public/default/orders/replication?isGlobal=true", ["east", "north"])
    path = "/admin/v2/persistent/public/default"
    wait_until(lambda: "persistent://public/default/orders" not in three["west"].ok("GET", path))  # cascading
    for name in ("east", "north"):  # the policy arrived, stamped as east made it
        wait_until(lambda name=name: three[name].ok(
            "GET", f"{path}/orders/replication?isGlobal=true") == ["east", "north"])
    assert "persistent://public/default/orders" in three["north"].ok("GET", path)
    three["east"].client().create_producer(TOPIC, producer_name="after").send(b"east and north")
    assert _values(read_all(three["north"], TOPIC, expected=2)) == Counter([b"everywhere", b"east and north"])


def test_global_policies_are_pushed_again_after_a_remote_comes_back(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].client().create_producer(TOPIC).send(b"x")
    read_all(two["west"], TOPIC, expected=1)
    two["west"].kill()
    two["east"].ok("POST", "/admin/v2/persistent/public/default/orders/replication?isGlobal=true", ["east", "west"])
    two["west"].restart()
    wait_until(lambda: two["west"].ok("GET", "/admin/v2/persistent/public/default/orders/replication?isGlobal=true")
               == ["east", "west"])


def test_the_cli_asks_before_a_global_policy_that_deletes_the_topic_elsewhere(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].client().create_producer(TOPIC).send(b"x")
    assert len(read_all(two["west"], TOPIC, expected=1)) == 1
    command = ["--url", two["east"].server.http_url, "topics", "set-replication-clusters", "public/default/orders",
               "--clusters", "east", "--global"]
    refused = CliRunner().invoke(main, command, input="n\n")
    assert refused.exit_code == 1 and "deletes topic public/default/orders on west" in refused.output
    path = "/admin/v2/persistent/public/default/orders/replication?isGlobal=true"
    assert two["east"].ok("GET", path) is None  # answering no changed nothing
    forced = CliRunner().invoke(main, [*command, "--force"])
    assert forced.exit_code == 0, forced.output
    topics = "/admin/v2/persistent/public/default"
    wait_until(lambda: "persistent://public/default/orders" not in two["west"].ok("GET", topics))


def _replication_to(cluster, remote: str, topic: str = "spread") -> dict:
    stats = cluster.ok("GET", f"/admin/v2/persistent/public/default/{topic}/partitioned-stats")
    return stats["replication"].get(remote, {})


def test_a_remote_topic_of_another_type_gets_nothing_and_stats_say_why(two):
    # both made before replication is on: else west's replicator may make its topic on east first
    two["west"].ok("PUT", "/admin/v2/persistent/public/default/spread")  # non-partitioned on west
    two["east"].ok("PUT", "/admin/v2/persistent/public/default/spread/partitions", 2)
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].client().create_producer("persistent://public/default/spread").send(b"stays on east")
    wait_until(lambda: "non-partitioned" in _replication_to(two["east"], "west").get("lastError", ""))
    assert _replication_to(two["east"], "west")["connected"] is False
    assert sorted(two["west"].ok("GET", "/admin/v2/persistent/public/default")) == [
        "persistent://public/default/spread"]  # no orphan partitions were made there
    assert read_all(two["west"], "persistent://public/default/spread", expected=0) == []


def test_without_remote_topic_creation_a_missing_partitioned_topic_is_reported_not_skipped(tmp_path):
    clusters = start_clusters(tmp_path, "east", "west",
                              broker_conf={"east": "createTopicToRemoteClusterForReplication=false\n"})
    try:
        replicate_namespace(clusters, "public/default", ["east", "west"], on=["east", "west"])
        clusters["east"].ok("PUT", "/admin/v2/persistent/public/default/spread/partitions", 2)
        clusters["east"].client().create_producer("persistent://public/default/spread").send(b"waits")
        wait_until(lambda: "createTopicToRemoteClusterForReplication is off" in
                   _replication_to(clusters["east"], "west").get("lastError", ""))
        assert _replication_to(clusters["east"], "west")["replicationBacklog"] == 1
        clusters["west"].ok("PUT", "/admin/v2/persistent/public/default/spread/partitions", 2)  # made by hand
        consumer = clusters["west"].client().subscribe("persistent://public/default/spread", "s",
                                                        initial_position=pulsar.InitialPosition.Earliest)
        (got,) = receive_until([consumer], 1, seconds=WAIT_S)
        assert [m.data() for m in got] == [b"waits"]
    finally:
        stop_clusters(clusters)


def test_migration_a_cursor_made_at_the_start_before_replication_sends_the_older_messages(two):
    producer = two["east"].client().create_producer(TOPIC)
    producer.send(b"before replication")
    # as Pulsar's migration: the replicator's cursor made at the earliest message first, then replication on
    two["east"].ok("PUT", "/admin/v2/persistent/public/default/orders/subscription/pulsar.repl.west", "earliest")
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    producer.send(b"after")
    assert _values(read_all(two["west"], TOPIC, expected=2)) == Counter([b"before replication", b"after"])


def test_without_a_cursor_made_first_older_messages_stay_behind(two):
    producer = two["east"].client().create_producer(TOPIC)
    producer.send(b"before replication")
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    wait_until(lambda: "pulsar.repl.west" in two["east"].ok("GET", "/admin/v2/persistent/public/default/orders"
                                                                   "/subscriptions"))
    producer.send(b"after")
    assert _values(read_all(two["west"], TOPIC, expected=1)) == Counter([b"after"])


def test_removing_a_global_policy_removes_it_everywhere_and_a_local_one_stays_local(two):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].client().create_producer(TOPIC).send(b"x")
    read_all(two["west"], TOPIC, expected=1)
    policy = "/admin/v2/persistent/public/default/orders/replication"
    two["east"].ok("POST", f"{policy}?isGlobal=true", ["east", "west"])
    two["east"].ok("POST", policy, ["east", "west"])  # a local one: east's only
    wait_until(lambda: two["west"].ok("GET", f"{policy}?isGlobal=true") == ["east", "west"])
    assert two["west"].ok("GET", policy) is None
    two["east"].ok("DELETE", f"{policy}?isGlobal=true")
    wait_until(lambda: two["west"].ok("GET", f"{policy}?isGlobal=true") is None)
    assert two["east"].ok("GET", policy) == ["east", "west"]  # the local policy is untouched


def test_a_cluster_a_global_policy_leaves_out_keeps_it_and_refuses_clients_until_it_is_removed(two, caplog):
    replicate_namespace(two, "public/default", ["east", "west"], on=["east", "west"])
    two["east"].client().create_producer(TOPIC).send(b"both")
    read_all(two["west"], TOPIC, expected=1)
    path = "/admin/v2/persistent/public/default"
    two["east"].ok("POST", f"{path}/orders/replication?isGlobal=true", ["east"])
    wait_until(lambda: "persistent://public/default/orders" not in two["west"].ok("GET", path))  # cascading
    # west keeps the global policy: its namespace's clusters do not apply again, so no client makes the topic
    client = two["west"].client()
    why = "topic public/default/orders is not served on cluster west: west is not among the replication " \
          "clusters of its global topic policy (east)"
    refused_at_once(pulsar.TopicNotFound, lambda: client.create_producer(TOPIC))
    assert why in caplog.text  # (the client logs the server's reason)
    refused_at_once(pulsar.TopicNotFound, lambda: client.subscribe(TOPIC, "sub"))
    assert "persistent://public/default/orders" not in two["west"].ok("GET", path)
    two["west"].client().create_producer("persistent://public/default/other").send(b"others are served")
    # removed on east, it is removed on west: the namespace's clusters apply again and replication resumes
    two["east"].ok("DELETE", f"{path}/orders/replication?isGlobal=true")
    wait_until(lambda: "persistent://public/default/orders" in two["west"].ok("GET", path))
    two["east"].client().create_producer(TOPIC, producer_name="after").send(b"after")
    assert b"after" in _values(read_all(two["west"], TOPIC, expected=1))
    two["west"].client().create_producer(TOPIC, producer_name="west").send(b"from west")
    assert b"from west" in _values(read_all(two["east"], TOPIC, expected=3))
