"""The admin layer's stats in Pulsar's shapes: the `replication` section every caller gets (in-process,
log.admin, the CLI, the server)."""

import seglog


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
