"""Replicated subscriptions' snapshots without I/O (replication/snapshots.py), on a manual clock: each step of
Pulsar's algorithm (docs/REPLICATION.md, "Replicated subscriptions"), the snapshot cache's rules with Pulsar's
own example, and clusters exchanging markers end to end."""

from __future__ import annotations

import itertools

import pytest

from seglog.clock import ManualClock
from seglog.errors import InvalidArgumentError
from seglog.replication import markers
from seglog.replication.markers import SnapshotRequest, SnapshotResponse, SubscriptionUpdate
from seglog.replication.snapshots import (
    Outgoing,
    Snapshot,
    SnapshotCache,
    SnapshotController,
    SubscriptionChange,
    SubscriptionSnapshots,
)

CONNECTED = {"west": True}
BOTH = {"west": True, "north": True}


@pytest.fixture
def clock():
    return ManualClock()


def controller(clock, local="east", **settings) -> SnapshotController:
    ids = itertools.count(1)
    return SnapshotController(local, clock, new_id=lambda: f"snap-{next(ids)}", **settings)


def sent(outgoing: Outgoing | None):
    """(the marker decoded, its clusters): what the replicators would carry."""
    assert outgoing is not None
    return markers.decode(outgoing.marker_type, outgoing.payload), outgoing.clusters


def answer(snapshot_id: str, cluster: str, position: int) -> SnapshotResponse:
    return SnapshotResponse(snapshot_id, cluster, position)


# --- step 1: when an attempt starts ------------------------------------------------------------------------

def test_an_attempt_starts_when_a_message_is_not_covered_and_sends_its_request_to_every_remote(clock):
    east = controller(clock)
    assert sent(east.tick(5, BOTH)) == (SnapshotRequest("snap-1", "east"), ("north", "west"))
    assert east.pending == 1


def test_no_attempt_on_a_partition_without_messages(clock):
    assert controller(clock).tick(0, CONNECTED) is None


def test_no_attempt_while_a_replicator_is_disconnected_or_without_remotes(clock):
    east = controller(clock)
    assert east.tick(5, {"west": True, "north": False}) is None
    assert east.tick(5, {}) is None
    assert east.pending == 0
    assert east.tick(5, BOTH) is not None  # (at once: nothing started meanwhile)


def test_at_most_one_attempt_per_frequency(clock):
    east = controller(clock, frequency_ms=1000)
    assert east.tick(5, CONNECTED) is not None
    clock.advance(999)
    assert east.tick(9, CONNECTED) is None
    clock.advance(1)
    assert sent(east.tick(9, CONNECTED))[0] == SnapshotRequest("snap-2", "east")
    assert east.pending == 2  # (attempts run side by side, as Pulsar's)


def test_no_new_attempt_without_a_message_after_the_last_snapshot(clock):
    """Pulsar: no progress without new data. Messages written before the last answer arrived are covered."""
    east = controller(clock)
    east.tick(5, CONNECTED)
    assert east.response_received(answer("snap-1", "west", 3), 8) == Snapshot("snap-1", 7, {"west": 3})
    clock.advance(seconds=10)
    assert east.tick(8, CONNECTED) is None  # 5, 6 and 7 were written during the attempt: covered
    assert sent(east.tick(9, CONNECTED))[0] == SnapshotRequest("snap-2", "east")


def test_attempts_older_than_the_timeout_are_abandoned_and_counted(clock):
    east = controller(clock, timeout_ms=30_000)
    east.tick(5, CONNECTED)
    clock.advance(seconds=30)
    east.tick(5, {"west": False})
    assert (east.pending, east.timed_out) == (1, 0)  # at 30 s exactly it still waits, as Pulsar's
    clock.advance(1)
    east.tick(5, {"west": False})
    assert (east.pending, east.timed_out) == (0, 1)
    assert east.response_received(answer("snap-1", "west", 3), 6) is None  # late: ignored


def test_an_answer_after_the_timeout_is_ignored_even_before_the_next_tick(clock):
    east = controller(clock, timeout_ms=1000)
    east.tick(5, CONNECTED)
    clock.advance(1001)
    assert east.response_received(answer("snap-1", "west", 3), 6) is None
    assert (east.pending, east.timed_out) == (0, 1)


# --- steps 2 to 5: requests, answers, rounds and the snapshot -------------------------------------------------

def test_a_remote_answers_with_its_last_message_to_the_asking_cluster_only():
    west = SnapshotController("west", ManualClock())
    assert sent(west.request_received(SnapshotRequest("snap-1", "east"), 12)) == (
        SnapshotResponse("snap-1", "west", 11), ("east",))  # the last of the 12 messages it had
    assert sent(west.request_received(SnapshotRequest("snap-1", "east"), 0))[0].position == -1


def test_with_one_remote_its_answer_completes_the_snapshot_where_it_arrived(clock):
    east = controller(clock)
    east.tick(5, CONNECTED)
    clock.advance(40)
    snapshot = east.response_received(answer("snap-1", "west", 3), 8)
    assert snapshot == Snapshot("snap-1", 7, {"west": 3})
    assert (east.pending, east.completed, east.completed_ms) == (0, 1, 40)  # (the snapshot_ms summary's figures)


def test_with_two_remotes_a_second_round_and_the_first_answer_of_each_kept(clock):
    east = controller(clock)
    east.tick(5, BOTH)
    assert east.response_received(answer("snap-1", "west", 3), 6) is None
    assert east.response_received(answer("snap-1", "west", 4), 6) is None  # a repeat: the first stays
    second = east.response_received(answer("snap-1", "north", 10), 7)
    assert sent(second) == (SnapshotRequest("snap-1", "east"), ("north", "west"))
    assert east.response_received(answer("snap-1", "north", 12), 9) is None
    snapshot = east.response_received(answer("snap-1", "west", 5), 11)
    assert snapshot == Snapshot("snap-1", 10, {"west": 3, "north": 10})  # local: where the last answer arrived


def test_unknown_answers_and_answers_from_clusters_not_asked_are_ignored(clock):
    east = controller(clock)
    east.tick(5, CONNECTED)
    assert east.response_received(answer("snap-9", "west", 3), 6) is None
    assert east.response_received(answer("snap-1", "north", 3), 6) is None
    assert east.pending == 1
    assert east.response_received(answer("snap-1", "west", 3), 6) == Snapshot("snap-1", 5, {"west": 3})
    assert east.response_received(answer("snap-1", "west", 3), 6) is None  # done: no second snapshot


def test_an_attempt_ending_where_the_last_snapshot_did_gives_no_snapshot(clock):
    """Two attempts side by side, answered with no message between: the second would sit at the first's
    position, which the cache takes for a rewind."""
    east = controller(clock)
    east.tick(5, CONNECTED)
    clock.advance(seconds=1)
    east.tick(6, CONNECTED)
    assert east.response_received(answer("snap-1", "west", 3), 8) == Snapshot("snap-1", 7, {"west": 3})
    assert east.response_received(answer("snap-2", "west", 3), 8) is None
    assert east.pending == 0
    assert east.response_received(answer("snap-3", "west", 3), 9) is None  # (never started: unknown)


# --- steps 6 and 7: a subscription passing a snapshot sends an UPDATE --------------------------------------------

def test_passing_a_snapshot_sends_its_remote_positions_at_once():
    orders = SubscriptionSnapshots("orders", 30)
    assert orders.snapshot_taken(Snapshot("s1", 10, {"west": 4, "north": 9}), mark_delete=3) is None
    assert orders.mark_delete_moved(9) is None
    assert sent(orders.mark_delete_moved(10)) == (SubscriptionUpdate("orders", {"west": 4, "north": 9}),
                                                  ("north", "west"))
    assert orders.mark_delete_moved(11) is None  # passed once


def test_a_subscription_already_past_a_new_snapshot_sends_its_update_without_another_ack():
    orders = SubscriptionSnapshots("orders", 30)
    assert sent(orders.snapshot_taken(Snapshot("s1", 10, {"west": 4}), mark_delete=12))[0] == \
        SubscriptionUpdate("orders", {"west": 4})
    assert len(orders.cache) == 0


def test_only_the_newest_snapshot_passed_is_sent():
    orders = SubscriptionSnapshots("orders", 30)
    for i, position in enumerate((10, 20, 30)):
        orders.snapshot_taken(Snapshot(f"s{i}", position, {"west": i}), mark_delete=0)
    assert sent(orders.mark_delete_moved(25))[0] == SubscriptionUpdate("orders", {"west": 1})
    assert [s.position for s in orders.cache.snapshots] == [30]


# --- step 8: an UPDATE from another cluster --------------------------------------------------------------------

def test_an_update_acknowledges_an_existing_subscription_up_to_this_clusters_position(clock):
    west = controller(clock, local="west")
    update = SubscriptionUpdate("orders", {"west": 41, "north": 7})
    assert west.update_received(update, exists=True) == SubscriptionChange("orders", acknowledge=41)


def test_an_update_creates_a_missing_subscription_at_latest(clock):
    west = controller(clock, local="west")
    update = SubscriptionUpdate("orders", {"west": 41})
    assert west.update_received(update, exists=False) == SubscriptionChange("orders", create=True)


def test_an_update_without_this_cluster_or_before_its_first_message_changes_nothing(clock):
    west = controller(clock, local="west")
    assert west.update_received(SubscriptionUpdate("orders", {"north": 7}), exists=True) is None
    assert west.update_received(SubscriptionUpdate("orders", {"north": 7}), exists=False) is None
    assert west.update_received(SubscriptionUpdate("orders", {"west": -1}), exists=True) is None


# --- the snapshot cache -----------------------------------------------------------------------------------------

def _snapshot(position: int) -> Snapshot:
    return Snapshot(f"at-{position}", position, {"west": position})


def test_pulsars_cache_example():
    """ReplicatedSubscriptionSnapshotCacheTest with its (ledger, entry) positions as offsets: (1,1) 11,
    (2,2) 22, (5,5) 55, (7,7) 77; mark-delete positions (0,0) 0, (1,0) 10, (1,1) 11, (5,6) 56."""
    cache = SnapshotCache(10)
    assert cache.advance(0) is None and cache.advance(100) is None
    for position in (11, 22, 55, 77):
        cache.add(_snapshot(position))
    assert cache.advance(0) is None
    assert cache.advance(10) is None
    assert cache.advance(11).snapshot_id == "at-11"
    assert cache.advance(56).snapshot_id == "at-55"
    assert cache.advance(22) is None and cache.advance(55) is None  # dropped with the one returned
    assert [s.position for s in cache.snapshots] == [77]


def test_past_capacity_the_interior_snapshot_whose_neighbours_are_closest_goes():
    cache = SnapshotCache(4)
    for position in (0, 100, 110, 300):
        cache.add(_snapshot(position))
    cache.add(_snapshot(400))  # 100: neighbours 0 and 110 (110 apart); 110: 100 and 300 (200); 300: 200
    assert [s.position for s in cache.snapshots] == [0, 110, 300, 400]
    cache.add(_snapshot(410))  # 110: 300; 300: 290; 400: 110
    assert [s.position for s in cache.snapshots] == [0, 110, 300, 410]


def test_the_first_and_last_snapshots_are_never_evicted():
    """So a subscription that moves slowly always has a snapshot to reach, and snapshots spread over its whole
    backlog instead of the newest N (the stall of Pulsar's older cache)."""
    cache = SnapshotCache(3)
    for position in range(0, 1000, 10):
        cache.add(_snapshot(position))
    assert [s.position for s in cache.snapshots] == [0, 20, 990]  # each newer interior one was closer
    spread = SnapshotCache(5)
    for position in range(0, 1600, 100):
        spread.add(_snapshot(position))
    kept = [s.position for s in spread.snapshots]
    assert kept[0] == 0 and kept[-1] == 1500 and len(kept) == 5
    assert max(b - a for a, b in zip(kept, kept[1:])) <= 800  # spread out, not the newest five


def test_a_tie_evicts_the_earlier_snapshot():
    cache = SnapshotCache(3)
    for position in (0, 10, 20, 30):
        cache.add(_snapshot(position))
    assert [s.position for s in cache.snapshots] == [0, 20, 30]


def test_a_snapshot_at_or_before_the_newest_starts_the_cache_over():
    """The subscription was rewound: Pulsar reads the markers again and the cache rebuilds from them."""
    cache = SnapshotCache(10)
    for position in (10, 20, 30):
        cache.add(_snapshot(position))
    cache.add(_snapshot(30))
    assert [s.position for s in cache.snapshots] == [30]
    cache.add(_snapshot(5))
    assert [s.position for s in cache.snapshots] == [5]


@pytest.mark.parametrize("capacity", [2, 0, -1, "30", True])
def test_a_cache_of_fewer_than_three_is_refused(capacity):
    with pytest.raises(InvalidArgumentError, match="max_cached_per_subscription .*accepted: an int of at least 3"):
        SnapshotCache(capacity)


# --- clusters exchanging markers, end to end ---------------------------------------------------------------------

class Cluster:
    """One cluster's partition: its log (the origin of each message), its controller, its subscription."""

    def __init__(self, name: str, clock: ManualClock) -> None:
        self.name = name
        self.log: list[str] = []
        self.controller = controller(clock, local=name)
        self.orders = SubscriptionSnapshots("orders", 30)
        self.acknowledged = -1  # the subscription's mark-delete position

    @property
    def end(self) -> int:
        return len(self.log)


class Mesh:
    """Clusters replicating to each other in order: each link is a queue of (message or marker) in the order
    the sending cluster's replicator carries them."""

    def __init__(self, clock: ManualClock, *names: str) -> None:
        self.clusters = {name: Cluster(name, clock) for name in names}
        self.links: dict[tuple[str, str], list] = {(a, b): [] for a in names for b in names if a != b}
        self.sent: dict[tuple[str, str], int] = dict.fromkeys(self.links, 0)  # messages of a's log given to a->b
        self.updates: list[tuple[str, SubscriptionChange]] = []

    def produce(self, name: str, count: int) -> None:
        self.clusters[name].log.extend([name] * count)

    def forward(self, source: str) -> None:
        """The replicators of `source` carry its own messages written so far (never replicated ones)."""
        cluster = self.clusters[source]
        for (a, b), link in self.links.items():
            if a == source:
                for i in range(self.sent[(a, b)], cluster.end):
                    if cluster.log[i] == source:
                        link.append(("message", source))
                self.sent[(a, b)] = cluster.end

    def send(self, source: str, outgoing: Outgoing | None) -> None:
        if outgoing is None:
            return
        self.forward(source)  # (after every message written so far, as ReplicationService.send_marker)
        for remote in outgoing.clusters:
            self.links[(source, remote)].append(("marker", (outgoing.marker_type, outgoing.payload)))

    def deliver(self, a: str, b: str, count: int | None = None) -> None:
        """What is queued on the link a -> b (all, or the first `count`) arrives at b, in order."""
        target = self.clusters[b]
        link = self.links[(a, b)]
        arriving, link[:] = link[:count], link[len(link) if count is None else count:]
        for kind, item in arriving:
            if kind == "message":
                target.log.append(item)
                continue
            marker = markers.decode(*item)
            if isinstance(marker, SnapshotRequest):
                self.send(b, target.controller.request_received(marker, target.end))
            elif isinstance(marker, SnapshotResponse):
                progress = target.controller.response_received(marker, target.end)
                if isinstance(progress, Snapshot):
                    self.send(b, target.orders.snapshot_taken(progress, target.acknowledged))
                else:
                    self.send(b, progress)
            else:
                self.updates.append((b, target.controller.update_received(marker, exists=True)))

    def settle(self) -> None:
        for _ in range(6):
            for name in self.clusters:
                self.forward(name)
            for a, b in list(self.links):
                self.deliver(a, b)


def assert_consumed_here(mesh: Mesh, names: tuple[str, ...]) -> None:
    """Each remote acknowledged, of each origin's messages, no more than east's subscription consumed."""
    east = mesh.clusters["east"]
    consumed = east.log[:east.acknowledged + 1]
    assert sorted(name for name, _ in mesh.updates) == sorted(names[1:])
    for name, change in mesh.updates:
        acknowledged = mesh.clusters[name].log[:change.acknowledge + 1]
        for origin in names:
            assert acknowledged.count(origin) <= consumed.count(origin), (name, origin)
        assert acknowledged.count(name) > 0


@pytest.mark.parametrize("names", [("east", "west"), ("east", "west", "north")])
def test_what_another_cluster_acknowledges_was_consumed_here(clock, names):
    """Messages produced everywhere, a snapshot taken on east, east's subscription passing it: each remote
    acknowledges only messages that east's subscription had consumed (all of them in east's log up to the
    acknowledged position), and with three clusters only after two rounds."""
    mesh = Mesh(clock, *names)
    for name in names:
        mesh.produce(name, 5)
    mesh.settle()
    east = mesh.clusters["east"]
    mesh.send("east", east.controller.tick(east.end, dict.fromkeys(names[1:], True)))
    for name in names:
        mesh.produce(name, 3)  # while the snapshot is taken
    mesh.settle()
    assert east.controller.pending == 0 and len(east.orders.cache) == 1
    snapshot = east.orders.cache.snapshots[0]
    east.acknowledged = snapshot.position
    mesh.send("east", east.orders.mark_delete_moved(east.acknowledged))
    mesh.settle()
    assert_consumed_here(mesh, names)


def test_with_three_clusters_the_second_round_takes_in_what_the_remotes_exchanged(clock):
    """north answers, then writes messages that reach west before west answers and reach east only after
    north's answer: after one round east's position would not hold them while west's would. The second round's
    answers come after them on every link."""
    names = ("east", "west", "north")
    mesh = Mesh(clock, *names)
    for name in names:
        mesh.produce(name, 5)
    mesh.settle()
    east = mesh.clusters["east"]
    mesh.send("east", east.controller.tick(east.end, {"west": True, "north": True}))
    mesh.deliver("east", "north")  # north answers
    mesh.produce("north", 3)
    mesh.forward("north")
    mesh.deliver("north", "west")  # north's new messages reach west ...
    mesh.deliver("east", "west")  # ... before east's request: west's answer covers them
    mesh.deliver("north", "east", count=1)  # north's answer, not yet the messages after it
    mesh.deliver("west", "east")
    assert east.controller.pending == 1 and len(east.orders.cache) == 0  # a second round, not a snapshot yet
    mesh.settle()
    snapshot = east.orders.cache.snapshots[0]
    assert east.log[:snapshot.position + 1].count("north") == 8
    east.acknowledged = snapshot.position
    mesh.send("east", east.orders.mark_delete_moved(east.acknowledged))
    mesh.settle()
    assert_consumed_here(mesh, names)
