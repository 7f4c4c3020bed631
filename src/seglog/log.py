"""The log: an opened data directory with its topics, and the process's partition writers.

Layout of a data directory:
    broker.conf                                      optional broker settings, `name=value` lines (config.py)
    meta.sqlite                                      tenants, namespaces, topics and policies (metadata.py)
    topics/<tenant>/<namespace>/<topic>/<partition>/ segments: 00000000000000000000.log, .index, .timeindex
    subscriptions/<tenant>/<namespace>/<topic>/      cursors: <name>.cursor, <name>.lock (cursor_file.py)
    trash/                                           topics being deleted (removed at the next open)"""

from __future__ import annotations

import shutil
import threading
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from seglog.admin.api import Admin
from seglog.storage.check import recover_log
from seglog.clock import Clock, system_clock
from seglog.lifecycle.maintenance import Housekeeper, MaintenanceReport, run_pass
from seglog.catalog.policies import EffectivePolicies
from seglog.lifecycle.quota import QuotaGuard
from seglog.storage.segment_table import SegmentFacts
from seglog.subscriptions.subscription import Subscriptions
from seglog.catalog.config import BrokerConfig, TopicConfig
from seglog.errors import ClosedError, InvalidArgumentError, PartitionLockedError, TopicInUseError
from seglog.storage.fence import TopicFence, create_fence, fence_deleted, has_fence, set_deleted
from seglog.storage.linger import LingerFlusher
from seglog.storage.lock import WriterLock
from seglog.catalog.metadata import Metadata
from seglog.names import TopicName
from seglog.storage.partition_view import PartitionView
from seglog.storage.segment import LOCK_FILE, refuse_symbolic_links
from seglog.topic import Topic
from seglog.storage.writer import PartitionWriter

MAX_PARTITIONS = 10_000
METADATA_FILE = "meta.sqlite"  # its presence is what makes a directory a seglog data directory


class Log:
    """An open data directory. Use as a context manager, or call close()."""

    def __init__(self, path: str | Path, *, clock: Clock | None = None, background: bool = True,
                 **broker_config: Any) -> None:
        if clock is not None and not callable(clock):
            raise InvalidArgumentError("clock", clock, "a callable returning ms since the epoch")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.config = BrokerConfig.load(self.path, broker_config)
        self.clock: Clock = clock or system_clock
        shutil.rmtree(self.path / "trash", ignore_errors=True)
        self._metadata = Metadata(self.path / METADATA_FILE)
        # As Kafka at log load: partitions left by an unclean stop and nobody's to write now are cut back
        # to their commit point here, so every process reads what the next writer keeps. Readers that
        # must not change files (background=False) apply the same rule in memory (storage.partition_view.SegmentView).
        if background:
            recover_log(self.path)
        self._fences: dict[str, TopicFence] = {}
        self._prepare_topic_fences(finish_deletions=background)
        self._writers: dict[tuple[str, int], PartitionWriter] = {}
        self._writer_users: dict[tuple[str, int], int] = {}  # this process's producers using each writer
        self._producers: dict[str, int] = {}  # open producers of each topic (a deletion names them)
        self._writers_lock = threading.Lock()
        self._linger = LingerFlusher()
        self._maintenance_lock = threading.Lock()
        self._quota_guards: dict[str, QuotaGuard] = {}
        self._partition_views: dict[Path, PartitionView] = {}
        self._segment_tables: dict[Path, SegmentFacts] = {}
        self._subscriptions = Subscriptions(self)
        self._closed = False
        self.admin = Admin(self)
        # Readers in other processes (a Spark executor) open without it: they have no cursors to persist,
        # and their maintenance would delete segments the process that writes them should decide on.
        self._housekeeper = Housekeeper(self) if background else None

    def __repr__(self) -> str:
        return f"seglog.Log({str(self.path)!r})"

    def create_topic(self, name: str, *, partitions: int = 1, **topic_config: Any) -> Topic:
        """Create a topic ('tenant/namespace/topic', or a bare name in public/default). Settings not given
        follow the broker's defaults: segment_size, segment_roll_time, segment_max_messages,
        timestamp_type ('create_time' or 'log_append_time'), fsync ('never', 'always' or an interval)."""
        self._check_open()
        topic_name = TopicName.parse(name)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidArgumentError("partitions", partitions, f"an int from 1 to {MAX_PARTITIONS}")
        config = self.config.topic_defaults.updated(topic_config)
        given = {key: getattr(config, key) for key in topic_config}
        directory = self._topic_directory(topic_name)
        trash = self._new_trash()

        def make_files() -> None:  # in the metadata transaction: no process sees the topic before its fence
            self._trash_files_of(topic_name, trash)  # a deleted topic's fenced users left them: start empty
            create_fence(directory)

        self._metadata.create_topic(topic_name, partitions, given, self.clock(), then=make_files)
        shutil.rmtree(trash, ignore_errors=True)
        return Topic(self, topic_name, partitions, config, self._fence(topic_name))

    def topic(self, name: str) -> Topic:
        """The existing topic `name`; TopicNotFoundError if there is none."""
        self._check_open()
        record = self._metadata.topic(TopicName.parse(name))
        return Topic(self, record.name, record.partitions, self.config.topic_defaults.restored(record.config),
                     self._fence(record.name))

    def _fence(self, name: TopicName) -> TopicFence:
        """This process's map of the topic's fence (mapped again when the name is reused after a deletion)."""
        fence = self._fences.get(str(name))
        if fence is None or fence.deleted:
            fence = self._fences[str(name)] = TopicFence(self._topic_directory(name), str(name))
        return fence

    def _prepare_topic_fences(self, *, finish_deletions: bool) -> None:
        """Give every topic a fence (a data directory made before fences, a crash in create_topic), and
        finish deletions a crash interrupted after the fence was set (unless this process changes nothing)."""
        names = self._metadata.list_topics()
        if not all(has_fence(self._topic_directory(TopicName.parse(name))) for name in names):
            with self._metadata.topics_held() as names:  # the write lock only when there is one to make
                for name in names:
                    directory = self._topic_directory(TopicName.parse(name))
                    if not has_fence(directory):
                        create_fence(directory)
        if finish_deletions:
            for name in names:
                if fence_deleted(self._topic_directory(TopicName.parse(name))):
                    self._remove_topic(TopicName.parse(name))

    def _set_topic_config(self, name: str, changes: dict[str, Any]) -> TopicConfig:
        """Apply setting changes to a topic (validated as a whole first); its open writers take them too."""
        self._check_open()
        topic_name = TopicName.parse(name)
        record = self._metadata.topic(topic_name)
        config = self.config.topic_defaults.restored(record.config).updated(changes)
        given = {key: getattr(config, key) for key in {**record.config, **changes}}
        self._metadata.set_topic_config(topic_name, given)
        self._policies_changed()
        with self._writers_lock:
            for (writer_topic, _), writer in self._writers.items():
                if writer_topic == str(topic_name):
                    writer.config = config
        return config

    def _effective_policies(self, topic: Topic) -> EffectivePolicies:
        """The retention, TTL and backlog quotas in force for `topic`, each with the level that set it."""
        config = topic.config
        return EffectivePolicies.resolve(self.config.policies(),
                                         self._metadata.namespace_policies(topic.topic_name.namespace_name),
                                         self._metadata.topic_policies(topic.topic_name),
                                         retention_time=config.retention_time,
                                         max_partition_size=config.max_partition_size)

    def _quota_guard(self, topic: Topic) -> QuotaGuard:
        guard = self._quota_guards.get(topic.name)
        if guard is None or guard.topic.partitions != topic.partitions:
            guard = self._quota_guards[topic.name] = QuotaGuard(topic)
            guard.refresh()
        return guard

    def _policies_changed(self) -> None:
        """Policies or topic settings changed (here, or seen from another process): re-arm the quotas."""
        for name, guard in list(self._quota_guards.items()):
            if guard.topic.fence.deleted:  # by another process
                self._quota_guards.pop(name, None)
            else:
                guard.refresh()

    def _segment_facts(self, view: PartitionView) -> SegmentFacts:
        facts = self._segment_tables.get(view.directory)
        if facts is None or facts.view is not view:
            facts = self._segment_tables[view.directory] = SegmentFacts(view)
        return facts

    def run_maintenance(self) -> MaintenanceReport:
        """Apply every lifecycle rule now, synchronously: message TTL, backlog-quota eviction, retention,
        segment eviction and minimum-timestamp retention (the background thread does this every
        `maintenance_interval`). Returns what was deleted, expired and evicted."""
        self._check_open()
        with self._maintenance_lock:
            return run_pass(self)

    def _metadata_store(self) -> Metadata:
        self._check_open()
        return self._metadata

    def list_topics(self) -> list[str]:
        """Full names ('tenant/namespace/topic') of every topic, sorted."""
        self._check_open()
        return self._metadata.list_topics()

    def delete_topic(self, name: str, *, force: bool = False) -> None:
        """Delete a topic and its data, as `pulsar-admin topics delete`.

        Its users in every process are fenced: their sends, acks and reads raise TopicNotFoundError from
        then on, and a topic created again under the name starts empty. Refused with TopicInUseError while
        producers or consumers use it, in this process or another, unless `force` (pulsar-admin's -f)."""
        self._check_open()
        topic = self.topic(name)
        with ExitStack() as locks:  # held while the files go: no producer or consumer can start meanwhile
            users = self._topic_users(topic, locks)
            if users and not force:
                raise TopicInUseError(f"topic {topic.name} has {' and '.join(users)}; close them first, or delete "
                                      "with force=True (seglog topic delete --force), which fences them")
            set_deleted(self._topic_directory(topic.topic_name))  # from here on every user fails
            self._forget_topic(topic)
            self._remove_topic(topic.topic_name)

    def update_partitions(self, name: str, partitions: int) -> Topic:
        """Give a topic more partitions, as `pulsar-admin topics update-partitioned-topic -p N`; never fewer
        (their messages would go). Returns a handle with all of them.

        Refused with TopicInUseError while producers or consumers use the topic, in this process or another:
        they spread messages over the partitions they started with. Topic handles made before keep working
        on the partitions they know (a subscribe() through one takes in the new ones); every subscription
        reads the new partitions from their start."""
        self._check_open()
        topic = self.topic(name)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or \
                not topic.partitions < partitions <= MAX_PARTITIONS:
            raise InvalidArgumentError("partitions", partitions, f"an int from {topic.partitions + 1} to "
                                       f"{MAX_PARTITIONS}: more than the {topic.partitions} partitions {topic.name} "
                                       "has (a partition is never removed)")
        with ExitStack() as locks:  # held while the count changes: no producer or consumer can start meanwhile
            users = self._topic_users(topic, locks)
            if users:
                raise TopicInUseError(f"topic {topic.name} has {' and '.join(users)}; close them first: they "
                                      "would go on with the partitions they started with")
            self._metadata.grow_topic(topic.topic_name, partitions)
        return self.topic(name)

    def _topic_users(self, topic: Topic, locks: ExitStack) -> list[str]:
        """Who produces to or consumes the topic, in this process and others; the writer and subscription
        locks nobody holds are taken into `locks`."""
        users = []
        with self._writers_lock:
            producers = self._producers.get(topic.name, 0)
        if producers:
            users.append(f"{producers} producer(s) in this process")
        for partition in range(topic.partitions):
            directory = topic.partition_directory(partition)
            if (topic.name, partition) in self._writers or not directory.is_dir():
                continue
            try:
                locks.callback(WriterLock(directory / LOCK_FILE).release)
            except PartitionLockedError as error:
                users.append(f"a producer of partition {partition} in process {error.holder_pid}")
        users += [f"consumers of subscription {name!r}" for name in self._subscriptions.claim_all(topic, locks)]
        return users

    def _forget_topic(self, topic: Topic) -> None:
        """Let go of this process's writers, views, quota guards and subscriptions of a deleted topic."""
        with self._writers_lock:
            self._producers.pop(topic.name, None)
            for key in [k for k in self._writers if k[0] == topic.name]:
                self._writer_users.pop(key, None)
                self._writers.pop(key).close()  # fenced: they unmap and leave the files alone
        directory = self._topic_directory(topic.topic_name)
        for partition_directory in [d for d in self._partition_views if d.parent == directory]:
            del self._partition_views[partition_directory]  # batches already read keep their maps alive
            self._segment_tables.pop(partition_directory, None)
        self._quota_guards.pop(topic.name, None)
        self._subscriptions.forget_topic(topic)

    def _remove_topic(self, name: TopicName) -> None:
        """Move a topic's files to the trash and its row out of the metadata in one transaction, then delete
        the files. A crash before the commit leaves the row: fenced, the deletion is finished at the next
        open; only a crash between the renames and the commit leaves the topic, empty."""
        trash = self._new_trash()
        self._metadata.delete_topic(name, then=lambda: self._trash_files_of(name, trash))
        shutil.rmtree(trash, ignore_errors=True)

    def _new_trash(self) -> Path:
        """A fresh folder name under trash/ (emptied at every open), made when something is moved there."""
        return self.path / "trash" / uuid.uuid4().hex

    def _trash_files_of(self, name: TopicName, trash: Path) -> None:
        """Move the topic directory and subscription directory of `name` into `trash` (atomic renames)."""
        for kind, directory in (("topic", self._topic_directory(name)),
                                ("subscriptions", self.path.joinpath("subscriptions", *name.path_parts()))):
            if directory.exists():
                trash.mkdir(parents=True, exist_ok=True)
                directory.rename(trash / kind)

    def _topic_directory(self, name: TopicName) -> Path:
        return self.path.joinpath("topics", *name.path_parts())

    def _partition_view(self, directory: Path) -> PartitionView:
        """The shared read-side view of a partition (readers, offsets, storage size)."""
        self._check_open()
        view = self._partition_views.get(directory)
        if view is None:
            refuse_symbolic_links(directory)
            view = self._partition_views[directory] = PartitionView(directory)
        return view

    def _producer_opened(self, topic: Topic) -> None:
        self._check_open()
        with self._writers_lock:
            self._producers[topic.name] = self._producers.get(topic.name, 0) + 1

    def _producer_closed(self, topic: Topic) -> None:
        with self._writers_lock:
            # Counted no more after the log closed or the topic was deleted (the name may be another's now).
            if not self._closed and not topic.fence.deleted:
                self._producers[topic.name] -= 1
                if not self._producers[topic.name]:
                    del self._producers[topic.name]

    def _acquire_writer(self, topic: Topic, partition: int) -> PartitionWriter:
        """This process's writer of one partition, opened (taking its writer lock) for its first user."""
        self._check_open()
        key = (topic.name, partition)
        with self._writers_lock:
            writer = self._writers.get(key)
            if writer is None:
                writer = self._writers[key] = PartitionWriter(topic.partition_directory(partition), partition,
                                                              topic.config, self.clock, self._linger, topic.fence)
            self._writer_users[key] = self._writer_users.get(key, 0) + 1
            return writer

    def _release_writer(self, topic: Topic, partition: int) -> None:
        """A user is done with a partition's writer: the last one closes it (and lets its lock go)."""
        key = (topic.name, partition)
        with self._writers_lock:
            if self._closed or topic.fence.deleted:  # its writers went with the log or the topic
                return
            self._writer_users[key] -= 1
            if not self._writer_users[key]:
                del self._writer_users[key]
                self._writers.pop(key).close()

    def flush(self) -> None:
        """Write every message queued by this log's producers."""
        for writer in list(self._writers.values()):
            writer.flush_pending()

    def close(self) -> None:
        """Flush and close every writer (their partitions are marked cleanly closed) and the metadata."""
        if self._closed:
            return
        self._closed = True
        if self._housekeeper is not None:
            self._housekeeper.stop()
        self._linger.stop()
        self._subscriptions.close()
        with self._writers_lock:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()
            self._writer_users.clear()
            self._producers.clear()
        self._partition_views.clear()
        self._metadata.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"log {self.path} is closed")

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_data_directory(path: str | Path) -> bool:
    """Whether `path` holds a seglog data directory (one that seglog.open made), without creating one."""
    return (Path(path) / METADATA_FILE).is_file()


def open(path: str | Path, *, clock: Clock | None = None, background: bool = True,  # noqa: A001
         **broker_config: Any) -> Log:
    """Open (creating if needed) the data directory `path`.

    clock: a callable returning ms since the epoch, read by every age-dependent decision (default: the
    wall clock). background: run the housekeeping thread, which persists cursors every
    cursor_persist_interval and runs maintenance every maintenance_interval; a process that only reads
    passes False (log.run_maintenance() still works). broker_config: defaults for topics (segment_size,
    segment_roll_time, ...), verify_crc (check each batch's CRC32C on read, default True) and the
    policies' defaults (see BrokerConfig)."""
    return Log(path, clock=clock, background=background, **broker_config)
