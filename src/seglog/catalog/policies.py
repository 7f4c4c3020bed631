"""Topic policies (retention, message TTL, backlog quotas, deduplication, topic auto-creation, replication
clusters, the compaction threshold): their values, units and levels.

As in Pulsar, each policy is set on a namespace or on a topic; the topic's wins over the namespace's, the
namespace's over the broker's default, and removing one falls back to the next level (docs/LIFECYCLE.md).
Values are kept exactly (ms and bytes); the admin API reports them in Pulsar's units (minutes, MB, seconds),
so a value that is not a whole number of the unit it is reported in is refused: rounded, it would read back
as another, and a retention of 10 s or 10 bytes would read as 0, which in Pulsar's table means keep nothing.

Input forms follow pulsar-admin: a retention time or TTL given as a bare number is seconds ('3h', '2d 10s',
120), a size given as a bare number is bytes ('10G' is 10 GiB, '1 GB' 10**9 bytes), -1 means no limit."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from seglog.catalog.stamps import Stamp
from seglog.errors import InvalidArgumentError
from seglog.units import as_typed, format_duration, format_size, parse_duration, parse_size

SECOND_MS = 1000
MINUTE_MS = 60_000
MB = 1 << 20  # Pulsar's MB, as in retentionSizeInMB

QUOTA_TYPES = ("destination_storage", "message_age")
QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
TOPIC_TYPES = ("non-partitioned", "partitioned")  # Pulsar's TopicType, as allowAutoTopicCreationType names them


@dataclass(frozen=True)
class Retention:
    """How long acknowledged messages are kept: time in ms and size in bytes, -1 for no limit, 0 for none.

    Both limits always exist. 0/0 keeps nothing; with both > 0 whichever is reached first deletes.
    Immutable (a frozen dataclass): shared freely by threads."""
    time_ms: int
    size_bytes: int

    @classmethod
    def parse(cls, *, size: Any, time: Any) -> Retention:
        time_ms = parse_duration(time, argument="retention time", allow_infinite=True, unit="s")
        size_bytes = parse_size(size, argument="retention size", allow_infinite=True)
        retention = cls(
            _whole(time_ms, MINUTE_MS, argument="retention time", given=time, shown=format_duration,
                   unit="minutes (retentionTimeInMinutes)",
                   accepted="whole minutes: '10m', '3h', '7 days' or seconds as an int (3600), -1 for no limit, "
                            "0 (with size 0) for none"),
            _whole(size_bytes, MB, argument="retention size", given=size, shown=format_size,
                   unit="MB (retentionSizeInMB, 1 MB = 1 MiB = 1048576 bytes)",
                   accepted="whole MB: '10M', '500 MiB', '10G', '1T', -1 for no limit, 0 (with time 0) for none"))
        if (retention.time_ms == 0) != (retention.size_bytes == 0):
            if retention.time_ms == 0:  # (named as given: a bare int is seconds, or bytes)
                zero, zero_given, other = "time", time, f"size {as_typed(size, 'bytes')}"
            else:
                zero, zero_given, other = "size", size, f"time {as_typed(time, 'seconds')}"
            raise InvalidArgumentError(
                f"retention {zero}", zero_given,
                "both limits 0 (keep nothing), or neither: -1 (no limit) or a positive value for each",
                detail=f"a limit of 0 with the other limit set ({other}) is refused, as in Pulsar")
        return retention

    @property
    def infinite(self) -> bool:
        return self.time_ms == -1 and self.size_bytes == -1

    def to_admin(self) -> dict[str, int]:
        """Pulsar's RetentionPolicies: minutes and MB, -1 for no limit. Exact for a policy (parse refuses
        other values); a topic's Fluvio limits acting as its retention are rounded up, never down to 0."""
        return {"retentionTimeInMinutes": _rounded_up(self.time_ms, MINUTE_MS),
                "retentionSizeInMB": _rounded_up(self.size_bytes, MB)}

    def to_json(self) -> dict[str, int]:
        return {"time_ms": self.time_ms, "size_bytes": self.size_bytes}

    @classmethod
    def from_json(cls, data: Mapping[str, int]) -> Retention:
        return cls(data["time_ms"], data["size_bytes"])


@dataclass(frozen=True)
class BacklogQuota:
    """A limit on the backlog of a topic's slowest subscription, and what happens at it.

    `limit` is bytes for `destination_storage`, ms of age of the oldest unacknowledged message for
    `message_age`. Immutable (a frozen dataclass): shared freely by threads."""
    type: str
    limit: int
    policy: str

    @classmethod
    def parse(cls, *, type: Any, limit: Any, limit_time: Any, policy: Any) -> BacklogQuota:  # noqa: A002
        if type not in QUOTA_TYPES:
            raise InvalidArgumentError("type", type, " or ".join(map(repr, QUOTA_TYPES)))
        if policy not in QUOTA_POLICIES:
            raise InvalidArgumentError("policy", policy, ", ".join(map(repr, QUOTA_POLICIES)))
        if type == "destination_storage":
            if limit is None or limit_time is not None:
                raise InvalidArgumentError("limit", limit, "a size for type 'destination_storage' (and no "
                                           "limit_time), e.g. '2G' or 2147483648")
            value = parse_size(limit, argument="limit")
        else:
            if limit_time is None or limit is not None:
                raise InvalidArgumentError("limit_time", limit_time, "a duration for type 'message_age' (and "
                                           "no limit), e.g. 3600 (seconds) or '1h'")
            value = _whole(parse_duration(limit_time, argument="limit_time", unit="s"), SECOND_MS,
                           argument="limit_time", given=limit_time, shown=format_duration,
                           unit="seconds (limitTime)", accepted="whole seconds: 3600, '1h', '2d 10s'")
        if value <= 0:
            raise InvalidArgumentError("limit" if type == "destination_storage" else "limit_time",
                                       limit if limit is not None else limit_time, "a limit greater than 0")
        return cls(type, value, policy)

    def to_admin(self) -> dict[str, Any]:
        """As pulsar-admin's get-backlog-quotas shows it: bytes, or whole seconds for message_age."""
        if self.type == "destination_storage":
            return {"limit": self.limit, "policy": self.policy}
        return {"limitTime": self.limit // SECOND_MS, "policy": self.policy}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "limit": self.limit, "policy": self.policy}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BacklogQuota:
        return cls(data["type"], data["limit"], data["policy"])


@dataclass(frozen=True)
class AutoTopicCreation:
    """Whether `seglog serve` creates a topic a client names that does not exist, and of which kind: Pulsar's
    allowAutoTopicCreation / allowAutoTopicCreationType / defaultNumPartitions in broker.conf, and a
    namespace's autoTopicCreationOverride over them. `partitions` is None for non-partitioned topics."""
    allowed: bool = True
    topic_type: str = "non-partitioned"
    partitions: int | None = None

    @classmethod
    def parse(cls, *, allowed: Any, topic_type: Any = "non-partitioned", partitions: Any = None) -> AutoTopicCreation:
        """Checked as Pulsar checks an override: partitioned needs a partition count of at least 1, and
        non-partitioned refuses one. A disabled one ignores both, as Pulsar's check does."""
        if not isinstance(allowed, bool):
            raise InvalidArgumentError("allowAutoTopicCreation", allowed, "true or false")
        if not allowed:
            return cls(False)
        if topic_type not in TOPIC_TYPES:
            raise InvalidArgumentError("topicType", topic_type, " or ".join(map(repr, TOPIC_TYPES)))
        if topic_type == "non-partitioned":
            if partitions is not None:
                raise InvalidArgumentError("defaultNumPartitions", partitions, "no partition count with topicType "
                                           "'non-partitioned' (give topicType 'partitioned' for one)")
            return cls(True, topic_type, None)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidArgumentError("defaultNumPartitions", partitions, "a partition count of at least 1 with "
                                       "topicType 'partitioned'")
        return cls(True, topic_type, partitions)

    def to_admin(self) -> dict[str, Any]:
        """Pulsar's AutoTopicCreationOverride JSON (defaultNumPartitions only where there is one)."""
        data: dict[str, Any] = {"allowAutoTopicCreation": self.allowed, "topicType": self.topic_type}
        if self.partitions is not None:
            data["defaultNumPartitions"] = self.partitions
        return data

    @classmethod
    def from_admin(cls, data: Any) -> AutoTopicCreation:
        """An AutoTopicCreationOverride as Pulsar's REST API and the catalog hold it, checked."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError("autoTopicCreationOverride", data, '{"allowAutoTopicCreation": true, '
                                       '"topicType": "partitioned", "defaultNumPartitions": 4}')
        unknown = sorted(set(data) - {"allowAutoTopicCreation", "topicType", "defaultNumPartitions"})
        if unknown:
            raise InvalidArgumentError("autoTopicCreationOverride field", unknown[0],
                                       "allowAutoTopicCreation, topicType, defaultNumPartitions")
        if "allowAutoTopicCreation" not in data:
            raise InvalidArgumentError("allowAutoTopicCreation", None, "true or false (required)")
        return cls.parse(allowed=data["allowAutoTopicCreation"], topic_type=data.get("topicType", "non-partitioned"),
                         partitions=data.get("defaultNumPartitions"))


def parse_ttl(seconds: Any) -> int:
    """A message TTL in ms, whole seconds (as get_message_ttl reports it); 0 means none (as in Pulsar)."""
    return _whole(parse_duration(seconds, argument="message TTL", unit="s"), SECOND_MS, argument="message TTL",
                  given=seconds, shown=format_duration, unit="seconds (get_message_ttl)",
                  accepted="whole seconds: 120, '2h', '1d', 0 for no TTL")


def parse_compaction_threshold(threshold: Any) -> int:
    """Pulsar's compaction threshold in bytes: the backlog that starts a compaction; 0 turns that off (as
    brokerServiceCompactionThresholdInBytes=0). Negative values are refused, as Pulsar refuses them."""
    try:
        return parse_size(threshold, argument="compaction threshold")
    except InvalidArgumentError as error:
        raise InvalidArgumentError("compaction threshold", threshold, f"{error.accepted}; 0 for no compaction by size",
                                   detail=error.detail) from None


def _whole(amount: int, per_unit: int, *, argument: str, given: Any, shown: Callable[[int], str], unit: str,
           accepted: str) -> int:
    """`amount` (ms or bytes), if -1, 0 or a whole number of the `unit` it is reported in (`per_unit` ms or
    bytes each); else InvalidArgumentError, since the report would round it to another value."""
    if amount > 0 and amount % per_unit:
        raise InvalidArgumentError(argument, given, accepted,
                                   detail=f"{shown(amount)} is not a whole number of {unit}, the unit it is "
                                          "reported in: rounded, it would read back as another value")
    return amount


def _rounded_up(amount: int, unit: int) -> int:
    """`amount` in `unit`s, rounded up; -1 (no limit) stays -1."""
    return amount if amount == -1 else -(-amount // unit)


@dataclass(frozen=True)
class Policies:
    """The policies set at one level (namespace or topic); None where that level sets nothing."""
    retention: Retention | None = None
    message_ttl_ms: int | None = None
    backlog_quotas: Mapping[str, BacklogQuota] | None = None
    # Pulsar's message deduplication by producer name and sequence id (seglog serve's producers)
    deduplication: bool | None = None
    # namespaces and the broker only (Pulsar has no topic level for it)
    auto_topic_creation: AutoTopicCreation | None = None
    # Pulsar's replication_clusters: a namespace's (set-clusters) or a topic's local policy (a topic's global one
    # is in its GlobalPolicies); the broker has none (docs/SERVER.md, Geo-replication)
    replication_clusters: frozenset[str] | None = None
    # namespaces only: the clusters its topics may reach (PIP-321's allowed_clusters)
    allowed_clusters: frozenset[str] | None = None
    # schemas (catalog/schemas.py): Pulsar's schema_compatibility_strategy (a namespace's or a topic's),
    # is_allow_auto_update_schema (namespaces only) and schema_validation_enforced (a namespace's or a topic's)
    schema_compatibility_strategy: str | None = None
    allow_auto_update_schema: bool | None = None
    schema_validation_enforced: bool | None = None
    # Pulsar's compaction_threshold (bytes of backlog that start a compaction, 0: never), a namespace's or a topic's
    compaction_threshold: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.retention is not None:
            data["retention"] = self.retention.to_json()
        if self.message_ttl_ms is not None:
            data["message_ttl_ms"] = self.message_ttl_ms
        if self.backlog_quotas:
            data["backlog_quotas"] = {t: q.to_json() for t, q in self.backlog_quotas.items()}
        if self.deduplication is not None:
            data["deduplication"] = self.deduplication
        if self.auto_topic_creation is not None:
            data["auto_topic_creation"] = self.auto_topic_creation.to_admin()
        if self.replication_clusters is not None:
            data["replication_clusters"] = sorted(self.replication_clusters)
        if self.allowed_clusters is not None:
            data["allowed_clusters"] = sorted(self.allowed_clusters)
        for name in _PLAIN_POLICIES:
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policies:
        retention = data.get("retention")
        quotas = data.get("backlog_quotas") or {}
        auto = data.get("auto_topic_creation")
        replication, allowed = data.get("replication_clusters"), data.get("allowed_clusters")
        return cls(Retention.from_json(retention) if retention else None, data.get("message_ttl_ms"),
                   {t: BacklogQuota.from_json(q) for t, q in quotas.items()} or None, data.get("deduplication"),
                   AutoTopicCreation.from_admin(auto) if auto is not None else None,
                   frozenset(replication) if replication is not None else None,
                   frozenset(allowed) if allowed is not None else None,
                   **{name: data[name] for name in _PLAIN_POLICIES if name in data})


# the policies kept in JSON as they are (a str, a bool or an int)
_PLAIN_POLICIES = ("schema_compatibility_strategy", "allow_auto_update_schema", "schema_validation_enforced",
                   "compaction_threshold")


@dataclass(frozen=True)
class GlobalPolicies:
    """A topic's global policies (Pulsar's topic policies with isGlobal, PIP-92): set on one cluster and meant
    to reach, with replication, every cluster of the topic's replication set, where they apply unless that
    cluster's local policy says otherwise. Only `replication_clusters` is set globally so far.

    `updated_ms` and `origin` (the cluster where the change was made) stamp the last change, a removal
    included: the policies are then empty but the stamp stays, so a late copy of what was removed cannot bring
    it back. A copy received from another cluster is applied only when it `supersedes` what is kept, so one
    applied twice, or after a newer one, changes nothing and every cluster ends with the same value."""
    policies: Policies = field(default_factory=Policies)
    updated_ms: int = 0  # 0 with origin "": never set
    origin: str = ""

    @property
    def stamp(self) -> Stamp:
        return Stamp(self.updated_ms, self.origin)

    def supersedes(self, other: GlobalPolicies) -> bool:
        """Whether this change is newer than `other` (Stamp.supersedes: a later time, or the same time from a
        cluster whose name sorts first). A change never supersedes itself."""
        return self.stamp.supersedes(other.stamp)

    def changed(self, origin: str, now_ms: int, **changes: Any) -> GlobalPolicies:
        """These policies with `changes` made on cluster `origin` at `now_ms`, stamped so that the result
        supersedes them even when `now_ms` is behind their time (Stamp.following)."""
        stamp = self.stamp.following(origin, now_ms)
        return GlobalPolicies(replace(self.policies, **changes), stamp.time_ms, stamp.origin)

    def to_json(self) -> dict[str, Any]:
        return {"policies": self.policies.to_json(), "updated_ms": self.updated_ms, "origin": self.origin}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GlobalPolicies:
        return cls(Policies.from_json(data.get("policies", {})), data.get("updated_ms", 0), data.get("origin", ""))


@dataclass(frozen=True)
class InForce:
    """A policy value in force for a topic and the level that set it ('broker', 'namespace', 'topic', or
    'topic (retention_time / max_partition_size)' where Fluvio's limits act as retention)."""
    value: Any
    level: str


@dataclass(frozen=True)
class EffectivePolicies:
    """Every policy in force for one topic, each with the level that set it.
    Immutable (a frozen dataclass): shared freely by threads."""
    retention: InForce
    message_ttl_ms: InForce  # value 0: no TTL
    backlog_quotas: Mapping[str, InForce]  # by type; only the types that have a quota
    deduplication: InForce  # value True or False
    compaction_threshold: InForce  # bytes; value 0: no compaction started by the backlog's size

    @classmethod
    def resolve(cls, broker: Policies, namespace: Policies, topic: Policies, *,
                retention_time: int | None, max_partition_size: int | None) -> EffectivePolicies:
        """Topic over namespace over broker. A topic's `retention_time` / `max_partition_size` act as its
        retention (-1 where unset) unless the topic sets a retention policy itself (docs/LIFECYCLE.md,
        Segment eviction)."""
        levels = (("topic", topic), ("namespace", namespace), ("broker", broker))
        if topic.retention is None and (retention_time is not None or max_partition_size is not None):
            retention = InForce(Retention(retention_time if retention_time is not None else -1,
                                          max_partition_size if max_partition_size is not None else -1),
                                "topic (retention_time / max_partition_size)")
        else:
            retention = next(InForce(p.retention, level) for level, p in levels if p.retention is not None)
        ttl = next(InForce(p.message_ttl_ms, level) for level, p in levels if p.message_ttl_ms is not None)
        quotas = {}
        for quota_type in QUOTA_TYPES:
            for level, p in levels:
                if p.backlog_quotas and quota_type in p.backlog_quotas:
                    quotas[quota_type] = InForce(p.backlog_quotas[quota_type], level)
                    break
        deduplication = next(InForce(p.deduplication, level) for level, p in levels if p.deduplication is not None)
        threshold = next(InForce(p.compaction_threshold, level) for level, p in levels
                         if p.compaction_threshold is not None)
        return cls(retention, ttl, quotas, deduplication, threshold)
