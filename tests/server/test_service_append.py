"""BrokerService.append in this process, on a real broker: which appends it tells the replication of
(`on_local_append`). Replicators are woken by messages produced here only: what another cluster's replicator
writes never leaves again, and a duplicate writes nothing."""

from __future__ import annotations

import pytest

from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import unpack
from seglog.server.service import BrokerService, Settings

TOPIC = "public/default/orders"


@pytest.fixture
def service(tmp_path):
    broker = Broker.open(tmp_path / "data", clock=ManualClock(), background=False)
    service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    service.local_appends = []
    service.on_local_append = lambda topic, partition: service.local_appends.append((topic, partition))
    yield service
    broker.close()


def _send(service, handle, sequence_id: int):
    """One unbatched SEND of `handle`'s producer, as the connection hands it to the service."""
    metadata = api.MessageMetadata(producer_name=handle.name, sequence_id=sequence_id, publish_time=1_000)
    return service.append(handle, unpack(metadata, b"value", sequence_id), sequence_id)


def test_a_local_producers_appends_are_told_of_with_their_partition(service):
    target = service.resolve(TOPIC, True)
    handle = service.open_writer(target, "local-producer")
    assert _send(service, handle, 0) == 0
    assert _send(service, handle, 1) == 1
    assert service.local_appends == [(TOPIC, 0), (TOPIC, 0)]


def test_a_replicators_appends_and_duplicates_are_not(service):
    target = service.resolve(TOPIC, True)
    replicated = service.open_writer(target, "pulsar.repl.west-->east")
    assert _send(service, replicated, 7) == 0
    assert service.broker.store.end_offset(target.ref.name, 0) == 1  # (written all the same)
    assert service.local_appends == []
    local = service.open_writer(target, "local-producer")
    assert _send(service, local, 0) == 1
    service.local_appends.clear()
    assert _send(service, replicated, 7) is None  # (the same origin offset again: dropped)
    assert service.local_appends == []
