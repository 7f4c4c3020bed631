"""The work the replication service does per change does not grow with the number of topics (issue 26, item
7): creating a topic, or changing one topic's policies or settings, looks at that topic alone; a change that may reach
every topic (a namespace's clusters) looks at all of them; the periodic look reads the topics' names only,
and still finds a topic another process created. Counted on a real broker with 5,000 topics, in this
process: the topics each look reads from the catalog. The remote is registered at a port nothing listens
on: the replicators run, retrying their connections, which is all this needs."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.catalog.policies import GlobalPolicies
from seglog.catalog.topics import Catalog
from seglog.clock import system_clock
from seglog.replication.service import RECONCILE_S, ReplicationService

TOPICS = 5_000
GEO = "public/geo"
WAIT_S = 20.0
IDLE_S = 3.0  # three of the housekeeper's rounds (cursor_persist_interval: 1 s)


def _cluster_data(data, topics: int) -> None:
    """Cluster east: remote west registered (unreachable), namespace GEO replicated to both, `topics` topics
    in the default namespace (not replicated) and one in GEO."""
    broker = Broker.open(data, clock=system_clock, background=False)
    try:
        broker.catalog.record_local_cluster("east")
        admin = Admin(broker)
        for name in ("east", "west"):
            admin.clusters.create(name, {"serviceUrl": "http://127.0.0.1:1",
                                         "brokerServiceUrl": "pulsar://127.0.0.1:1"})
        admin.namespaces.create(GEO, clusters=["east", "west"])
        for number in range(topics):
            broker.create_topic(f"public/default/t{number}", 1, {})
        broker.create_topic(f"{GEO}/first", 1, {})
    finally:
        broker.close()


class Reads:
    """The topics the catalog reads for the replication service's looks, counted by kind: `every` (a look
    over every topic: each topic it returns), `one` (a look at one topic) and `names` (the periodic look's
    names, each name counted)."""

    def __init__(self, catalog: Catalog, monkeypatch) -> None:
        self.counts: Counter[str] = Counter()
        every, one, names = catalog.topics_with_replication, catalog.topic_with_replication, catalog.topic_names

        def topics_with_replication(local):
            found = every(local)
            self.counts["every"] += len(found)
            return found

        def topic_with_replication(name, local):
            self.counts["one"] += 1
            return one(name, local)

        def topic_names():
            found = names()
            self.counts["names"] += len(found)
            return found

        monkeypatch.setattr(catalog, "topics_with_replication", topics_with_replication)
        monkeypatch.setattr(catalog, "topic_with_replication", topic_with_replication)
        monkeypatch.setattr(catalog, "topic_names", topic_names)

    def take(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts


def _replicated(service: ReplicationService) -> set[str]:
    return {topic for topic, _ in service.replicated_partitions()}


async def _until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {WAIT_S} s"
        await asyncio.sleep(0.01)


@dataclass
class East:
    """Cluster east's broker with its replication service running, and the catalog's reads counted."""
    broker: Broker
    reads: Reads
    service: ReplicationService
    executor: ThreadPoolExecutor

    async def call(self, function, *args):
        """`function(*args)` in the thread pool, as the server calls the admin API."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)


@asynccontextmanager
async def _east(data, monkeypatch, *, background: bool) -> AsyncIterator[East]:
    """East opened on `data` (with the housekeeper if `background`), once the service's first look started
    GEO's replicator; closed after the block."""
    broker = Broker.open(data, clock=system_clock, background=background)
    reads = Reads(broker.catalog, monkeypatch)
    with ThreadPoolExecutor(2) as executor:
        service = ReplicationService(broker, "east", executor)
        service.start()
        try:
            await _until(lambda: _replicated(service) == {f"{GEO}/first"}, "the first look runs GEO's")
            yield East(broker, reads, service, executor)
        finally:
            await service.stop()
    broker.close()


def test_a_look_reads_the_topics_that_changed_not_every_topic(tmp_path, monkeypatch) -> None:
    _cluster_data(tmp_path / "east", TOPICS)

    async def run() -> dict[str, Counter[str]]:
        seen: dict[str, Counter[str]] = {}
        async with _east(tmp_path / "east", monkeypatch, background=False) as east:
            broker, reads, service = east.broker, east.reads, east.service
            seen["start"] = reads.take()

            # a topic created here: its replicators start, and only it is read
            await east.call(broker.create_topic, f"{GEO}/second", 2, {})
            await _until(lambda: f"{GEO}/second" in _replicated(service), "the new topic's replicators")
            await asyncio.sleep(RECONCILE_S * 1.5)  # (and a periodic look after it, which finds nothing new)
            seen["create"] = reads.take()

            # one topic's policies: global ones from west (PUT .../global-policies) leaving west out stop its
            # replicators
            received = GlobalPolicies().changed("west", int(time.time() * 1000),
                                                replication_clusters=frozenset({"east"}))
            outcome = await east.call(Admin(broker).topics.receive_global_policies, f"{GEO}/first", received, 1)
            assert outcome == "applied"
            await _until(lambda: f"{GEO}/first" not in _replicated(service), "the first topic's stop")
            seen["topic policy"] = reads.take()

            # one topic's own policies and settings, through the admin API and the broker: that topic alone
            admin = Admin(broker)
            await east.call(lambda: admin.topics.set_retention(f"{GEO}/second", size="1G", time="1h"))
            await east.call(broker.set_topic_config, f"{GEO}/second", {"retention_time": "2h"})
            await east.call(admin.topics.set_replication_clusters, f"{GEO}/second", ["east"])
            await _until(lambda: f"{GEO}/second" not in _replicated(service), "the second topic's stop")
            seen["topic admin"] = reads.take()

            # a topic another process created (no notification here): the periodic look finds it
            other = Broker.open(tmp_path / "east", clock=system_clock, background=False)
            try:
                await east.call(other.create_topic, f"{GEO}/elsewhere", 1, {})
            finally:
                other.close()
            await _until(lambda: f"{GEO}/elsewhere" in _replicated(service), "the other process's topic")
            seen["elsewhere"] = reads.take()

            # a namespace's clusters: every topic is looked at
            await east.call(Admin(broker).namespaces.set_clusters, GEO, ["east"])
            await _until(lambda: not _replicated(service), "every replicator's stop")
            seen["namespace"] = reads.take()
        return seen

    seen = asyncio.run(run())
    assert seen["start"]["every"] == TOPICS + 1 and seen["start"]["one"] == 0
    assert seen["create"]["every"] == 0 and seen["create"]["one"] == 1, seen["create"]
    assert seen["topic policy"]["every"] == 0 and seen["topic policy"]["one"] == 1, seen["topic policy"]
    assert seen["topic admin"]["every"] == 0 and 1 <= seen["topic admin"]["one"] <= 3, seen["topic admin"]
    # (found by the periodic look, which read the names only: no topic's policies but the new one's)
    assert seen["elsewhere"]["every"] == 0 and seen["elsewhere"]["one"] == 1, seen["elsewhere"]
    assert seen["elsewhere"]["names"] >= TOPICS + 3
    assert seen["namespace"]["every"] == TOPICS + 3, seen["namespace"]


def test_a_topic_deleted_and_made_again_before_a_look_gets_cursors_and_replicators_of_its_own(tmp_path) -> None:
    """(nothing tells the service of a deletion: the topic made again must not inherit the deleted one's
    cursor, whose fence says deleted)"""
    _cluster_data(tmp_path / "east", 0)
    topic = f"{GEO}/first"

    async def run() -> tuple[list[str], bool]:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(2) as executor:
            service = ReplicationService(broker, "east", executor)
            service.start()
            try:
                await _until(lambda: _replicated(service) == {topic}, "the first look runs its replicator")

                def again() -> None:
                    broker.delete_topic(topic, force=True)
                    broker.create_topic(topic, 1, {})
                await loop.run_in_executor(executor, again)
                await asyncio.sleep(RECONCILE_S * 1.5)  # (a look at it, and a periodic one)
                cursors = await loop.run_in_executor(executor, Admin(broker).topics.subscriptions, topic)
                stats = service.replication_stats(topic, None)
            finally:
                await service.stop()
        broker.close()
        return cursors, "west" in stats

    cursors, replicating = asyncio.run(run())
    assert cursors == ["pulsar.repl.west"] and replicating


def test_the_housekeeper_tells_of_changes_only_when_another_process_made_some(tmp_path, monkeypatch) -> None:
    """(it used to say "policies may have changed" every second, and every topic was looked at each time)"""
    _cluster_data(tmp_path / "east", TOPICS)

    async def run() -> dict[str, Counter[str]]:
        seen: dict[str, Counter[str]] = {}
        async with _east(tmp_path / "east", monkeypatch, background=True) as east:
            await asyncio.sleep(IDLE_S)  # (the housekeeper's first round may still see the opening's changes)
            east.reads.take()
            await asyncio.sleep(IDLE_S)
            seen["idle"] = east.reads.take()

            other = Broker.open(tmp_path / "east", clock=system_clock, background=False)
            try:
                await east.call(Admin(other).namespaces.set_clusters, GEO, ["east"])
            finally:
                other.close()
            await _until(lambda: not _replicated(east.service), "every replicator's stop")
            seen["elsewhere"] = east.reads.take()
        return seen

    seen = asyncio.run(run())
    assert seen["idle"]["every"] == 0, seen["idle"]
    assert seen["elsewhere"]["every"] >= TOPICS + 1, seen["elsewhere"]
