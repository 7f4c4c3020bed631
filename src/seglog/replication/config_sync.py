"""The synchronized configuration store (Pulsar's PIP-136; `seglog serve --configuration-sync-topic
TENANT/NS/TOPIC`; docs/REPLICATION.md, "Configuration stores"): each cluster keeps its own catalog, and the
changes of the shared configuration (registered clusters, tenants, namespaces with their policies and
permissions, partitioned topics' partition counts) travel as events on a topic that the ordinary replicators
carry to the other clusters. Topic data never travels this way.

- Out: every change this cluster makes to a shared entity (Metadata.on_shared_change, inside the change's
  catalog transaction) is stamped and appended to the local sync topic as one message (SyncEvent), before the
  transaction commits: a change that cannot be written is refused (ConfigurationStoreError, 503 on the REST
  API) and the catalog keeps what it had. The stamp is recorded in the catalog (Metadata.record_shared_stamp)
  in the same transaction.
- In: the durable subscription CONFIGURATION_SYNC_SUBSCRIPTION of the local sync topic reads every event (the
  other clusters' events arrive there through their replicators) and applies each one newer than what this
  cluster has, through SharedConfiguration (cascading deletions included), then acknowledges it. This
  cluster's own events are read too: never applied again, they start the cascading deletions of their
  namespace here, as etcd's watch does for its own changes.
- Conflict rule, per entity (kind, key): the newer stamp wins (catalog.stamps.Stamp: the later time, at the
  same time the smaller cluster name); an older event is skipped. Stamps live in the catalog, committed with
  the change they stamp, so a restarted cluster that catches up from its cursor applies the rule as if it had
  never stopped, and an event delivered again after a crash is skipped as not newer.

The topic's namespace must exist before the server starts (start() names what to create): it is what the
user makes replicate to every synchronized cluster, as Pulsar's documentation has it for PIP-136."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from seglog.broker import Broker
from seglog.catalog.metadata import SHARED_KINDS, SharedChange
from seglog.catalog.stamps import Stamp
from seglog.errors import (
    ConfigurationStoreError,
    InvalidArgumentError,
    NotFoundError,
    TopicExistsError,
    TopicNotFoundError,
)
from seglog.names import TopicName
from seglog.replication.shared_configuration import Incoming, SharedConfiguration
from seglog.server.protocol.metadata import CONFIGURATION_SYNC_SUBSCRIPTION
from seglog.storage.fence import TopicFence
from seglog.storage.writer import PartitionWriter
from seglog.subscriptions.delivery import ConsumerState, Piece
from seglog.subscriptions.subscription import Subscription

logger = logging.getLogger("seglog.replication.config_sync")

OPTION = "--configuration-sync-topic"
ACCEPTED = ("TENANT/NAMESPACE/TOPIC or persistent://TENANT/NAMESPACE/TOPIC (each part ASCII letters, digits and "
            "_ - . = :), a topic in a namespace that replicates to every synchronized cluster")
# configuration events are small: the topic needs no segments of the broker's default size (1 GiB, allocated on
# disk before anything is written), on every cluster; set when this cluster makes the topic
SEGMENT_SIZE = 4 << 20
READ_MOST = 100  # events read and applied at a time
POLL_S = 1.0  # the fallback wait for what no append signal says
RETRY_S = 1.0  # after a batch that failed (it is read again)
STOP_S = 10.0  # how long stopping waits for a batch being applied


def parse_sync_topic(given: str) -> TopicName:
    """The topic of `--configuration-sync-topic`; InvalidArgumentError naming what is accepted."""
    if not isinstance(given, str) or given.removeprefix("persistent://").count("/") != 2:
        # (TopicName would take a bare name as public/default's: the option names the namespace)
        raise InvalidArgumentError(OPTION, given, ACCEPTED, detail="it must name the tenant, namespace and topic")
    try:
        return TopicName.parse(given)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(OPTION, given, ACCEPTED, detail=error.detail) from None


@dataclass(frozen=True)
class SyncEvent:
    """One change of the shared configuration as the sync topic carries it: a JSON object with SharedChange's
    `kind`, `key` and `value` (null for a deletion), and the stamp's `origin` (the cluster that made it) and
    `time_ms` (its broker's clock, or one past the entity's previous stamp when that clock is behind it)."""
    change: SharedChange
    stamp: Stamp

    def to_json(self) -> bytes:
        return json.dumps({"kind": self.change.kind, "key": self.change.key, "value": self.change.value,
                           "origin": self.stamp.origin, "time_ms": self.stamp.time_ms}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> SyncEvent:
        """The event a message carries; ValueError when it carries none (anyone allowed to produce to the
        topic may write something else)."""
        try:
            event = json.loads(data or b"")
            change = SharedChange(event["kind"], event["key"], event["value"])
            stamp = Stamp(event["time_ms"], event["origin"])
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"not a configuration event: {error}") from None
        well_formed = (change.kind in SHARED_KINDS and isinstance(change.key, str)
                       and (change.value is None or isinstance(change.value, dict))
                       and isinstance(stamp.time_ms, int) and isinstance(stamp.origin, str) and stamp.origin != "")
        if not well_formed:  # (a stamp that does not compare would stop every event after it)
            raise ValueError(f"not a configuration event: {event!r}")
        return cls(change, stamp)


class ConfigurationSync:
    """This cluster `local`'s catalog synchronized with the other clusters through `topic` (the module's
    docstring). `start` (blocking) checks the namespace, makes the topic if needed and begins applying what it
    carries; `apply` applies events, whatever read them."""

    def __init__(self, broker: Broker, local: str, topic: str,
                 appended: Callable[[str, int, int, int, str | None], None] | None = None,
                 grow: Callable[[str, int], None] | None = None) -> None:
        self.topic = parse_sync_topic(topic)
        self.broker = broker
        self.local = local
        # (topic, partition, offset, count, None): told of each event written here, to wake its replicators
        self._appended = appended
        self.shared = SharedConfiguration(broker, local, grow)  # (`grow`: as SharedConfiguration's)
        self._writer: PartitionWriter | None = None  # None: not started, or stopped (changes are refused)
        self._fence: TopicFence | None = None
        self._writing = threading.Lock()  # a change being written; stop() waits for it
        self._subscription: Subscription | None = None
        # the subscription's one consumer; it keeps nothing it took (on_forget) and is never disconnected
        self._consumer = ConsumerState(CONFIGURATION_SYNC_SUBSCRIPTION, None, lambda partition: None, lambda: None)
        self._wake = threading.Event()  # an append to the topic, or stop()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Check that the topic's namespace exists (NotFoundError naming what to create), make the topic if
        it is new, and begin: changes made here are written to it, and its events are applied."""
        metadata = self.broker.catalog.metadata
        namespace = self.topic.namespace_name
        try:
            clusters = metadata.namespace_policies(namespace).replication_clusters
        except NotFoundError:
            raise NotFoundError(
                f"{OPTION} {self.topic}: namespace {namespace} does not exist on this cluster. Create tenant "
                f"{self.topic.tenant} and namespace {namespace} first, with every synchronized cluster as its "
                "clusters, on every cluster (docs/REPLICATION.md, Configuration stores)") from None
        if not clusters or clusters == {self.local}:
            logger.warning("configuration sync: namespace %s replicates to no other cluster: changes made here "
                           "stay here until its clusters name the others", namespace)
        name = str(self.topic)
        try:
            self.broker.create_topic(name, 1, {"segment_size": SEGMENT_SIZE})  # (replicated from its start)
        except TopicExistsError:
            pass  # (made at an earlier start, or by another cluster's replicator)
        ref = self.broker.topic(name)
        if ref.partitions != 1:
            raise ConfigurationStoreError(f"{OPTION} {name}: the topic has {ref.partitions} partitions here; the "
                                          "sync topic must have one, so that events keep their order")
        store = self.broker.store
        self._fence = store.fence(ref.name)
        self._writer = store.acquire_writer(ref.name, 0, ref.config)
        store.producer_opened(ref.name)  # (a user: deleting the topic needs force)
        self._subscription = self.broker.subscriptions.open(ref, CONFIGURATION_SYNC_SUBSCRIPTION, "exclusive",
                                                            "earliest")
        self._subscription.attach(self._consumer, "exclusive")
        metadata.on_shared_change(self._publish)
        self.broker.catalog.share_configuration(f"persistent://{name}")
        self._thread = threading.Thread(target=self._follow, name="seglog-configuration-sync", daemon=True)
        self._thread.start()
        logger.info("configuration sync through %s: following from offset %d", name,
                    self._subscription.read_position(0))

    def stop(self) -> None:
        """Stop applying events (a batch being applied finishes first, STOP_S at most) and writing them:
        changes made here from now on are refused."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(STOP_S)
            if self._thread.is_alive():
                logger.warning("configuration sync: still applying after %.0f s; stopping anyway", STOP_S)
            elif self._subscription is not None:
                self._subscription.detach(self._consumer)
                self.broker.subscriptions.release(self._subscription)  # (its acknowledgements persisted)
        with self._writing:
            writer, self._writer = self._writer, None
        if writer is not None and self._fence is not None:
            self.broker.store.release_writer(self.topic, 0, self._fence)
            self.broker.store.producer_closed(self.topic, self._fence)

    def apply(self, events: Iterable[SyncEvent]) -> bool:
        """Apply, in order, each event newer than what this cluster has for its entity (the conflict rule),
        then the cascading deletions of their namespaces; whether the catalog changed."""
        return self.shared.apply_incoming(
            Incoming(event.change, partial(self._newer, event), partial(self._record, event)) for event in events)

    def _newer(self, event: SyncEvent) -> bool:
        change = event.change
        return event.stamp.supersedes(self.broker.catalog.metadata.shared_stamp(change.kind, change.key))

    def _record(self, event: SyncEvent) -> None:
        self.broker.catalog.metadata.record_shared_stamp(event.change.kind, event.change.key, event.stamp)

    def _publish(self, change: SharedChange) -> None:
        """Metadata.on_shared_change, inside the change's transaction: stamp the change and append it to the
        sync topic (ConfigurationStoreError refuses it, and the stamp rolls back with it)."""
        metadata = self.broker.catalog.metadata
        with self._writing:
            writer = self._writer
            if writer is None:
                raise ConfigurationStoreError(f"the configuration sync topic {self.topic} is no longer written (the "
                                              "server is stopping)")
            stamp = metadata.shared_stamp(change.kind, change.key).following(self.local, self.broker.clock())
            metadata.record_shared_stamp(change.kind, change.key, stamp)
            try:
                offset = writer.append(writer.source([SyncEvent(change, stamp).to_json()]))
            except Exception as error:  # (whatever stops the write refuses the change, saying why)
                raise ConfigurationStoreError(f"the configuration sync topic {self.topic} could not take the "
                                              f"change of {change.kind} {change.key}: {error}") from error
        if self._appended is not None:
            self._appended(str(self.topic), 0, offset, 1, None)

    def _follow(self) -> None:
        """The thread that applies the topic's events until stop(), or until the topic is deleted."""
        subscription = self._subscription
        assert subscription is not None
        signal = subscription.appended[0]
        signal.watch(self._wake)
        try:
            while not self._stopped.is_set():
                try:
                    applied = self._apply_next(subscription)
                except TopicNotFoundError:
                    logger.error("configuration sync: topic %s was deleted; no change made elsewhere is applied "
                                 "here until it is made again and the server restarted", self.topic)
                    return
                except Exception:  # (one failed batch never ends synchronization: it is read again)
                    logger.exception("configuration sync: applying events of %s failed; retrying in %.1f s",
                                     self.topic, RETRY_S)
                    subscription.redeliver(self._consumer, None)
                    self._stopped.wait(RETRY_S)
                    continue
                if not applied:
                    self._wake.wait(POLL_S)
        finally:
            signal.unwatch(self._wake)

    def _apply_next(self, subscription: Subscription) -> bool:
        """Apply and acknowledge the next events; False when there were none."""
        self._wake.clear()  # (before reading: an append from now on wakes the wait)
        pieces = subscription.next_delivery(self._consumer, READ_MOST)
        if not pieces:
            return False
        self.apply(self._events(pieces))
        subscription.ack_many(0, np.concatenate([piece.offsets for piece in pieces]))
        return True

    def _events(self, pieces: list[Piece]) -> Iterator[SyncEvent]:
        for piece in pieces:
            for message in piece.messages():
                try:
                    yield SyncEvent.from_json(message.value)
                except ValueError as error:
                    logger.warning("configuration sync: offset %d of %s skipped: %s", message.offset, self.topic,
                                   error)

