"""The registry of a log's subscriptions (Subscriptions, built once by Broker.open): their cursor files, the
subscriptions this process consumes (one Subscription each, opened and released here), and the changes
made to a subscription without a consumer (TTL, eviction, clear-backlog, the admin API)."""

from __future__ import annotations

import os
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from seglog._core._acks import AckSet
from seglog.catalog.topics import TopicRef
from seglog.errors import ConsumerBusyError, InvalidArgumentError
from seglog.names import TopicName, validate_subscription_name
from seglog.storage.lock import ExclusiveFileLock
from seglog.subscriptions.cursor_file import (
    CURSOR_SUFFIX,
    LOCK_SUFFIX,
    SUBSCRIPTION_TYPES,
    CursorRecord,
    PartitionCursor,
    load,
    save,
    subscription_names,
)
from seglog.subscriptions.subscription import Subscription

if TYPE_CHECKING:
    from seglog.clock import Clock
    from seglog.storage.store import PartitionStore


SUBSCRIPTION_TYPES_ACCEPTED = ("exclusive, failover, shared or key_shared, in any case (Pulsar's Exclusive, "
                               "Failover, Shared, Key_Shared; KeyShared too)")
INITIAL_POSITIONS = ("earliest", "latest")  # where a new subscription's cursor starts
INITIAL_POSITIONS_ACCEPTED = "earliest or latest, in any case (Pulsar's Earliest, Latest)"


def parse_subscription_type(value: object) -> str:
    """The subscription type `value` names, as seglog spells it (one of SUBSCRIPTION_TYPES): any case, with or
    without the underscore, so that Pulsar's spellings (Shared, Key_Shared) are taken as its clients write them."""
    if isinstance(value, str):
        folded = value.lower().replace("_", "")
        for subscription_type in SUBSCRIPTION_TYPES:
            if folded == subscription_type.replace("_", ""):
                return subscription_type
    raise InvalidArgumentError("subscription_type", value, SUBSCRIPTION_TYPES_ACCEPTED)


def parse_initial_position(value: object) -> str:
    """The initial position `value` names, as seglog spells it (one of INITIAL_POSITIONS): any case, so that
    Pulsar's spellings (Earliest, Latest) are taken as its clients write them."""
    if isinstance(value, str) and value.lower() in INITIAL_POSITIONS:
        return value.lower()
    raise InvalidArgumentError("initial_position", value, INITIAL_POSITIONS_ACCEPTED)


class Subscriptions:
    """The subscriptions of a log: their files, and those this process consumes."""

    def __init__(self, root: Path, store: PartitionStore, clock: Clock, *, verify_crc: bool) -> None:
        self.root = root  # subscriptions/ of the data directory
        self.store = store
        self.clock = clock
        self.verify_crc = verify_crc  # dispatch checks each batch's CRC32C
        self._open: dict[tuple[str, str], Subscription] = {}
        self._lock = threading.RLock()
        self._file_cache: dict[str, tuple[tuple[int, int], CursorRecord]] = {}
        self._modifying: dict[tuple[str, str], threading.Lock] = {}  # (topic, subscription) -> modify's lock
        # subscriptions modify opened for a change alone, closed when it ends unless open() claims one meanwhile
        self._held_for_change: set[tuple[str, str]] = set()

    def directory(self, name: TopicName) -> Path:
        return self.root.joinpath(*name.path_parts())

    def names(self, ref: TopicRef) -> list[str]:
        return subscription_names(self.directory(ref.name))

    def open(self, ref: TopicRef, name: str, subscription_type: str, initial_position: str) -> Subscription:
        """This process's Subscription `name` of the topic, created (at `initial_position`) if new."""
        self.store.fence(ref.name).check()
        validate_subscription_name(name)
        subscription_type = parse_subscription_type(subscription_type)
        initial_position = parse_initial_position(initial_position)
        with self._lock:
            key = (str(ref), name)
            subscription = self._open.get(key)
            if subscription is not None and not subscription.closed:
                # (one that an admin change holds open is this caller's now: the change must not close it)
                self._held_for_change.discard(key)
                return subscription
            directory = self.directory(ref.name)
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{name}{CURSOR_SUFFIX}"
            lock = ExclusiveFileLock(directory / f"{name}{LOCK_SUFFIX}", busy=_subscription_busy(str(ref), name))
            try:
                if path.exists():
                    record = load(path)
                else:
                    record = self._new_record(ref, subscription_type, initial_position)
                    save(path, record, fsync=ref.config.fsync != "never")
                grown = self._cover_new_partitions(record, ref)
                subscription = Subscription(ref, name, record, lock, path, self.store, self.clock,
                                            spill_directory=self.root,
                                            verify_crc=self.verify_crc)
                subscription.cursor.dirty = grown
            except BaseException:
                lock.release()
                raise
            self._open[key] = subscription
            return subscription

    def open_non_durable(self, ref: TopicRef, name: str, starts: list[int]) -> Subscription:
        """A non-durable subscription (Pulsar's reader): an exclusive cursor at `starts` (each partition's
        first offset to deliver) that lives in memory only. It has no file and no lock, is not listed
        among the topic's subscriptions, and so never holds back retention; closing it forgets it."""
        self.store.fence(ref.name).check()
        record = CursorRecord("exclusive", self.clock())
        record.partitions.extend(PartitionCursor(AckSet(start)) for start in starts)
        return Subscription(ref, name, record, None, None, self.store, self.clock, verify_crc=self.verify_crc,
                            spill_directory=self.root)

    def _new_record(self, ref: TopicRef, subscription_type: str, initial_position: str) -> CursorRecord:
        record = CursorRecord(subscription_type, self.clock())
        start = self.store.end_offset if initial_position == "latest" else self.store.earliest_offset
        record.partitions.extend(PartitionCursor(AckSet(start(ref.name, p))) for p in range(ref.partitions))
        return record

    def _cover_new_partitions(self, record: CursorRecord, ref: TopicRef) -> bool:
        """Give a cursor saved before partitions were added to the topic (log.update_partitions) a position
        on each new one: its earliest offset, so everything written there is unacknowledged, as in Pulsar.
        Returns whether any was added (the record then needs saving)."""
        added = range(len(record.partitions), ref.partitions)
        record.partitions.extend(PartitionCursor(AckSet(self.store.earliest_offset(ref.name, p))) for p in added)
        return bool(added)

    def live(self, ref: TopicRef, name: str) -> Subscription | None:
        subscription = self._open.get((str(ref), name))
        return subscription if subscription is not None and not subscription.closed else None

    def states(self, ref: TopicRef) -> Iterator[tuple[str, CursorRecord, Subscription | None]]:
        """Every subscription of the topic with its cursor state: live for those consumed in this process,
        else as last persisted (read again only when the file changed)."""
        directory = str(self.directory(ref.name))  # plain strings: a pass reads every cursor file's status
        for name in subscription_names(directory):
            live = self.live(ref, name)
            if live is not None:
                yield name, live.record, live
                continue
            path = os.path.join(directory, name + CURSOR_SUFFIX)
            try:
                status = os.stat(path)
            except FileNotFoundError:
                continue  # unsubscribed meanwhile
            identity = (status.st_mtime_ns, status.st_size)
            cached = self._file_cache.get(path)
            if cached is None or cached[0] != identity:
                cached = self._file_cache[path] = (identity, load(Path(path)))
            self._cover_new_partitions(cached[1], ref)
            yield name, cached[1], None

    @contextmanager
    def modify(self, ref: TopicRef, name: str) -> Iterator[Subscription | None]:
        """A context manager giving a subscription to change (TTL, eviction, clear-backlog, acknowledging
        through the admin API): this process's live one, or the persisted one locked, loaded and saved
        afterwards. Gives None when another process consumes it (that process applies the rules itself).
        Changes of one subscription made through it run one at a time: a second one given the persisted
        subscription the first had opened would change it after the first had saved and closed it, and
        its change would be lost. A consumer that opens the subscription meanwhile gets the one the change
        holds, and keeps it: the change then saves it and leaves it open."""
        key = (str(ref), name)
        with self._lock:
            one_at_a_time = self._modifying.setdefault(key, threading.Lock())
        with one_at_a_time:
            live = self.live(ref, name)
            if live is not None:
                yield live
                return
            if name not in self.names(ref):
                yield None
                return
            with self._lock:  # (opened and marked as held in one step: no open() between the two)
                try:
                    opened = self.open(ref, name, "exclusive", "earliest")
                except ConsumerBusyError:
                    opened = None
                else:
                    self._held_for_change.add(key)
            if opened is None:
                yield None
                return
            try:
                yield opened
            finally:
                with self._lock:
                    claimed = key not in self._held_for_change
                    self._held_for_change.discard(key)
                    if claimed:
                        opened.persist()
                    else:
                        self.release(opened)

    def create(self, ref: TopicRef, name: str, initial_position: str) -> bool:
        """Make subscription `name` of the topic at `initial_position`, consumed by nobody (an admin's or a
        producer's initial subscription); False, and nothing changed, if it exists already."""
        if name in self.names(ref):
            return False
        self.release(self.open(ref, name, "exclusive", initial_position))
        return True

    def release(self, subscription: Subscription) -> None:
        """Persist and unlock a subscription this process no longer consumes."""
        with self._lock:
            subscription.close()
            if self._open.get((str(subscription.ref), subscription.name)) is subscription:
                del self._open[(str(subscription.ref), subscription.name)]

    def persist_dirty(self) -> None:
        with self._lock:
            subscriptions = [s for s in self._open.values() if not s.closed and s.cursor.dirty]
        for subscription in subscriptions:
            subscription.persist()

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            with subscription.mutex:
                if subscription.consumers:
                    raise ConsumerBusyError(f"subscription {subscription.name!r} of {subscription.ref} "
                                            f"still has {len(subscription.consumers)} consumer(s)")
                self._remove(subscription)

    def remove_unused(self, subscription: Subscription) -> None:
        """Delete a subscription this call created and no consumer joined (its first subscribe failed)."""
        with self._lock, subscription.mutex:
            if not subscription.consumers:
                self._remove(subscription)

    def _remove(self, subscription: Subscription) -> None:
        """Delete a subscription's files, its lock file last, while holding its lock (caller holds _lock)."""
        subscription.remove()
        self._open.pop((str(subscription.ref), subscription.name), None)

    def claim_all(self, ref: TopicRef, locks: ExitStack) -> list[str]:
        """The names of the topic's subscriptions that have consumers, in this process or another; the locks
        of the others are taken into `locks`, so none gets a consumer while the caller holds them."""
        consumed = []
        for name in self.names(ref):
            live = self.live(ref, name)
            if live is not None:
                if live.consumers:
                    consumed.append(name)
                continue
            try:
                lock = ExclusiveFileLock(self.directory(ref.name) / f"{name}{LOCK_SUFFIX}",
                                  busy=_subscription_busy(str(ref), name))
            except ConsumerBusyError:
                consumed.append(name)
            else:
                locks.callback(lock.release)
        return consumed

    def forget_topic(self, name: TopicName) -> None:
        """Close this process's subscriptions of a topic being deleted (their files go with it)."""
        with self._lock:
            for key in [k for k in self._open if k[0] == str(name)]:
                self._open.pop(key).abandon()

    def close(self) -> None:
        with self._lock:
            subscriptions = list(self._open.values())
            self._open.clear()
        for subscription in subscriptions:
            subscription.close()


def _subscription_busy(topic: str, name: str):
    def busy(lock_path: str, holder: int | None) -> ConsumerBusyError:
        who = f"process {holder}" if holder else "another process"
        return ConsumerBusyError(f"subscription {name!r} of {topic} is consumed by {who} (lock {lock_path}); "
                                 "a subscription is consumed by one process at a time")
    return busy
