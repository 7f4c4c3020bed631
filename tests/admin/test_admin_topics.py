"""log.admin.topics: subscriptions as pulsar-admin manages them (create, unsubscribe, reset by time, skip,
expire, peek, replicated subscription status), and growing a topic's partitions."""

from pathlib import Path

import pytest

import seglog
from helpers_storage import consumed_in_another_process
from seglog.errors import ConsumerBusyError, InvalidArgumentError, NotFoundError, TopicInUseError
from seglog.subscriptions.cursor_file import load


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


# --- replicated subscriptions (PIP-33): whether a subscription's position goes to the other clusters -------------

def test_a_subscription_is_replicated_per_partition_and_stays_so_after_a_restart(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t", partitions=3).subscribe("s").close()
        log.create_topic("one").subscribe("s").close()
        admin = log.admin.topics
        assert admin.get_replicated_subscription_status("t", "s") == {
            f"persistent://public/default/t-partition-{p}": False for p in range(3)}
        admin.set_replicated_subscription_status("t", "s", True, partition=1)
        admin.set_replicated_subscription_status("one", "s", True)
        assert log.topic("t").stats()["subscriptions"]["s"]["isReplicated"] is True  # on a partition: as Pulsar adds
    with seglog.open(tmp_path) as log:
        admin = log.admin.topics
        assert admin.get_replicated_subscription_status("t", "s") == {
            "persistent://public/default/t-partition-0": False, "persistent://public/default/t-partition-1": True,
            "persistent://public/default/t-partition-2": False}
        assert admin.get_replicated_subscription_status("t", "s", partition=1) == {
            "persistent://public/default/t-partition-1": True}
        assert admin.get_replicated_subscription_status("one", "s") == {"persistent://public/default/one": True}
        admin.set_replicated_subscription_status("t", "s", True)
        admin.set_replicated_subscription_status("t", "s", False, partition=1)
        assert list(admin.get_replicated_subscription_status("t", "s").values()) == [True, False, True]
        admin.set_replicated_subscription_status("t", "s", False)
        assert log.topic("t").stats()["subscriptions"]["s"]["isReplicated"] is False


def test_a_consumed_subscription_is_changed_and_saved_at_once_and_its_consumer_goes_on(log, clock):
    topic = two_partitions(log, clock)
    cursor = Path(log.path, "subscriptions", "public", "default", "t", "s.cursor")
    with topic.subscribe("s", initial_position="earliest") as consumer:
        consumer.ack_cumulative(consumer.receive(timeout=5))
        log.admin.topics.set_replicated_subscription_status("t", "s", True)
        assert all(log.admin.topics.get_replicated_subscription_status("t", "s").values())
        assert [c.replicated for c in load(cursor).partitions] == [True, True]  # not at the next persist
        assert consumer.receive(timeout=5).value == b"m1"
    assert log.topic("t").stats()["subscriptions"]["s"]["msgBacklog"] == 7


@pytest.mark.parametrize(("arguments", "error", "reason"), [
    (("t", "nope", True), NotFoundError, "subscription nope of public/default/t does not exist (it has s)"),
    (("t", "s", "yes"), InvalidArgumentError, "invalid enabled 'yes'; accepted: True or False"),
    (("t", "s", True, 2), InvalidArgumentError, "invalid partition 2; accepted: an int from 0 to 1"),
    (("t", "s", True, True), InvalidArgumentError, "invalid partition True; accepted: an int from 0 to 1"),
    (("one", "s", True, 0), InvalidArgumentError, "invalid partition 0; accepted: none: public/default/one has one "
                                                  "partition"),
])
def test_a_refused_status_names_what_and_changes_nothing(log, clock, arguments, error, reason):
    two_partitions(log, clock).subscribe("s").close()
    log.create_topic("one").subscribe("s").close()
    topic, subscription, enabled, *partition = arguments
    with pytest.raises(error) as caught:
        log.admin.topics.set_replicated_subscription_status(topic, subscription, enabled,
                                                            partition=partition[0] if partition else None)
    assert str(caught.value).startswith(reason)
    assert not any(log.admin.topics.get_replicated_subscription_status("t", "s").values())


def test_another_process_consuming_the_subscription_owns_its_status(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t").subscribe("s").close()
    with consumed_in_another_process(tmp_path), seglog.open(tmp_path) as log:
        with pytest.raises(ConsumerBusyError, match="consumed by another process"):
            log.admin.topics.set_replicated_subscription_status("t", "s", True)
        assert log.admin.topics.get_replicated_subscription_status("t", "s") == {"persistent://public/default/t": False}


def test_with_replicated_subscriptions_disabled_none_is_made_and_marks_wait_for_them(tmp_path):
    """broker.conf enableReplicatedSubscriptions=false: enabling is refused; a subscription marked before reads
    as not replicated, keeps its mark (as Pulsar keeps the cursor's property) and is replicated again once they
    are enabled."""
    with seglog.open(tmp_path) as log:
        log.create_topic("t").subscribe("s").close()
        log.admin.topics.set_replicated_subscription_status("t", "s", True)
    with seglog.open(tmp_path, enable_replicated_subscriptions=False) as log:
        admin = log.admin.topics
        with pytest.raises(InvalidArgumentError, match="replicated subscriptions are disabled on this cluster "
                                                       r"\(broker.conf enableReplicatedSubscriptions=false\)"):
            admin.set_replicated_subscription_status("t", "s", True)
        assert admin.get_replicated_subscription_status("t", "s") == {"persistent://public/default/t": False}
        assert log.topic("t").stats()["subscriptions"]["s"]["isReplicated"] is False
    with seglog.open(tmp_path) as log:
        assert log.admin.topics.get_replicated_subscription_status("t", "s") == {"persistent://public/default/t": True}
        with seglog.open(tmp_path, enable_replicated_subscriptions=False) as disabled:
            disabled.admin.topics.set_replicated_subscription_status("t", "s", False)  # disabling is always allowed
        assert log.admin.topics.get_replicated_subscription_status("t", "s") == {"persistent://public/default/t": False}
