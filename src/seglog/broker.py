"""The composition root: one data directory's services, built once by `Broker.open`.

Layers below take values (a TopicRef) and the services they use, never the facade: the in-process API
(log.py, topic.py, producer.py, consumer.py), the admin API and, later, the network server and the
replicators are users of the same Broker. The operations here are those that span services: creating,
deleting and growing a topic, changing its settings.

Layout of a data directory:
    broker.conf                                      optional broker settings, `name=value` lines (catalog/config.py)
    meta.sqlite                                      tenants, namespaces, topics and policies (catalog/metadata.py)
    topics/<tenant>/<namespace>/<topic>/<partition>/ segments: 00000000000000000000.log, .index, .timeindex
    subscriptions/<tenant>/<namespace>/<topic>/      cursors: <name>.cursor, <name>.lock (subscriptions/cursor_file.py)
    trash/                                           topics being deleted (removed at the next open)

Creating and deleting a topic change the metadata and the files in one metadata transaction, and a crash can
stop them halfway: every open finishes what it left (Broker._finish_topic_changes), so that each topic is
whole or gone, and `seglog check` reports it meanwhile (storage.check.topic_leftovers)."""

from __future__ import annotations

import logging
import shutil
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seglog.catalog.config import BrokerConfig, TopicConfig
from seglog.catalog.metadata import Metadata
from seglog.catalog.topics import Catalog, TopicRef
from seglog.clock import Clock
from seglog.errors import ClosedError, InvalidArgumentError, PartitionLockedError, TopicInUseError, TopicNotFoundError
from seglog.lifecycle.compactor import Compactor
from seglog.lifecycle.maintenance import Housekeeper, Maintenance, MaintenanceReport
from seglog.lifecycle.quota import QuotaGuards
from seglog.names import TopicName
from seglog.storage.check import recover_log
from seglog.storage.data_directory import make_data_directory
from seglog.storage.store import PartitionStore
from seglog.subscriptions.registry import Subscriptions

MAX_PARTITIONS = 10_000
METADATA_FILE = "meta.sqlite"  # its presence is what makes a directory a seglog data directory

logger = logging.getLogger(__name__)


@dataclass
class TopicCleanup:
    """What an open finished of the topic creations and deletions a crash cut short (full names)."""
    finished_deletions: list[str] = field(default_factory=list)
    removed_directories: list[str] = field(default_factory=list)  # of topics that were never created or are gone


class Broker:
    """The services of one open data directory. Build it with `Broker.open`; its attributes are the
    services (read them, do not replace them)."""

    def __init__(self, path: Path, config: BrokerConfig, clock: Clock, catalog: Catalog, store: PartitionStore,
                 subscriptions: Subscriptions, maintenance: Maintenance, quotas: QuotaGuards,
                 housekeeper: Housekeeper | None) -> None:
        self.path = path
        self.config = config
        self.clock = clock
        self.catalog = catalog
        self.store = store
        self.subscriptions = subscriptions
        self.maintenance = maintenance
        self.quotas = quotas
        self.housekeeper = housekeeper
        self.compactor = Compactor(store, clock)  # compactions asked for (admin.topics.compact) and their status
        self.cleanup = TopicCleanup()  # what the open finished (Broker.open)
        self._closed = False
        self._close_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, *, clock: Clock, background: bool, **broker_config: Any) -> Broker:
        """Open (creating if needed) the data directory `path`. Topic creations and deletions a crash cut
        short are finished (see _finish_topic_changes; `cleanup` says what was). With `background`,
        partitions left by an unclean stop that nobody writes now are recovered here, as Kafka does at log
        load, so every process reads what the next writer keeps (readers that must not change files,
        background=False, apply the same rule in memory: storage.partition_view.SegmentView), and the
        housekeeper thread persists cursors and runs maintenance."""
        make_data_directory(path, METADATA_FILE)  # (a file in the way: one line naming it, not a bare OSError)
        config = BrokerConfig.load(path, broker_config)
        store = PartitionStore(path, clock)
        store.empty_trash()
        catalog = Catalog(Metadata(path / METADATA_FILE), config)
        subscriptions = Subscriptions(path / "subscriptions", store, clock, verify_crc=config.verify_crc)
        maintenance = Maintenance(catalog, store, subscriptions, clock)
        broker = cls(path, config, clock, catalog, store, subscriptions, maintenance,
                     QuotaGuards(catalog, maintenance), None)
        broker.cleanup = broker._finish_topic_changes()
        if background:
            recover_log(path)  # after the cleanup: no partition of a topic that is gone is recovered
            broker.housekeeper = Housekeeper(maintenance,
                                             cursor_persist_interval_ms=config.cursor_persist_interval,
                                             maintenance_interval_ms=config.maintenance_interval)
        return broker

    # topics

    def create_topic(self, name: str, partitions: int, topic_config: dict[str, Any]) -> TopicRef:
        self.check_open()
        topic_name = TopicName.parse(name)
        check_partition_count(partitions, minimum=1)
        config = self.config.topic_defaults.updated(topic_config)
        given = {key: getattr(config, key) for key in topic_config}
        trash = self.store.new_trash()

        def make_files() -> None:  # in the metadata transaction: no process sees the topic before its fence
            self._move_to_trash(topic_name, trash)  # a deleted topic's fenced users left them: start empty
            self.store.create_fence(topic_name)

        self.catalog.metadata.create_topic(topic_name, partitions, given, self.clock(), then=make_files)
        shutil.rmtree(trash, ignore_errors=True)
        ref = TopicRef(topic_name, partitions, config)
        self.catalog.topic_created(ref)
        return ref

    def topic(self, name: str | TopicName) -> TopicRef:
        self.check_open()
        return self.catalog.topic(name)

    def set_topic_config(self, name: str, changes: dict[str, Any]) -> TopicConfig:
        """Apply setting changes to a topic (validated as a whole first); its open writers take them too."""
        self.check_open()
        topic_name = TopicName.parse(name)
        record = self.catalog.metadata.topic(topic_name)
        config = self.config.topic_defaults.restored(record.config).updated(changes)
        given = {key: getattr(config, key) for key in {**record.config, **changes}}
        self.catalog.metadata.set_topic_config(topic_name, given)
        self.catalog.policies_changed(topic_name)
        self.store.reconfigure(topic_name, config)
        return config

    def delete_topic(self, name: str, *, force: bool, keep_global_policies: bool = False) -> None:
        """See Log.delete_topic. `keep_global_policies`: a cascading deletion (replication) keeps the topic's
        global policies (Metadata.delete_topic)."""
        ref = self.topic(name)
        with ExitStack() as locks:  # held while the files go: no producer or consumer can start meanwhile
            users = self._topic_users(ref, locks)
            if users and not force:
                raise TopicInUseError(f"topic {ref} has {' and '.join(users)}; close them first, or delete "
                                      "with force (the force argument, or seglog topics delete --force), which "
                                      "fences them")
            self.store.set_deleted(ref.name)  # from here on every user fails
            self.store.forget_topic(ref.name)
            self.quotas.forget(str(ref))
            self.subscriptions.forget_topic(ref.name)
            self._remove_topic(ref.name, keep_global_policies=keep_global_policies)

    def update_partitions(self, name: str, partitions: int) -> TopicRef:
        """See Log.update_partitions."""
        with ExitStack() as locks:  # held while the count changes: no producer or consumer can start meanwhile
            ref = self._check_growth(name, partitions, locks)
            self.catalog.metadata.grow_topic(ref.name, partitions)
        return self.topic(name)

    def check_growth(self, name: str, partitions: int) -> None:
        """Refuse as update_partitions would now, changing nothing (a growth that other clusters make first
        asks here before)."""
        with ExitStack() as locks:
            self._check_growth(name, partitions, locks)

    def _check_growth(self, name: str, partitions: int, locks: ExitStack) -> TopicRef:
        ref = self.topic(name)
        check_partition_count(partitions, minimum=ref.partitions + 1,
                              why=f": more than the {ref.partitions} partitions {ref} has (a partition is never "
                                  "removed)")
        users = self._topic_users(ref, locks, growing=True)
        if users:
            raise TopicInUseError(f"topic {ref} has {' and '.join(users)}; close them first: they "
                                  "would go on with the partitions they started with")
        return ref

    def run_maintenance(self) -> MaintenanceReport:
        self.check_open()
        return self.maintenance.run_pass()

    def _topic_users(self, ref: TopicRef, locks: ExitStack, *, growing: bool = False) -> list[str]:
        """Who produces to or consumes the topic, in this process and others; the writer and subscription
        locks nobody holds are taken into `locks`. `growing`: only the users a growth would leave behind
        (this process's producers that write where they are told, as replicators do, are not)."""
        users = []
        producers = self.store.producers(ref.name, routing_only=growing)
        if producers:
            users.append(f"{producers} producer(s) in this process")
        for partition in range(ref.partitions):
            try:
                lock = self.store.lock_partition(ref.name, partition)
            except PartitionLockedError as error:
                users.append(f"a producer of partition {partition} in process {error.holder_pid}")
            else:
                if lock is not None:
                    locks.callback(lock.release)
        users += [f"consumers of subscription {name!r}" for name in self.subscriptions.claim_all(ref, locks)]
        return users

    def _finish_topic_changes(self) -> TopicCleanup:
        """Finish what a crash cut short in create_topic or delete_topic, at every open (background=False
        too: its readers must see each topic whole or gone, and the name free again): a deletion whose fence
        was set is finished; the directory of a topic the metadata does not list (a creation that never
        committed, a deletion stopped after its commit) is removed; a topic without a fence (a data directory
        made before fences) is given one. Deciding needs no lock; each change takes the metadata's write
        lock and looks again, since another process may be making the same change or a creation."""
        cleanup = TopicCleanup()
        metadata = self.catalog.metadata
        for name in map(TopicName.parse, metadata.list_topics()):
            if self.store.is_deleted(name):
                logger.warning("%s: finishing the deletion of topic %s, which a crash cut short", self.path, name)
                self._remove_topic(name)
                cleanup.finished_deletions.append(str(name))
        for name in self.store.unowned_topics(set(metadata.list_topics())):
            trash = self.store.new_trash()
            if self._remove_if_unowned(name, trash):
                logger.warning("%s: removed %s, a directory of topic %s, which does not exist (a crash while it "
                               "was created or deleted)", self.path, self.store.topic_directory(name), name)
                cleanup.removed_directories.append(str(name))
            shutil.rmtree(trash, ignore_errors=True)
        if not all(self.store.has_fence(TopicName.parse(name)) for name in metadata.list_topics()):
            with metadata.topics_held() as names:
                for name in map(TopicName.parse, names):
                    if not self.store.has_fence(name):
                        self.store.create_fence(name)
        return cleanup

    def _remove_topic(self, name: TopicName, *, keep_global_policies: bool = False) -> None:
        """Delete a topic whose fence is set: its row, with its partitions and subscriptions moved to the
        trash, in one transaction; then its directory, which holds the fence alone by then. The fence stays
        set in place until the row is gone, so a crash before the commit leaves a deletion that the next open
        finishes, and one after it a directory that no topic owns, which the next open removes."""
        trash = self.store.new_trash()
        try:
            self.catalog.metadata.delete_topic(
                name, then=lambda: self.store.empty_topic(name, trash, *self._subscription_files(name)),
                keep_global_policies=keep_global_policies)
        except TopicNotFoundError:  # another process finished the deletion first (an open, seeing the fence set)
            pass
        self._remove_if_unowned(name, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def _remove_if_unowned(self, name: TopicName, trash: Path) -> bool:
        """Move the topic's files to `trash` if the metadata does not list it; whether it did. Under the write
        lock: a creation makes its files inside its transaction, so none of them is taken from under it."""
        metadata = self.catalog.metadata
        with metadata.transaction():
            try:
                metadata.topic(name)
            except TopicNotFoundError:
                self._move_to_trash(name, trash)
                return True
        return False

    def _move_to_trash(self, name: TopicName, trash: Path) -> None:
        self.store.move_to_trash(name, trash, *self._subscription_files(name))

    def _subscription_files(self, name: TopicName) -> tuple[tuple[str, Path]]:
        return ("subscriptions", self.subscriptions.directory(name)),

    # lifetime

    def check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"log {self.path} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the housekeeper, persist the cursors, flush and close every writer (their partitions are
        marked cleanly closed) and the metadata."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self.housekeeper is not None:
            self.housekeeper.stop()
        self.subscriptions.close()
        self.store.close()
        self.catalog.close()


def check_partition_count(partitions: Any, *, minimum: int, why: str = "") -> None:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not minimum <= partitions <= MAX_PARTITIONS:
        raise InvalidArgumentError("partitions", partitions, f"an int from {minimum} to {MAX_PARTITIONS}{why}")


def is_data_directory(path: str | Path) -> bool:
    """Whether `path` holds a seglog data directory (one that seglog.open made), without creating one."""
    return (Path(path) / METADATA_FILE).is_file()
