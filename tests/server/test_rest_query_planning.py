"""What a query engine plans a read with, through the server's REST API (admin.topics.offsets) and the
cumulative acknowledgement a streaming query commits with: the same answers in-process and through `seglog serve`
(seglog.remote's RemoteAdmin, the client the Spark connector's driver uses)."""

from __future__ import annotations

import pytest

import seglog
from helpers_server import start_server
from seglog.errors import InvalidArgumentError, TopicNotFoundError
from seglog.remote import Credentials, RemoteAdmin


def _fill(log) -> None:
    topic = log.create_topic("events", partitions=2, segment_max_messages=10)
    with topic.producer() as producer:
        for i in range(4):
            producer.send_batch([b"v"] * 10, partition=0, timestamps=[1_000 * i + j for j in range(10)])
        producer.send_batch([b"w"] * 5, partition=1, timestamps=[500] * 5)
    log.admin.topics.create_subscription("events", "etl", "earliest")


def test_offsets_in_process(tmp_path):
    with seglog.open(tmp_path / "data") as log:
        _fill(log)
        assert log.admin.topics.offsets("events", timestamp=2_005) == [
            {"partition": 0, "compactionHorizon": 0, "earliestOffset": 0, "endOffset": 40, "offsetAtTimestamp": 25},
            {"partition": 1, "compactionHorizon": 0, "earliestOffset": 0, "endOffset": 5, "offsetAtTimestamp": 5}]
        assert "offsetAtTimestamp" not in log.admin.topics.offsets("events")[0]
        for bad in (-1, "5", True):
            with pytest.raises(InvalidArgumentError, match="timestamp.*ms since the epoch"):
                log.admin.topics.offsets("events", timestamp=bad)
        with pytest.raises(InvalidArgumentError, match="read_compacted"):
            log.admin.topics.offsets("events", read_compacted="yes")


def test_offsets_and_cumulative_acks_answer_the_same_through_the_server(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as log:
        _fill(log)
        local = [log.admin.topics.offsets("events", timestamp=t) for t in (0, 2_005, 9_999)]
        local.append(log.admin.topics.offsets("events", read_compacted=True))
    server = start_server(data)
    try:
        remote = RemoteAdmin(server.http_url, Credentials())
        try:
            assert [remote.topics.offsets("events", timestamp=t) for t in (0, 2_005, 9_999)] + [
                remote.topics.offsets("events", read_compacted=True)] == local
            with pytest.raises(TopicNotFoundError):
                remote.topics.offsets("missing")
            assert remote.topics.ack_cumulative("events", "etl", {0: 19, 1: 2}) is True
            assert remote.topics.ack_cumulative("events", "etl", {0: 9}) is True  # never moves a cursor back
            cursors = remote.topics.internal_stats("events")["partitions"]
            assert [cursors[p]["cursors"]["etl"]["markDeletePosition"] for p in ("0", "1")] == [19, 2]
        finally:
            remote.close()
    finally:
        server.stop()
