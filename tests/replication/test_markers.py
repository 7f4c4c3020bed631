"""The payloads of replicated subscriptions' markers (replication/markers.py): Pulsar's field numbers on the
wire, positions as seglog offsets both ways, and every payload that cannot be one refused with its reason."""

from __future__ import annotations

import pytest

from seglog.replication import markers
from seglog.replication.markers import MarkerError, SnapshotRequest, SnapshotResponse, SubscriptionUpdate


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field, written by hand: the wire contract, not the generated module's."""
    return bytes([number << 3 | 2, len(value)]) + value


def _varint_field(number: int, value: int) -> bytes:
    encoded = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        encoded.append(byte | (0x80 if value else 0))
        if not value:
            return bytes([number << 3]) + bytes(encoded)


def _cluster_id(cluster: str, ledger: int, entry: int) -> bytes:
    """ClusterMessageId {1: cluster, 2: MarkersMessageIdData {1: ledger_id, 2: entry_id}}."""
    return _field(1, cluster.encode()) + _field(2, _varint_field(1, ledger) + _varint_field(2, entry))


@pytest.mark.parametrize("marker", [
    SnapshotRequest("3f1c", "east"),
    SnapshotResponse("3f1c", "west", 41),
    SnapshotResponse("3f1c", "west", -1),  # the remote had no message yet
    SubscriptionUpdate("orders", {"west": 41, "north": 7}),
    SubscriptionUpdate("orders", {}),
])
def test_each_marker_round_trips(marker):
    marker_type, payload = markers.encode(marker)
    assert markers.decode(marker_type, payload) == marker


def test_the_types_are_pulsars():
    assert [markers.encode(m)[0] for m in (SnapshotRequest("i", "a"), SnapshotResponse("i", "a", 0),
                                           SubscriptionUpdate("s", {}))] == [10, 11, 13]
    assert markers.SNAPSHOT == 12


def test_the_payloads_are_pulsars_field_numbers_both_ways():
    request = _field(1, b"id-1") + _field(2, b"east")
    response = _field(1, b"id-1") + _field(2, _cluster_id("west", 0, 41))
    update = _field(1, b"orders") + _field(2, _cluster_id("north", 0, 7)) + _field(2, _cluster_id("west", 0, 41))
    assert markers.decode(10, request) == SnapshotRequest("id-1", "east")
    assert markers.decode(11, response) == SnapshotResponse("id-1", "west", 41)
    assert markers.decode(13, update) == SubscriptionUpdate("orders", {"north": 7, "west": 41})
    assert markers.encode(SnapshotRequest("id-1", "east"))[1] == request
    assert markers.encode(SnapshotResponse("id-1", "west", 41))[1] == response
    assert markers.encode(SubscriptionUpdate("orders", {"west": 41, "north": 7}))[1] == update  # clusters sorted


def test_before_the_first_message_is_entry_minus_one_as_uint64():
    payload = markers.encode(SnapshotResponse("i", "west", -1))[1]
    assert payload == _field(1, b"i") + _field(2, _cluster_id("west", 0, (1 << 64) - 1))


@pytest.mark.parametrize("marker_type", [0, 12, 20, 21])
def test_markers_that_are_not_a_replicated_subscriptions_are_not_decoded(marker_type):
    """Transaction markers, unknown ones, and the SNAPSHOT marker, which no seglog cluster sends."""
    assert markers.decode(marker_type, b"\xff\xff") is None


@pytest.mark.parametrize(("marker_type", "payload", "reason"), [
    (10, b"\xff\xff\xff", "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST payload of 3 bytes does not decode"),
    (10, _field(2, b"east"), "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST payload of 6 bytes lacks snapshot_id"),
    (11, _field(1, b"id"), "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE 'id' names no cluster"),
    (11, _field(1, b"id") + _field(2, _cluster_id("west", 7, 41)),
     "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: the position of cluster 'west' is 7:41, not a seglog offset"),
    (13, _field(1, b"s") + _field(2, _cluster_id("west", 0, (1 << 64) - 2)),
     "REPLICATED_SUBSCRIPTION_UPDATE: the position of cluster 'west' is 0:-2, not a seglog offset"),
    (13, _field(2, _cluster_id("west", 0, 1)), "REPLICATED_SUBSCRIPTION_UPDATE payload of 14 bytes lacks "
                                               "subscription_name"),
    (11, _field(1, b"id") + _field(2, _field(1, b"west")), "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE payload of "
                                                           "12 bytes lacks cluster.message_id"),
])
def test_a_payload_that_is_not_its_types_message_is_refused_with_the_reason(marker_type, payload, reason):
    with pytest.raises(MarkerError) as caught:
        markers.decode(marker_type, payload)
    assert str(caught.value).startswith(reason)
