"""BrokerService in this process, on a real broker: what append tells the replication of each append
(`on_append`): where the messages went, and whether they were produced here or came from another cluster's
replicator; a duplicate writes nothing and is told of as nothing. And namespace listings racing a deletion."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import unpack, unpack_native
from seglog.server.protocol.metadata import REPLICATE_TO
from seglog.server.rest.topics import pulsar_topic_names
from seglog.server.service import BrokerService, Settings

TOPIC = "public/default/orders"


@pytest.fixture
def service(tmp_path):
    broker = Broker.open(tmp_path / "data", clock=ManualClock(), background=False)
    service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    service.appends = []
    service.on_append = lambda *append: service.appends.append(append)
    yield service
    broker.close()


def _send(service, handle, sequence_id: int, count: int = 1):
    """One SEND of `count` messages of `handle`'s producer, as the connection hands it to the service."""
    metadata = api.MessageMetadata(producer_name=handle.name, sequence_id=sequence_id, publish_time=1_000)
    if count == 1:
        return service.append(handle, unpack(metadata, b"value", sequence_id), sequence_id)
    metadata.num_messages_in_batch = count
    single = api.SingleMessageMetadata(payload_size=1).SerializeToString()
    payload = b"".join(len(single).to_bytes(4, "big") + single + b"v" for _ in range(count))
    return service.append(handle, unpack(metadata, payload, sequence_id + count - 1), sequence_id)


def test_a_local_producers_appends_are_told_of_with_their_offsets_and_no_origin(service):
    handle = service.open_writer(service.resolve(TOPIC, True), "local-producer")
    assert _send(service, handle, 0) == 0
    assert _send(service, handle, 1, count=3) == 1
    assert service.appends == [(TOPIC, 0, 0, 1, None), (TOPIC, 0, 1, 3, None)]


def test_a_replicators_appends_are_told_of_with_their_origin_and_duplicates_not_at_all(service):
    target = service.resolve(TOPIC, True)
    local = service.open_writer(target, "local-producer")
    replicated = service.open_writer(target, "pulsar.repl.west-->east")
    assert _send(service, local, 0) == 0
    assert _send(service, replicated, 7) == 1
    assert service.appends == [(TOPIC, 0, 0, 1, None), (TOPIC, 0, 1, 1, "west")]
    assert _send(service, replicated, 7) is None  # (the same origin offset again: dropped)
    assert service.broker.store.end_offset(target.ref.name, 0) == 2
    assert len(service.appends) == 2


def test_a_topic_deleted_while_a_namespace_is_listed_is_left_out_not_an_error(service, monkeypatch):
    """A listing reads the topics' names, then each topic: one deleted in between (a cascading deletion, say)
    must not fail the whole listing (it did: 404 naming the deleted topic), in the binary protocol's
    GET_TOPICS_OF_NAMESPACE as in the admin API's list."""
    broker = service.broker
    broker.create_topic("public/default/kept", 2, {})
    broker.create_topic("public/default/gone", 1, {})
    names = broker.catalog.topic_names()  # (read before the deletion)
    broker.delete_topic("public/default/gone", force=True)
    monkeypatch.setattr(broker.catalog, "topic_names", lambda: names)
    kept = ["persistent://public/default/kept-partition-0", "persistent://public/default/kept-partition-1"]
    assert service.topics_of_namespace("public/default") == kept
    context = SimpleNamespace(broker=broker)
    assert pulsar_topic_names(context, "public/default", partitioned=False) == kept
    assert pulsar_topic_names(context, "public/default", partitioned=True) == ["persistent://public/default/kept"]


def _native_send(handle, sequence_id: int, count: int):
    """One batched SEND of `count` messages of `handle`'s producer, unpacked natively as the connection does."""
    metadata = api.MessageMetadata(producer_name=handle.name, sequence_id=sequence_id, publish_time=1_000,
                                   num_messages_in_batch=count)
    single = api.SingleMessageMetadata(payload_size=2).SerializeToString()
    payload = b"".join(len(single).to_bytes(4, "big") + single + b"v%d" % (i % 10) for i in range(count))
    messages = unpack_native(metadata.SerializeToString(), payload, sequence_id + count - 1)
    assert messages is not None
    return messages


def test_sends_appended_together_get_consecutive_offsets_and_one_append_told_of(service):
    target = service.resolve(TOPIC, True)
    handle = service.open_writer(target, "local-producer")
    assert _send(service, handle, 0) == 0
    sends = [_native_send(handle, 1, 3), _native_send(handle, 4, 1), _native_send(handle, 5, 10)]
    assert service.append_all(handle, sends) == [1, 4, 5]
    assert service.appends == [(TOPIC, 0, 0, 1, None), (TOPIC, 0, 1, 14, None)]
    assert service.broker.store.end_offset(target.ref.name, 0) == 15


def test_sends_the_service_must_see_one_by_one_are_not_appended_together(service):
    """A topic that deduplicates (each SEND's sequence ids checked), a replicator, and messages naming the
    clusters to replicate to (counted per SEND) leave append_all None, nothing written."""
    target = service.resolve(TOPIC, True)
    replicator = service.open_writer(target, "pulsar.repl.west-->east")
    assert service.append_all(replicator, [_native_send(replicator, 0, 2)]) is None
    local = service.open_writer(target, "local-producer")
    named = _native_send(local, 0, 2)
    named.attributes[REPLICATE_TO] = "west"
    assert service.append_all(local, [_native_send(local, 0, 1), named]) is None
    Admin(service.broker).namespaces.set_deduplication("public/default", True)
    deduplicated = service.open_writer(service.resolve(TOPIC, True), "deduplicated-producer")
    assert service.append_all(deduplicated, [_native_send(deduplicated, 0, 2)]) is None
    assert service.broker.store.end_offset(target.ref.name, 0) == 0 and service.appends == []
