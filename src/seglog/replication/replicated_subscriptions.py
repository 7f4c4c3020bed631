"""Replicated subscriptions (Pulsar's PIP-33) at work in `seglog serve`: snapshots taken on every replicated
partition that has a replicated subscription, the markers that take them answered for every replicated
partition, and each replicated subscription's mark-delete position sent, through the newest snapshot it
passed, to the other clusters, which acknowledge up to it there (or create the subscription).

The rules are snapshots.py's (decisions without I/O); this module runs them. Every TICK_S it
- reads, in the thread pool, the mark-delete position (the last offset below which everything is
  acknowledged) of every replicated subscription, and the end offset of each partition that has one: every
  DISCOVERY_TICKS ticks on every replicated topic, in between on those that had a replicated subscription at
  the last look, at every tick where one is consumed here and else when the next snapshot may start (a look
  at a topic reads the catalog and lists its cursor files: every 100 ms on each of a thousand replicated
  topics, that took most of a core while nothing happened);
- ticks each partition's SnapshotController (one attempt at most per replicatedSubscriptionsSnapshotFrequency-
  Millis, only when a message came after the last snapshot, every replicator connected, and the partition has
  a replicated subscription: snapshots cost markers, which a partition nobody fails over does not need);
- hands each subscription whose mark-delete position moved to its SubscriptionSnapshots, which sends an UPDATE
  when it passed a snapshot.
Markers from other clusters (REQUEST, RESPONSE, UPDATE) arrive through the replication service's marker
channel (ReplicationService.on_marker), in order with the replicated messages, and are answered the same way.

Snapshots live in memory, as Pulsar's snapshot cache does: a restarted server takes new ones (Pulsar rebuilds
its cache by reading the snapshot markers again from the mark-delete position; seglog writes none into the
log, so a subscription moves on from the first snapshot taken after the restart)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Set
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Protocol

from seglog.admin.api import Admin
from seglog.admin.stats import replicated
from seglog.broker import Broker
from seglog.errors import AlreadyExistsError, NotFoundError, SeglogError
from seglog.replication.markers import (
    SNAPSHOT_REQUEST,
    SNAPSHOT_RESPONSE,
    UPDATE,
    MarkerError,
    SnapshotRequest,
    SnapshotResponse,
    SubscriptionUpdate,
    decode,
)
from seglog.replication.snapshots import (
    Outgoing,
    Snapshot,
    SnapshotController,
    SubscriptionChange,
    SubscriptionSnapshots,
)

logger = logging.getLogger("seglog.replication.subscriptions")

TICK_S = 0.1  # a tenth of the default frequency: an attempt starts at most a tick late
# how often a tick looks for replicated subscriptions on every replicated topic: a subscription made replicated
# takes its first snapshot up to a second later
DISCOVERY_TICKS = 10
STOP_S = 5.0  # how long stopping waits for the UPDATEs being applied

_Partition = tuple[str, int]  # (seglog topic, partition)
_Subscription = tuple[str, int, str]  # (seglog topic, partition, subscription)


class Streams(Protocol):
    """What the replicated subscriptions need of the replication service."""

    def replicated_partitions(self) -> dict[_Partition, dict[str, bool]]:
        """Every partition with replicators: remote cluster -> whether its replicator is connected."""

    def send_marker(self, topic: str, partition: int, remote: str, marker_type: int, payload: bytes) -> bool:
        """Send a marker to `remote` on the partition's replication stream, after every message written."""

    def on_marker(self, marker_type: int,
                  handler: Callable[[str, int, str, bytes, int], None]) -> None:
        """Have markers of `marker_type` from other clusters go to `handler`, on the loop."""


def _carried(known: set[_Partition], replicated: Set[_Partition], looked_at: set[_Partition],
             seen: set[_Partition]) -> set[_Partition]:
    """What a tick knows of a set of partitions: what it saw among those it looked at, and what it knew of
    the others that still replicate."""
    return ((known & replicated) - looked_at) | seen


@dataclass(frozen=True)
class _Observed:
    """What a tick read in the thread pool."""
    ends: dict[_Partition, int]  # each partition's end offset
    marks: dict[_Subscription, int]  # each replicated subscription's mark-delete position
    live: set[_Partition]  # the partitions with a replicated subscription consumed in this process


@dataclass
class _Counts:
    """Snapshot attempts counted since the server started."""
    timed_out: int = 0
    completed: int = 0
    completed_ms: int = 0  # the time the completed ones took, summed

    def add(self, controller: SnapshotController) -> None:
        self.timed_out += controller.timed_out
        self.completed += controller.completed
        self.completed_ms += controller.completed_ms


class ReplicatedSubscriptions:
    """The replicated subscriptions of one cluster (loop thread, but for what runs in `executor`)."""

    def __init__(self, broker: Broker, local: str, streams: Streams, executor: Executor) -> None:
        self.broker = broker
        self.local = local
        self._streams = streams
        self._executor = executor
        self._admin = Admin(broker)
        self._controllers: dict[_Partition, SnapshotController] = {}
        self._subscriptions: dict[_Subscription, SubscriptionSnapshots] = {}
        self._marks: dict[_Subscription, int] = {}
        self._ticks = 0
        self._with_subscriptions: set[_Partition] = set()  # the partitions the last look found them on
        self._live: set[_Partition] = set()  # those of them where one is consumed in this process
        self._dropped = _Counts()  # those of controllers dropped since (their partitions no longer replicate)
        self._task: asyncio.Task[None] | None = None
        self._updates: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self.broker.config.enable_replicated_subscriptions

    def start(self) -> None:
        for marker_type in (SNAPSHOT_REQUEST, SNAPSHOT_RESPONSE, UPDATE):
            self._streams.on_marker(marker_type, functools.partial(self._marker, marker_type))
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop ticking; UPDATEs being applied finish first (each a short admin call, bounded by STOP_S)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._updates:
            await asyncio.wait(set(self._updates), timeout=STOP_S)
        for task in list(self._updates):
            task.cancel()

    def stats(self) -> dict[str, int]:
        """Snapshot attempts in progress; since the server started, those abandoned after the timeout, those
        completed and the milliseconds they took (Pulsar's pulsar_replicated_subscriptions_pending_snapshots,
        ..._timedout_snapshots and ..._snapshot_ms)."""
        controllers = list(self._controllers.values())  # (a copy: called from the thread pool too)
        counts = dataclasses.replace(self._dropped)
        for controller in controllers:
            counts.add(controller)
        return {"pendingSnapshots": sum(c.pending for c in controllers), "timedoutSnapshots": counts.timed_out,
                "completedSnapshots": counts.completed, "completedSnapshotsMs": counts.completed_ms}

    def cached(self, topic: str, partition: int) -> dict[str, tuple[Snapshot, ...]]:
        """The snapshots each replicated subscription of the partition has not passed yet, oldest first
        (any thread: internal-stats shows them, since in seglog no marker in the topic does)."""
        return {name: snapshots.cache.snapshots for (t, p, name), snapshots in list(self._subscriptions.items())
                if (t, p) == (topic, partition)}

    async def _run(self) -> None:
        while True:
            try:
                await self._tick()
            except Exception:  # (one failed tick never stops them; the next one tries again)
                logger.exception("replicated subscriptions: a snapshot tick failed")
            await asyncio.sleep(TICK_S)

    async def _tick(self) -> None:
        if not self.enabled:
            return
        partitions = self._streams.replicated_partitions()
        for key in [key for key in self._controllers if key not in partitions]:
            self._dropped.add(self._controllers.pop(key))
        discovering = self._ticks % DISCOVERY_TICKS == 0
        self._ticks += 1
        looked_at = set(partitions) if discovering else {key for key in partitions if self._worth_a_look(key)}
        # (nothing to look at, no trip to the thread pool: a server without replicated subscriptions made one
        # ten times a second for nothing)
        observed = await self._blocking(self._observe, looked_at) if looked_at else _Observed({}, {}, set())
        found = {(topic, partition) for topic, partition, _ in observed.marks}
        self._with_subscriptions = _carried(self._with_subscriptions, partitions.keys(), looked_at, found)
        self._live = _carried(self._live, partitions.keys(), looked_at, observed.live)
        for key, remotes in partitions.items():
            if key in observed.ends:
                self._send(key, self._controller(key).tick(observed.ends[key], remotes))
        for subscription in [subscription for subscription in self._subscriptions
                             if subscription[:2] not in partitions
                             or (subscription[:2] in looked_at and subscription not in observed.marks)]:
            del self._subscriptions[subscription], self._marks[subscription]
        for subscription, mark in observed.marks.items():
            if subscription not in self._subscriptions:
                self._subscriptions[subscription] = SubscriptionSnapshots(
                    subscription[2],
                    self.broker.config.replicated_subscriptions_snapshot_max_cached_per_subscription)
            elif self._marks[subscription] != mark:
                self._send(subscription[:2], self._subscriptions[subscription].mark_delete_moved(mark))
            self._marks[subscription] = mark

    def _worth_a_look(self, key: _Partition) -> bool:
        """Between two looks at every replicated topic: whether the tick looks at this partition. One with a
        replicated subscription consumed here at every tick (acknowledgements move its mark-delete position,
        which an UPDATE follows); one whose replicated subscriptions no consumer here holds (only the admin API
        or another process moves them) when its next snapshot may start. (Looking at every one ten times a
        second, a trip to the thread pool each, was half of what snapshots cost the servers.)"""
        if key not in self._with_subscriptions:
            return False
        controller = self._controllers.get(key)
        return key in self._live or controller is None or controller.may_start()

    def _observe(self, partitions: Iterable[_Partition]) -> _Observed:
        """The mark-delete position of each replicated subscription on the partitions, and the end offset of
        each partition that has one (blocking: reads cursor files of subscriptions no consumer of this process
        holds)."""
        ends: dict[_Partition, int] = {}
        marks: dict[_Subscription, int] = {}
        live: set[_Partition] = set()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        for topic, numbers in by_topic.items():
            try:
                ref = self.broker.topic(topic)
                found: set[int] = set()
                for name, record, consumed in self.broker.subscriptions.states(ref):
                    for partition in numbers:
                        cursor = record.partitions[partition]
                        if replicated(self.broker, cursor):
                            marks[(topic, partition, name)] = cursor.acks.floor - 1
                            found.add(partition)
                            if consumed is not None:
                                live.add((topic, partition))
                for partition in found:
                    ends[(topic, partition)] = self.broker.store.end_offset(ref.name, partition)
            except NotFoundError:
                continue  # (deleted meanwhile: the replication service stops its replicators)
        return _Observed(ends, marks, live)

    def _controller(self, key: _Partition) -> SnapshotController:
        controller = self._controllers.get(key)
        if controller is None:
            config = self.broker.config
            controller = self._controllers[key] = SnapshotController(
                self.local, self.broker.clock, frequency_ms=config.replicated_subscriptions_snapshot_frequency_ms,
                timeout_ms=config.replicated_subscriptions_snapshot_timeout_seconds * 1000)
        return controller

    def _send(self, key: _Partition, outgoing: Outgoing | None) -> None:
        if outgoing is None:
            return
        for remote in outgoing.clusters:
            if not self._streams.send_marker(*key, remote, outgoing.marker_type, outgoing.payload):
                logger.debug("replicated subscriptions: no replicator of %s partition %d goes to %s", *key, remote)

    # markers from the other clusters (loop)

    def _marker(self, marker_type: int, topic: str, partition: int, origin: str, payload: bytes,
                position: int) -> None:
        """A REQUEST, RESPONSE or UPDATE cluster `origin` sent, arrived when the partition ended at
        `position`."""
        if not self.enabled:
            return
        key = (topic, partition)
        try:
            marker = decode(marker_type, payload)
        except MarkerError as error:  # (a bad marker is dropped: the snapshot it belongs to times out)
            logger.warning("replicated subscriptions: a marker from %s on %s partition %d dropped: %s", origin,
                           topic, partition, error)
            return
        if isinstance(marker, SnapshotRequest):
            self._send(key, self._controller(key).request_received(marker, position))
        elif isinstance(marker, SnapshotResponse):
            result = self._controller(key).response_received(marker, position)
            if isinstance(result, Snapshot):
                self._snapshot_taken(key, result)
            else:
                self._send(key, result)
        elif isinstance(marker, SubscriptionUpdate):
            task = asyncio.get_running_loop().create_task(self._update(key, marker))
            self._updates.add(task)
            task.add_done_callback(self._updates.discard)

    def _snapshot_taken(self, key: _Partition, snapshot: Snapshot) -> None:
        for (topic, partition, name), snapshots in self._subscriptions.items():
            if (topic, partition) == key:
                self._send(key, snapshots.snapshot_taken(snapshot, self._marks[(topic, partition, name)]))

    async def _update(self, key: _Partition, update: SubscriptionUpdate) -> None:
        try:
            exists = await self._blocking(self._exists, key[0], update.subscription)
            change = self._controller(key).update_received(update, exists)
            if change is not None:
                await self._blocking(self._apply, key, change)
        except SeglogError as error:  # (the topic or subscription went meanwhile: the next update applies)
            logger.info("replicated subscriptions: update of %r on %s partition %d not applied: %s",
                        update.subscription, *key, error)

    def _exists(self, topic: str, subscription: str) -> bool:
        return subscription in self.broker.subscriptions.names(self.broker.topic(topic))

    def _apply(self, key: _Partition, change: SubscriptionChange) -> None:
        """Acknowledge cumulatively where the other cluster's subscription got to, or create the subscription
        at the latest position, replicated (on every partition: seglog makes a partitioned topic's
        subscription on all of them at once, where Pulsar makes each partition's)."""
        topic, partition = key
        topics = self._admin.topics
        if change.create:
            try:
                topics.create_subscription(topic, change.subscription, "latest")
            except AlreadyExistsError:
                pass  # (a consumer made it meanwhile)
            topics.set_replicated_subscription_status(topic, change.subscription, True)
        elif change.acknowledge is not None:
            topics.ack_cumulative(topic, change.subscription, {partition: change.acknowledge})

    async def _blocking(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

