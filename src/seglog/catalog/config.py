"""Topic and broker settings: their names, defaults, accepted forms and validation.

A topic's settings are the broker's defaults (given to `seglog.open` or written in the data directory's
`broker.conf`) overridden by what `create_topic` or `admin.topics.set_config` was given; all go through
the same parsers, so `segment_size='10 MiB'` and `segment_size=10485760` are the same setting and a bad
value is refused with the setting's name and the accepted forms."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from seglog.catalog.policies import QUOTA_POLICIES, TOPIC_TYPES, AutoTopicCreation, BacklogQuota, Policies, Retention
from seglog.errors import ConfigFileError, InvalidArgumentError
from seglog.units import as_typed, format_duration, format_size, parse_duration, parse_size

GiB = 1 << 30
MIN_SEGMENT_SIZE = 1024
MAX_SEGMENT_SIZE = 2 * GiB  # batch offsets are int32, as in Arrow's binary arrays
TIMESTAMP_TYPES = ("create_time", "log_append_time")
# Kafka's cleanup.policy: a list of these, each once; kept as this normal form (compact first)
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
DAY_MS = 86_400_000


def _segment_size(value: Any) -> int:
    size = parse_size(value, argument="segment_size")
    if not MIN_SEGMENT_SIZE <= size <= MAX_SEGMENT_SIZE:
        raise InvalidArgumentError("segment_size", value, "a size from 1 KiB to 2 GiB, e.g. '64 MiB' or 1073741824")
    return size


def _optional_duration(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None or value in (-1, "-1", 0, "0"):
            return None
        return parse_duration(value, argument=name)
    return parse


def _int_from_text(value: Any) -> Any:
    """broker.conf gives every value as text: '-1' or '1000' become ints, anything else is left as it is."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _optional_count(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        value = _int_from_text(value)
        if value is None or value in (-1, 0):
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(name, value, "a positive int, or None / -1 for no limit")
        return value
    return parse


def _optional_size(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None or value in (-1, "-1"):
            return None
        return parse_size(value, argument=name)
    return parse


def _min_timestamp(value: Any) -> int:
    value = _int_from_text(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError("retention_min_timestamp", value, "ms since the epoch as an int, 0 for off")
    return value


def _cleanup_policy(value: Any) -> str:
    """Kafka's cleanup.policy, a list of 'compact' and 'delete': a str of them separated by commas (spaces
    around a comma allowed, as Kafka splits it) or a list of them. Case matters and an empty list is refused:
    Kafka refuses 'COMPACT' too, and seglog has no policy that neither deletes nor compacts."""
    accepted = ("'delete', 'compact' or 'compact,delete' (either order, or a list of them), as Kafka's "
                "cleanup.policy")
    if isinstance(value, str):
        given = [part.strip() for part in value.strip().split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(part, str) for part in value):
        given = [part.strip() for part in value]
    else:
        raise InvalidArgumentError("cleanup_policy", value, accepted)
    unknown = [part for part in given if part not in ("compact", "delete")]
    if unknown:
        detail = ("it is empty" if given == [""] or not given else "it has an empty entry" if "" in unknown
                  else f"{unknown[0]!r} is neither 'compact' nor 'delete'")
        raise InvalidArgumentError("cleanup_policy", value, accepted, detail=detail)
    return ",".join(policy for policy in ("compact", "delete") if policy in given)


def _max_compaction_lag(value: Any) -> int | None:
    """Kafka's max.compaction.lag.ms: at least 1 ms; None or -1 for no bound (Kafka's default, Long.MAX_VALUE)."""
    if value is None or value in (-1, "-1"):
        return None
    lag = parse_duration(value, argument="max_compaction_lag")
    if lag == 0:
        raise InvalidArgumentError("max_compaction_lag", value, "a duration greater than 0 with its unit, e.g. '7d' "
                                   "or '12h'; None or -1 for no bound")
    return lag


def _min_cleanable_dirty_ratio(value: Any) -> float:
    """Kafka's min.cleanable.dirty.ratio: a number from 0 to 1 (text from broker.conf or the CLI too)."""
    accepted = "a number from 0 to 1, e.g. 0.5 (Kafka's default) or '0.1'"
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise InvalidArgumentError("min_cleanable_dirty_ratio", value, accepted) from None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number <= 1:
        raise InvalidArgumentError("min_cleanable_dirty_ratio", value, accepted)
    return float(number)


def _timestamp_type(value: Any) -> str:
    if value not in TIMESTAMP_TYPES:
        raise InvalidArgumentError("timestamp_type", value, " or ".join(map(repr, TIMESTAMP_TYPES)))
    return value


def _fsync(value: Any) -> str:
    """'never' (leave it to the OS), 'always' (every batch), or an interval: fsync when one has passed."""
    if value in ("never", "always"):
        return value
    try:
        interval = parse_duration(value, argument="fsync")
    except InvalidArgumentError as error:
        raise InvalidArgumentError("fsync", value, "'never', 'always', or an interval with its unit, such as "
                                   "'100ms' or '1s'", detail=error.detail) from None
    return "always" if interval == 0 else f"{interval}ms"


@dataclass(frozen=True)
class TopicConfig:
    """The settings of a topic. Sizes in bytes, durations in ms, None for off / no limit.
    Immutable (a frozen dataclass): shared freely by threads."""
    segment_size: int = GiB
    segment_roll_time: int | None = None
    segment_max_messages: int | None = None
    timestamp_type: str = "create_time"
    fsync: str = "never"
    # Fluvio's segment eviction and Kafka's minimum-timestamp retention (docs/LIFECYCLE.md)
    retention_time: int | None = None
    max_partition_size: int | None = None
    retention_min_timestamp: int = 0
    # Kafka's log compaction (docs/LIFECYCLE.md, Compaction): cleanup.policy, min/max.compaction.lag.ms,
    # delete.retention.ms (how long a tombstone is kept) and min.cleanable.dirty.ratio, with Kafka's defaults
    cleanup_policy: str = "delete"
    min_compaction_lag: int = 0
    max_compaction_lag: int | None = None
    delete_retention: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5

    @property
    def compacted(self) -> bool:
        """Whether the cleanup policy compacts ('compact' or 'compact,delete'): every message needs a key."""
        return self.cleanup_policy != "delete"

    @property
    def fsync_interval_ms(self) -> int | None:
        """None: never fsync; 0: after every batch; N: when N ms passed since the last fsync."""
        if self.fsync == "never":
            return None
        return 0 if self.fsync == "always" else int(self.fsync[:-2])

    @property
    def log_append_time(self) -> bool:
        return self.timestamp_type == "log_append_time"

    def updated(self, options: Mapping[str, Any]) -> TopicConfig:
        """A copy with `options` parsed and applied; unknown names are refused with the accepted ones."""
        return replace(self, **parse_options(options, TOPIC_SETTINGS, "topic setting"))._checked(options)

    def restored(self, stored: Mapping[str, Any]) -> TopicConfig:
        """A copy with the settings a topic's metadata holds: values the parsers made (bytes and ms as
        ints, fsync as text), taken as they are. Parsed again, a duration stored as a bare number of ms
        would be refused as ambiguous."""
        return replace(self, **stored)._checked(stored)

    def _checked(self, given: Mapping[str, Any]) -> TopicConfig:
        """Self, if its settings agree with each other; `given` are the values as the caller gave them."""
        if self.max_partition_size is not None and self.max_partition_size < self.segment_size:
            # (the segment size as given, else as set before, in the unit that shows it shortest)
            segment_size = (as_typed(given["segment_size"], "bytes") if "segment_size" in given
                            else format_size(self.segment_size))
            raise InvalidArgumentError("max_partition_size",
                                       given.get("max_partition_size", self.max_partition_size),
                                       f"a size of at least the segment_size ({segment_size})",
                                       detail="a partition always keeps its active segment")
        if self.max_compaction_lag is not None and self.min_compaction_lag > self.max_compaction_lag:
            name = "min_compaction_lag" if "min_compaction_lag" in given else "max_compaction_lag"
            other = "max_compaction_lag" if name == "min_compaction_lag" else "min_compaction_lag"
            other_ms = getattr(self, other)
            raise InvalidArgumentError(name, given.get(name, getattr(self, name)),
                                       f"a duration {'at most' if name == 'min_compaction_lag' else 'at least'} "
                                       f"{other} ({format_duration(other_ms)})",
                                       detail="Kafka refuses min.compaction.lag.ms > max.compaction.lag.ms")
        return self

    def to_admin(self) -> dict[str, Any]:
        """The settings as admin answers show them (get_config, explain_retention, `topic describe --json`):
        camelCase names, sizes in bytes, durations and the timestamp in ms, None for off."""
        return {ADMIN_NAMES[name]: value for name, value in asdict(self).items()}


TOPIC_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "segment_size": _segment_size,
    "segment_roll_time": _optional_duration("segment_roll_time"),
    "segment_max_messages": _optional_count("segment_max_messages"),
    "timestamp_type": _timestamp_type,
    "fsync": _fsync,
    "retention_time": _optional_duration("retention_time"),
    "max_partition_size": _optional_size("max_partition_size"),
    "retention_min_timestamp": _min_timestamp,
    "cleanup_policy": _cleanup_policy,
    "min_compaction_lag": lambda value: parse_duration(value, argument="min_compaction_lag"),
    "max_compaction_lag": _max_compaction_lag,
    "delete_retention": lambda value: parse_duration(value, argument="delete_retention"),
    "min_cleanable_dirty_ratio": _min_cleanable_dirty_ratio,
}
assert set(TOPIC_SETTINGS) == {f.name for f in fields(TopicConfig)}

# Pulsar's admin JSON is camelCase and names the unit of a time (retentionTimeInMinutes); these are in ms.
ADMIN_NAMES = {
    "segment_size": "segmentSize", "segment_roll_time": "segmentRollTimeMs",
    "segment_max_messages": "segmentMaxMessages", "timestamp_type": "timestampType", "fsync": "fsync",
    "retention_time": "retentionTimeMs", "max_partition_size": "maxPartitionSize",
    "retention_min_timestamp": "retentionMinTimestampMs", "cleanup_policy": "cleanupPolicy",
    "min_compaction_lag": "minCompactionLagMs", "max_compaction_lag": "maxCompactionLagMs",
    "delete_retention": "deleteRetentionMs", "min_cleanable_dirty_ratio": "minCleanableDirtyRatio",
}
assert set(ADMIN_NAMES) == set(TOPIC_SETTINGS)


def _bool_setting(name: str) -> Callable[[Any], bool]:
    """A True/False setting that broker.conf gives as text."""
    def parse(value: Any) -> bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):  # from broker.conf
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise InvalidArgumentError(name, value, "true or false (True or False from Python)")
        return value
    return parse


def _int_setting(name: str, accepted: str) -> Callable[[Any], int]:
    """An int setting that broker.conf may also give as text; -1 means no limit."""
    def parse(value: Any) -> int:
        value = _int_from_text(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise InvalidArgumentError(name, value, accepted)
        return value
    return parse


def _quota_policy(value: Any) -> str:
    if value not in QUOTA_POLICIES:
        raise InvalidArgumentError("backlog_quota_default_retention_policy", value,
                                   ", ".join(map(repr, QUOTA_POLICIES)))
    return value


def _topic_type(value: Any) -> str:
    if value not in TOPIC_TYPES:
        raise InvalidArgumentError("allow_auto_topic_creation_type", value, " or ".join(map(repr, TOPIC_TYPES)))
    return value


def _int_at_least(name: str, minimum: int, accepted: str) -> Callable[[Any], int]:
    """An int setting of at least `minimum` that broker.conf may also give as text."""
    def parse(value: Any) -> int:
        value = _int_from_text(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidArgumentError(name, value, accepted)
        return value
    return parse


def _interval(name: str) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        ms = parse_duration(value, argument=name)
        if ms <= 0:
            raise InvalidArgumentError(name, value, "a duration greater than 0 with its unit, e.g. '60s' or '500ms'")
        return ms
    return parse


BROKER_FILE = "broker.conf"
MIN_SNAPSHOTS_CACHED = 3  # Pulsar's snapshot cache refuses fewer: it never evicts its first or last snapshot
WEEK_MINUTES = 7 * 24 * 60


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of an opened data directory: the defaults of its topics, its readers and its policies.

    The policy defaults carry Pulsar's broker.conf names in snake case. seglog keeps acknowledged data 7
    days by default (Kafka's and Fluvio's period), not Pulsar's 0/0: see docs/LIFECYCLE.md, Retention.
    Immutable (a frozen dataclass): shared freely by threads."""
    topic_defaults: TopicConfig = TopicConfig()
    verify_crc: bool = True
    default_retention_time_minutes: int = WEEK_MINUTES
    default_retention_size_mb: int = -1
    ttl_duration_default_seconds: int = 0
    backlog_quota_default_limit_bytes: int = -1
    backlog_quota_default_limit_seconds: int = -1
    backlog_quota_default_retention_policy: str = "producer_request_hold"
    broker_deduplication_enabled: bool = False
    # Pulsar's brokerServiceCompactionThresholdInBytes: the backlog in bytes that starts a topic's compaction (0: off)
    broker_service_compaction_threshold_in_bytes: int = 0
    # seglog serve: a topic a client names is created on first use, as Pulsar's broker does by default
    allow_auto_topic_creation: bool = True
    allow_auto_topic_creation_type: str = "non-partitioned"
    default_num_partitions: int = 1
    # geo-replication: a partitioned topic replicated to a cluster that lacks it is created there with as many
    # partitions (Pulsar's createTopicToRemoteClusterForReplication; without it, it must exist there already)
    create_topic_to_remote_cluster_for_replication: bool = True
    # the messages a replicator may have sent and not yet had receipted by the remote (Pulsar's
    # replicationProducerQueueSize): the window that bounds a replicator's rate at its round trip
    replication_producer_queue_size: int = 1000
    # replicated subscriptions (Pulsar's PIP-33, docs/REPLICATION.md): whether consumers may have them, how often
    # a topic partition with new messages takes a snapshot, when an unfinished one is abandoned, and how many a
    # subscription keeps (its first and last always: at least MIN_SNAPSHOTS_CACHED)
    enable_replicated_subscriptions: bool = True
    replicated_subscriptions_snapshot_frequency_ms: int = 1000
    replicated_subscriptions_snapshot_timeout_seconds: int = 30
    replicated_subscriptions_snapshot_max_cached_per_subscription: int = 30
    maintenance_interval: int = 60_000
    cursor_persist_interval: int = 1_000

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> BrokerConfig:
        topic_options = {k: v for k, v in options.items() if k in TOPIC_SETTINGS}
        own = parse_options({k: v for k, v in options.items() if k not in TOPIC_SETTINGS},
                            BROKER_SETTINGS, "broker setting", also=TOPIC_SETTINGS)
        config = cls(topic_defaults=TopicConfig().updated(topic_options), **own)
        config.policies()  # refuse a retention of 0 with a limit (and so on) now, not at the first topic
        return config

    @classmethod
    def load(cls, directory: Path, options: Mapping[str, Any]) -> BrokerConfig:
        """The settings of `directory/broker.conf` (Pulsar's `key=value` lines, `#` comments) overridden
        by `options` (the keyword arguments of seglog.open). A refused value of the file raises
        ConfigFileError naming the file and its line."""
        path = directory / BROKER_FILE
        entries = read_broker_file(path)
        try:
            return cls.from_options({**{name: entry.value for name, entry in entries.items()}, **options})
        except InvalidArgumentError as error:
            from_file = [entries[name].line for name in _settings_named_by(error.argument)
                         if name in entries and name not in options]
            if not from_file:
                raise
            raise ConfigFileError(str(path), sorted(from_file), error) from None

    def policies(self) -> Policies:
        """The broker level of the policies: the default of every namespace and topic."""
        quotas = {}
        if self.backlog_quota_default_limit_bytes > 0:
            quotas["destination_storage"] = BacklogQuota("destination_storage",
                                                         self.backlog_quota_default_limit_bytes,
                                                         self.backlog_quota_default_retention_policy)
        if self.backlog_quota_default_limit_seconds > 0:
            quotas["message_age"] = BacklogQuota("message_age", self.backlog_quota_default_limit_seconds * 1000,
                                                 self.backlog_quota_default_retention_policy)
        minutes, mb = self.default_retention_time_minutes, self.default_retention_size_mb
        # (in broker.conf's units, which a refusal names: defaultRetentionTimeInMinutes, defaultRetentionSizeInMB)
        retention = Retention.parse(time=minutes if minutes == -1 else f"{minutes} minutes",
                                    size=mb if mb == -1 else f"{mb} MiB")
        partitioned = self.allow_auto_topic_creation_type == "partitioned"
        auto = AutoTopicCreation.parse(allowed=self.allow_auto_topic_creation,
                                       topic_type=self.allow_auto_topic_creation_type,
                                       partitions=self.default_num_partitions if partitioned else None)
        return Policies(retention, max(self.ttl_duration_default_seconds, 0) * 1000, quotas,
                        self.broker_deduplication_enabled, auto,
                        compaction_threshold=self.broker_service_compaction_threshold_in_bytes)


BROKER_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "verify_crc": _bool_setting("verify_crc"),
    "broker_deduplication_enabled": _bool_setting("broker_deduplication_enabled"),
    "default_retention_time_minutes": _int_setting("default_retention_time_minutes",
                                                   "minutes as an int, -1 for no limit, 0 for none"),
    "default_retention_size_mb": _int_setting("default_retention_size_mb", "MB as an int, -1 for no limit, 0 for none"),
    "ttl_duration_default_seconds": _int_setting("ttl_duration_default_seconds", "seconds as an int, 0 for no TTL"),
    "backlog_quota_default_limit_bytes": _int_setting("backlog_quota_default_limit_bytes",
                                                      "bytes as an int, -1 for no quota"),
    "backlog_quota_default_limit_seconds": _int_setting("backlog_quota_default_limit_seconds",
                                                        "seconds as an int, -1 for no quota"),
    "backlog_quota_default_retention_policy": _quota_policy,
    "broker_service_compaction_threshold_in_bytes": _int_at_least("broker_service_compaction_threshold_in_bytes", 0,
                                                                  "bytes as an int, 0 for no compaction by size"),
    "allow_auto_topic_creation": _bool_setting("allow_auto_topic_creation"),
    "allow_auto_topic_creation_type": _topic_type,
    "default_num_partitions": _int_at_least("default_num_partitions", 1, "a partition count of at least 1"),
    "create_topic_to_remote_cluster_for_replication": _bool_setting("create_topic_to_remote_cluster_for_replication"),
    "replication_producer_queue_size": _int_at_least("replication_producer_queue_size", 1,
                                                     "messages as an int of at least 1"),
    "enable_replicated_subscriptions": _bool_setting("enable_replicated_subscriptions"),
    "replicated_subscriptions_snapshot_frequency_ms": _int_at_least(
        "replicated_subscriptions_snapshot_frequency_ms", 1, "ms as an int of at least 1"),
    "replicated_subscriptions_snapshot_timeout_seconds": _int_at_least(
        "replicated_subscriptions_snapshot_timeout_seconds", 1, "seconds as an int of at least 1"),
    "replicated_subscriptions_snapshot_max_cached_per_subscription": _int_at_least(
        "replicated_subscriptions_snapshot_max_cached_per_subscription", MIN_SNAPSHOTS_CACHED,
        f"an int of at least {MIN_SNAPSHOTS_CACHED} (a subscription's first and last snapshots are always kept)"),
    "maintenance_interval": _interval("maintenance_interval"),
    "cursor_persist_interval": _interval("cursor_persist_interval"),
}
assert set(BROKER_SETTINGS) == {f.name for f in fields(BrokerConfig)} - {"topic_defaults"}


# Pulsar's broker.conf names of the settings seglog has, so a line copied from Pulsar's file means the same.
PULSAR_BROKER_NAMES = {
    "defaultRetentionTimeInMinutes": "default_retention_time_minutes",
    "defaultRetentionSizeInMB": "default_retention_size_mb",
    "ttlDurationDefaultInSeconds": "ttl_duration_default_seconds",
    "backlogQuotaDefaultLimitBytes": "backlog_quota_default_limit_bytes",
    "backlogQuotaDefaultLimitSecond": "backlog_quota_default_limit_seconds",
    "backlogQuotaDefaultRetentionPolicy": "backlog_quota_default_retention_policy",
    "brokerDeduplicationEnabled": "broker_deduplication_enabled",
    "brokerServiceCompactionThresholdInBytes": "broker_service_compaction_threshold_in_bytes",
    "allowAutoTopicCreation": "allow_auto_topic_creation",
    "allowAutoTopicCreationType": "allow_auto_topic_creation_type",
    "defaultNumPartitions": "default_num_partitions",
    "createTopicToRemoteClusterForReplication": "create_topic_to_remote_cluster_for_replication",
    "replicationProducerQueueSize": "replication_producer_queue_size",
    "enableReplicatedSubscriptions": "enable_replicated_subscriptions",
    "replicatedSubscriptionsSnapshotFrequencyMillis": "replicated_subscriptions_snapshot_frequency_ms",
    "replicatedSubscriptionsSnapshotTimeoutSeconds": "replicated_subscriptions_snapshot_timeout_seconds",
    "replicatedSubscriptionsSnapshotMaxCachedPerSubscription":
        "replicated_subscriptions_snapshot_max_cached_per_subscription",
}
_BROKER_FILE_FORM = "UTF-8 text of 'name=value' lines, blank lines and # comments"


@dataclass(frozen=True)
class FileEntry:
    value: str
    line: int


def read_broker_file(path: Path) -> dict[str, FileEntry]:
    """The settings of a broker.conf by seglog's name (a Pulsar name is taken for its seglog one), each with
    its value as text and its line; blank lines and `#` comments skipped. Missing file: no settings. A line
    that is not UTF-8, not `name=value` or names no setting raises ConfigFileError."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        text = raw.decode()
    except UnicodeDecodeError as error:
        number = raw.count(b"\n", 0, error.start) + 1
        undecodable = raw.split(b"\n")[number - 1]
        raise ConfigFileError(str(path), [number], InvalidArgumentError(
            "line", undecodable, _BROKER_FILE_FORM, detail=f"byte {raw[error.start]:#04x} is not UTF-8")) from None
    known = {*BROKER_SETTINGS, *TOPIC_SETTINGS, *PULSAR_BROKER_NAMES}
    settings = {}
    for number, line in enumerate(text.split("\n"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, equals, value = (part.strip() for part in line.partition("="))
        if not equals or not key:
            raise ConfigFileError(str(path), [number], InvalidArgumentError("line", line, _BROKER_FILE_FORM))
        if key not in known:
            raise ConfigFileError(str(path), [number], InvalidArgumentError("broker setting", key,
                                                                            ", ".join(sorted(known))))
        settings[PULSAR_BROKER_NAMES.get(key, key)] = FileEntry(value, number)
    return settings


def _settings_named_by(argument: str) -> tuple[str, ...]:
    """The settings an InvalidArgumentError's `argument` stands for: itself, or both retention defaults for
    the retention they make together."""
    if argument in ("retention time", "retention size"):  # (a limit of 0 is refused with the other one set)
        return ("default_retention_time_minutes", "default_retention_size_mb")
    return (argument,)


def broker_file_problem(directory: Path) -> ConfigFileError | None:
    """What is wrong with `directory/broker.conf` on its own (keyword arguments of seglog.open aside)."""
    try:
        BrokerConfig.load(directory, {})
    except ConfigFileError as error:
        return error
    return None


def parse_options(options: Mapping[str, Any], settings: Mapping[str, Callable[[Any], Any]], what: str,
                  also: Mapping[str, Any] = {}) -> dict[str, Any]:
    unknown = sorted(set(options) - set(settings))
    if unknown:
        accepted = ", ".join(sorted({*settings, *also}))
        raise InvalidArgumentError(what, unknown[0], accepted)
    return {name: settings[name](value) for name, value in options.items()}
