"""Topics as the services below the facade take them: a frozen TopicRef (name, partitions, settings resolved
against the broker's defaults), and the Catalog that makes them and resolves the policies in force."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seglog.catalog.clusters import allowed_in_force, applied_replication, full_cluster_data, leaves_topic
from seglog.catalog.config import BrokerConfig, TopicConfig
from seglog.catalog.metadata import Metadata, TopicRecord
from seglog.catalog.policies import AutoTopicCreation, EffectivePolicies, GlobalPolicies, Policies
from seglog.errors import ClosedError, InvalidArgumentError, NotFoundError, TopicNotFoundError
from seglog.names import NamespaceName, TopicName, validate_part


@dataclass(frozen=True)
class TopicRef:
    """One topic as the catalog had it when the reference was made. A reference made before
    log.update_partitions keeps the partition count it was made with."""
    name: TopicName
    partitions: int
    config: TopicConfig

    def __str__(self) -> str:
        return str(self.name)

    def pulsar_name(self, partition: int) -> str:
        """Partition `partition` as Pulsar names it: `persistent://tenant/namespace/topic-partition-N` on a topic
        of several partitions (Pulsar's partitioned topic), `persistent://tenant/namespace/topic` on one of one."""
        return f"persistent://{self.name}-partition-{partition}" if self.partitions > 1 else f"persistent://{self.name}"

    def check_partition(self, partition: Any) -> int:
        """`partition` if the topic has it; InvalidArgumentError naming the partitions it has otherwise."""
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < self.partitions:
            raise InvalidArgumentError("partition", partition, f"an int from 0 to {self.partitions - 1}")
        return partition


class Catalog:
    """Tenants, namespaces, topics and policies of one data directory (`metadata`, SQLite), read as values.

    `policies_changed()` tells the listeners (the quota guards, the replication service) that policies, topic
    settings, clusters or tenants changed, here or, as the housekeeper finds, in another process; given the
    topic whose own policies or settings changed, it tells them which one, so that they look at that topic
    only (on_topic_policies_changed): a change to one topic costs the same with 10 or 10,000 topics."""

    def __init__(self, metadata: Metadata, config: BrokerConfig) -> None:
        self._metadata = metadata
        self.config = config
        self._topic_listeners: list[Callable[[TopicName | None], None]] = []
        self._created_listeners: list[Callable[[TopicRef], None]] = []
        self._configuration_store: str | None = None
        self._closed = False

    @property
    def metadata(self) -> Metadata:
        """The store itself (ClosedError once closed), for the admin API's tenant and namespace calls."""
        if self._closed:
            raise ClosedError(f"log {self._metadata.path.parent} is closed")
        return self._metadata

    def topic_names(self) -> list[str]:
        """Full names of every topic, sorted."""
        return self.metadata.list_topics()

    def topic(self, name: str | TopicName) -> TopicRef:
        """The topic `name` as it is now; TopicNotFoundError if there is none."""
        return self._ref(self.metadata.topic(name if isinstance(name, TopicName) else TopicName.parse(name)))

    def _ref(self, record: TopicRecord) -> TopicRef:
        return TopicRef(record.name, record.partitions, self.config.topic_defaults.restored(record.config))

    def policies(self, ref: TopicRef) -> EffectivePolicies:
        """The retention, TTL and backlog quotas in force on a topic, each with the level that set it."""
        return EffectivePolicies.resolve(self.config.policies(),
                                         self.metadata.namespace_policies(ref.name.namespace_name),
                                         self.metadata.topic_policies(ref.name),
                                         retention_time=ref.config.retention_time,
                                         max_partition_size=ref.config.max_partition_size)

    def auto_topic_creation(self, namespace: NamespaceName | str) -> AutoTopicCreation:
        """Whether and how `seglog serve` creates a missing topic of `namespace` that a client names: the
        namespace's override, else the broker's setting (broker.conf allowAutoTopicCreation...)."""
        override = self.metadata.namespace_policies(namespace).auto_topic_creation
        return override or self.config.policies().auto_topic_creation or AutoTopicCreation()

    # geo-replication (catalog/clusters.py; docs/SERVER.md, "Geo-replication: clusters and policies")

    @property
    def local_cluster(self) -> str | None:
        """The cluster this data directory is (the first `seglog serve --cluster NAME` that served); None before."""
        return self.metadata.local_cluster()

    def record_local_cluster(self, name: str) -> None:
        """Make `name` this data directory's cluster when it has none (`seglog serve --cluster NAME`);
        InvalidArgumentError naming both when it is another cluster already: a cluster's name never changes."""
        self.metadata.record_local_cluster(validate_part(name, kind="cluster name"))

    def check_local_cluster(self, name: str) -> None:
        """Refuse `name` as record_local_cluster would (InvalidArgumentError naming both when the data directory
        is another cluster already), recording nothing: `seglog serve` checks before its ports open and records
        only once they serve."""
        recorded = self.local_cluster
        if recorded is not None and recorded != validate_part(name, kind="cluster name"):
            self.metadata.record_local_cluster(name)  # (refused, with the one message saying why; writes nothing)

    @property
    def configuration_store(self) -> str | None:
        """The shared configuration store this catalog mirrors (`seglog serve --configuration-store`), or the
        topic it is synchronized through (`--configuration-sync-topic`, as `persistent://...`); None when its
        clusters, tenants and namespaces are its own (independent stores)."""
        return self._configuration_store

    def share_configuration(self, store: str) -> None:
        """The clusters, tenants, namespaces and partitioned topics here mirror the shared store `store` from
        now on (replication/config_store.py, or config_sync.py through a topic, keeps them so): a namespace
        change then deletes topics on the clusters it leaves out (Namespaces.cascading_deletions says which)."""
        self._configuration_store = store

    def replication_clusters(self, name: TopicName, local_cluster: str) -> frozenset[str]:
        """The clusters topic `name` replicates among, seen from `local_cluster`: its local topic policy, else
        its global topic policy, else its namespace's clusters, else {local_cluster} (a local namespace). The
        local cluster is in it when the set lists it (a policy may leave it out: a global policy that does
        has this cluster drop the topic). TopicNotFoundError if there is no such topic."""
        metadata = self.metadata
        return applied_replication(metadata.topic_policies(name), metadata.topic_global_policies(name),
                                   metadata.namespace_policies(name.namespace_name), local_cluster)

    def topic_with_replication(self, name: TopicName,
                               local_cluster: str) -> tuple[TopicRef, GlobalPolicies, frozenset[str]]:
        """Topic `name` with its global policies and its replication set seen from `local_cluster`
        (replication_clusters), for a look at the one topic that changed. TopicNotFoundError if there is none."""
        metadata = self.metadata
        ref = self._ref(metadata.topic(name))
        global_ = metadata.topic_global_policies(name)
        return ref, global_, applied_replication(metadata.topic_policies(name), global_,
                                                 metadata.namespace_policies(name.namespace_name), local_cluster)

    def topics_with_replication(self, local_cluster: str) -> list[tuple[TopicRef, GlobalPolicies, frozenset[str]]]:
        """Every topic, sorted by name, with its global policies and its replication set seen from
        `local_cluster` (replication_clusters), read at once: a look over every topic (the replication
        service's, after a change that may reach any topic) takes one query and one a namespace, not five a
        topic."""
        metadata = self.metadata
        namespaces: dict[str, Policies] = {}
        found = []
        for record, local, global_ in metadata.topics_with_policies():
            namespace = record.name.namespace_name
            if namespace not in namespaces:
                namespaces[namespace] = metadata.namespace_policies(namespace)
            found.append((self._ref(record), global_,
                          applied_replication(local, global_, namespaces[namespace], local_cluster)))
        return found

    def left_out(self, name: TopicName, local_cluster: str) -> str | None:
        """Why `local_cluster` must not hold topic `name`, here or not (leaves_topic), or None when it may: it
        is outside the allowed clusters of its namespace, or outside its applied replication set (a global
        policy is kept after the topic went; a local one only while it is here). None when the namespace does
        not exist."""
        metadata = self.metadata
        try:
            namespace = metadata.namespace_policies(name.namespace_name)
        except NotFoundError:
            return None
        try:
            local = metadata.topic_policies(name)
        except TopicNotFoundError:
            local = Policies()
        return leaves_topic(namespace, metadata.topic_global_policies(name), local, local_cluster)

    def allowed_clusters(self, namespace: NamespaceName | str, local_cluster: str) -> frozenset[str]:
        """The clusters the topics of `namespace` may reach, seen from `local_cluster`: its allowed clusters,
        else its clusters, else {local_cluster}. NotFoundError if there is no such namespace."""
        return allowed_in_force(self.metadata.namespace_policies(namespace), local_cluster) or frozenset()

    def cluster_data(self, name: str) -> dict[str, Any]:
        """Cluster `name`'s ClusterData with Pulsar's keys: serviceUrl, serviceUrlTls, brokerServiceUrl,
        brokerServiceUrlTls ('' when not given), peerClusterNames, authenticationPlugin and
        authenticationParameters (None when not given), and any other key as registered. NotFoundError if
        it is not registered."""
        return full_cluster_data(self.metadata.cluster_config(validate_part(name, kind="cluster name")))

    def global_topic_policies(self, name: TopicName) -> GlobalPolicies:
        """Topic `name`'s global policies with their stamp (what replication sends to the other clusters)."""
        return self.metadata.topic_global_policies(name)

    def apply_global_topic_policies(self, name: TopicName, received: GlobalPolicies) -> bool:
        """Take global policies received from another cluster if they supersede those kept (a newer stamp),
        unchecked, as Pulsar applies replicated topic policies; whether they did. Applying the same ones
        again, or older ones, changes nothing. The topic need not be here (a cluster they leave out keeps
        them)."""
        metadata = self.metadata
        with metadata.transaction():
            if not received.supersedes(metadata.topic_global_policies(name)):
                return False
            metadata.set_topic_global_policies(name, received)
        self.policies_changed(name)
        return True

    def on_topic_policies_changed(self, listener: Callable[[TopicName | None], None]) -> None:
        """Call `listener` after every change policies_changed is told of, with the topic whose own policies
        or settings changed, or None when the change may reach any topic (a namespace's, tenant's, cluster's
        or the broker's, or one the caller does not name), in the changing thread."""
        self._topic_listeners.append(listener)

    def on_topic_created(self, listener: Callable[[TopicRef], None]) -> None:
        """Call `listener` with each topic this process creates, in the creating thread, before the creation
        returns (the replication service makes the topic's replication cursors then, so nothing written to
        it is missed)."""
        self._created_listeners.append(listener)

    def topic_created(self, ref: TopicRef) -> None:
        for listener in self._created_listeners:
            listener(ref)

    def policies_changed(self, topic: TopicName | None = None) -> None:
        """Tell the listeners that policies changed: those of `topic` alone (its topic policies, global
        policies or settings), or, with None, possibly any topic's."""
        for topic_listener in self._topic_listeners:
            topic_listener(topic)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._metadata.close()
