"""Live rates and counters, as Pulsar's stats report them (msgRateIn, msgThroughputOut, msgInCounter ...):
counts added as they happen, read as per-second rates over the last WINDOW_S seconds and as running totals.

`RateMeter` is one figure; `Traffic` (one per PartitionStore, so one per broker) holds them for every topic
of the process: what was written to each partition (counted by the partition's writer, whoever writes: a
server's producer, an in-process one, a replicator), what each subscription's consumers were given and asked
to be given again (counted by dispatch, whoever the consumer is), and the producers connected. Counts are per
write and per delivery, never per message: the sizes come from the stored batches (storage/value_bytes.py).

Nothing here is persisted: every count starts at 0 when the process starts, as Pulsar's broker's do."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

# Rates are over the last minute: Pulsar's statsUpdateFrequencyInSecs (default 60) computes them over each
# minute once it is over; seglog's window slides by the second (the current second so far and the 59 before it)
WINDOW_S = 60
_MIN_SPAN_MS = 1000  # a meter younger than a second divides by a second: no rate from a handful of ms


class RateMeter:
    """Messages and bytes per second over the last WINDOW_S seconds of `clock` (ms) or since `started_ms` (by
    default when the meter was made) if that is less, and their totals (`messages`, `bytes`). One add per write
    or delivery: a bucket per second in a ring."""

    def __init__(self, clock: Callable[[], int], started_ms: int | None = None) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._started_ms = clock() if started_ms is None else started_ms
        self._seconds = [-1] * WINDOW_S
        self._messages = [0] * WINDOW_S
        self._bytes = [0] * WINDOW_S
        self.messages = 0
        self.bytes = 0

    def add(self, messages: int, nbytes: int) -> None:
        second = self._clock() // 1000
        slot = second % WINDOW_S
        with self._lock:
            if self._seconds[slot] != second:
                self._seconds[slot] = second
                self._messages[slot] = self._bytes[slot] = 0
            self._messages[slot] += messages
            self._bytes[slot] += nbytes
            self.messages += messages
            self.bytes += nbytes

    def rates(self) -> tuple[float, float]:
        """(messages per second, bytes per second): what was added in this second so far and the
        WINDOW_S - 1 before it, over the time that covers (from the meter's making, if later)."""
        now = self._clock()
        first = now // 1000 - WINDOW_S + 1
        with self._lock:
            recent = [i for i, second in enumerate(self._seconds) if first <= second]
            messages = sum(self._messages[i] for i in recent)
            nbytes = sum(self._bytes[i] for i in recent)
        span_s = max(now - max(first * 1000, self._started_ms), _MIN_SPAN_MS) / 1000
        return messages / span_s, nbytes / span_s


def iso_time(ms: int) -> str:
    """A time as Pulsar's stats show one (connectedSince): ISO 8601 in UTC."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()


@dataclass(eq=False)
class Publisher:
    """A producer connected to a partition (Pulsar's PublisherStats): what it wrote, counted by the writer."""
    name: str
    partition: int
    meter: RateMeter
    connected_since: str
    address: str | None = None  # where a server's producer connects from; None in-process
    access_mode: str = "Shared"


class PartitionMeters:
    """A RateMeter per partition, made at the partition's first count, each counting from `started_ms` (its
    owner's start): a partition first counted late still shows its rate over its owner's whole life."""

    def __init__(self, clock: Callable[[], int], started_ms: int) -> None:
        self._clock = clock
        self._started_ms = started_ms
        self._lock = threading.Lock()
        self._meters: dict[int, RateMeter] = {}

    def __getitem__(self, partition: int) -> RateMeter:
        meter = self._meters.get(partition)
        if meter is None:
            with self._lock:
                meter = self._meters.setdefault(partition, RateMeter(self._clock, self._started_ms))
        return meter

    def items(self) -> list[tuple[int, RateMeter]]:
        return list(self._meters.items())

    def values(self) -> list[RateMeter]:
        return list(self._meters.values())


class SubscriptionTraffic:
    """What a subscription's consumers were given, and asked to be given again, per partition: its consumers
    add to it as they count, so it outlives them (a subscription's counters are all its consumers', as in
    Pulsar)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        started_ms = clock()  # each partition's figures count from here, however late their first add
        self.out = PartitionMeters(clock, started_ms)
        self.redelivered = PartitionMeters(clock, started_ms)


class ConsumerTraffic:
    """What one consumer was given (msgRateOut, msgOutCounter ...) and asked to have redelivered
    (msgRateRedeliver), added to its subscription's figures as well."""

    def __init__(self, subscription: SubscriptionTraffic, clock: Callable[[], int]) -> None:
        self.subscription = subscription
        self.out = RateMeter(clock)
        self.redelivered = RateMeter(clock)
        self.connected_since = iso_time(clock())
        self.address: str | None = None  # where a server's consumer connects from; None in-process

    def delivered(self, partition: int, messages: int, nbytes: int) -> None:
        self.out.add(messages, nbytes)
        self.subscription.out[partition].add(messages, nbytes)

    def redelivery_asked(self, partition: int, messages: int) -> None:
        """The consumer gave back `messages` to be delivered again (a negative ack, an ack timeout)."""
        self.redelivered.add(messages, 0)
        self.subscription.redelivered[partition].add(messages, 0)


@dataclass(eq=False)
class TopicTraffic:
    """One topic's live figures: what was written to each partition (each counted from `started_ms`, when this
    process first wrote or showed the topic, however late its writer opened), its subscriptions', its
    publishers."""
    clock: Callable[[], int]
    started_ms: int
    inbound: PartitionMeters = field(init=False)  # what was written to each partition (its writer counts)
    subscriptions: dict[str, SubscriptionTraffic] = field(default_factory=dict)
    publishers: list[Publisher] = field(default_factory=list)
    # messages and bytes given to the consumers of subscriptions deleted since: the topic's msgOutCounter and
    # bytesOutCounter keep them, as Pulsar's do
    removed_out: tuple[int, int] = (0, 0)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.inbound = PartitionMeters(self.clock, self.started_ms)

    def subscription(self, name: str) -> SubscriptionTraffic:
        with self.lock:
            traffic = self.subscriptions.get(name)
            if traffic is None:
                traffic = self.subscriptions[name] = SubscriptionTraffic(self.clock)
            return traffic

    def remove_subscription(self, name: str) -> None:
        """A subscription was deleted (unsubscribed, a reader closed): its counts stay in the topic's."""
        with self.lock:
            traffic = self.subscriptions.pop(name, None)
            if traffic is not None:
                messages, nbytes = self.removed_out
                self.removed_out = (messages + sum(m.messages for m in traffic.out.values()),
                                    nbytes + sum(m.bytes for m in traffic.out.values()))

    def add_publisher(self, name: str, partition: int, address: str | None = None,
                      access_mode: str = "Shared") -> Publisher:
        publisher = Publisher(name, partition, RateMeter(self.clock), iso_time(self.clock()), address, access_mode)
        with self.lock:
            self.publishers.append(publisher)
        return publisher

    def remove_publisher(self, publisher: Publisher) -> None:
        with self.lock:
            if publisher in self.publishers:
                self.publishers.remove(publisher)


class Traffic:
    """The live figures of every topic this process writes or dispatches, by topic name ('tenant/ns/topic');
    a deleted topic's go with it (`forget`), so a topic created again under its name starts at 0."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self._topics: dict[str, TopicTraffic] = {}
        self._lock = threading.Lock()

    def topic(self, name: str) -> TopicTraffic:
        with self._lock:
            traffic = self._topics.get(name)
            if traffic is None:
                traffic = self._topics[name] = TopicTraffic(self.clock, self.clock())
            return traffic

    def forget(self, name: str) -> None:
        with self._lock:
            self._topics.pop(name, None)
