"""`log.admin`: tenants, namespaces and the policies of namespaces and topics, as pulsar-admin has them.

Answers use Pulsar's JSON names and units (retentionTimeInMinutes, retentionSizeInMB, seconds for TTLs),
so scripts written against pulsar-admin read the same figures. Every setter validates everything before it
changes anything: a refused call leaves the policies as they were."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from seglog._core._messages import Message
from seglog.admin import pulsar_stats
from seglog.admin.schemas import AdminSchemas
from seglog.admin.stats import explain_retention, internal_stats, replicated, topic_stats
from seglog.broker import check_partition_count
from seglog.catalog.clusters import (
    allowed_in_force,
    applied_replication,
    check_cluster_data,
    check_namespace,
    check_registered,
    check_tenant_keeps,
    check_topic,
    check_unused,
    cluster_names,
    clusters_in_force,
    leaves_topic,
)
from seglog.catalog.policies import (
    QUOTA_TYPES,
    AutoTopicCreation,
    BacklogQuota,
    GlobalPolicies,
    Policies,
    Retention,
    parse_compaction_threshold,
    parse_ttl,
)
from seglog.errors import (
    AlreadyExistsError,
    ConsumerBusyError,
    InvalidArgumentError,
    NotFoundError,
    TopicExistsError,
    TopicNotFoundError,
)
from seglog.names import NamespaceName, TopicName, validate_part
from seglog.storage.partition_view import MAX_OFFSET
from seglog.subscriptions.subscription import reading
from seglog.units import parse_duration

if TYPE_CHECKING:
    from seglog.broker import Broker
    from seglog.catalog.topics import TopicRef
    from seglog.lifecycle.maintenance import MaintenanceReport
    from seglog.subscriptions.subscription import Subscription


class Admin:
    """The admin API of an open log: `clusters`, `tenants`, `namespaces`, `topics` and `schemas`.

    Thread safety: it and its four parts may be shared by the threads of a process: each change is one
    metadata transaction. Every process's admin API reads and changes the same metadata, so a change made
    in one process is seen by the others; a subscription that another process consumes is left to it
    (acknowledgements and cursor resets of it return False)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.clusters = Clusters(broker)
        self.tenants = Tenants(broker)
        self.namespaces = Namespaces(broker)
        self.topics = Topics(broker)
        self.schemas = AdminSchemas(broker)

    def now_ms(self) -> int:
        """The log's clock, ms since the epoch (what reset-cursor --time counts back from)."""
        return self._broker.clock()

    def run_maintenance(self) -> MaintenanceReport:
        """Apply retention, TTL, backlog-quota eviction and segment eviction now (log.run_maintenance)."""
        return self._broker.run_maintenance()

    def metrics(self) -> str:
        """Every topic's stats in Prometheus' text format, with Pulsar's metric names and labels (what
        pulsar-admin broker-stats monitoring-metrics and a broker's /metrics give)."""
        from seglog.admin.metrics import prometheus_text  # prometheus_client costs `import seglog` ~35 ms
        return prometheus_text(self._broker)


class Clusters:
    """The clusters a data directory knows (Pulsar's ClusterData by name): the clusters tenants may use and
    namespaces and topics replicate to. `seglog serve --cluster NAME` registers its own.
    `log.admin.clusters`; shared by threads and processes as Admin is."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def create(self, name: str, data: Mapping[str, Any] | None = None, *, exist_ok: bool = False) -> None:
        """Register cluster `name` with its ClusterData: serviceUrl / serviceUrlTls (http:// / https://),
        brokerServiceUrl / brokerServiceUrlTls (pulsar:// / pulsar+ssl://), and the token replication
        authenticates with (authenticationPlugin 'token', authenticationParameters 'token:<JWT>' or
        'file:<path>'); AlreadyExistsError if it exists (unless `exist_ok`: then nothing changes)."""
        validate_part(name, kind="cluster name")
        self._broker.catalog.metadata.create_cluster(name, check_cluster_data(data), exist_ok=exist_ok)
        self._broker.catalog.policies_changed()

    def list(self) -> list[str]:
        """The names of the registered clusters."""
        return self._broker.catalog.metadata.clusters()

    def get(self, name: str) -> dict[str, Any]:
        """The cluster's ClusterData: every URL key (empty when not given), the authentication keys (None when
        not given) and the rest as given."""
        return self._broker.catalog.cluster_data(name)

    def update(self, name: str, data: Mapping[str, Any]) -> None:
        """Replace the cluster's ClusterData."""
        self._broker.catalog.metadata.set_cluster_config(validate_part(name, kind="cluster name"),
                                                         check_cluster_data(data))
        self._broker.catalog.policies_changed()

    def delete(self, name: str) -> None:
        """Forget a cluster nothing uses: ClusterInUseError naming the tenants (allowed clusters), namespaces
        (clusters, allowed clusters) and topics (replication clusters) that name it, or if it is this data
        directory's own cluster."""
        validate_part(name, kind="cluster name")
        catalog = self._broker.catalog
        metadata = catalog.metadata
        with metadata.transaction():
            if name not in metadata.clusters():
                raise NotFoundError(f"cluster {name} does not exist")
            check_unused(metadata, name, local_cluster=metadata.local_cluster())
            metadata.delete_cluster(name)
        catalog.policies_changed()


class Tenants:
    """The tenants (Pulsar's TenantInfo: allowed clusters and admin roles). `log.admin.tenants`; shared by
    threads and processes as Admin is."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def create(self, name: str, allowed_clusters: list[str] | None = None, *,
               admin_roles: list[str] | None = None) -> None:
        """Create a tenant. `allowed_clusters`: the registered clusters its namespaces may use (None or empty:
        every cluster); `admin_roles`: the roles that administer it (Pulsar's adminRoles). UnusableClusterError
        for a cluster not registered."""
        validate_part(name, kind="tenant name")
        config = self._config(allowed_clusters, admin_roles)
        metadata = self._broker.catalog.metadata
        with metadata.transaction():
            check_registered(metadata, config["allowed_clusters"] or (), "allowed_clusters",
                             local_cluster=metadata.local_cluster(), reachable=False)
            metadata.create_tenant(name, config)
        self._broker.catalog.policies_changed()

    def update(self, name: str, allowed_clusters: list[str] | None = None, *,
               admin_roles: list[str] | None = None) -> None:
        """Replace the tenant's allowed clusters and admin roles (Pulsar's tenants update). Refused with
        ClusterInUseError ("Active namespaces") when the new allowed clusters drop one that a namespace of the
        tenant uses (in its clusters or allowed clusters, or its own cluster for a local namespace)."""
        validate_part(name, kind="tenant name")
        config = self._config(allowed_clusters, admin_roles)
        metadata = self._broker.catalog.metadata
        with metadata.transaction():
            metadata.tenant_config(name)  # NotFoundError first
            local = metadata.local_cluster()
            check_registered(metadata, config["allowed_clusters"] or (), "allowed_clusters", local_cluster=local,
                             reachable=False)
            check_tenant_keeps(metadata, name, config["allowed_clusters"], local_cluster=local)
            metadata.set_tenant_config(name, config)
        self._broker.catalog.policies_changed()

    def _config(self, allowed_clusters: Any, admin_roles: Any) -> dict[str, Any]:
        if allowed_clusters is not None and (
                isinstance(allowed_clusters, str) or not isinstance(allowed_clusters, (list, tuple))
                or not all(isinstance(c, str) for c in allowed_clusters)):
            raise InvalidArgumentError("allowed_clusters", allowed_clusters, "a list of cluster names, or None")
        if admin_roles is not None and (isinstance(admin_roles, str) or not isinstance(admin_roles, (list, tuple))
                                        or not all(isinstance(r, str) for r in admin_roles)):
            raise InvalidArgumentError("admin_roles", admin_roles, "a list of role names, or None")
        clusters = None
        if allowed_clusters is not None:  # in the order given, each once
            clusters = list(dict.fromkeys(validate_part(c, kind="cluster name") for c in allowed_clusters))
        config: dict[str, Any] = {"allowed_clusters": clusters}
        if admin_roles:
            config["admin_roles"] = list(admin_roles)
        return config

    def list(self) -> list[str]:
        """The names of the tenants."""
        return self._broker.catalog.metadata.tenants()

    def get(self, name: str) -> dict[str, Any]:
        """{'adminRoles': [...], 'allowedClusters': [...] or None}, as pulsar-admin tenants get (None or []:
        every cluster)."""
        config = self._broker.catalog.metadata.tenant_config(validate_part(name, kind="tenant name"))
        return {"adminRoles": config.get("admin_roles", []), "allowedClusters": config.get("allowed_clusters")}

    def delete(self, name: str) -> None:
        """Delete an empty tenant (NotEmptyError while it has namespaces; 'public' always exists)."""
        self._broker.catalog.metadata.delete_tenant(validate_part(name, kind="tenant name"))


class PolicyLevel:
    """The policy getters and setters namespaces and topics share; subclasses say where policies live."""

    _broker: Broker

    def _read(self, name: str) -> Policies:
        raise NotImplementedError

    def _write(self, name: str, policies: Policies) -> None:
        raise NotImplementedError

    def _update(self, name: str, **changes: Any) -> None:
        self._write(name, replace(self._read(name), **changes))
        self._changed(name)

    def _changed(self, name: str) -> None:
        """Tell the catalog's listeners that the policies of `name` changed."""
        raise NotImplementedError

    def set_retention(self, name: str, *, size: Any, time: Any) -> None:
        """Retention of acknowledged messages: size ('10G', bytes as int, -1 no limit, 0) and time ('3h',
        seconds as int, -1 no limit, 0). Both are required; 0 with a limit is refused, as in Pulsar."""
        retention = Retention.parse(size=size, time=time)
        self._update(name, retention=retention)

    def get_retention(self, name: str) -> dict[str, int] | None:
        """{'retentionTimeInMinutes': .., 'retentionSizeInMB': ..} set at this level, or None."""
        retention = self._read(name).retention
        return retention.to_admin() if retention else None

    def remove_retention(self, name: str) -> None:
        self._update(name, retention=None)

    def set_message_ttl(self, name: str, seconds: Any) -> None:
        """Acknowledge messages unacknowledged for longer than this (seconds as int, or '2h'); 0: no TTL."""
        self._update(name, message_ttl_ms=parse_ttl(seconds))

    def get_message_ttl(self, name: str) -> int | None:
        """The TTL set at this level in seconds, or None."""
        ttl = self._read(name).message_ttl_ms
        return None if ttl is None else ttl // 1000

    def remove_message_ttl(self, name: str) -> None:
        self._update(name, message_ttl_ms=None)

    def set_backlog_quota(self, name: str, limit: Any = None, limit_time: Any = None,
                          policy: str = "producer_request_hold", type: str = "destination_storage") -> None:  # noqa: A002
        """A backlog quota: type 'destination_storage' with `limit` (bytes, '2G') or 'message_age' with
        `limit_time` (seconds, '1h'); policy 'producer_request_hold', 'producer_exception' or
        'consumer_backlog_eviction'."""
        quota = BacklogQuota.parse(type=type, limit=limit, limit_time=limit_time, policy=policy)
        quotas = dict(self._read(name).backlog_quotas or {})
        quotas[type] = quota
        self._update(name, backlog_quotas=quotas)

    def get_backlog_quotas(self, name: str) -> dict[str, dict[str, Any]]:
        """The quotas set at this level by type: {'destination_storage': {'limit': .., 'policy': ..},
        'message_age': {'limitTime': .., 'policy': ..}}."""
        return {t: q.to_admin() for t, q in (self._read(name).backlog_quotas or {}).items()}

    def set_deduplication(self, name: str, enabled: bool) -> None:
        """Pulsar's message deduplication: a server producer's message whose sequence id is not above the
        last one stored for its producer name is acknowledged and not stored again (docs/SERVER.md)."""
        if not isinstance(enabled, bool):
            raise InvalidArgumentError("enabled", enabled, "True or False")
        self._update(name, deduplication=enabled)

    def get_deduplication(self, name: str) -> bool | None:
        """Deduplication as set at this level, or None."""
        return self._read(name).deduplication

    def remove_deduplication(self, name: str) -> None:
        self._update(name, deduplication=None)

    def remove_backlog_quota(self, name: str, type: str = "destination_storage") -> None:  # noqa: A002
        if type not in QUOTA_TYPES:
            raise InvalidArgumentError("type", type, " or ".join(map(repr, QUOTA_TYPES)))
        quotas = dict(self._read(name).backlog_quotas or {})
        quotas.pop(type, None)
        self._update(name, backlog_quotas=quotas or None)

    def set_compaction_threshold(self, name: str, threshold: Any) -> None:
        """Pulsar's compaction threshold: a compaction starts once a topic's backlog not yet compacted reaches
        this size (bytes as an int, or '10M', '1 GB'); 0 never starts one by size."""
        self._update(name, compaction_threshold=parse_compaction_threshold(threshold))

    def get_compaction_threshold(self, name: str) -> int | None:
        """The compaction threshold set at this level in bytes, or None."""
        return self._read(name).compaction_threshold

    def remove_compaction_threshold(self, name: str) -> None:
        self._update(name, compaction_threshold=None)


class Namespaces(PolicyLevel):
    """The namespaces ('tenant/namespace'): their clusters, permissions and policies, which their topics
    inherit. `log.admin.namespaces`; shared by threads and processes as Admin is."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def create(self, name: str, *, clusters: Collection[str] | None = None,
               allowed_clusters: Collection[str] | None = None) -> None:
        """Create 'tenant/namespace' in an existing tenant, with its clusters and allowed clusters when given
        (checked as set_clusters and set_allowed_clusters check them; a refused one creates nothing). With
        neither, the namespace is local to this cluster."""
        namespace = NamespaceName.parse(name)
        policies = Policies(replication_clusters=None if clusters is None else cluster_names(clusters, "clusters"),
                            allowed_clusters=None if allowed_clusters is None
                            else cluster_names(allowed_clusters, "allowed_clusters"))
        metadata = self._broker.catalog.metadata
        with metadata.transaction():
            metadata.create_namespace(namespace, policies)  # the tenant's existence first; rolled back if refused
            local = metadata.local_cluster()
            check_namespace(metadata, namespace, policies, changed="clusters", local_cluster=local)
            check_namespace(metadata, namespace, policies, changed="allowed_clusters", local_cluster=local)
        self._broker.catalog.policies_changed()

    def list(self, tenant: str | None = None) -> list[str]:
        """Every namespace ('tenant/namespace'), or those of `tenant`."""
        if tenant is not None:
            validate_part(tenant, kind="tenant name")
        return self._broker.catalog.metadata.namespaces(tenant)

    def delete(self, name: str) -> None:
        """Delete an empty namespace (NotEmptyError while it has topics; 'public/default' always exists)."""
        self._broker.catalog.metadata.delete_namespace(NamespaceName.parse(name))

    def clear_backlog(self, name: str, subscription: str | None = None) -> None:
        """Acknowledge everything on every topic of the namespace, for one subscription or all."""
        prefix = f"{NamespaceName.parse(name)}/"
        for topic in self._broker.catalog.topic_names():
            if topic.startswith(prefix):
                _clear_backlog(self._broker, self._broker.topic(topic), subscription)

    def grant_permission(self, name: str, role: str, actions: Iterable[str]) -> None:
        """Let `role` produce and/or consume on every topic of the namespace (pulsar-admin namespaces
        grant-permission): `actions` from 'produce' and 'consume', replacing what the role had. A server
        with authentication enforces them (docs/SERVER.md, Security)."""
        checked = _actions(actions)
        self._broker.catalog.metadata.set_namespace_permission(NamespaceName.parse(name), _role(role), checked)

    def revoke_permission(self, name: str, role: str) -> bool:
        """Take every action on the namespace from `role` (pulsar-admin namespaces revoke-permission); whether
        it had any (a role without any is no error, as in Pulsar)."""
        return self._broker.catalog.metadata.remove_namespace_permission(NamespaceName.parse(name), _role(role))

    def permissions(self, name: str) -> Permissions:
        """{role: [actions]} granted on the namespace (pulsar-admin namespaces permissions)."""
        return self._broker.catalog.metadata.namespace_permissions(NamespaceName.parse(name))

    def policies(self, name: str) -> dict[str, Any]:
        """Pulsar's Policies of the namespace, with its field names (pulsar-admin namespaces policies; GET
        /admin/v2/namespaces/{tenant}/{namespace}): retention_policies, message_ttl_in_seconds,
        backlog_quota_map (Pulsar's BacklogQuota by type), replication_clusters, allowed_clusters,
        auth_policies (namespace_auth: the permissions; seglog has no topic or subscription ones),
        autoTopicCreationOverride and compaction_threshold. A policy not set is None: its default applies."""
        quotas = self.get_backlog_quotas(name)  # (first: NotFoundError for a namespace that does not exist)
        return {"retention_policies": self.get_retention(name), "message_ttl_in_seconds": self.get_message_ttl(name),
                "backlog_quota_map": {t: pulsar_backlog_quota(q) for t, q in quotas.items()},
                "replication_clusters": self.get_clusters(name), "allowed_clusters": self.get_allowed_clusters(name),
                "auth_policies": {"namespace_auth": self.permissions(name), "destination_auth": {},
                                  "subscription_auth_roles": {}},
                "autoTopicCreationOverride": self.get_auto_topic_creation(name),
                "compaction_threshold": self.get_compaction_threshold(name), "deleted": False}

    def set_auto_topic_creation(self, name: str, allowed: bool, topic_type: str = "non-partitioned",
                                partitions: int | None = None) -> None:
        """Whether `seglog serve` creates a missing topic of the namespace on first use, and as what
        (pulsar-admin namespaces set-auto-topic-creation): `topic_type` 'non-partitioned', or 'partitioned'
        with `partitions` (at least 1). Overrides the broker's allowAutoTopicCreation settings."""
        self._update(name, auto_topic_creation=AutoTopicCreation.parse(allowed=allowed, topic_type=topic_type,
                                                                       partitions=partitions))

    def get_auto_topic_creation(self, name: str) -> dict[str, Any] | None:
        """The namespace's override as Pulsar's AutoTopicCreationOverride JSON, or None."""
        override = self._read(name).auto_topic_creation
        return override.to_admin() if override is not None else None

    def remove_auto_topic_creation(self, name: str) -> None:
        """Remove the override: the broker's settings apply again."""
        self._update(name, auto_topic_creation=None)

    def set_clusters(self, name: str, clusters: Collection[str]) -> None:
        """The clusters the namespace's topics replicate among (pulsar-admin namespaces set-clusters): one or
        more registered clusters, each but this one with its URLs (else UnusableClusterError), allowed by the
        tenant (else ClusterNotAllowedError) and within the namespace's allowed clusters when it has them
        (else InvalidArgumentError), each error naming the cluster."""
        self._set_cluster_level(name, "clusters", cluster_names(clusters, "clusters"))

    def get_clusters(self, name: str) -> Names:
        """The namespace's clusters, sorted: those set, else this cluster (a local namespace; none before the
        data directory is served), as pulsar-admin namespaces get-clusters shows them."""
        return sorted(clusters_in_force(self._read(name), self._broker.catalog.local_cluster) or ())

    def set_allowed_clusters(self, name: str, clusters: Collection[str]) -> None:
        """The clusters the namespace's topics may reach at all (PIP-321; pulsar-admin namespaces
        set-allowed-clusters): checked as set_clusters checks clusters, and they must include every cluster of
        the namespace (InvalidArgumentError naming the one left out)."""
        self._set_cluster_level(name, "allowed_clusters", cluster_names(clusters, "allowed_clusters"))

    def get_allowed_clusters(self, name: str) -> Names:
        """The namespace's allowed clusters, sorted: those set, else its clusters (get_clusters)."""
        return sorted(allowed_in_force(self._read(name), self._broker.catalog.local_cluster) or ())

    def cascading_deletions(self, name: str, *, clusters: Collection[str] | None = None,
                            allowed_clusters: Collection[str] | None = None) -> dict[str, Names]:
        """What setting the namespace's clusters (or, given instead, its allowed clusters) would delete, when
        the clusters share their configuration (`seglog serve --configuration-store`, or synchronize it with
        `--configuration-sync-topic`): by each registered cluster the change leaves out of the namespace, the
        namespace's topics this cluster knows that it would delete (for a clusters change, not those a global
        replication policy listing it keeps, nor, on this cluster, those a local policy keeps). A cluster named
        also deletes any topic of the namespace that only it has. {} with independent stores, where a namespace
        change only stops replication."""
        if (clusters is None) == (allowed_clusters is None):
            raise InvalidArgumentError("clusters / allowed_clusters", None, "exactly one of them: the change asked "
                                       "about")
        namespace = NamespaceName.parse(name)
        policies = self._read(name)
        changed = (replace(policies, replication_clusters=cluster_names(clusters, "clusters")) if clusters is not None
                   else replace(policies, allowed_clusters=cluster_names(allowed_clusters, "allowed_clusters")))
        catalog = self._broker.catalog
        if catalog.configuration_store is None:
            return {}
        metadata = catalog.metadata
        topics = [TopicName.parse(topic) for topic in catalog.topic_names()
                  if TopicName.parse(topic).namespace_name == str(namespace)]
        deleted: dict[str, Names] = {}
        for cluster in metadata.clusters():
            if leaves_topic(policies, GlobalPolicies(), None, cluster) or \
                    not leaves_topic(changed, GlobalPolicies(), None, cluster):
                continue  # (the namespace kept it out before, or keeps it in)
            deleted[cluster] = [str(topic) for topic in topics if leaves_topic(
                changed, metadata.topic_global_policies(topic),
                metadata.topic_policies(topic) if cluster == catalog.local_cluster else None, cluster) is not None]
        return deleted

    def _set_cluster_level(self, name: str, changed: str, clusters: frozenset[str]) -> None:
        namespace = NamespaceName.parse(name)
        metadata = self._broker.catalog.metadata
        with metadata.transaction():
            policies = metadata.namespace_policies(namespace)
            policies = (replace(policies, replication_clusters=clusters) if changed == "clusters"
                        else replace(policies, allowed_clusters=clusters))
            check_namespace(metadata, namespace, policies, changed=changed, local_cluster=metadata.local_cluster())
            metadata.set_namespace_policies(namespace, policies)
        self._broker.catalog.policies_changed()

    def _read(self, name: str) -> Policies:
        return self._broker.catalog.metadata.namespace_policies(NamespaceName.parse(name))

    def _write(self, name: str, policies: Policies) -> None:
        self._broker.catalog.metadata.set_namespace_policies(NamespaceName.parse(name), policies)

    def _changed(self, name: str) -> None:
        self._broker.catalog.policies_changed()  # (any topic of the namespace may follow them)


class Topics(PolicyLevel):
    """The topics: their settings, policies, stats, subscriptions and replication clusters.
    `log.admin.topics`; shared by threads and processes as Admin is."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def create(self, topic: str, partitions: int = 1, **topic_config: Any) -> dict[str, Any]:
        """Create a topic (as log.create_topic: its tenant and namespace are made if needed); returns
        {'name': 'tenant/namespace/topic', 'partitions': N}."""
        ref = self._broker.create_topic(topic, partitions, topic_config)
        return {"name": str(ref.name), "partitions": ref.partitions}

    def delete(self, topic: str, force: bool = False) -> None:
        """Delete a topic and its data (see Log.delete_topic; TopicInUseError while used, unless `force`)."""
        self._broker.delete_topic(topic, force=force)

    def describe(self, topic: str) -> dict[str, Any]:
        """The topic's settings (as get_config), each partition's earliest and end offsets, its storage size,
        and the policies in force with their levels: `policies` as stats shows them (Pulsar's units), and
        `policiesInForce` exactly (ms and bytes)."""
        ref = self._broker.topic(topic)
        store = self._broker.store
        offsets = [{"partition": p, "earliestOffset": store.earliest_offset(ref.name, p),
                    "endOffset": store.end_offset(ref.name, p)} for p in range(ref.partitions)]
        stats = topic_stats(self._broker, ref)
        policies = self._broker.catalog.policies(ref)
        exact = {"retention": {"timeMs": policies.retention.value.time_ms,
                               "sizeBytes": policies.retention.value.size_bytes, "level": policies.retention.level},
                 "messageTtlMs": {"value": policies.message_ttl_ms.value, "level": policies.message_ttl_ms.level},
                 "backlogQuotas": {t: {"limit": q.value.limit, "policy": q.value.policy, "level": q.level}
                                   for t, q in policies.backlog_quotas.items()},
                 "compactionThreshold": {"value": policies.compaction_threshold.value,
                                         "level": policies.compaction_threshold.level}}
        return {"name": str(ref.name), "partitions": ref.partitions, **ref.config.to_admin(),
                "storageSize": stats["storageSize"], "partitionOffsets": offsets, "policies": stats["policies"],
                "policiesInForce": exact}

    def offsets(self, topic: str, *, read_compacted: bool = False, timestamp: int | None = None
                ) -> list[dict[str, int]]:
        """Each partition's offsets as a query engine plans a read of them: `earliestOffset` (where a reader from
        'earliest' starts: the compacted view's first message with `read_compacted`, or where the view stands for
        a log compacted by cleanup_policy=compact), `endOffset`, `compactionHorizon` (0 if never compacted; taken
        before the end offset, so a compaction after it is one a read notices) and, with `timestamp` (ms since
        the epoch), `offsetAtTimestamp`: the first offset whose timestamp is at or after it, the end offset if
        none is."""
        if not isinstance(read_compacted, bool):
            raise InvalidArgumentError("read_compacted", read_compacted, "True or False")
        if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0):
            raise InvalidArgumentError("timestamp", timestamp, "ms since the epoch, an int >= 0")
        ref = self._broker.topic(topic)
        store, verify = self._broker.store, self._broker.config.verify_crc
        offsets = []
        for partition in range(ref.partitions):
            with store.reader(ref.name, partition, "earliest", verify_crc=verify,
                              read_compacted=read_compacted) as reader:
                found = {"partition": partition, "compactionHorizon": reader.compacted_view.horizon(),
                         "earliestOffset": reader.offset, "endOffset": store.end_offset(ref.name, partition)}
            if timestamp is not None:
                found["offsetAtTimestamp"] = store.start_offset(ref.name, partition, {"timestamp": timestamp})
            offsets.append(found)
        return offsets

    def set_config(self, topic: str, **topic_config: Any) -> None:
        """Change topic settings (segment_size, retention_time, max_partition_size, retention_min_timestamp,
        ...); the rest keep their values. Validated as a whole before anything changes."""
        self._broker.set_topic_config(topic, topic_config)

    def get_config(self, topic: str) -> dict[str, Any]:
        """Every setting of the topic in force, by camelCase name (segmentSize, retentionTimeMs, ...): sizes in
        bytes, durations in ms, None for off."""
        return self._broker.topic(topic).config.to_admin()

    def stats(self, topic: str) -> dict[str, Any]:
        """The topic's stats (Topic.stats): storage, backlog per subscription, policies in force, backlog
        quotas' usage, and `replication`, the replication cursors' backlogs per remote cluster."""
        return topic_stats(self._broker, self._broker.topic(topic))

    def partitioned_stats(self, topic: str, *, per_partition: bool = False) -> dict[str, Any]:
        """Pulsar's PartitionedTopicStats of a topic of several partitions (pulsar-admin topics
        partitioned-stats): its TopicStats, every partition together, with `metadata` {'partitions': N} and,
        with `per_partition`, each partition's TopicStats under `partitions` by its Pulsar name
        ('persistent://tenant/namespace/topic-partition-N'). NotFoundError for a topic of one partition
        (non-partitioned in Pulsar: see `stats`). Producers and replicators are a server's: the publishers
        are [] and the replication section shows the replication cursors' backlogs."""
        return pulsar_stats.partitioned_stats(self._broker, self._broker.topic(topic), per_partition=per_partition)

    def internal_stats(self, topic: str) -> dict[str, Any]:
        return internal_stats(self._broker, self._broker.topic(topic))

    def compact(self, topic: str) -> dict[str, Any]:
        """Compact the topic now, Pulsar's model (docs/LIFECYCLE.md, Compaction): each partition's compacted
        view then holds each key's latest message up to the end offset it had; the log itself is unchanged.
        Returns what was done per partition (horizon, messages read, kept, removed); CompactionRunningError
        while another compaction of the topic runs. `compaction_status` says how the last one went."""
        outcomes = self._broker.compactor.compact(self._broker.topic(topic))
        return {"partitions": [{"partition": p, "horizon": o.horizon, "read": o.read, "kept": o.kept,
                                "removed": o.removed, "durationMs": o.duration_ms} for p, o in enumerate(outcomes)]}

    def compaction_status(self, topic: str) -> dict[str, Any]:
        """Pulsar's compaction status of the topic: {"status": NOT_RUN | RUNNING | SUCCESS | ERROR,
        "lastError": text, "" unless ERROR}, for compactions asked of this process."""
        return self._broker.compactor.status(self._broker.topic(topic)).to_admin()

    def explain_retention(self, topic: str) -> dict[str, Any]:
        """Why each segment is kept, or which rule deletes it next and when (see retention.py)."""
        return explain_retention(self._broker, self._broker.topic(topic))

    def clear_backlog(self, topic: str, subscription: str | None = None) -> None:
        _clear_backlog(self._broker, self._broker.topic(topic), subscription)

    def update_partitions(self, topic: str, partitions: int) -> None:
        """Give the topic more partitions, never fewer (pulsar-admin topics update-partitioned-topic); see
        Log.update_partitions (refused while producers or consumers use it)."""
        self._broker.update_partitions(topic, partitions)

    def subscriptions(self, topic: str) -> list[str]:
        """The names of the topic's subscriptions, sorted (pulsar-admin topics subscriptions)."""
        return sorted(self._broker.subscriptions.names(self._broker.topic(topic)))

    def create_subscription(self, topic: str, subscription: str,
                            offsets: Mapping[int, int] | str = "latest") -> None:
        """Create `subscription` at 'latest' (Pulsar's default: only messages written from now on are
        delivered), 'earliest', or with its cursor at `offsets` ({partition: offset}, every partition), as
        pulsar-admin topics create-subscription --messageId does: messages before count as acknowledged.
        AlreadyExistsError if it exists."""
        t = self._broker.topic(topic)
        registry = self._broker.subscriptions
        if subscription in registry.names(t):
            raise AlreadyExistsError(f"subscription {subscription} of {t} already exists")
        if isinstance(offsets, str) and offsets in ("earliest", "latest"):
            registry.create(t, subscription, offsets)
            return
        positions = _cursor_offsets(self._broker, t, offsets, every_partition=True, written_only=False)
        registry.create(t, subscription, "earliest")
        self.reset_cursor(topic, subscription, positions)

    def unsubscribe(self, topic: str, subscription: str, force: bool = False) -> None:
        """Delete the subscription (pulsar-admin topics unsubscribe): its backlog no longer keeps messages.
        Refused with ConsumerBusyError while it has consumers; with `force`, those of this process are
        closed first. Consumers in another process are never closed from here (there is no broker to
        disconnect them): refused even with `force`."""
        t = self._subscribed_topic(topic, subscription)
        registry = self._broker.subscriptions
        live = registry.live(t, subscription)
        if live is not None and live.consumers:
            if not force:
                raise ConsumerBusyError(f"subscription {subscription} of {t.name} has {len(live.consumers)} "
                                        "consumer(s) in this process; close them, or unsubscribe with force")
            for consumer in list(live.consumers):
                consumer.disconnect()
        with self._changing(t, subscription) as changed:
            registry.unsubscribe(changed)

    def reset_cursor_to_time(self, topic: str, subscription: str, timestamp: int) -> bool:
        """Move the cursor of every partition to its first message whose timestamp is >= `timestamp` (ms
        since the epoch), as pulsar-admin topics reset-cursor --time does; see reset_cursor."""
        t = self._broker.topic(topic)
        if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp <= MAX_OFFSET:
            raise InvalidArgumentError("timestamp", timestamp, f"ms since the epoch, an int from 0 to {MAX_OFFSET}")
        store = self._broker.store
        return self.reset_cursor(topic, subscription, {p: store.start_offset(t.name, p, {"timestamp": timestamp})
                                                       for p in range(t.partitions)})

    def skip(self, topic: str, subscription: str, count: int) -> int:
        """Acknowledge the `count` oldest unacknowledged messages of each partition (pulsar-admin topics
        skip -n); returns how many were skipped in all. ConsumerBusyError while another process consumes
        the subscription (skip there)."""
        t = self._subscribed_topic(topic, subscription)
        _check_count(count)
        with self._changing(t, subscription) as changed:
            return sum(changed.skip(p, count) for p in range(t.partitions))

    def expire_messages(self, topic: str, subscription: str, seconds: Any) -> int:
        """Acknowledge the messages older than `seconds` (an int, or a duration such as '1h'), by their
        timestamps, as the message TTL does and pulsar-admin topics expire-messages -t; they count as
        expired in stats. Returns how many were unacknowledged. ConsumerBusyError while another process
        consumes the subscription."""
        t = self._subscribed_topic(topic, subscription)
        older_than = self._broker.clock() - parse_duration(seconds, argument="expire time", unit="s")
        store = self._broker.store
        with self._changing(t, subscription) as changed:
            return sum(changed.skip_to(p, store.start_offset(t.name, p, {"timestamp": max(older_than, 0)}),
                                       counter="expired")
                       for p in range(t.partitions))

    def peek_messages(self, topic: str, subscription: str, count: int = 1) -> list[Message]:
        """The next `count` messages of each partition that the subscription has not acknowledged, without
        acknowledging them (pulsar-admin topics peek-messages -n): by its cursor in this process, else as
        last persisted (a process consuming it may have acknowledged more since)."""
        t = self._subscribed_topic(topic, subscription)
        _check_count(count)
        record, live = next((record, live) for name, record, live in self._broker.subscriptions.states(t)
                            if name == subscription)
        messages: list[Message] = []
        for p in range(t.partitions):
            acks = record.partitions[p].acks
            taken: list[Message] = []
            with self._broker.store.reader(t.name, p, acks.floor, verify_crc=self._broker.config.verify_crc) as reader:
                while len(taken) < count and (batch := reader.read_messages(count - len(taken))):
                    with reading(live):
                        taken += [m for m in batch if not acks.is_acked(m.offset)]
            messages += taken
        return messages

    def set_replicated_subscription_status(self, topic: str, subscription: str, enabled: bool, *,
                                           partition: int | None = None) -> None:
        """Whether the subscription's position is replicated to the topic's other clusters (Pulsar's replicated
        subscriptions, PIP-33; pulsar-admin topics set-replicated-subscription-status): on every partition, or
        on `partition` of a topic of several (Pulsar's partition `NAME-partition-N`). A consumer asking for it
        (pulsar-client's replicate_subscription_state_enabled) enables it too. Enabling is refused while
        broker.conf has enableReplicatedSubscriptions=false. NotFoundError for a subscription the topic does
        not have; ConsumerBusyError while another process consumes it (set it there)."""
        t = self._subscribed_topic(topic, subscription)
        if not isinstance(enabled, bool):
            raise InvalidArgumentError("enabled", enabled, "True or False")
        partitions = _named_partitions(t, partition)
        if enabled and not self._broker.config.enable_replicated_subscriptions:
            raise InvalidArgumentError("enabled", enabled, "False", detail="replicated subscriptions are disabled "
                                       "on this cluster (broker.conf enableReplicatedSubscriptions=false)")
        with self._changing(t, subscription) as changed:
            changed.set_replicated(partitions, enabled)

    def get_replicated_subscription_status(self, topic: str, subscription: str, *,
                                           partition: int | None = None) -> dict[str, bool]:
        """Whether the subscription's position is replicated, by partition as Pulsar names them and answers
        GET replicatedSubscriptionStatus: {'persistent://tenant/ns/topic': bool} for a topic of one partition,
        {'persistent://tenant/ns/topic-partition-N': bool, ...} for each partition of one of several (or for
        `partition` alone). False while broker.conf disables replicated subscriptions."""
        t = self._subscribed_topic(topic, subscription)
        partitions = _named_partitions(t, partition)
        record = next(record for name, record, _ in self._broker.subscriptions.states(t) if name == subscription)
        return {t.pulsar_name(p): replicated(self._broker, record.partitions[p]) for p in partitions}

    def _subscribed_topic(self, topic: str, subscription: str) -> TopicRef:
        """The topic, if it has the subscription; NotFoundError naming those it has otherwise."""
        t = self._broker.topic(topic)
        names = self._broker.subscriptions.names(t)
        if subscription not in names:
            raise NotFoundError(f"subscription {subscription} of {t} does not exist (it has "
                                f"{', '.join(sorted(names)) or 'none'})")
        return t

    @contextmanager
    def _changing(self, t: TopicRef, subscription: str) -> Iterator[Subscription]:
        """The subscription to change: this process's, or the persisted one, locked meanwhile.
        ConsumerBusyError while another process consumes it: that process owns its cursor."""
        with self._broker.subscriptions.modify(t, subscription) as changed:
            if changed is None:
                raise ConsumerBusyError(f"subscription {subscription} of {t.name} is consumed by another "
                                        "process; change it there, or once it stopped")
            yield changed

    def reset_cursor(self, topic: str, subscription: str, offsets: Mapping[int, int]) -> bool:
        """Move the cursor of each partition given to its offset, as pulsar-admin topics reset-cursor does:
        messages from it on are unacknowledged, those before it acknowledged; an offset past the end is the
        end (as a consumer's seek). Returns False, changing nothing, while another process consumes the
        subscription."""
        return self._move_cursor(topic, subscription, offsets, lambda live, p, o: live.seek(p, o), written_only=False)

    def ack_cumulative(self, topic: str, subscription: str, offsets: Mapping[int, int]) -> bool:
        """Acknowledge every message of each partition given up to and including its offset, as a consumer's
        cumulative ack would, without attaching a consumer (so the subscription keeps its type). A cursor
        already past an offset stays where it is. Returns False, changing nothing, while another process
        consumes the subscription (it acknowledges there)."""
        return self._move_cursor(topic, subscription, offsets, lambda live, p, o: live.skip_to(p, o + 1),
                                 written_only=True)

    def _move_cursor(self, topic: str, subscription: str, offsets: Mapping[int, int],
                     move: Callable[[Any, int, int], Any], *, written_only: bool) -> bool:
        t = self._subscribed_topic(topic, subscription)
        positions = _cursor_offsets(self._broker, t, offsets, every_partition=False, written_only=written_only)
        with self._broker.subscriptions.modify(t, subscription) as live:
            if live is None:
                return False
            for partition, offset in positions.items():
                move(live, partition, offset)  # each marks the subscription dirty if it changed anything
        return True

    def set_replication_clusters(self, topic: str, clusters: Collection[str], *, is_global: bool = False) -> None:
        """The clusters the topic replicates among, over its namespace's (pulsar-admin topics
        set-replication-clusters): a local policy (this cluster only, which it must include), or with
        `is_global` a global one (meant for every cluster of the set, stamped so a copy replicated later
        applies once). One or more registered clusters, each but this one with its URLs (else
        UnusableClusterError), within the namespace's allowed clusters (else InvalidArgumentError), each
        error naming the cluster."""
        name = TopicName.parse(topic)
        given = cluster_names(clusters, "clusters")
        catalog = self._broker.catalog
        metadata = catalog.metadata
        with metadata.transaction():
            local_policies = metadata.topic_policies(name)  # TopicNotFoundError first
            local = metadata.local_cluster()
            check_topic(metadata, metadata.namespace_policies(name.namespace_name), given, is_global=is_global,
                        local_cluster=local)
            if is_global:
                stamped = metadata.topic_global_policies(name).changed(local or "", self._broker.clock(),
                                                                       replication_clusters=given)
                metadata.set_topic_global_policies(name, stamped)
            else:
                metadata.set_topic_policies(name, replace(local_policies, replication_clusters=given))
        catalog.policies_changed(name)

    def get_replication_clusters(self, topic: str, *, applied: bool = False,
                                 is_global: bool = False) -> list[str] | None:
        """The topic's local (or with `is_global`, global) replication clusters, sorted, or None when unset;
        with `applied`, the set in force on this cluster whichever level set it: local, else global, else the
        namespace's clusters (`is_global` aside)."""
        name = TopicName.parse(topic)
        catalog = self._broker.catalog
        metadata = catalog.metadata
        local_policies, global_policies = metadata.topic_policies(name), metadata.topic_global_policies(name)
        if applied:
            return sorted(applied_replication(local_policies, global_policies,
                                              metadata.namespace_policies(name.namespace_name),
                                              catalog.local_cluster))
        clusters = (global_policies.policies if is_global else local_policies).replication_clusters
        return sorted(clusters) if clusters is not None else None

    def remove_replication_clusters(self, topic: str, *, is_global: bool = False) -> None:
        """Remove the topic's local (or global) replication clusters: the next level applies again. A removed
        global policy keeps its stamp, so a copy of what it was, replicated later, does not bring it back."""
        name = TopicName.parse(topic)
        catalog = self._broker.catalog
        metadata = catalog.metadata
        with metadata.transaction():
            local_policies = metadata.topic_policies(name)  # TopicNotFoundError first
            if is_global:
                stamped = metadata.topic_global_policies(name).changed(metadata.local_cluster() or "",
                                                                       self._broker.clock(),
                                                                       replication_clusters=None)
                metadata.set_topic_global_policies(name, stamped)
            else:
                metadata.set_topic_policies(name, replace(local_policies, replication_clusters=None))
        catalog.policies_changed(name)

    def receive_global_policies(self, topic: str, received: GlobalPolicies, partitions: int) -> str:
        """Global policies another cluster replicated for `topic`, which had `partitions` there (Pulsar's
        replicated topic policies, PIP-92 / PIP-422): applied when newer than those kept (else 'stale');
        then, where they leave this cluster out of the topic's applied replication set, the topic is deleted
        here with its partitions and subscriptions (Pulsar's cascading deletion: 'deleted'), the global
        policies kept (they refuse clients that ask for the topic here); a topic this cluster does not have
        yet and is meant to is created first with the partition count (as Pulsar makes the remote's
        partitioned topic: 'created'); one it does not have and is not meant to is left absent, the policies
        kept if newer ('absent'). Otherwise 'applied'."""
        name = TopicName.parse(topic)
        check_partition_count(partitions, minimum=1)
        catalog = self._broker.catalog
        local = catalog.local_cluster
        if local is None:
            raise InvalidArgumentError("local cluster", None, "a data directory served as a cluster (seglog serve "
                                       "--cluster NAME): replicated policies name clusters")
        clusters = received.policies.replication_clusters
        outcome = "applied"
        try:
            catalog.topic(name)
        except TopicNotFoundError:
            if clusters is not None and local not in clusters:
                catalog.apply_global_topic_policies(name, received)
                return "absent"
            try:
                self._broker.create_topic(str(name), partitions, {})
            except TopicExistsError:
                pass  # (made meanwhile by a producer)
            outcome = "created"
        if not catalog.apply_global_topic_policies(name, received):
            return "stale"
        if local not in catalog.replication_clusters(name, local):
            self._broker.delete_topic(str(name), force=True, keep_global_policies=True)
            return "deleted"
        return outcome

    def list_with_settings(self) -> list[dict[str, Any]]:
        """Every topic's name, partitions and settings (as get_config gives them), sorted by name (a topic
        deleted while they are read, as a cascading deletion may, is left out)."""
        listed = []
        for name in self.list():
            try:
                ref = self._broker.topic(name)
            except TopicNotFoundError:
                continue
            listed.append({"name": str(ref.name), "partitions": ref.partitions, **ref.config.to_admin()})
        return listed

    # after every method annotated with list[...]: in the class, `list` is this method from here on

    def list(self) -> list[str]:
        """Full names ('tenant/namespace/topic') of every topic, sorted."""
        self._broker.check_open()
        return self._broker.catalog.topic_names()

    def _read(self, name: str) -> Policies:
        return self._broker.catalog.metadata.topic_policies(TopicName.parse(name))

    def _write(self, name: str, policies: Policies) -> None:
        self._broker.catalog.metadata.set_topic_policies(TopicName.parse(name), policies)

    def _changed(self, name: str) -> None:
        self._broker.catalog.policies_changed(TopicName.parse(name))


ACTIONS = ("produce", "consume")  # what a namespace permission may grant, in the order they are listed
Permissions = dict[str, list[str]]  # {role: [actions]} (named here: in Namespaces, `list` is a method)
Names = list[str]  # cluster names, sorted (named here for the same reason)


def pulsar_backlog_quota(quota: Mapping[str, Any]) -> dict[str, Any]:
    """A backlog quota as get_backlog_quotas gives it ({'limit' | 'limitTime', 'policy'}) as Pulsar's
    BacklogQuota: limitSize and limitTime, -1 for the one its type does not use."""
    return {"limitSize": quota.get("limit", -1), "limitTime": quota.get("limitTime", -1), "policy": quota["policy"]}


def _role(role: Any, argument: str = "role") -> str:
    """A role name: the subject of a client's token. Any text without commas (lists of roles are
    comma-separated) and without spaces at either end."""
    if not isinstance(role, str) or not role or role != role.strip() or "," in role:
        raise InvalidArgumentError(argument, role, "a role name (a token's subject): text without commas and "
                                   "without spaces at either end")
    return role


def _actions(actions: Any) -> list[str]:
    """Namespace actions, each once, as ACTIONS orders them."""
    given = [actions] if isinstance(actions, str) else actions
    accepted = f"one or more of {', '.join(map(repr, ACTIONS))}"
    if not isinstance(given, Iterable):
        raise InvalidArgumentError("actions", actions, accepted)
    given = list(given)
    if not given or any(action not in ACTIONS for action in given):
        raise InvalidArgumentError("actions", actions, accepted)
    return [action for action in ACTIONS if action in given]


def _named_partitions(topic: TopicRef, partition: Any) -> range:
    """Every partition of the topic for None, else `partition` of a topic of several: Pulsar names the
    partitions of partitioned topics only."""
    if partition is None:
        return range(topic.partitions)
    if topic.partitions == 1:
        raise InvalidArgumentError("partition", partition, f"none: {topic.name} has one partition (Pulsar's "
                                   "non-partitioned topic)")
    return range(topic.check_partition(partition), partition + 1)


def _check_count(count: Any) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidArgumentError("count", count, "a number of messages, an int >= 1")


def _cursor_offsets(broker: Broker, topic: TopicRef, offsets: object, *, every_partition: bool,
                    written_only: bool) -> dict[int, int]:
    """{partition: offset} checked against the topic: existing partitions, offsets from 0 below the end
    offset where `written_only` (an acknowledged message must exist), else any position (Subscription.seek
    takes one past the end as the end)."""
    partitions = range(topic.partitions)
    bound = "below the end offset" if written_only else f"to {MAX_OFFSET} (past the end: the end)"
    accepted = (f"{{partition: offset}} for {'every partition' if every_partition else 'partitions'} of "
                f"{topic.name} ({', '.join(map(str, partitions))}), offsets from 0 {bound}")
    if not isinstance(offsets, Mapping) or not offsets or (every_partition and set(offsets) != set(partitions)):
        raise InvalidArgumentError("offsets", offsets, accepted)
    for partition, offset in offsets.items():
        if partition not in partitions or isinstance(offset, bool) or not isinstance(offset, int) \
                or not 0 <= offset <= (broker.store.end_offset(topic.name, partition) - 1 if written_only
                                       else MAX_OFFSET):
            raise InvalidArgumentError("offsets", offsets, accepted)
    return dict(offsets)


def _clear_backlog(broker: Broker, ref: TopicRef, subscription: str | None) -> None:
    """Acknowledge every message written so far, on one subscription or all (Pulsar's clear-backlog)."""
    registry = broker.subscriptions
    names = registry.names(ref)
    if subscription is not None and subscription not in names:
        raise InvalidArgumentError("subscription", subscription, f"a subscription of {ref}: "
                                   f"{', '.join(names) or 'it has none'}")
    for name in names if subscription is None else [subscription]:
        with registry.modify(ref, name) as live:
            if live is None:
                raise InvalidArgumentError("subscription", name, "a subscription not consumed by another "
                                           "process (clear its backlog there)")
            for partition in range(ref.partitions):
                live.skip_to(partition, broker.store.end_offset(ref.name, partition))


__all__ = ["ACTIONS", "Admin", "PolicyLevel", "pulsar_backlog_quota"]
