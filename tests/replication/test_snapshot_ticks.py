"""Which topics the replicated subscriptions' tick looks at (replication/replicated_subscriptions.py): every
replicated topic once every DISCOVERY_TICKS ticks, in between only those with a replicated subscription, so
that a cluster with many replicated topics and few replicated subscriptions does not read every topic's
cursor files ten times a second."""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import seglog
from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.replication import markers
from seglog.replication.replicated_subscriptions import DISCOVERY_TICKS, ReplicatedSubscriptions

TOPICS = ("public/default/a", "public/default/b", "public/default/c")


class FakeStreams:
    """Every topic of TOPICS replicated to west, its replicator connected; the markers sent."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def replicated_partitions(self):
        return {(topic, 0): {"west": True} for topic in TOPICS}

    def send_marker(self, topic, partition, remote, marker_type, payload) -> bool:
        if marker_type == markers.SNAPSHOT_REQUEST:
            self.requests.append(topic)
        return True

    def on_marker(self, marker_type, handler) -> None:
        pass


def test_a_tick_looks_at_every_replicated_topic_only_every_discovery_ticks_and_else_at_those_it_found(tmp_path):
    with seglog.open(tmp_path / "east") as log:
        for topic in TOPICS:
            log.create_topic(topic)
            with log.topic(topic).producer() as producer:
                producer.send_batch([b"x"])
            log.admin.topics.create_subscription(topic, "app", "earliest")
        log.admin.topics.set_replicated_subscription_status("public/default/b", "app", True)
    streams = FakeStreams()
    looked: list[Counter] = []

    async def run() -> None:
        broker = Broker.open(tmp_path / "east", clock=ManualClock(), background=False)
        states = broker.subscriptions.states
        seen: Counter = Counter()

        def counted(ref):
            seen[str(ref.name)] += 1
            return states(ref)

        broker.subscriptions.states = counted
        with ThreadPoolExecutor(2) as executor:
            ticking = ReplicatedSubscriptions(broker, "east", streams, executor)
            for tick in range(2 * DISCOVERY_TICKS + 1):
                if tick == 2:  # made replicated between two looks: found at the next discovery
                    Admin(broker).topics.set_replicated_subscription_status("public/default/c", "app", True)
                seen.clear()
                await ticking._tick()
                looked.append(Counter(seen))
        broker.close()

    asyncio.run(run())
    everything = Counter({topic: 1 for topic in TOPICS})
    assert looked[0] == everything
    assert all(looked[tick] == Counter({"public/default/b": 1}) for tick in range(1, DISCOVERY_TICKS))
    assert looked[DISCOVERY_TICKS] == everything
    assert all(looked[tick] == Counter({"public/default/b": 1, "public/default/c": 1})
               for tick in range(DISCOVERY_TICKS + 1, 2 * DISCOVERY_TICKS))
    # a snapshot starts on each partition with a replicated subscription as it is found, on no other
    assert streams.requests == ["public/default/b", "public/default/c"]


class _NoStreams(FakeStreams):
    def replicated_partitions(self):
        return {}


class _CountingPool(ThreadPoolExecutor):
    submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_a_tick_with_no_replicated_topic_to_look_at_makes_no_trip_to_the_thread_pool(tmp_path):
    with seglog.open(tmp_path / "east") as log:
        log.create_topic(TOPICS[0])

    async def run() -> int:
        broker = Broker.open(tmp_path / "east", clock=ManualClock(), background=False)
        with _CountingPool(2) as pool:
            ticking = ReplicatedSubscriptions(broker, "east", _NoStreams(), pool)
            for _ in range(2 * DISCOVERY_TICKS):
                await ticking._tick()
            submitted = pool.submitted
        broker.close()
        return submitted

    assert asyncio.run(run()) == 0
