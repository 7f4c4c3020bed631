"""Replicated subscriptions' snapshots (Pulsar's PIP-33), as decisions without I/O: what to send when, what
a completed snapshot says, and what a subscription's progress means on the other clusters.

A snapshot ties a position of this cluster's partition to a position of each remote's: every message a
remote had written up to its position was also here before the local one. So a subscription that has
acknowledged everything up to the local position may acknowledge, on each remote, everything up to that
remote's position, and nothing it has not consumed somewhere is lost.

Positions are offsets, each the last message written at that point (-1 for none), so they compare directly
with a subscription's mark-delete position (the last offset below which everything is acknowledged). The
markers that take a snapshot never enter a log (markers.py), so a marker's "position" is where it arrived:
the partition's end offset then, the last message before it being end - 1.

- SnapshotController, one per topic partition with replication (Pulsar's ReplicatedSubscriptionsController
  and ReplicatedSubscriptionsSnapshotBuilder): starts attempts, answers other clusters' requests, collects
  the answers to its own, times attempts out, and applies an UPDATE from another cluster.
- SubscriptionSnapshots, one per replicated subscription and partition (Pulsar's
  ReplicatedSubscriptionSnapshotCache and the subscription's part): the snapshots a subscription has not
  passed yet, and the UPDATE its mark-delete position passing one of them sends.

Every rule reads the injected clock; the caller sends what these return through the replicators, in order
with the data (ReplicationService.send_marker), and calls back with what arrives (ReplicationService.on_marker,
decoded by markers.decode)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from seglog.catalog.config import MIN_SNAPSHOTS_CACHED
from seglog.clock import Clock
from seglog.errors import InvalidArgumentError
from seglog.replication.markers import Marker, SnapshotRequest, SnapshotResponse, SubscriptionUpdate, encode


@dataclass(frozen=True)
class Outgoing:
    """A marker to send to each of `clusters` on the partition's replication stream, after every message
    written when it is sent (ReplicationService.send_marker). Sent later than it was made, it follows more
    messages than its position names: a REQUEST or RESPONSE then says less than the remote will have, never
    more, which keeps every snapshot true."""
    marker_type: int
    payload: bytes
    clusters: tuple[str, ...]

    @classmethod
    def of(cls, marker: Marker, clusters: tuple[str, ...]) -> Outgoing:
        marker_type, payload = encode(marker)
        return cls(marker_type, payload, clusters)


@dataclass(frozen=True)
class Snapshot:
    """Everything a remote had written up to `positions[remote]` was here up to `position`."""
    snapshot_id: str
    position: int
    positions: Mapping[str, int]


@dataclass(frozen=True)
class SubscriptionChange:
    """What an UPDATE from another cluster asks of this cluster's subscription: acknowledge cumulatively up to
    `acknowledge` (it exists), or `create` it at the latest position, replicated (it does not, as Pulsar's
    broker creates it: where that cluster's consumers were is not a position here)."""
    subscription: str
    acknowledge: int | None = None
    create: bool = False


@dataclass
class _Attempt:
    """One snapshot being taken (Pulsar's ReplicatedSubscriptionsSnapshotBuilder)."""
    snapshot_id: str
    started_ms: int
    remotes: frozenset[str]
    rounds_left: int  # requests still to send after this round's answers: 1 with more than one remote
    missing: set[str]
    positions: dict[str, int] = field(default_factory=dict)


class SnapshotController:
    """The snapshots of one topic partition. Not thread safe: the caller serializes the calls."""

    def __init__(self, local_cluster: str, clock: Clock, *, frequency_ms: int = 1000, timeout_ms: int = 30_000,
                 new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.local_cluster = local_cluster
        self.clock = clock
        self.frequency_ms = frequency_ms
        self.timeout_ms = timeout_ms
        self.new_id = new_id
        self.timed_out = 0  # attempts abandoned since this controller started (a metric's counter)
        self.completed = 0  # snapshots completed since this controller started
        self.completed_ms = 0  # the time they took, summed (with `completed`: Pulsar's snapshot_ms summary)
        self._attempts: dict[str, _Attempt] = {}
        self._last_start_ms: int | None = None
        self._last_position: int | None = None  # of the last snapshot completed

    @property
    def pending(self) -> int:
        """Attempts started and neither completed nor timed out (a metric's gauge)."""
        return len(self._attempts)

    def may_start(self) -> bool:
        """Whether `tick` could start an attempt now: a frequency has passed since the last one started."""
        return self._due(self.clock())

    def _due(self, now: int) -> bool:
        return self._last_start_ms is None or now - self._last_start_ms >= self.frequency_ms

    def tick(self, end_offset: int, replicators: Mapping[str, bool]) -> Outgoing | None:
        """Abandons attempts older than the timeout, then starts one, at most one per frequency, if the
        partition (ending at `end_offset`) has a message no snapshot covers and every replicator (remote
        cluster -> connected) is connected. Returns its REQUEST, for every remote. Call it several times a
        frequency (every 100 ms, say): ticks only once a frequency, a little early or late, would start an
        attempt every other frequency.

        Pulsar starts one when a message was published since the start of the last completed snapshot. Here
        markers take no offset, so that rule would take a second snapshot at the position of the first after
        traffic stops, which the cache takes for a rewind and clears itself for; this one asks for what the
        rule is for: a message after the last snapshot's position."""
        now = self._expire()
        if not replicators or not all(replicators.values()):
            return None  # a remote that cannot answer makes an attempt that can only time out
        if not self._due(now):
            return None
        covered = self._last_position if self._last_position is not None else -1
        if end_offset - 1 <= covered:
            return None
        remotes = frozenset(replicators)
        attempt = _Attempt(self.new_id(), now, remotes, 1 if len(remotes) > 1 else 0, set(remotes))
        self._attempts[attempt.snapshot_id] = attempt
        self._last_start_ms = now
        return self._request(attempt)

    def response_received(self, response: SnapshotResponse, end_offset: int) -> Outgoing | Snapshot | None:
        """A remote's answer arrived when the partition ended at `end_offset`. The first answer of each remote
        is kept. Once every remote answered: the second round's REQUEST with more than one remote (so that
        what the remotes exchanged among themselves arrived here too), else the completed Snapshot, whose
        position is where the last answer arrived. None while answers are missing, and for an answer to an
        attempt that is unknown, timed out or done, or from a cluster it did not ask."""
        now = self._expire()
        attempt = self._attempts.get(response.snapshot_id)
        if attempt is None or response.cluster not in attempt.remotes:
            return None
        attempt.positions.setdefault(response.cluster, response.position)
        attempt.missing.discard(response.cluster)
        if attempt.missing:
            return None
        if attempt.rounds_left:
            attempt.rounds_left -= 1
            attempt.missing = set(attempt.remotes)
            return self._request(attempt)
        del self._attempts[attempt.snapshot_id]
        position = end_offset - 1
        if self._last_position is not None and position <= self._last_position:
            return None  # (an attempt that ran beside the last one and ended where it did: it adds nothing)
        self._last_position = position
        self.completed += 1
        self.completed_ms += now - attempt.started_ms
        return Snapshot(attempt.snapshot_id, position, dict(attempt.positions))

    def request_received(self, request: SnapshotRequest, end_offset: int) -> Outgoing:
        """Another cluster's REQUEST arrived when the partition ended at `end_offset`: the RESPONSE with this
        cluster's position (the last message before the request), back to the asking cluster only. (The caller
        reconnects its replicator to that cluster if it is down, as Pulsar does.)"""
        response = SnapshotResponse(request.snapshot_id, self.local_cluster, end_offset - 1)
        return Outgoing.of(response, (request.source,))

    def update_received(self, update: SubscriptionUpdate, exists: bool) -> SubscriptionChange | None:
        """Another cluster's subscription passed a snapshot: what this cluster's subscription of that name
        (`exists` or not) does. None when the update has no position for this cluster, or one before its
        first message."""
        position = update.positions.get(self.local_cluster)
        if position is None:
            return None
        if not exists:
            return SubscriptionChange(update.subscription, create=True)
        return SubscriptionChange(update.subscription, acknowledge=position) if position >= 0 else None

    def _request(self, attempt: _Attempt) -> Outgoing:
        return Outgoing.of(SnapshotRequest(attempt.snapshot_id, self.local_cluster), tuple(sorted(attempt.remotes)))

    def _expire(self) -> int:
        """Abandon the attempts older than the timeout (late answers to them are ignored); returns now."""
        now = self.clock()
        for snapshot_id in [i for i, a in self._attempts.items() if now - a.started_ms > self.timeout_ms]:
            del self._attempts[snapshot_id]
            self.timed_out += 1
        return now


class SnapshotCache:
    """The snapshots a subscription's mark-delete position has not passed yet, oldest first, at most
    `capacity` (Pulsar's ReplicatedSubscriptionSnapshotCache as of PR #25044).

    Past capacity, the snapshot evicted is the one between two others whose neighbours are closest (in
    messages), never the first or the last: so the first stays until the mark-delete position passes it,
    and the ones kept spread over the whole backlog of a subscription that moves slowly."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < MIN_SNAPSHOTS_CACHED:
            raise InvalidArgumentError("replicated_subscriptions_snapshot_max_cached_per_subscription", capacity,
                                       f"an int of at least {MIN_SNAPSHOTS_CACHED}", detail="the cache keeps its "
                                       "first and last snapshots and evicts between them")
        self.capacity = capacity
        self._snapshots: list[Snapshot] = []

    def __len__(self) -> int:
        return len(self._snapshots)

    @property
    def snapshots(self) -> tuple[Snapshot, ...]:
        return tuple(self._snapshots)

    def add(self, snapshot: Snapshot) -> None:
        """Keep `snapshot`. One at or before the newest kept means the subscription read again from an
        earlier position (Pulsar re-reads its markers then): the cache starts over from it."""
        if self._snapshots and snapshot.position <= self._snapshots[-1].position:
            self._snapshots.clear()
        self._snapshots.append(snapshot)
        if len(self._snapshots) > self.capacity:
            del self._snapshots[self._closest_neighbours()]

    def advance(self, mark_delete: int) -> Snapshot | None:
        """The mark-delete position moved to `mark_delete`: every snapshot at or before it is dropped, and the
        newest of them returned (None if there was none)."""
        passed = 0
        while passed < len(self._snapshots) and self._snapshots[passed].position <= mark_delete:
            passed += 1
        if not passed:
            return None
        newest = self._snapshots[passed - 1]
        del self._snapshots[:passed]
        return newest

    def _closest_neighbours(self) -> int:
        """The index of the interior snapshot whose neighbours are the fewest messages apart; the earlier one
        on a tie (as Pulsar orders them by position then)."""
        positions = [s.position for s in self._snapshots]
        return min(range(1, len(positions) - 1), key=lambda i: positions[i + 1] - positions[i - 1])


class SubscriptionSnapshots:
    """A replicated subscription on one partition: its snapshot cache, and the UPDATE it sends when its
    mark-delete position passes a snapshot."""

    def __init__(self, subscription: str, capacity: int) -> None:
        self.subscription = subscription
        self.cache = SnapshotCache(capacity)

    def snapshot_taken(self, snapshot: Snapshot, mark_delete: int) -> Outgoing | None:
        """A snapshot of the partition completed while the subscription's mark-delete position was
        `mark_delete`. In Pulsar the subscription reads the snapshot's marker, and acknowledging that marker
        moves its mark-delete position past it; here the snapshot is in no log, so a subscription already
        past it sends its UPDATE now rather than at its next acknowledgement."""
        self.cache.add(snapshot)
        return self.mark_delete_moved(mark_delete)

    def mark_delete_moved(self, mark_delete: int) -> Outgoing | None:
        """The subscription's mark-delete position is now `mark_delete`: if it passed a cached snapshot, the
        UPDATE giving the newest such snapshot's remote positions, for those remotes."""
        snapshot = self.cache.advance(mark_delete)
        if snapshot is None:
            return None
        update = SubscriptionUpdate(self.subscription, dict(snapshot.positions))
        return Outgoing.of(update, tuple(sorted(snapshot.positions)))
