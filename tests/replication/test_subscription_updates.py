"""The replicated subscriptions' side of markers, in this process on a real broker with a fake replication
stream (replication/replicated_subscriptions.py): what an UPDATE from another cluster does to a subscription
here, what a REQUEST is answered with, what a malformed marker leaves (nothing), and that a broker with
replicated subscriptions disabled ignores them."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

import seglog
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.replication import markers
from seglog.replication.markers import SnapshotRequest, SnapshotResponse, SubscriptionUpdate
from seglog.replication.replicated_subscriptions import ReplicatedSubscriptions

TOPIC = "public/default/orders"


class FakeStreams:
    """The replication service as ReplicatedSubscriptions sees it: one connected replicator to west."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str, object]] = []
        self.handlers = {}

    def replicated_partitions(self):
        return {(TOPIC, 0): {"west": True}}

    def send_marker(self, topic, partition, remote, marker_type, payload) -> bool:
        self.sent.append((topic, partition, remote, markers.decode(marker_type, payload)))
        return True

    def on_marker(self, marker_type, handler) -> None:
        self.handlers[marker_type] = handler


@pytest.fixture
def data(tmp_path):
    with seglog.open(tmp_path / "east") as log:
        log.create_topic(TOPIC)
        with log.topic(TOPIC).producer() as producer:
            producer.send_batch([b"a", b"b", b"c", b"d"])
    return tmp_path / "east"


def _deliver(data, *arrivals, **broker_config) -> FakeStreams:
    """Start the replicated subscriptions of `data` (as east), hand them each (marker, position) as from west,
    and stop them, which waits for what they do; the fake stream, with what they sent."""
    streams = FakeStreams()

    async def run() -> None:
        broker = Broker.open(data, clock=ManualClock(), background=False, **broker_config)
        with ThreadPoolExecutor(2) as executor:
            subscriptions = ReplicatedSubscriptions(broker, "east", streams, executor)
            subscriptions.start()
            for marker, position in arrivals:
                marker_type, payload = marker if isinstance(marker, tuple) else markers.encode(marker)
                streams.handlers[marker_type](TOPIC, 0, "west", payload, position)
            await subscriptions.stop()  # (after the updates under way)
        broker.close()
    asyncio.run(run())
    return streams


def _subscriptions(data) -> dict[str, dict]:
    with seglog.open(data) as log:
        stats = log.admin.topics.stats(TOPIC)["subscriptions"]
        return {name: {"backlog": s["msgBacklog"], "replicated": s["isReplicated"]} for name, s in stats.items()}


def test_an_update_acknowledges_an_existing_subscription_up_to_its_position_here_never_back(data):
    with seglog.open(data) as log:
        log.admin.topics.create_subscription(TOPIC, "app", "earliest")
    _deliver(data, (SubscriptionUpdate("app", {"east": 1, "west": 7}), 4),
             (SubscriptionUpdate("app", {"east": 0, "west": 3}), 4))  # (an older one: it stays at 1)
    assert _subscriptions(data) == {"app": {"backlog": 2, "replicated": False}}


def test_an_update_for_a_missing_subscription_creates_it_at_the_end_replicated(data):
    _deliver(data, (SubscriptionUpdate("audit", {"east": 1, "west": 1}), 4))
    assert _subscriptions(data) == {"audit": {"backlog": 0, "replicated": True}}


def test_an_update_without_a_position_here_changes_nothing(data):
    with seglog.open(data) as log:
        log.admin.topics.create_subscription(TOPIC, "app", "earliest")
    _deliver(data, (SubscriptionUpdate("app", {"north": 3}), 4), (SubscriptionUpdate("other", {"north": 3}), 4))
    assert _subscriptions(data) == {"app": {"backlog": 4, "replicated": False}}


def test_a_request_is_answered_to_its_cluster_with_the_last_message_before_it(data):
    streams = _deliver(data, (SnapshotRequest("snap-1", "west"), 4))
    assert streams.sent == [(TOPIC, 0, "west", SnapshotResponse("snap-1", "east", 3))]


def test_a_malformed_marker_is_dropped_with_a_warning_and_nothing_changes(data, caplog):
    with seglog.open(data) as log:
        log.admin.topics.create_subscription(TOPIC, "app", "earliest")
    with caplog.at_level(logging.WARNING, logger="seglog.replication.subscriptions"):
        streams = _deliver(data, ((markers.UPDATE, b"\xff\x00 not protobuf"), 4),
                              ((markers.SNAPSHOT_REQUEST, b""), 4))
    assert streams.sent == []
    assert _subscriptions(data) == {"app": {"backlog": 4, "replicated": False}}
    dropped = "replicated subscriptions: a marker from west on public/default/orders partition 0 dropped: "
    assert [r.getMessage().removeprefix(dropped) for r in caplog.records] == [
        "REPLICATED_SUBSCRIPTION_UPDATE payload of 15 bytes does not decode: Error parsing message with type "
        "'seglog.markers.ReplicatedSubscriptionsUpdate': Wire format was corrupt",
        "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST payload of 0 bytes lacks snapshot_id"]


def test_with_replicated_subscriptions_disabled_markers_are_ignored(data):
    streams = _deliver(data, (SnapshotRequest("snap-1", "west"), 4),
                          (SubscriptionUpdate("audit", {"east": 1}), 4), enable_replicated_subscriptions=False)
    assert streams.sent == []
    assert _subscriptions(data) == {}
