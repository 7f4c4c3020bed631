"""The log: an opened data directory, the in-process entry point. A thin facade over the Broker
(broker.py), which builds the services; Topic handles, producers and consumers come from here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seglog.admin.api import Admin
from seglog.broker import MAX_PARTITIONS, METADATA_FILE, Broker, is_data_directory
from seglog.catalog.config import BrokerConfig
from seglog.clock import Clock, system_clock
from seglog.errors import InvalidArgumentError
from seglog.lifecycle.maintenance import MaintenanceReport
from seglog.topic import Topic

__all__ = ["MAX_PARTITIONS", "METADATA_FILE", "Log", "is_data_directory", "open"]


class Log:
    """An open data directory. Use as a context manager, or call close().

    Thread safety: one Log may be shared by every thread of a process (changes to topics and policies are
    metadata transactions under a lock); close it once, when the other threads are done. Any number of
    processes may open the same data directory at once, each with its own Log; do not use one in a child
    made by fork, which would share the parent's locks (docs/THREADS.md)."""

    def __init__(self, path: str | Path, *, clock: Clock | None = None, background: bool = True,
                 **broker_config: Any) -> None:
        if clock is not None and not callable(clock):
            raise InvalidArgumentError("clock", clock, "a callable returning ms since the epoch")
        self._broker = Broker.open(Path(path), clock=clock or system_clock, background=background, **broker_config)
        self.admin = Admin(self._broker)
        """The admin API: clusters, tenants, namespaces and topics, as pulsar-admin has them."""

    @property
    def path(self) -> Path:
        """The data directory."""
        return self._broker.path

    @property
    def config(self) -> BrokerConfig:
        """The broker settings in force (broker.conf and the options given to open)."""
        return self._broker.config

    @property
    def clock(self) -> Clock:
        """The clock every age-dependent decision reads (the one given to open, else the wall clock)."""
        return self._broker.clock

    def __repr__(self) -> str:
        return f"seglog.Log({str(self.path)!r})"

    def create_topic(self, name: str, *, partitions: int = 1, **topic_config: Any) -> Topic:
        """Create a topic ('tenant/namespace/topic', or a bare name in public/default). Settings not given
        follow the broker's defaults: segment_size, segment_roll_time, segment_max_messages,
        timestamp_type ('create_time' or 'log_append_time'), fsync ('never', 'always' or an interval)."""
        return Topic(self._broker, self._broker.create_topic(name, partitions, topic_config))

    def topic(self, name: str) -> Topic:
        """The existing topic `name`; TopicNotFoundError if there is none."""
        return Topic(self._broker, self._broker.topic(name))

    def list_topics(self) -> list[str]:
        """Full names ('tenant/namespace/topic') of every topic, sorted."""
        self._broker.check_open()
        return self._broker.catalog.topic_names()

    def delete_topic(self, name: str, *, force: bool = False) -> None:
        """Delete a topic and its data, as `pulsar-admin topics delete`.

        Its users in every process are fenced: their sends, acks and reads raise TopicNotFoundError from
        then on, and a topic created again under the name starts empty. Refused with TopicInUseError while
        producers or consumers use it, in this process or another, unless `force` (pulsar-admin's -f)."""
        self._broker.delete_topic(name, force=force)

    def update_partitions(self, name: str, partitions: int) -> Topic:
        """Give a topic more partitions, as `pulsar-admin topics update-partitioned-topic -p N`; never fewer
        (their messages would go). Returns a handle with all of them.

        Refused with TopicInUseError while producers or consumers use the topic, in this process or another:
        they spread messages over the partitions they started with. Topic handles made before keep working
        on the partitions they know (a subscribe() through one takes in the new ones); every subscription
        reads the new partitions from their start."""
        return Topic(self._broker, self._broker.update_partitions(name, partitions))

    def run_maintenance(self) -> MaintenanceReport:
        """Apply every lifecycle rule now, synchronously: message TTL, backlog-quota eviction, retention,
        segment eviction and minimum-timestamp retention (the background thread does this every
        `maintenance_interval`). Returns what was deleted, expired and evicted."""
        return self._broker.run_maintenance()

    def flush(self) -> None:
        """Write every message queued by this log's producers."""
        self._broker.store.flush()

    def close(self) -> None:
        """Flush and close every writer (their partitions are marked cleanly closed) and the metadata."""
        self._broker.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
