"""log.admin.topics: subscriptions as pulsar-admin manages them (create, unsubscribe, reset by time, skip,
expire, peek), and growing a topic's partitions."""

import pytest

import seglog
from helpers_storage import consumed_in_another_process
from seglog.errors import ConsumerBusyError, InvalidArgumentError, NotFoundError, TopicInUseError


def floors(log, topic, subscription):
    cursors = log.topic(topic).internal_stats()["partitions"]
    return [cursors[p]["cursors"][subscription]["markDeletePosition"] + 1 for p in sorted(cursors, key=int)]


def two_partitions(log, clock):
    """Topic t: partition 0 holds m0..m4 written a minute apart, partition 1 n0..n2 (the last minute)."""
    topic = log.create_topic("t", partitions=2)
    with topic.producer() as producer:
        for i in range(5):
            producer.send(f"m{i}".encode(), partition=0, timestamp=clock())
            clock.advance(minutes=1)
        for i in range(3):
            producer.send(f"n{i}".encode(), partition=1, timestamp=clock())
    return topic


def test_create_subscription_at_earliest_latest_or_offsets_and_list_them(log, clock):
    two_partitions(log, clock)
    admin = log.admin.topics
    admin.create_subscription("t", "from-now")  # Pulsar's default: latest
    admin.create_subscription("t", "all", "earliest")
    admin.create_subscription("t", "placed", {0: 2, 1: 3})
    assert admin.subscriptions("t") == ["all", "from-now", "placed"]
    assert floors(log, "t", "from-now") == [5, 3]
    assert floors(log, "t", "all") == [0, 0]
    assert floors(log, "t", "placed") == [2, 3]
    with pytest.raises(InvalidArgumentError, match="invalid offsets"):
        admin.create_subscription("t", "bad", "middle")
    assert admin.subscriptions("t") == ["all", "from-now", "placed"]


def test_unsubscribe_refuses_a_consumed_subscription_unless_forced_in_this_process(log, clock):
    topic = two_partitions(log, clock)
    consumer = topic.subscribe("s")
    with pytest.raises(ConsumerBusyError, match="has 1 consumer"):
        log.admin.topics.unsubscribe("t", "s")
    assert log.admin.topics.subscriptions("t") == ["s"]
    log.admin.topics.unsubscribe("t", "s", force=True)
    assert log.admin.topics.subscriptions("t") == []
    with pytest.raises(seglog.errors.ClosedError):
        consumer.receive(timeout=0)
    with pytest.raises(NotFoundError, match="subscription s of public/default/t does not exist"):
        log.admin.topics.unsubscribe("t", "s")


def test_unsubscribe_never_forces_another_process(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t")
        log.topic("t").subscribe("s").close()
    with consumed_in_another_process(tmp_path), seglog.open(tmp_path) as log:
        for force in (False, True):
            with pytest.raises(ConsumerBusyError, match="consumed by another process"):
                log.admin.topics.unsubscribe("t", "s", force=force)
        assert log.admin.topics.subscriptions("t") == ["s"]
        with pytest.raises(ConsumerBusyError):
            log.admin.topics.skip("t", "s", 1)


def test_reset_cursor_to_a_time(log, clock):
    two_partitions(log, clock)
    log.admin.topics.create_subscription("t", "s")
    written_at = clock() - 5 * 60_000  # m0's timestamp
    assert log.admin.topics.reset_cursor_to_time("t", "s", written_at + 2 * 60_000) is True
    assert floors(log, "t", "s") == [2, 0]  # m2 on; every n is from the last minute
    assert log.admin.topics.reset_cursor_to_time("t", "s", clock() + 1) is True
    assert floors(log, "t", "s") == [5, 3]
    with pytest.raises(InvalidArgumentError, match="invalid timestamp"):
        log.admin.topics.reset_cursor_to_time("t", "s", -5)


def test_skip_acknowledges_the_oldest_unacknowledged_messages_of_each_partition(log, clock):
    topic = two_partitions(log, clock)
    log.admin.topics.create_subscription("t", "s", "earliest")
    with topic.subscribe("s") as consumer:
        consumer.ack(seglog.MessageId(0, 1))  # acknowledged already: not counted again
    assert log.admin.topics.skip("t", "s", 2) == 4  # m0, m2 and n0, n1
    values = [m.value for m in log.admin.topics.peek_messages("t", "s", 5)]
    assert values == [b"m3", b"m4", b"n2"]
    assert log.admin.topics.skip("t", "s", 10) == 3
    assert log.topic("t").stats()["subscriptions"]["s"]["msgBacklog"] == 0
    with pytest.raises(InvalidArgumentError, match="invalid count"):
        log.admin.topics.skip("t", "s", 0)


def test_expire_messages_acknowledges_those_older_than_the_time_given(log, clock):
    two_partitions(log, clock)
    log.admin.topics.create_subscription("t", "s", "earliest")
    assert log.admin.topics.expire_messages("t", "s", 150) == 3  # m0, m1, m2 are over 150 s old
    assert floors(log, "t", "s") == [3, 0]
    assert log.topic("t").stats()["subscriptions"]["s"]["msgExpired"] == 3
    assert log.admin.topics.expire_messages("t", "s", "1h") == 0
    with pytest.raises(InvalidArgumentError, match="invalid expire time"):
        log.admin.topics.expire_messages("t", "s", "soon")


def test_peek_shows_without_acknowledging(log, clock):
    topic = two_partitions(log, clock)
    log.admin.topics.create_subscription("t", "s", "earliest")
    with topic.subscribe("s") as consumer:  # a live cursor of this process, with an individual ack
        consumer.ack(seglog.MessageId(0, 0))
        consumer.ack(seglog.MessageId(1, 1))
        peeked = log.admin.topics.peek_messages("t", "s", 2)
        assert [(m.partition, m.offset) for m in peeked] == [(0, 1), (0, 2), (1, 0), (1, 2)]
    assert [m.value for m in log.admin.topics.peek_messages("t", "s")] == [b"m1", b"n0"]  # as persisted
    assert floors(log, "t", "s") == [1, 0]


def test_update_partitions_grows_only_and_old_handles_keep_working(log, clock):
    old = two_partitions(log, clock)
    old.subscribe("s", initial_position="earliest").close()
    for fewer in (1, 2, 0, "3"):
        with pytest.raises(InvalidArgumentError, match="more than the 2 partitions"):
            log.admin.topics.update_partitions("t", fewer)
    with old.producer() as producer:
        producer.send(b"held")
        with pytest.raises(TopicInUseError, match="producer"):
            log.admin.topics.update_partitions("t", 3)
    assert log.topic("t").partitions == 2

    log.admin.topics.update_partitions("t", 4)
    new = log.topic("t")
    assert new.partitions == 4 and old.partitions == 2
    with new.producer() as producer:
        producer.send(b"on 3", partition=3)
    with old.producer() as producer:  # an old handle writes to the partitions it knows
        producer.send(b"old", partition=1)
    assert [m.value for m in old.reader(partition=1)][-1] == b"old"
    stats = new.stats()["subscriptions"]["s"]
    assert stats["msgBacklog"] == 5 + 3 + 1 + 1 + 1  # every partition, the new ones from their start
    with old.subscribe("s") as consumer:  # through the old handle too: it takes in the new partitions
        values = [consumer.receive(timeout=0).value for _ in range(11)]
    assert b"on 3" in values and old.partitions == 4
    assert floors(log, "t", "s") == [0, 0, 0, 0]  # nothing acknowledged


def test_a_grown_topic_in_another_process_is_seen_with_its_subscriptions(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t")
        log.topic("t").subscribe("s", initial_position="earliest").close()
    with seglog.open(tmp_path) as other, seglog.open(tmp_path) as log:
        handle_before = other.topic("t")
        log.admin.topics.update_partitions("t", 3)
        assert other.topic("t").partitions == 3 and handle_before.partitions == 1
        assert list(other.topic("t").stats()["partitions"]) == ["0", "1", "2"]
        assert floors(other, "t", "s") == [0, 0, 0]


def test_clusters_and_tenants_admin_roles(tmp_path):
    import pytest

    from seglog.errors import (
        AlreadyExistsError,
        ClusterInUseError,
        InvalidArgumentError,
        NotFoundError,
        UnusableClusterError,
    )
    with seglog.open(tmp_path / "d") as log:
        clusters = log.admin.clusters
        assert clusters.list() == []
        clusters.create("east", {"serviceUrl": "http://east:8080"})
        with pytest.raises(AlreadyExistsError, match="cluster east already exists"):
            clusters.create("east")
        clusters.create("east", exist_ok=True)
        assert clusters.get("east")["serviceUrl"] == "http://east:8080"
        assert clusters.get("east")["brokerServiceUrl"] == ""
        with pytest.raises(InvalidArgumentError, match="peerClusterNames"):
            clusters.update("east", {"peerClusterNames": "west"})
        log.admin.tenants.create("t", ["east"], admin_roles=["ops"])
        assert log.admin.tenants.get("t") == {"adminRoles": ["ops"], "allowedClusters": ["east"]}
        with pytest.raises(ClusterInUseError, match=r"cluster east is still used by tenant t \(allowed clusters\)"):
            clusters.delete("east")
        with pytest.raises(UnusableClusterError, match="cluster west is not registered"):
            log.admin.tenants.update("t", ["west"])
        log.admin.tenants.update("t", None)
        assert log.admin.tenants.get("t") == {"adminRoles": [], "allowedClusters": None}
        with pytest.raises(NotFoundError):
            log.admin.tenants.update("nope", None)
        clusters.delete("east")
        with pytest.raises(NotFoundError):
            clusters.delete("east")


def test_topics_create_list_describe_delete(tmp_path):
    with seglog.open(tmp_path / "d") as log:
        topics = log.admin.topics
        assert topics.create("acme/ns/t", 2, segment_size="1 MiB") == {"name": "acme/ns/t", "partitions": 2}
        assert topics.list() == ["acme/ns/t"]
        [listed] = topics.list_with_settings()
        assert listed["name"] == "acme/ns/t" and listed["partitions"] == 2 and listed["segmentSize"] == 1 << 20
        described = topics.describe("acme/ns/t")
        assert [p["endOffset"] for p in described["partitionOffsets"]] == [0, 0]
        assert described["policiesInForce"]["retention"]["level"] == "broker"
        topics.delete("acme/ns/t")
        assert topics.list() == []
