"""Topic auto-creation as Pulsar's broker does it, with the real Pulsar client: broker.conf's
allowAutoTopicCreation / allowAutoTopicCreationType / defaultNumPartitions, and a namespace's
autoTopicCreationOverride over them, changed while the server runs."""

from __future__ import annotations

import seglog
from helpers_server import pulsar, receive_until, refused_at_once, rest, start_server


def _server(data, broker_conf: str = ""):
    with seglog.open(data, background=False) as log:
        log.admin.namespaces.create("public/other")
    if broker_conf:
        (data / "broker.conf").write_text(broker_conf)
    return start_server(data)


def _rest(server, method: str, path: str, body=None) -> tuple[int, object]:
    return rest(server.http_url, method, path, body)


def _topics(server) -> list[str]:
    return _rest(server, "GET", "/admin/v2/persistent/public/default")[1] + \
        _rest(server, "GET", "/admin/v2/persistent/public/other")[1]




def test_by_default_a_topic_is_created_non_partitioned_on_first_use(tmp_path):
    server = _server(tmp_path / "data")
    try:
        server.client().create_producer("persistent://public/default/fresh").send(b"one")
        assert _rest(server, "GET", "/admin/v2/persistent/public/default/fresh/partitions") == (200, {"partitions": 0})
        assert "persistent://public/default/fresh" in _topics(server)
    finally:
        server.stop()


def test_with_auto_creation_off_a_missing_topic_is_topic_not_found_and_nothing_is_created(tmp_path):
    server = _server(tmp_path / "data", "allowAutoTopicCreation=false\n")
    try:
        client = server.client()
        missing = "persistent://public/default/missing"
        refused_at_once(pulsar.TopicNotFound, lambda: client.create_producer(missing))
        refused_at_once(pulsar.TopicNotFound, lambda: client.subscribe(missing, "sub"))
        refused_at_once(pulsar.TopicNotFound, lambda: client.create_reader(missing, pulsar.MessageId.earliest))
        assert _topics(server) == []
        assert _rest(server, "PUT", "/admin/v2/persistent/public/default/made")[0] == 204  # made by hand: usable
        client.create_producer("persistent://public/default/made").send(b"kept")
        reader = client.create_reader("persistent://public/default/made", pulsar.MessageId.earliest)
        assert reader.read_next(10_000).data() == b"kept"
    finally:
        server.stop()


def test_a_replicator_never_creates_a_partitions_name_as_a_topic_of_its_own(tmp_path):
    # (the partitioned topic it replicates is missing here: deleted, or not made yet; a stray topic
    # `gone-partition-1` would outlive the deletion and replicate back)
    server = _server(tmp_path / "data")
    try:
        client = server.client()
        partition = "persistent://public/default/gone-partition-1"
        refused_at_once(pulsar.TopicNotFound,
                        lambda: client.create_producer(partition, producer_name="pulsar.repl.east-->standalone"))
        assert _topics(server) == []
        client.create_producer(partition).send(b"a client's name of its own")  # (any other producer makes it)
        assert _topics(server) == [partition]
    finally:
        server.stop()


def test_partitioned_auto_creation_makes_a_topic_of_default_num_partitions(tmp_path):
    server = _server(tmp_path / "data", "allowAutoTopicCreationType=partitioned\ndefaultNumPartitions=3\n")
    try:
        client = server.client()
        producer = client.create_producer("persistent://public/default/spread", batching_enabled=False,
                                          message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
        for i in range(9):
            producer.send(f"m{i}".encode())
        assert _rest(server, "GET", "/admin/v2/persistent/public/default/spread/partitions") == (200, {"partitions": 3})
        consumer = client.subscribe("persistent://public/default/spread", "all",
                                    initial_position=pulsar.InitialPosition.Earliest)
        (got,) = receive_until([consumer], 9)
        assert sorted(m.data() for m in got) == [f"m{i}".encode() for i in range(9)]
        assert {m.topic_name() for m in got} == {f"persistent://public/default/spread-partition-{i}" for i in range(3)}
    finally:
        server.stop()
    with seglog.open(tmp_path / "data", background=False) as log:  # an ordinary seglog topic of 3 partitions
        assert log.topic("public/default/spread").partitions == 3


def test_a_namespace_override_wins_over_broker_conf_and_applies_while_the_server_runs(tmp_path):
    server = _server(tmp_path / "data", "allowAutoTopicCreation=false\n")
    try:
        client = server.client()
        override = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 2}
        assert _rest(server, "POST", "/admin/v2/namespaces/public/other/autoTopicCreation", override)[0] == 204
        client.create_producer("persistent://public/other/allowed").send(b"x")
        assert _rest(server, "GET", "/admin/v2/persistent/public/other/allowed/partitions")[1] == {"partitions": 2}
        refused_at_once(pulsar.TopicNotFound, lambda: client.create_producer("persistent://public/default/still-refused"))

        assert _rest(server, "DELETE", "/admin/v2/namespaces/public/other/autoTopicCreation")[0] == 204
        refused_at_once(pulsar.TopicNotFound, lambda: client.create_producer("persistent://public/other/refused-again"))
    finally:
        server.stop()


def test_an_override_can_turn_creation_off_where_broker_conf_allows_it(tmp_path):
    server = _server(tmp_path / "data")
    try:
        assert _rest(server, "POST", "/admin/v2/namespaces/public/other/autoTopicCreation",
                     {"allowAutoTopicCreation": False})[0] == 204
        client = server.client()
        refused_at_once(pulsar.TopicNotFound, lambda: client.create_producer("persistent://public/other/nope"))
        client.create_producer("persistent://public/default/yes").send(b"x")  # another namespace: as broker.conf
    finally:
        server.stop()


def test_the_http_lookup_creates_a_partitioned_topic_as_the_binary_one_does(tmp_path):
    server = _server(tmp_path / "data", "allowAutoTopicCreationType=partitioned\ndefaultNumPartitions=2\n")
    client = pulsar.Client(server.http_url, operation_timeout_seconds=30)
    try:
        client.create_producer("persistent://public/default/over-http").send(b"x")
        assert _rest(server, "GET", "/admin/v2/persistent/public/default/over-http/partitions")[1] == {"partitions": 2}
        # without checkAllowAutoCreation (an admin asking) nothing is created
        assert _rest(server, "GET", "/admin/v2/persistent/public/default/asked/partitions")[1] == {"partitions": 0}
        assert "persistent://public/default/asked" not in _topics(server)
    finally:
        client.close()
        server.stop()


def test_the_override_round_trips_through_the_admin_api_with_pulsars_codes(tmp_path):
    server = _server(tmp_path / "data")
    path = "/admin/v2/namespaces/public/other/autoTopicCreation"
    try:
        assert _rest(server, "GET", path) == (200, None)
        override = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 4}
        assert _rest(server, "POST", path, override)[0] == 204
        assert _rest(server, "GET", path) == (200, override)
        assert _rest(server, "GET", "/admin/v2/namespaces/public/other")[1]["autoTopicCreationOverride"] == override
        for invalid, named in (({"allowAutoTopicCreation": True, "topicType": "partitioned"}, "defaultNumPartitions"),
                               ({"allowAutoTopicCreation": True, "topicType": "partitioned",
                                 "defaultNumPartitions": 0}, "defaultNumPartitions"),
                               ({"allowAutoTopicCreation": True, "topicType": "non-partitioned",
                                 "defaultNumPartitions": 2}, "defaultNumPartitions"),
                               ({"allowAutoTopicCreation": True, "topicType": "sharded"}, "topicType"),
                               ({"allowAutoTopicCreation": "yes"}, "allowAutoTopicCreation"),
                               ({"topicType": "partitioned"}, "allowAutoTopicCreation")):
            status, body = _rest(server, "POST", path, invalid)
            assert status == 412 and named in body["reason"], (invalid, body)
        assert _rest(server, "GET", path) == (200, override)  # refused changes left it as it was
        assert _rest(server, "DELETE", path)[0] == 204
        assert _rest(server, "GET", path) == (200, None)
        assert _rest(server, "GET", "/admin/v2/namespaces/public/missing/autoTopicCreation")[0] == 404
        created = {"autoTopicCreationOverride": {"allowAutoTopicCreation": False}}
        assert _rest(server, "PUT", "/admin/v2/namespaces/public/made", created)[0] == 204
        assert _rest(server, "GET", "/admin/v2/namespaces/public/made/autoTopicCreation")[1] == {
            "allowAutoTopicCreation": False, "topicType": "non-partitioned"}
    finally:
        server.stop()
