"""Which replicators an append wakes (ReplicationService.local_append, in this process on a real broker):
those of the appended partition, one per remote, and no others; none once they stopped. The remotes are
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
    woken: list[tuple[str, int, str]] = []
    monkeypatch.setattr(Replicator, "appended", lambda self: woken.append((self.remote_topic, self.partition,
                                                                           self.remote)))

    async def run() -> list[tuple[str, int, str]]:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        with ThreadPoolExecutor(2) as executor:
            service = ReplicationService(broker, "east", executor)
            service.start()
            deadline = time.monotonic() + WAIT_S
            while _running(service) != EXPECTED and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert _running(service) == EXPECTED
            service.local_append(GEO, 1)
            service.local_append(LOCAL, 0)
            while_running = sorted(woken)
            await service.stop()
            service.local_append(GEO, 1)
        broker.close()
        return while_running

    while_running = asyncio.run(run())
    partition = f"persistent://{GEO}-partition-1"
    assert while_running == [(partition, 1, "north"), (partition, 1, "west")]
    assert sorted(woken) == while_running  # (none once stopped)
