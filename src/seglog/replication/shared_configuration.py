"""Changes of the shared configuration made on other clusters, applied to this one, whatever carried them: the
etcd store (config_store.py) or the synchronized store's replicated topic (config_sync.py). Each transport
publishes this cluster's changes from Metadata.on_shared_change and hands what it receives here, each change
with its own conflict rule (Incoming).

Clusters, tenants and namespaces are applied through Metadata.apply_shared, partitioned topics through the
broker (their files). A namespace change is followed by its cascading deletions: this cluster deletes the
topics its namespace's clusters or allowed clusters now leave it out of (catalog.clusters.leaves_topic; a topic
policy that lists it protects a topic against a clusters change, not against an allowed-clusters change), as
Pulsar does when clusters share their configuration. Nothing applied here is told to the catalog's
shared-change listeners: it came from elsewhere."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from seglog.broker import Broker
from seglog.catalog.metadata import DEFAULT, SharedChange
from seglog.errors import TopicInUseError, TopicNotFoundError
from seglog.names import DEFAULT_TENANT, TopicName

logger = logging.getLogger("seglog.replication.shared_configuration")


def always_exists(change: SharedChange) -> bool:
    """`public` and `public/default`, which every data directory has and nobody can delete."""
    return (change.kind, change.key) in (("tenant", DEFAULT_TENANT), ("namespace", DEFAULT))


@dataclass(frozen=True)
class Incoming:
    """A change made on another cluster (or this one's own, come back through its transport), with the
    transport's conflict rule: `newer()`, whether it is newer than what this cluster has (no side effect);
    `record()`, make it the newest. Both are called inside the catalog transaction that applies the change."""
    change: SharedChange
    newer: Callable[[], bool]
    record: Callable[[], None]


class SharedConfiguration:
    """The shared configuration changes that reach this cluster `local`, applied to its broker (the module's
    docstring)."""

    def __init__(self, broker: Broker, local: str, grow: Callable[[str, int], None] | None = None) -> None:
        self.broker = broker
        self.local = local
        # grows a topic here (TopicInUseError while in use): the replication service's, which pauses the topic's
        # replicators meanwhile, else the broker's
        self._grow = grow or (lambda topic, partitions: broker.update_partitions(topic, partitions))

    def apply_incoming(self, incoming: Iterable[Incoming]) -> bool:
        """Apply, in order, each change newer than what this cluster has, then the cascading deletions of the
        namespaces they name (applied or not: this cluster's own namespace changes come back this way), then
        tell the catalog's listeners (policies_changed), so replicators start and stop at once. Whether the
        catalog changed. A change that cannot be applied is logged and never stops the others."""
        changed = False
        namespaces = set()
        metadata = self.broker.catalog.metadata
        for item in incoming:
            change = item.change
            if change.kind == "namespace":
                namespaces.add(change.key)
            if not item.newer():
                continue  # (an older deletion deletes no topics either)
            self.delete_topics_of(change)  # (before the transaction: the same locks as a topic's)
            # the rule is asked again, and a cluster, tenant or namespace applied, in one catalog transaction: a
            # change made here meanwhile records its stamp inside its own, so an older one never overwrites it
            # (a partitioned topic is applied after: creating or deleting one takes locks the catalog's users
            # hold while they wait for the catalog)
            with metadata.transaction():
                if not item.newer():
                    continue
                item.record()
                if change.kind != "topic":
                    changed |= self.apply_logged(change)
            if change.kind == "topic":
                changed |= self.apply_logged(change)
        try:
            changed |= self.cascade(namespaces)
        except Exception:  # (logged; the next change or start looks again)
            logger.exception("shared configuration: cascading deletions in %s failed", ", ".join(namespaces))
        if changed:
            self.broker.catalog.policies_changed()
        return changed

    def apply(self, change: SharedChange) -> bool:
        """Apply one change, unchecked; whether the catalog changed."""
        metadata = self.broker.catalog.metadata
        with metadata.applying_shared():
            if change.kind == "topic":
                return self._apply_topic(change.key, change.value)
            if always_exists(change) and change.value is None:
                return False
            self.delete_topics_of(change)
            return metadata.apply_shared(change)

    def apply_logged(self, change: SharedChange) -> bool:
        """apply, with a failure logged as no change (one change that cannot be applied never stops the
        others)."""
        try:
            return self.apply(change)
        except Exception:
            logger.exception("shared configuration: applying %s %s failed", change.kind, change.key)
            return False

    def delete_topics_of(self, change: SharedChange) -> None:
        """The topics here of a tenant or namespace the change deletes (nothing for any other change)."""
        if change.value is not None or change.kind not in ("tenant", "namespace") or always_exists(change):
            return
        with self.broker.catalog.metadata.applying_shared():
            for name in self.broker.catalog.topic_names():
                if name.startswith(f"{change.key}/"):
                    self._delete(name, f"its {change.kind} {change.key} was deleted in the shared configuration")

    def cascade(self, namespaces: Iterable[str]) -> bool:
        """Delete the topics of `namespaces` this cluster is left out of (leaves_topic); whether any went."""
        wanted = set(namespaces)
        catalog = self.broker.catalog
        doomed = [name for name in map(TopicName.parse, catalog.topic_names())
                  if name.namespace_name in wanted and catalog.left_out(name, self.local) is not None]
        with self.broker.catalog.metadata.applying_shared():  # (a partitioned topic stays in the configuration)
            for name in doomed:
                self._delete(str(name), f"its namespace's clusters leave out {self.local} (cascading deletion)",
                             cascading=True)
        return bool(doomed)

    def _apply_topic(self, key: str, value: dict[str, Any] | None) -> bool:
        """A partitioned topic as the shared configuration has it: created with its partitions, grown, or
        deleted. A non-partitioned topic of the same name here, or more partitions here, is left as it is and
        logged (a topic's type never changes, and a partition is never removed)."""
        name = TopicName.parse(key)
        try:
            here = self.broker.catalog.topic(name).partitions
        except TopicNotFoundError:
            here = 0
        wanted = 0 if value is None else int(value["partitions"])
        if here == wanted or (value is None and here == 1):
            return False
        if value is None:
            return self._delete(key, "it was deleted in the shared configuration")
        if here == 0:
            if self.broker.catalog.left_out(name, self.local) is not None:
                return False
            self.broker.create_topic(key, wanted, {})
            return True
        if here == 1 or here > wanted:
            logger.warning("shared configuration: topic %s has %d partitions there and %s here; left as it is",
                           key, wanted, "is not partitioned" if here == 1 else f"has {here}")
            return False
        try:
            self._grow(key, wanted)
        except TopicInUseError as error:
            logger.warning("shared configuration: topic %s keeps %d partitions here, not the %d it has elsewhere, "
                           "while it is in use: %s", key, here, wanted, error)
            return False
        return True

    def _delete(self, name: str, why: str, *, cascading: bool = False) -> bool:
        """Delete topic `name` here; a `cascading` deletion keeps its global policies (Pulsar's)."""
        logger.info("shared configuration: deleting topic %s on %s: %s", name, self.local, why)
        try:
            self.broker.delete_topic(name, force=True, keep_global_policies=cascading)
        except TopicNotFoundError:
            return False
        except Exception:  # (one topic that cannot be deleted never stops the others; the next look retries)
            logger.exception("shared configuration: deleting topic %s failed", name)
            return False
        return True
