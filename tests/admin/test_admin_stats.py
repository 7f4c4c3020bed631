"""The admin layer's stats in Pulsar's shapes: the `replication` section every caller gets (in-process,
log.admin, the CLI, the server), and the partitioned stats the CLI and the server's REST route share."""

import pytest

import seglog
from seglog.errors import NotFoundError


def test_stats_have_the_replication_cursors_backlogs_per_remote_cluster(tmp_path):
    with seglog.open(tmp_path / "d") as log:
        topic = log.create_topic("t", partitions=2)
        assert topic.stats()["replication"] == {} == log.admin.topics.stats("t")["replication"]
        with topic.producer() as producer:
            for i in range(5):
                producer.send(b"x", partition=i % 2)
        log.admin.topics.create_subscription("t", "pulsar.repl.east", "earliest")
        log.admin.topics.create_subscription("t", "pulsar.repl.west", {0: 3, 1: 2})
        log.admin.topics.create_subscription("t", "plain", "earliest")  # not a replicator's cursor
        replication = topic.stats()["replication"]
        assert {remote: stats["replicationBacklog"] for remote, stats in replication.items()} == {"east": 5, "west": 0}
        # Pulsar's ReplicatorStats, with nothing connected: no replicator runs in-process
        assert replication["east"]["connected"] is False and replication["west"]["msgRateOut"] == 0
        assert set(replication["east"]) >= {"msgRateIn", "msgOutCounter", "replicationDelayInSeconds",
                                            "outboundConnection"}
        assert log.admin.topics.stats("t")["replication"] == replication


def test_partitioned_stats_as_pulsar_admin_prints_them(tmp_path):
    with seglog.open(tmp_path / "d") as log:
        topic = log.create_topic("acme/ns/events", partitions=2)
        with topic.producer() as producer:
            for i in range(5):
                producer.send(b"x", partition=i % 2)
        log.admin.topics.create_subscription("acme/ns/events", "pulsar.repl.east", "earliest")
        consumer = topic.subscribe("all", consumer_name="reader", initial_position="earliest")
        try:
            stats = log.admin.topics.partitioned_stats("acme/ns/events")
            assert stats["metadata"] == {"partitions": 2} and stats["partitions"] == {}
            assert stats["publishers"] == [] and stats["storageSize"] == topic.stats()["storageSize"]
            all_ = stats["subscriptions"]["all"]
            assert (all_["type"], all_["msgBacklog"], all_["activeConsumerName"]) == ("Exclusive", 5, "reader")
            assert stats["replication"]["east"]["replicationBacklog"] == 5
            each = log.admin.topics.partitioned_stats("acme/ns/events", per_partition=True)["partitions"]
            names = ["persistent://acme/ns/events-partition-0", "persistent://acme/ns/events-partition-1"]
            assert list(each) == names
            assert [each[n]["subscriptions"]["all"]["msgBacklog"] for n in names] == [3, 2]
            assert [each[n]["replication"]["east"]["replicationBacklog"] for n in names] == [3, 2]
            assert set(each[names[0]]) == set(stats) - {"metadata", "partitions", "replicationNotAllowed"}
        finally:
            consumer.close()
        log.create_topic("one")
        with pytest.raises(NotFoundError, match=r"^partitioned topic public/default/one does not exist "
                                                r"\(public/default/one is non-partitioned\)$"):
            log.admin.topics.partitioned_stats("one")
