"""Which topics the replicated subscriptions' tick looks at (replication/replicated_subscriptions.py): every
replicated topic once every DISCOVERY_TICKS ticks, in between only those with a replicated subscription, and
of those at every tick only where one is consumed in this process, so that a cluster with many replicated
topics and few replicated subscriptions does not read every topic's cursor files ten times a second."""

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


def test_a_tick_looks_at_every_replicated_topic_every_discovery_ticks_and_else_only_where_it_may_matter(tmp_path):
    """Between two looks at every topic, a tick looks at a partition with a replicated subscription consumed
    in this process every time (acknowledgements move it), and at one whose replicated subscriptions nobody
    here consumes only when its next snapshot may start (a frequency, 1,000 ms, after the last began)."""
    with seglog.open(tmp_path / "east") as log:
        for topic in TOPICS:
            log.create_topic(topic)
            with log.topic(topic).producer() as producer:
                producer.send_batch([b"x"])
            log.admin.topics.create_subscription(topic, "app", "earliest")
        for topic in TOPICS[:2]:
            log.admin.topics.set_replicated_subscription_status(topic, "app", True)
    streams = FakeStreams()
    looked: list[set[str]] = []

    async def run() -> None:
        clock = ManualClock()
        broker = Broker.open(tmp_path / "east", clock=clock, background=False)
        consumed = broker.subscriptions.open(broker.topic("public/default/a"), "app", "exclusive", "earliest")
        states = broker.subscriptions.states
        seen: Counter = Counter()

        def counted(ref):
            seen[str(ref.name)] += 1
            return states(ref)

        broker.subscriptions.states = counted
        with ThreadPoolExecutor(2) as executor:
            ticking = ReplicatedSubscriptions(broker, "east", streams, executor)
            for tick in range(2 * DISCOVERY_TICKS + 1):
                clock.advance(1_000 if tick in (5, 15) else 100 if tick else 0)  # (ticks 100 ms apart, and two jumps)
                if tick == 2:  # made replicated between two looks: found at the next discovery
                    Admin(broker).topics.set_replicated_subscription_status("public/default/c", "app", True)
                seen.clear()
                await ticking._tick()
                looked.append({topic.rsplit("/", 1)[1] for topic in seen})
        broker.subscriptions.release(consumed)
        broker.close()

    asyncio.run(run())
    assert looked[0] == looked[DISCOVERY_TICKS] == looked[2 * DISCOVERY_TICKS] == {"a", "b", "c"}
    # a at every tick; b and c also where their next snapshot may start: after each jump (1,400 and 3,300 ms;
    # c's first was at the second discovery, 1,900 ms)
    assert [sorted(looked[tick]) for tick in range(1, 2 * DISCOVERY_TICKS)] == (
        [["a"]] * 4 + [["a", "b"]] + [["a"]] * 4 + [["a", "b", "c"]] + [["a"]] * 4 + [["a", "b", "c"]] + [["a"]] * 4)
    # snapshots start where a look finds them due: a and b at 0 ms and after the first jump, c at the second
    # discovery, all three after the second jump
    assert streams.requests == [f"public/default/{t}" for t in ("a", "b", "a", "b", "c", "a", "b", "c")]


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
