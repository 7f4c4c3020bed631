"""Tenants, namespaces and topics of a data directory, with their settings and policies, in SQLite
(`meta.sqlite`, WAL mode).

SQLite gives atomic, crash-safe updates and safe access from several processes; the tables are tiny.
`public/default` always exists; creating a topic creates its tenant and namespace if needed. A namespace's `config`
column holds its policies, a topic's `config` the settings given to it and its `policies` the policies set on it
for this cluster (JSON, see policies.py). `global_topic_policies` holds those meant for every cluster a topic
replicates to, by topic name: they outlive the topic when a cascading deletion removes it here (Pulsar keeps them,
so that the namespace's clusters do not apply again and clients asking for the topic here are refused); an explicit
deletion of the topic, or of its namespace, removes them. `schemas` every version of each topic's schema,
tombstones included (catalog/schemas.py gives them their meaning; a topic's deletion deletes them). `clusters`
holds the clusters known to this one (Pulsar's ClusterData, by name), for tenants' allowed clusters and
geo-replication; `properties` facts of the data directory itself: the cluster it is (`local_cluster`, recorded by the
first `seglog serve --cluster NAME`) and the shared configuration store it joined (`configuration_store`);
`shared_stamps` the stamp of the newest change to each shared entity (below) that the synchronized configuration
store made or applied here.

Shared configuration. What Pulsar keeps in its configuration store (registered clusters, tenants, namespaces
with their policies and permissions, partitioned topics' partition counts) is what clusters sharing one store
(`seglog serve --configuration-store`, replication/config_store.py) or synchronizing through a replicated
topic (`seglog serve --configuration-sync-topic`, replication/config_sync.py) see alike. This store stays every
reader's copy of it: each change to one of those entities is told, as a SharedChange, to the listeners of
`on_shared_change` inside its transaction, before it commits, so a listener that cannot publish it refuses
it (the transaction rolls back) and the local copy never holds what the shared store lacks; and a change
made elsewhere comes in through `apply_shared` (or, for a partitioned topic, whose files the broker makes,
inside `applying_shared()`), which tells nobody, since it came from the store."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seglog.catalog.policies import GlobalPolicies, Policies
from seglog.catalog.stamps import Stamp
from seglog.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    MetadataError,
    NotEmptyError,
    NotFoundError,
    TopicExistsError,
    TopicNotFoundError,
)
from seglog.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, NamespaceName, TopicName

SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, config TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY, tenant TEXT NOT NULL REFERENCES tenants(name), config TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS permissions (
    namespace TEXT NOT NULL REFERENCES namespaces(name), role TEXT NOT NULL, actions TEXT NOT NULL,
    PRIMARY KEY (namespace, role));
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY, namespace TEXT NOT NULL REFERENCES namespaces(name),
    partitions INTEGER NOT NULL, config TEXT NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS global_topic_policies (
    name TEXT PRIMARY KEY, namespace TEXT NOT NULL, config TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clusters (name TEXT PRIMARY KEY, config TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS properties (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shared_stamps (
    kind TEXT NOT NULL, key TEXT NOT NULL, time_ms INTEGER NOT NULL, origin TEXT NOT NULL, PRIMARY KEY (kind, key));
CREATE TABLE IF NOT EXISTS schemas (
    topic TEXT NOT NULL, version INTEGER NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL, properties TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL, deleted INTEGER NOT NULL, PRIMARY KEY (topic, version));
"""
# Columns added after the first release of the schema: (table, column, definition).
MIGRATIONS = (("topics", "policies", "TEXT NOT NULL DEFAULT '{}'"),)
LOCAL_CLUSTER = "local_cluster"  # the properties row naming the data directory's own cluster
CONFIGURATION_STORE = "configuration_store"  # the properties row naming the shared store it joined
DEFAULT = f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}"
# the kinds of shared entities, in the order a whole configuration is applied (each after those it names)
SHARED_KINDS = ("cluster", "tenant", "namespace", "topic")


@dataclass(frozen=True)
class SharedChange:
    """One entity of the shared configuration as a change left it: `kind` one of SHARED_KINDS; `key` its name
    (a cluster, a tenant, 'tenant/namespace', 'tenant/namespace/topic'); `value` its JSON, None once deleted:
    a cluster's ClusterData, a tenant's config, a namespace's {"policies": ..., "permissions": {role: [actions]}},
    a partitioned topic's {"partitions": N} (a topic of one partition is not partitioned, and not shared)."""
    kind: str
    key: str
    value: dict[str, Any] | None


SharedListener = Callable[[SharedChange], None]


@dataclass(frozen=True)
class TopicRecord:
    name: TopicName
    partitions: int
    config: dict[str, Any]  # only the settings given at creation; the rest follow the broker defaults
    created_ms: int


@dataclass(frozen=True)
class SchemaRecord:
    """One version of a topic's schema as stored (catalog/schemas.py gives it its meaning): `type` Pulsar's
    SchemaType name, `data` the definition as given, `deleted` for the tombstone a deletion writes."""
    version: int
    type: str
    data: bytes
    properties: dict[str, str]
    timestamp_ms: int
    deleted: bool


class Metadata:
    """The metadata of one data directory. SQLite's own errors (a file that is not a database or is
    corrupt, a lock held too long) are raised as MetadataError naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # reentrant: the statements of a caller's transaction() take it again
        self._lock = threading.RLock()
        self._in_transaction = False
        self._shared_listeners: list[SharedListener] = []
        self._touched: dict[tuple[str, str], None] = {}  # the shared entities the transaction changed, in order
        self._applying = threading.local()  # .active: this thread applies changes that came from the store
        self._data_version: int | None = None  # SQLite's, when changed_elsewhere last looked
        try:
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as error:
            raise MetadataError(str(path), str(error)) from error
        try:
            with self._access():
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(SCHEMA)
                for table, column, definition in MIGRATIONS:
                    if not self._has_column(table, column):
                        self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                self._move_global_policies()
                self._ensure_namespace(DEFAULT_TENANT, DEFAULT_NAMESPACE)
        except BaseException:
            self._db.close()
            raise

    def _move_global_policies(self) -> None:
        """Topics' global policies, kept in a `topics` column before they had a table of their own (they
        outlive the topic now), move there (checked again under the write lock: another process may have moved
        them meanwhile)."""
        if not self._has_column("topics", "global_policies"):
            return
        with self._transaction():
            if not self._has_column("topics", "global_policies"):
                return
            self._db.execute("INSERT OR IGNORE INTO global_topic_policies SELECT name, namespace, global_policies "
                             "FROM topics WHERE global_policies != '{}'")
            self._db.execute("ALTER TABLE topics DROP COLUMN global_policies")

    def _has_column(self, table: str, column: str) -> bool:
        return column in {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}

    @contextmanager
    def _access(self) -> Iterator[None]:
        """The lock, around statements whose SQLite errors the block does not handle itself."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as error:
                raise MetadataError(str(self.path), str(error)) from error

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One IMMEDIATE transaction under the lock: committed if the block ends normally, else rolled back.
        Inside a transaction already (a caller's transaction()), the block is part of that one."""
        with self._access():
            if self._in_transaction:
                yield
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._in_transaction = True
            self._touched.clear()  # (what statements outside a transaction touched, as at open, is no change)
            try:
                yield
                self._tell_shared()  # (before the commit: a listener that refuses rolls the change back)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._in_transaction = False
                self._touched.clear()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the database against changes by any process (and other threads) while the block checks
        something and makes the change the check allows: every call of this store inside the block is part
        of one transaction, committed if the block ends normally and rolled back otherwise."""
        with self._transaction():
            yield

    def _ensure_namespace(self, tenant: str, namespace: str) -> None:
        if self._db.execute("INSERT OR IGNORE INTO tenants(name) VALUES (?)", (tenant,)).rowcount:
            self._touch("tenant", tenant)
        if self._db.execute("INSERT OR IGNORE INTO namespaces(name, tenant) VALUES (?, ?)",
                            (f"{tenant}/{namespace}", tenant)).rowcount:
            self._touch("namespace", f"{tenant}/{namespace}")

    def create_topic(self, name: TopicName, partitions: int, config: dict[str, Any], created_ms: int,
                     then: Callable[[], None] | None = None) -> None:
        """Add a topic. `then` runs inside the transaction once the row is in (a failure rolls it back), so
        files that must exist with the topic are made before any other process can see the topic."""
        with self._transaction():
            self._ensure_namespace(name.tenant, name.namespace)
            try:
                self._db.execute(
                    "INSERT INTO topics(name, namespace, partitions, config, created_ms) VALUES (?, ?, ?, ?, ?)",
                    (str(name), name.namespace_name, partitions, json.dumps(config), created_ms))
            except sqlite3.IntegrityError:
                raise TopicExistsError(f"topic {name} already exists") from None
            if partitions > 1:
                self._touch("topic", str(name))
            if then is not None:
                then()

    def topic(self, name: TopicName) -> TopicRecord:
        with self._access():
            row = self._db.execute("SELECT partitions, config, created_ms FROM topics WHERE name = ?",
                                   (str(name),)).fetchone()
        if row is None:
            raise TopicNotFoundError(f"topic {name} does not exist")
        return TopicRecord(name, row[0], json.loads(row[1]), row[2])

    def topics_with_policies(self) -> list[tuple[TopicRecord, Policies, GlobalPolicies]]:
        """Every topic, sorted by name, with its local and global policies, in one query."""
        with self._access():
            rows = self._db.execute(
                "SELECT topics.name, partitions, topics.config, created_ms, policies, global_topic_policies.config "
                "FROM topics LEFT JOIN global_topic_policies USING (name) ORDER BY topics.name").fetchall()
        return [(TopicRecord(TopicName.parse(name), partitions, json.loads(config), created_ms),
                 Policies.from_json(json.loads(policies)), GlobalPolicies.from_json(json.loads(global_or_none or "{}")))
                for name, partitions, config, created_ms, policies, global_or_none in rows]

    def list_topics(self) -> list[str]:
        with self._access():
            return [row[0] for row in self._db.execute("SELECT name FROM topics ORDER BY name")]

    def delete_topic(self, name: TopicName, then: Callable[[], None] | None = None, *,
                     keep_global_policies: bool = False) -> None:
        """Remove a topic, and its global policies unless `keep_global_policies` (a cascading deletion keeps
        them). `then` runs inside the transaction once the row is out (a failure rolls it back), for the files
        that go with it."""
        with self._transaction():
            row = self._db.execute("SELECT partitions FROM topics WHERE name = ?", (str(name),)).fetchone()
            if row is None:
                raise TopicNotFoundError(f"topic {name} does not exist")
            self._db.execute("DELETE FROM topics WHERE name = ?", (str(name),))
            self.delete_schema_records(name)
            if not keep_global_policies:
                self._db.execute("DELETE FROM global_topic_policies WHERE name = ?", (str(name),))
            if row[0] > 1:
                self._touch("topic", str(name))
            if then is not None:
                then()

    @contextmanager
    def topics_held(self) -> Iterator[list[str]]:
        """Every topic's name, with the database held against changes by any process until the block ends
        (for files that must agree with the list of topics)."""
        with self._transaction():
            yield [row[0] for row in self._db.execute("SELECT name FROM topics ORDER BY name")]

    def grow_topic(self, name: TopicName, partitions: int) -> None:
        """Give a topic `partitions` partitions, more than it has (checked in the transaction, so two
        processes growing it at once cannot shrink it)."""
        with self._transaction():
            row = self._db.execute("SELECT partitions FROM topics WHERE name = ?", (str(name),)).fetchone()
            if row is None:
                raise TopicNotFoundError(f"topic {name} does not exist")
            if partitions <= row[0]:
                raise InvalidArgumentError("partitions", partitions, f"more than the {row[0]} partitions {name} "
                                           "has (a partition is never removed)")
            self._db.execute("UPDATE topics SET partitions = ? WHERE name = ?", (partitions, str(name)))
            self._touch("topic", str(name))

    def set_topic_config(self, name: TopicName, config: dict[str, Any]) -> None:
        self._update_json("topics", "config", str(name), config)

    def topic_policies(self, name: TopicName) -> Policies:
        return Policies.from_json(self._read_json("topics", "policies", str(name)))

    def set_topic_policies(self, name: TopicName, policies: Policies) -> None:
        self._update_json("topics", "policies", str(name), policies.to_json())

    def topic_global_policies(self, name: TopicName) -> GlobalPolicies:
        """Topic `name`'s global policies, whether the topic is here or not (empty when none were set or
        received)."""
        with self._access():
            row = self._db.execute("SELECT config FROM global_topic_policies WHERE name = ?", (str(name),)).fetchone()
        return GlobalPolicies.from_json(json.loads(row[0]) if row is not None else {})

    def set_topic_global_policies(self, name: TopicName, policies: GlobalPolicies) -> None:
        """Keep `policies` as topic `name`'s global policies (the topic need not be here: a cluster they leave
        out keeps them without it)."""
        with self._transaction():
            self._db.execute("INSERT INTO global_topic_policies VALUES (?, ?, ?) ON CONFLICT (name) "
                             "DO UPDATE SET config = excluded.config",
                             (str(name), name.namespace_name, json.dumps(policies.to_json())))

    # schemas: every version of each topic's schema, tombstones included (catalog/schemas.py)

    def schema_records(self, topic: TopicName) -> list[SchemaRecord]:
        """Every stored version of topic `topic`'s schema, oldest first (none when it has no schema)."""
        with self._access():
            rows = self._db.execute("SELECT version, type, data, properties, timestamp_ms, deleted FROM schemas "
                                    "WHERE topic = ? ORDER BY version", (str(topic),)).fetchall()
        return [SchemaRecord(version, kind, bytes(data), json.loads(properties), timestamp_ms, bool(deleted))
                for version, kind, data, properties, timestamp_ms, deleted in rows]

    def add_schema_record(self, topic: TopicName, record: SchemaRecord) -> None:
        """Store a new version of topic `topic`'s schema (the topic need not exist: Pulsar keeps a schema
        uploaded before its topic); AlreadyExistsError if that version is taken."""
        with self._transaction():
            try:
                self._db.execute("INSERT INTO schemas VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 (str(topic), record.version, record.type, record.data,
                                  json.dumps(record.properties), record.timestamp_ms, int(record.deleted)))
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(f"schema version {record.version} of {topic} already exists") from None

    def delete_schema_records(self, topic: TopicName) -> None:
        """Remove every version of topic `topic`'s schema (its deletion, or a forced deletion of its schema)."""
        with self._transaction():
            self._db.execute("DELETE FROM schemas WHERE topic = ?", (str(topic),))

    # tenants and namespaces

    def create_tenant(self, tenant: str, config: dict[str, Any]) -> None:
        with self._transaction():
            try:
                self._db.execute("INSERT INTO tenants VALUES (?, ?)", (tenant, json.dumps(config)))
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(f"tenant {tenant} already exists") from None
            self._touch("tenant", tenant)

    def set_tenant_config(self, tenant: str, config: dict[str, Any]) -> None:
        self._update_json("tenants", "config", tenant, config)

    def tenants(self) -> list[str]:
        with self._access():
            return [row[0] for row in self._db.execute("SELECT name FROM tenants ORDER BY name")]

    def tenant_config(self, tenant: str) -> dict[str, Any]:
        return self._read_json("tenants", "config", tenant)

    def delete_tenant(self, tenant: str) -> None:
        with self._transaction():
            namespaces = [r[0] for r in self._db.execute(
                "SELECT name FROM namespaces WHERE tenant = ? ORDER BY name", (tenant,))]
            if tenant == DEFAULT_TENANT:
                raise InvalidArgumentError("tenant", tenant, "a tenant other than 'public', which always exists")
            if namespaces:
                raise NotEmptyError(f"tenant {tenant} still has namespaces: {', '.join(namespaces)}; "
                                    "delete them first")
            if not self._db.execute("DELETE FROM tenants WHERE name = ?", (tenant,)).rowcount:
                raise NotFoundError(f"tenant {tenant} does not exist")
            self._touch("tenant", tenant)

    def create_namespace(self, name: NamespaceName, policies: Policies | None = None) -> None:
        """Add a namespace to an existing tenant, with `policies` from the start (none when None)."""
        with self._transaction():
            if not self._db.execute("SELECT 1 FROM tenants WHERE name = ?", (name.tenant,)).fetchone():
                raise NotFoundError(f"tenant {name.tenant} does not exist; create it first")
            try:
                self._db.execute("INSERT INTO namespaces(name, tenant, config) VALUES (?, ?, ?)",
                                 (str(name), name.tenant, json.dumps((policies or Policies()).to_json())))
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(f"namespace {name} already exists") from None
            self._touch("namespace", str(name))

    def namespaces(self, tenant: str | None = None) -> list[str]:
        with self._access():
            if tenant is None:
                rows = self._db.execute("SELECT name FROM namespaces ORDER BY name")
            else:
                if not self._db.execute("SELECT 1 FROM tenants WHERE name = ?", (tenant,)).fetchone():
                    raise NotFoundError(f"tenant {tenant} does not exist")
                rows = self._db.execute("SELECT name FROM namespaces WHERE tenant = ? ORDER BY name", (tenant,))
            return [row[0] for row in rows]

    def delete_namespace(self, name: NamespaceName) -> None:
        with self._transaction():
            if str(name) == DEFAULT:
                raise InvalidArgumentError("namespace", str(name), f"a namespace other than {DEFAULT!r}, "
                                           "which always exists")
            topics = [r[0] for r in self._db.execute(
                "SELECT name FROM topics WHERE namespace = ? ORDER BY name", (str(name),))]
            if topics:
                raise NotEmptyError(f"namespace {name} still has topics: {', '.join(topics)}; delete them first")
            if not self._db.execute("DELETE FROM namespaces WHERE name = ?", (str(name),)).rowcount:
                raise NotFoundError(f"namespace {name} does not exist")
            self._db.execute("DELETE FROM permissions WHERE namespace = ?", (str(name),))
            self._db.execute("DELETE FROM global_topic_policies WHERE namespace = ?", (str(name),))
            self._touch("namespace", str(name))

    def namespace_policies(self, name: NamespaceName | str) -> Policies:
        return Policies.from_json(self._read_json("namespaces", "config", str(name)))

    def set_namespace_policies(self, name: NamespaceName, policies: Policies) -> None:
        self._update_json("namespaces", "config", str(name), policies.to_json())

    # clusters

    def create_cluster(self, name: str, config: dict[str, Any], *, exist_ok: bool = False) -> None:
        """Add a cluster; AlreadyExistsError if there is one of that name (unless `exist_ok`: then nothing
        changes)."""
        with self._transaction():
            try:
                self._db.execute("INSERT INTO clusters VALUES (?, ?)", (name, json.dumps(config)))
            except sqlite3.IntegrityError:
                if not exist_ok:
                    raise AlreadyExistsError(f"cluster {name} already exists") from None
            else:
                self._touch("cluster", name)

    def clusters(self) -> list[str]:
        with self._access():
            return [row[0] for row in self._db.execute("SELECT name FROM clusters ORDER BY name")]

    def cluster_config(self, name: str) -> dict[str, Any]:
        return self._read_json("clusters", "config", name)

    def set_cluster_config(self, name: str, config: dict[str, Any]) -> None:
        self._update_json("clusters", "config", name, config)

    def delete_cluster(self, name: str) -> None:
        """Remove a cluster (whether anything still uses it is the caller's check: catalog/clusters.py)."""
        with self._transaction():
            if not self._db.execute("DELETE FROM clusters WHERE name = ?", (name,)).rowcount:
                raise NotFoundError(f"cluster {name} does not exist")
            self._touch("cluster", name)

    def local_cluster(self) -> str | None:
        """The cluster this data directory is, as its first `seglog serve --cluster` named it; None before."""
        with self._access():
            row = self._db.execute("SELECT value FROM properties WHERE name = ?", (LOCAL_CLUSTER,)).fetchone()
        return row[0] if row is not None else None

    def record_local_cluster(self, name: str) -> None:
        """Make `name` the data directory's cluster if it has none; InvalidArgumentError naming both if it is
        another one already (Pulsar's cluster name is fixed for its metadata store, as it is in every
        replication cursor and producer name other clusters keep)."""
        with self._transaction():
            row = self._db.execute("SELECT value FROM properties WHERE name = ?", (LOCAL_CLUSTER,)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO properties VALUES (?, ?)", (LOCAL_CLUSTER, name))
            elif row[0] != name:
                raise InvalidArgumentError(
                    "cluster", name, f"{row[0]!r}, the cluster of this data directory (or another data directory "
                                     f"for cluster {name!r})",
                    detail=f"the data directory {self.path.parent} is cluster {row[0]!r}, recorded when it was "
                           "first served; a cluster's name cannot change, since other clusters know it by it")

    def _read_json(self, table: str, column: str, key: str) -> dict[str, Any]:
        with self._access():
            row = self._db.execute(f"SELECT {column} FROM {table} WHERE name = ?", (key,)).fetchone()
        if row is None:
            raise self._missing(table, key)
        return json.loads(row[0])

    def _update_json(self, table: str, column: str, key: str, value: dict[str, Any]) -> None:
        with self._transaction():
            if not self._db.execute(f"UPDATE {table} SET {column} = ? WHERE name = ?",
                                    (json.dumps(value), key)).rowcount:
                raise self._missing(table, key)
            if (table, column) in _SHARED_COLUMNS:
                self._touch(_SHARED_COLUMNS[table, column], key)

    @staticmethod
    def _missing(table: str, key: str) -> Exception:
        if table == "topics":
            return TopicNotFoundError(f"topic {key} does not exist")
        return NotFoundError(f"{table[:-1]} {key} does not exist")

    # permissions: what each role may do on a namespace's topics (Pulsar's auth_policies.namespace_auth, role ->
    # actions), which `seglog serve` enforces when it authenticates clients. A tenant's admin roles are in the
    # tenant's `config` (`admin_roles`).

    def namespace_permissions(self, name: NamespaceName | str) -> dict[str, list[str]]:
        """{role: [actions]} granted on the namespace, by role (NotFoundError for a missing namespace)."""
        with self._access():
            self._require_namespace(str(name))
            rows = self._db.execute("SELECT role, actions FROM permissions WHERE namespace = ? ORDER BY role",
                                    (str(name),)).fetchall()
        return {role: json.loads(actions) for role, actions in rows}

    def set_namespace_permission(self, name: NamespaceName, role: str, actions: list[str]) -> None:
        """Give `role` exactly `actions` on the namespace (replacing what it had)."""
        with self._transaction():
            self._require_namespace(str(name))
            self._db.execute("INSERT OR REPLACE INTO permissions(namespace, role, actions) VALUES (?, ?, ?)",
                             (str(name), role, json.dumps(actions)))
            self._touch("namespace", str(name))

    def remove_namespace_permission(self, name: NamespaceName, role: str) -> bool:
        """Take every action on the namespace from `role`; whether it had any."""
        with self._transaction():
            self._require_namespace(str(name))
            removed = bool(self._db.execute("DELETE FROM permissions WHERE namespace = ? AND role = ?",
                                            (str(name), role)).rowcount)
            if removed:
                self._touch("namespace", str(name))
            return removed

    def _require_namespace(self, name: str) -> None:
        if not self._db.execute("SELECT 1 FROM namespaces WHERE name = ?", (name,)).fetchone():
            raise NotFoundError(f"namespace {name} does not exist")

    # the shared configuration (the module's docstring)

    def on_shared_change(self, listener: SharedListener) -> None:
        """Tell `listener` each change this process makes to an entity of the shared configuration, in its
        transaction before it commits (an exception the listener raises refuses the change: it is rolled back),
        in the order they are made; never the changes made by `apply_shared` or inside `applying_shared()`."""
        self._shared_listeners.append(listener)

    @contextmanager
    def applying_shared(self) -> Iterator[None]:
        """Changes this thread makes in the block came from the shared configuration: no listener is told
        (a partitioned topic the store has is created or deleted by the broker inside it)."""
        outer = getattr(self._applying, "active", False)
        self._applying.active = True
        try:
            yield
        finally:
            self._applying.active = outer

    def apply_shared(self, change: SharedChange) -> bool:
        """Make a cluster, tenant or namespace what another cluster made it in the shared configuration,
        unchecked (it was checked where it was made), telling no listener; whether anything changed. A deleted
        tenant takes its namespaces along, a deleted namespace its permissions (their topics are the caller's:
        deleting one needs the broker). A partitioned topic is the broker's to apply (applying_shared)."""
        if change.kind not in SHARED_KINDS[:-1]:
            raise InvalidArgumentError("kind", change.kind, f"one of {', '.join(SHARED_KINDS[:-1])} (a partitioned "
                                       "topic is created or deleted by the broker, inside applying_shared())")
        with self.applying_shared(), self._transaction():
            if self._shared_value(change.kind, change.key) == change.value:
                return False
            value, key = change.value, change.key
            if change.kind == "cluster":
                self._db.execute("DELETE FROM clusters WHERE name = ?", (key,))
                if value is not None:
                    self._db.execute("INSERT INTO clusters VALUES (?, ?)", (key, json.dumps(value)))
            elif change.kind == "tenant":
                if value is None:
                    for (namespace,) in self._db.execute("SELECT name FROM namespaces WHERE tenant = ?",
                                                         (key,)).fetchall():
                        self._db.execute("DELETE FROM permissions WHERE namespace = ?", (namespace,))
                    self._db.execute("DELETE FROM namespaces WHERE tenant = ?", (key,))
                    self._db.execute("DELETE FROM tenants WHERE name = ?", (key,))
                else:
                    self._db.execute("INSERT INTO tenants VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                                     "config = excluded.config", (key, json.dumps(value)))
            else:
                self._db.execute("DELETE FROM permissions WHERE namespace = ?", (key,))
                if value is None:
                    self._db.execute("DELETE FROM namespaces WHERE name = ?", (key,))
                else:
                    tenant = NamespaceName.parse(key).tenant
                    self._db.execute("INSERT OR IGNORE INTO tenants(name) VALUES (?)", (tenant,))
                    self._db.execute("INSERT INTO namespaces(name, tenant, config) VALUES (?, ?, ?) ON CONFLICT(name) "
                                     "DO UPDATE SET config = excluded.config",
                                     (key, tenant, json.dumps(value["policies"])))
                    self._db.executemany("INSERT INTO permissions(namespace, role, actions) VALUES (?, ?, ?)",
                                         [(key, role, json.dumps(actions))
                                          for role, actions in value["permissions"].items()])
            return True

    def shared_entities(self) -> list[SharedChange]:
        """Every entity of the shared configuration this store has, as SHARED_KINDS orders them, each kind by
        name."""
        with self._access():
            keys = [(kind, row[0]) for kind, query in (
                ("cluster", "SELECT name FROM clusters ORDER BY name"),
                ("tenant", "SELECT name FROM tenants ORDER BY name"),
                ("namespace", "SELECT name FROM namespaces ORDER BY name"),
                ("topic", "SELECT name FROM topics WHERE partitions > 1 ORDER BY name"))
                for row in self._db.execute(query).fetchall()]
            return [SharedChange(kind, key, self._shared_value(kind, key)) for kind, key in keys]

    def joined_store(self) -> str | None:
        """The identity of the shared configuration store this data directory joined (record_joined_store),
        or None."""
        with self._access():
            row = self._db.execute("SELECT value FROM properties WHERE name = ?", (CONFIGURATION_STORE,)).fetchone()
        return row[0] if row is not None else None

    def record_joined_store(self, identity: str) -> None:
        """This data directory's shared configuration is now that of the store `identity` (its later starts
        take the store's content as it is, deletions made there meanwhile included)."""
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO properties VALUES (?, ?)", (CONFIGURATION_STORE, identity))

    def shared_stamp(self, kind: str, key: str) -> Stamp:
        """The stamp of the newest change to a shared entity (SharedChange's kind and key) made here or applied
        here (record_shared_stamp); Stamp() when none was recorded."""
        with self._access():
            row = self._db.execute("SELECT time_ms, origin FROM shared_stamps WHERE kind = ? AND key = ?",
                                   (kind, key)).fetchone()
        return Stamp() if row is None else Stamp(row[0], row[1])

    def record_shared_stamp(self, kind: str, key: str, stamp: Stamp) -> None:
        """Record `stamp` as the shared entity's newest change (the synchronized configuration store stamps
        each change, and checks each change made elsewhere against it). Inside the transaction of the change
        it stamps, it commits or rolls back with it; it outlives the entity's deletion, so that an older change
        arriving later cannot bring the entity back."""
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO shared_stamps VALUES (?, ?, ?, ?)",
                             (kind, key, stamp.time_ms, stamp.origin))

    def _touch(self, kind: str, key: str) -> None:
        """The transaction changed this shared entity (its listeners are told before it commits)."""
        self._touched[(kind, key)] = None

    def _tell_shared(self) -> None:
        if not self._shared_listeners or getattr(self._applying, "active", False):
            return
        for kind, key in list(self._touched):
            change = SharedChange(kind, key, self._shared_value(kind, key))
            for listener in self._shared_listeners:
                listener(change)

    def _shared_value(self, kind: str, key: str) -> dict[str, Any] | None:
        """The entity's JSON as SharedChange has it, None when there is none (under the lock)."""
        if kind == "topic":
            row = self._db.execute("SELECT partitions FROM topics WHERE name = ?", (key,)).fetchone()
            return {"partitions": row[0]} if row is not None and row[0] > 1 else None
        table = {"cluster": "clusters", "tenant": "tenants", "namespace": "namespaces"}[kind]
        row = self._db.execute(f"SELECT config FROM {table} WHERE name = ?", (key,)).fetchone()
        if row is None:
            return None
        if kind != "namespace":
            return json.loads(row[0])
        permissions = self._db.execute("SELECT role, actions FROM permissions WHERE namespace = ? ORDER BY role",
                                       (key,)).fetchall()
        return {"policies": json.loads(row[0]), "permissions": {role: json.loads(a) for role, a in permissions}}

    def changed_elsewhere(self) -> bool:
        """Whether another process (another connection) committed a change since the last call; True at the
        first. SQLite's data_version counts those commits, and not this connection's own, which their
        callers tell the catalog's listeners of."""
        with self._access():
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
        changed, self._data_version = version != self._data_version, version
        return changed

    def close(self) -> None:
        with self._access():
            self._db.close()


def listed_topics(path: Path) -> list[str]:
    """Every topic's name in the metadata file `path`, read without changing anything, not even the schema
    (`seglog check`); MetadataError naming the file if SQLite cannot read it."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as error:
        raise MetadataError(str(path), str(error)) from error
    try:
        return [row[0] for row in db.execute("SELECT name FROM topics ORDER BY name")]
    except sqlite3.Error as error:
        raise MetadataError(str(path), str(error)) from error
    finally:
        db.close()


# the columns written through _update_json that hold a shared entity, and its kind
_SHARED_COLUMNS = {("tenants", "config"): "tenant", ("namespaces", "config"): "namespace",
                   ("clusters", "config"): "cluster"}
