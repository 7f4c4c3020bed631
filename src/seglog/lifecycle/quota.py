"""Backlog quotas on the send path (docs/LIFECYCLE.md, Backlog quotas).

A quota holds at its limit: a send is refused if the backlog of the topic's slowest subscription, with
that send, would be at or above the limit (Pulsar's test, "at or above", applied to the backlog the send
would make, so no send takes it over). Bytes are those `topic.stats()` reports as `backlogSize`: stored
batches, headers included. As in Pulsar, where each partition of a partitioned topic is a topic of its
own, the backlog compared is the partition's.

A topic without backlog quotas costs its producers nothing: their quota gate is None, set again whenever
this process changes a policy, and every `cursor_persist_interval` by the housekeeper for changes made by
other processes. With quotas, the check costs O(1) per send while the partition is below its limits: the
last computed backlog leaves a margin in bytes that each send uses up, and a time until the oldest
unacknowledged message reaches the age
limit. A send() counts the bytes its message would take alone in a batch, at least what it adds to the
batch it joins. When the margin or the time runs out, what send() queued is written and the backlog
computed again from the index, exactly as stats() computes it; while the partition is at its limit, only
once some subscription's cursor has moved since the last computation."""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from seglog._wait import wait_until
from seglog.catalog.policies import BacklogQuota
from seglog.catalog.topics import Catalog, TopicRef
from seglog.errors import ProducerBlockedQuotaExceededError, ProducerSendTimeoutError
from seglog.lifecycle.backlog import partition_backlog
from seglog.lifecycle.maintenance import Maintenance
from seglog.names import TopicName
from seglog.subscriptions.subscription import reading
from seglog.units import format_duration, format_size

QuotaGate = Callable[[bool], None]  # a producer's: armed (True) while its topic has backlog quotas


@dataclass(frozen=True)
class Refusal:
    """Why a send may not go: the policy of the backlog quota it reaches (producer_request_hold or
    producer_exception) and a message naming the quota, its limit and the backlog."""
    policy: str
    reason: str


@dataclass
class _PartitionState:
    margin: int = -1          # bytes that may still be sent before the size limit must be checked again
    age_deadline: int = -1    # clock time at which the oldest unacknowledged message reaches the age limit
    cursors: tuple = ()       # the subscriptions' cursors when last computed (names, floors, ack counts)
    refusal: str | None = None


class QuotaGuard:
    """The backlog quotas of one topic, checked by its producers before each send."""

    def __init__(self, ref: TopicRef, catalog: Catalog, maintenance: Maintenance) -> None:
        self.ref = ref
        self._catalog = catalog
        self._maintenance = maintenance
        self._store, self._subscriptions, self._clock = maintenance.store, maintenance.subscriptions, maintenance.clock
        self.fence = self._store.fence(ref.name)
        self._lock = threading.Lock()
        self._quotas: list[BacklogQuota] = []
        self._gates: list[weakref.WeakMethod[QuotaGate]] = []  # the producers' (they may be dropped unclosed)
        self._states = [_PartitionState() for _ in range(ref.partitions)]
        self._last: tuple = (0, None, None)  # (largest backlog bytes, its subscription, (oldest ts, its subscription))

    def check(self, partition: int, nbytes: int, send_timeout: float, write_queued: Callable[[], object]) -> None:
        """Return if `partition` may take `nbytes` more stored bytes now; else apply the quota's policy: raise
        (producer_exception), wait up to `send_timeout` seconds (producer_request_hold), or evict. Before the
        backlog is computed again, `write_queued` writes what send() queued on the partition."""
        refusal = self.admit(partition, nbytes, write_queued)
        if refusal is None:
            return
        if refusal.policy == "producer_exception":
            raise ProducerBlockedQuotaExceededError(refusal.reason)
        deadline = time.monotonic() + send_timeout
        if wait_until(deadline, lambda: self._admit_locked(partition, nbytes) is None):
            return
        raise ProducerSendTimeoutError(f"{self._states[partition].refusal}; the send was held for the producer's "
                                       f"send timeout of {send_timeout:g} s (policy producer_request_hold)")

    def admit(self, partition: int, nbytes: int, write_queued: Callable[[], object]) -> Refusal | None:
        """As check, without waiting or raising: None if `partition` may take `nbytes` more stored bytes now
        (after evicting, for consumer_backlog_eviction), else the refusal (a producer_request_hold or
        producer_exception quota reached, and why)."""
        state = self._states[partition]
        if state.refusal is None and state.margin > nbytes and self._clock() < state.age_deadline:
            state.margin -= nbytes
            return None
        write_queued()
        with self._lock:
            quota = self._admit(partition, nbytes)
            if quota is None:
                return None
            if quota.policy == "consumer_backlog_eviction":
                self._evict(partition, quota, nbytes)
                return None
            assert state.refusal is not None
            return Refusal(quota.policy, state.refusal)

    def count_written(self, partition: int, nbytes: int) -> None:
        """`nbytes` were written to `partition` after an `admit` of 0 bytes (Pulsar's test, which looks at the
        backlog before a send only): they use up the margin as an admitted send's do."""
        self._states[partition].margin -= nbytes

    def register(self, gate: QuotaGate) -> None:
        """Arm `gate` (a bound method of a producer) now and whenever the topic's quotas change."""
        with self._lock:
            self._gates = [g for g in self._gates if g() is not None] + [weakref.WeakMethod(gate)]
            armed = bool(self._quotas)
        gate(armed)

    def refresh(self) -> None:
        """Read the topic's quotas again and arm or disarm its producers' gates."""
        with self._lock:
            quotas = [q.value for q in self._catalog.policies(self.ref).backlog_quotas.values()]
            if quotas != self._quotas:
                self._quotas = quotas
                self._states = [_PartitionState() for _ in range(self.ref.partitions)]
            gates = [g() for g in self._gates]
        for gate in gates:
            if gate is not None:
                gate(bool(quotas))

    def _admit_locked(self, partition: int, nbytes: int) -> BacklogQuota | None:
        with self._lock:
            return self._admit(partition, nbytes)

    def _admit(self, partition: int, nbytes: int) -> BacklogQuota | None:
        """The quota a send of `nbytes` would reach (None if it reaches none: then its bytes are taken from
        the margin)."""
        quota = self._evaluate(partition, nbytes)
        if quota is None:
            self._states[partition].margin -= nbytes
        return quota

    def _evaluate(self, partition: int, nbytes: int) -> BacklogQuota | None:
        """The quota the partition is at or over with `nbytes` more (None if below all), updating the
        partition's state."""
        state = self._states[partition]
        states = list(self._subscriptions.states(self.ref))
        cursors = tuple((name, r.partitions[partition].acks.floor, r.partitions[partition].acks.individual_count)
                        for name, r, _ in states)
        now = self._clock()
        if state.refusal is not None and cursors == state.cursors:  # refused since, and no cursor moved
            return self._over(state, now, nbytes)
        view = self._store.view(self.ref.name, partition)
        table = view.facts.table()
        largest, oldest, slowest = 0, None, None
        for name, record, live in states:
            with reading(live):
                backlog = partition_backlog(view, table, record.partitions[partition].acks)
            if backlog.bytes >= largest:
                largest, slowest = backlog.bytes, name
            if backlog.oldest_timestamp is not None and (oldest is None or backlog.oldest_timestamp < oldest[0]):
                oldest = (backlog.oldest_timestamp, name)
        state.cursors = cursors
        state.margin = 1 << 62
        state.age_deadline = 1 << 62
        state.refusal = None
        self._last = (largest, slowest, oldest)
        for quota in self._quotas:
            if quota.type == "destination_storage":
                state.margin = min(state.margin, quota.limit - largest)
            else:  # without a backlog, the next message is at least as new as now
                state.age_deadline = min(state.age_deadline, (oldest[0] if oldest else now) + quota.limit)
        return self._over(state, now, nbytes)

    def _over(self, state: _PartitionState, now: int, nbytes: int) -> BacklogQuota | None:
        largest, slowest, oldest = self._last
        for quota in self._quotas:
            if quota.type == "destination_storage" and state.margin <= nbytes:
                with_send = (f", and this send of {nbytes:,} bytes would take it to {largest + nbytes:,}"
                             if nbytes else "")
                state.refusal = (f"backlog quota exceeded on {self.ref}: subscription {slowest!r} has a "
                                 f"backlog of {largest:,} bytes{with_send}, at or above the destination_storage "
                                 f"limit of {format_size(quota.limit)} ({quota.limit:,} bytes)")
                return quota
            if quota.type == "message_age" and oldest is not None and now >= state.age_deadline:
                state.refusal = (f"backlog quota exceeded on {self.ref}: subscription {oldest[1]!r} has an "
                                 f"unacknowledged message {format_duration(now - oldest[0])} old, at or above "
                                 f"the message_age limit of {format_duration(quota.limit)}")
                return quota
        state.refusal = None
        return None

    def _evict(self, partition: int, quota: BacklogQuota, incoming: int) -> None:
        self._maintenance.evict(self.ref, partition, [quota], incoming)
        self._states[partition] = _PartitionState()


class QuotaGuards:
    """The quota guard of each topic this process produces to, re-armed whenever policies change."""

    def __init__(self, catalog: Catalog, maintenance: Maintenance) -> None:
        self._catalog = catalog
        self._maintenance = maintenance
        self._guards: dict[str, QuotaGuard] = {}
        self._lock = threading.Lock()
        catalog.on_topic_policies_changed(self.refresh)

    def guard(self, ref: TopicRef) -> QuotaGuard:
        """The topic's guard (made again when the topic grew)."""
        with self._lock:
            guard = self._guards.get(str(ref))
            if guard is not None and guard.ref.partitions == ref.partitions:
                return guard
            guard = self._guards[str(ref)] = QuotaGuard(ref, self._catalog, self._maintenance)
        guard.refresh()
        return guard

    def refresh(self, topic: TopicName | None = None) -> None:
        """Policies or topic settings changed (here, or seen from another process): re-arm the quotas, of
        `topic` alone when the change was to its own."""
        with self._lock:
            guards = [(name, guard) for name, guard in self._guards.items() if topic is None or name == str(topic)]
        for name, guard in guards:
            if guard.fence.deleted:  # by another process
                self.forget(name)
            else:
                guard.refresh()

    def forget(self, name: str) -> None:
        with self._lock:
            self._guards.pop(name, None)
