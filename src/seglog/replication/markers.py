"""The markers of replicated subscriptions (Pulsar's PIP-33): their types and their payloads, both ways.

A marker is an entry whose MessageMetadata has `marker_type` set and one of markers.proto's messages as its
payload. Replicators carry them between clusters in order with the data, and the receiving server hands them
to the replication instead of storing them: in seglog a marker never enters a log.

A position here is a seglog offset: the last message a cluster had written at that point (-1 when it had
none), sent as Pulsar's message id of it (ledgerId LEDGER_ID, entryId the offset, as
server/protocol/message_ids.py maps them). A position of another ledger is a Pulsar broker's: seglog cannot
place it in a partition, so it is refused (MarkerError), and replicated subscriptions run between seglog
clusters only.

The SNAPSHOT marker (12) has no codec here: Pulsar writes it into the topic for its subscriptions to read,
while seglog hands a completed snapshot to the subscriptions directly (snapshots.py), so it never leaves the
process that took it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from seglog.errors import SeglogError
from seglog.replication import markers_pb2 as pb
from seglog.server.protocol.message_ids import LEDGER_ID, UINT64_MINUS_ONE, signed

SNAPSHOT_REQUEST = 10
SNAPSHOT_RESPONSE = 11
SNAPSHOT = 12  # Pulsar's completed snapshot: seglog keeps it in memory (see above), never sends or receives it
UPDATE = 13
NAMES = {SNAPSHOT_REQUEST: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
         SNAPSHOT_RESPONSE: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE",
         SNAPSHOT: "REPLICATED_SUBSCRIPTION_SNAPSHOT", UPDATE: "REPLICATED_SUBSCRIPTION_UPDATE"}


class MarkerError(SeglogError):
    """A marker whose payload is not what its type says: not the protobuf message, a required field missing,
    or a position that is not a seglog offset."""


@dataclass(frozen=True)
class SnapshotRequest:
    """REQUEST: cluster `source` takes snapshot `snapshot_id` and asks for every remote's position."""
    snapshot_id: str
    source: str


@dataclass(frozen=True)
class SnapshotResponse:
    """RESPONSE: `cluster` had written up to `position` when snapshot `snapshot_id`'s request reached it."""
    snapshot_id: str
    cluster: str
    position: int


@dataclass(frozen=True)
class SubscriptionUpdate:
    """UPDATE: subscription `subscription` may acknowledge, on each cluster, everything up to its position."""
    subscription: str
    positions: Mapping[str, int]


Marker = SnapshotRequest | SnapshotResponse | SubscriptionUpdate
_M = TypeVar("_M", bound=Message)


def encode(marker: Marker) -> tuple[int, bytes]:
    """(marker_type, payload) of a marker."""
    if isinstance(marker, SnapshotRequest):
        return SNAPSHOT_REQUEST, pb.ReplicatedSubscriptionsSnapshotRequest(
            snapshot_id=marker.snapshot_id, source_cluster=marker.source).SerializeToString()
    if isinstance(marker, SnapshotResponse):
        response = pb.ReplicatedSubscriptionsSnapshotResponse(snapshot_id=marker.snapshot_id)
        _fill(response.cluster, marker.cluster, marker.position)
        return SNAPSHOT_RESPONSE, response.SerializeToString()
    update = pb.ReplicatedSubscriptionsUpdate(subscription_name=marker.subscription)
    for cluster, position in sorted(marker.positions.items()):  # sorted: one payload for one update
        _fill(update.clusters.add(), cluster, position)
    return UPDATE, update.SerializeToString()


def decode(marker_type: int, payload: bytes) -> Marker | None:
    """The marker a replicator brought, or None for a marker type that is not a replicated subscription's
    (transaction markers and others: not for this module, as Pulsar's controller ignores them). MarkerError for
    a payload that is not its type's message."""
    if marker_type == SNAPSHOT_REQUEST:
        request = _parse(pb.ReplicatedSubscriptionsSnapshotRequest, marker_type, payload)
        return SnapshotRequest(request.snapshot_id, request.source_cluster)
    if marker_type == SNAPSHOT_RESPONSE:
        response = _parse(pb.ReplicatedSubscriptionsSnapshotResponse, marker_type, payload)
        if not response.HasField("cluster"):
            raise MarkerError(f"{NAMES[marker_type]} {response.snapshot_id!r} names no cluster")
        return SnapshotResponse(response.snapshot_id, response.cluster.cluster,
                                _offset(response.cluster, NAMES[marker_type]))
    if marker_type == UPDATE:
        update = _parse(pb.ReplicatedSubscriptionsUpdate, marker_type, payload)
        return SubscriptionUpdate(update.subscription_name,
                                  {c.cluster: _offset(c, NAMES[marker_type]) for c in update.clusters})
    return None


def _parse(message_type: type[_M], marker_type: int, payload: bytes) -> _M:
    """`payload` as `message_type`, with its required fields (protobuf parses a message without them)."""
    what = f"{NAMES[marker_type]} payload of {len(payload)} bytes"
    try:
        message = message_type.FromString(payload)
    except DecodeError as error:
        raise MarkerError(f"{what} does not decode: {error}") from None
    if not message.IsInitialized():
        # (a method of every message that types-protobuf's Message leaves out)
        missing = message.FindInitializationErrors()  # type: ignore[attr-defined, unused-ignore]
        raise MarkerError(f"{what} lacks {', '.join(missing)}")
    return message


def _fill(message: pb.ClusterMessageId, cluster: str, position: int) -> None:
    message.cluster = cluster
    message.message_id.ledger_id = LEDGER_ID
    message.message_id.entry_id = position if position >= 0 else UINT64_MINUS_ONE


def _offset(message: pb.ClusterMessageId, what: str) -> int:
    ledger, entry = message.message_id.ledger_id, signed(message.message_id.entry_id)
    if ledger != LEDGER_ID or entry < -1:
        raise MarkerError(f"{what}: the position of cluster {message.cluster!r} is {ledger}:{entry}, not a seglog "
                          f"offset ({LEDGER_ID}:offset, or {LEDGER_ID}:-1 before the first): replicated "
                          "subscriptions run between seglog clusters")
    return entry
