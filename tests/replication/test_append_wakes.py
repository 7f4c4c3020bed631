"""What an append does to replicators (ReplicationService.appended, in this process on a real broker): one
of messages produced here wakes those of the appended partition, one per remote, and no others; one of
messages from another cluster has them acknowledge its offsets instead (they never leave); neither reaches
a replicator once it stopped. The remotes are
registered at a port nothing listens on: the replicators run, retrying their connections, which is all
this needs."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import system_clock
from seglog.replication.replicator import Replicator
from seglog.replication.service import ReplicationService

GEO, LOCAL = "public/geo/orders", "public/default/orders"
WAIT_S = 10.0


def _cluster_data(data) -> None:
    """Cluster east's data directory: remotes west and north registered (unreachable), topic GEO of two
    partitions in a namespace replicated to all three, LOCAL in one that is not replicated."""
    broker = Broker.open(data, clock=system_clock, background=False)
    try:
        broker.catalog.record_local_cluster("east")
        admin = Admin(broker)
        for name in ("east", "west", "north"):
            admin.clusters.create(name, {"serviceUrl": "http://127.0.0.1:1",
                                         "brokerServiceUrl": "pulsar://127.0.0.1:1"})
        admin.namespaces.create("public/geo", clusters=["east", "west", "north"])
        broker.create_topic(GEO, 2, {})
        broker.create_topic(LOCAL, 1, {})
    finally:
        broker.close()


EXPECTED = {(GEO, 0): ["north", "west"], (GEO, 1): ["north", "west"]}  # (the replicators the service runs)


def _running(service: ReplicationService) -> dict[tuple[str, int], list[str]]:
    return {partition: sorted(remotes) for partition, remotes in service.replicated_partitions().items()}


def test_an_append_wakes_the_replicators_of_its_partition_and_no_others(tmp_path, monkeypatch):
    _cluster_data(tmp_path / "east")
    told: list[tuple] = []
    monkeypatch.setattr(Replicator, "appended", lambda self: told.append((self.partition, self.remote, "wake")))
    monkeypatch.setattr(Replicator, "replicated_here",
                        lambda self, first, count: told.append((self.partition, self.remote, first, count)))

    async def run() -> list[tuple]:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        with ThreadPoolExecutor(2) as executor:
            service = ReplicationService(broker, "east", executor)
            service.start()
            deadline = time.monotonic() + WAIT_S
            while _running(service) != EXPECTED and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert _running(service) == EXPECTED
            service.appended(GEO, 1, 10, 1, None)
            service.appended(GEO, 0, 20, 3, "west")
            service.appended(LOCAL, 0, 0, 1, None)
            while_running = sorted(told, key=str)
            await service.stop()
            service.appended(GEO, 1, 11, 1, None)
            service.appended(GEO, 1, 12, 1, "north")
        broker.close()
        return while_running

    while_running = asyncio.run(run())
    assert while_running == sorted([(1, "north", "wake"), (1, "west", "wake"), (0, "north", 20, 3),
                                    (0, "west", 20, 3)], key=str)
    assert sorted(told, key=str) == while_running  # (none once stopped)
