"""The catalog side of geo-replication (catalog/clusters.py, Catalog's replication methods): the data
directory's own cluster, the sets in force at each level and their precedence, global topic policies applied
once whatever order copies arrive in, and the store's transaction that makes a refused change leave nothing."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

import seglog
from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.catalog.config import BrokerConfig
from seglog.catalog.metadata import Metadata
from seglog.catalog.policies import GlobalPolicies, Policies
from seglog.errors import InvalidArgumentError, NotFoundError, TopicNotFoundError
from seglog.names import NamespaceName, TopicName

URLS = {"serviceUrl": "http://{}:8080", "brokerServiceUrl": "pulsar://{}:6650"}


@pytest.fixture
def broker(tmp_path: Path, clock: seglog.ManualClock):
    opened = Broker.open(tmp_path / "data", clock=clock, background=False)
    yield opened
    opened.close()


def register(admin: Admin, *names: str) -> None:
    for name in names:
        admin.clusters.create(name, {key: url.format(name) for key, url in URLS.items()})


# --- the data directory's own cluster ------------------------------------------------------------------------

def test_the_first_cluster_name_is_kept_and_another_is_refused_naming_both(tmp_path: Path) -> None:
    broker = Broker.open(tmp_path / "d", clock=seglog.ManualClock(), background=False)
    try:
        assert broker.catalog.local_cluster is None  # never served
        broker.catalog.record_local_cluster("us-east")
        broker.catalog.record_local_cluster("us-east")  # the same name again: nothing to do
        with pytest.raises(InvalidArgumentError) as refused:
            broker.catalog.record_local_cluster("us-west")
        message = str(refused.value)
        assert "invalid cluster 'us-west'" in message and "is cluster 'us-east'" in message
        assert str(tmp_path / "d") in message
        with pytest.raises(InvalidArgumentError, match="invalid cluster name 'a b'"):
            broker.catalog.record_local_cluster("a b")
    finally:
        broker.close()
    with seglog.open(tmp_path / "d"):  # kept in the data directory
        pass
    reopened = Broker.open(tmp_path / "d", clock=seglog.ManualClock(), background=False)
    try:
        assert reopened.catalog.local_cluster == "us-east"
    finally:
        reopened.close()


# --- the sets in force -----------------------------------------------------------------------------------------

def test_replication_clusters_are_local_policy_else_global_else_namespace_else_the_local_cluster(broker) -> None:
    admin = Admin(broker)
    register(admin, "r1", "r2", "r3")
    catalog = broker.catalog
    admin.namespaces.create("public/geo")
    admin.topics.create("public/geo/t")
    topic = TopicName.parse("public/geo/t")
    assert catalog.replication_clusters(topic, "r1") == {"r1"}  # a local namespace
    assert catalog.replication_clusters(topic, "r2") == {"r2"}  # seen from each cluster
    admin.namespaces.set_clusters("public/geo", ["r1", "r2", "r3"])
    assert catalog.replication_clusters(topic, "r1") == {"r1", "r2", "r3"}
    admin.topics.set_replication_clusters("public/geo/t", ["r2"], is_global=True)
    assert catalog.replication_clusters(topic, "r1") == {"r2"}  # a global policy may leave this cluster out
    admin.topics.set_replication_clusters("public/geo/t", ["r1", "r3"])
    assert catalog.replication_clusters(topic, "r1") == {"r1", "r3"}
    admin.topics.remove_replication_clusters("public/geo/t")
    assert catalog.replication_clusters(topic, "r1") == {"r2"}
    admin.topics.remove_replication_clusters("public/geo/t", is_global=True)
    assert catalog.replication_clusters(topic, "r1") == {"r1", "r2", "r3"}
    with pytest.raises(TopicNotFoundError):
        catalog.replication_clusters(TopicName.parse("public/geo/nope"), "r1")


def test_topics_with_replication_reads_what_each_topic_s_own_calls_give(broker) -> None:
    admin = Admin(broker)
    register(admin, "r1", "r2", "r3")
    catalog = broker.catalog
    admin.namespaces.create("public/geo")
    admin.namespaces.set_allowed_clusters("public/geo", ["r1", "r2", "r3"])
    admin.namespaces.set_clusters("public/geo", ["r1", "r2"])
    for topic in ("public/geo/by-namespace", "public/geo/by-global", "public/geo/by-local", "public/local/t"):
        admin.topics.create(topic, partitions=2 if "global" in topic else 1)
    admin.topics.set_replication_clusters("public/geo/by-global", ["r1", "r3"], is_global=True)
    admin.topics.set_replication_clusters("public/geo/by-local", ["r1"])
    names = [TopicName.parse(name) for name in catalog.topic_names()]
    expected = [(catalog.topic(name), catalog.global_topic_policies(name), catalog.replication_clusters(name, "r1"))
                for name in names]
    assert catalog.topics_with_replication("r1") == expected
    assert [clusters for _, _, clusters in expected] == [{"r1", "r3"}, {"r1"}, {"r1", "r2"}, {"r1"}]


def test_allowed_clusters_are_those_set_else_the_clusters_else_the_local_cluster(broker) -> None:
    admin = Admin(broker)
    register(admin, "r1", "r2", "r3")
    catalog = broker.catalog
    namespace = NamespaceName.parse("public/default")
    assert catalog.allowed_clusters(namespace, "r1") == {"r1"}
    admin.namespaces.set_clusters("public/default", ["r1", "r2"])
    assert catalog.allowed_clusters(namespace, "r1") == {"r1", "r2"}
    admin.namespaces.set_allowed_clusters("public/default", ["r1", "r2", "r3"])
    assert catalog.allowed_clusters(namespace, "r1") == {"r1", "r2", "r3"}
    with pytest.raises(NotFoundError, match="namespace public/nope does not exist"):
        catalog.allowed_clusters(NamespaceName.parse("public/nope"), "r1")


def test_cluster_data_is_pulsars_clusterdata_with_every_key(broker) -> None:
    admin = Admin(broker)
    admin.clusters.create("west", {"serviceUrl": "http://west:8080", "brokerServiceUrl": "pulsar://west:6650",
                                   "authenticationPlugin": "token", "authenticationParameters": "file:/w.token",
                                   "proxyServiceUrl": "pulsar://proxy:6650"})
    assert broker.catalog.cluster_data("west") == {
        "serviceUrl": "http://west:8080", "serviceUrlTls": "", "brokerServiceUrl": "pulsar://west:6650",
        "brokerServiceUrlTls": "", "peerClusterNames": None, "authenticationPlugin": "token",
        "authenticationParameters": "file:/w.token", "proxyServiceUrl": "pulsar://proxy:6650"}
    assert admin.clusters.get("west") == broker.catalog.cluster_data("west")
    with pytest.raises(NotFoundError, match="cluster nope does not exist"):
        broker.catalog.cluster_data("nope")


# --- global topic policies -------------------------------------------------------------------------------------

def test_a_global_change_supersedes_by_time_then_by_the_smaller_origin_never_itself() -> None:
    older = GlobalPolicies(Policies(replication_clusters=frozenset({"a"})), 1_000, "r2")
    newer = GlobalPolicies(Policies(replication_clusters=frozenset({"b"})), 2_000, "r9")
    tie_smaller = GlobalPolicies(Policies(replication_clusters=frozenset({"c"})), 1_000, "r1")
    assert newer.supersedes(older) and not older.supersedes(newer)
    assert tie_smaller.supersedes(older) and not older.supersedes(tie_smaller)
    assert not older.supersedes(older)
    assert older.supersedes(GlobalPolicies())  # never set
    # a change made here supersedes what it changes even when this clock is behind the other cluster's
    changed = newer.changed("r1", 500, replication_clusters=None)
    assert changed.supersedes(newer) and changed.updated_ms == 2_001 and changed.origin == "r1"
    assert changed.policies.replication_clusters is None
    assert GlobalPolicies.from_json(changed.to_json()) == changed


def test_a_received_global_policy_applies_once_and_never_over_a_newer_one(broker, clock) -> None:
    admin = Admin(broker)
    register(admin, "r1", "r2")
    admin.namespaces.set_clusters("public/default", ["r1", "r2"])
    admin.topics.create("t")
    topic = TopicName.parse("t")
    changes: list[TopicName | None] = []
    broker.catalog.on_topic_policies_changed(changes.append)
    received = GlobalPolicies(Policies(replication_clusters=frozenset({"r2"})), clock() + 10, "r2")
    assert broker.catalog.apply_global_topic_policies(topic, received)
    assert broker.catalog.global_topic_policies(topic) == received
    assert broker.catalog.replication_clusters(topic, "r1") == {"r2"}
    assert not broker.catalog.apply_global_topic_policies(topic, received)  # the same copy again
    stale = GlobalPolicies(Policies(replication_clusters=frozenset({"r1"})), clock() + 5, "r2")
    assert not broker.catalog.apply_global_topic_policies(topic, stale)
    assert changes == [topic]
    admin.topics.remove_replication_clusters("t", is_global=True)  # the removal keeps a newer stamp
    assert not broker.catalog.apply_global_topic_policies(topic, received)
    assert admin.topics.get_replication_clusters("t", is_global=True) is None
    missing = TopicName.parse("nope")  # kept without the topic (a cluster they leave out keeps them)
    assert broker.catalog.apply_global_topic_policies(missing, received)
    assert broker.catalog.global_topic_policies(missing) == received
    with pytest.raises(TopicNotFoundError):
        admin.topics.remove_replication_clusters("nope", is_global=True)


def test_a_cascading_deletion_keeps_the_global_policies_and_an_explicit_one_removes_them(broker, clock) -> None:
    admin = Admin(broker)
    register(admin, "r1", "r2")
    admin.namespaces.create("public/geo")
    admin.namespaces.set_clusters("public/geo", ["r1", "r2"])
    topic = TopicName.parse("public/geo/t")
    admin.topics.create(str(topic))
    admin.topics.set_replication_clusters(str(topic), ["r1"], is_global=True)
    kept = broker.catalog.global_topic_policies(topic)
    broker.delete_topic(str(topic), force=True, keep_global_policies=True)
    assert broker.catalog.global_topic_policies(topic) == kept
    assert broker.catalog.left_out(topic, "r2") == \
        "r2 is not among the replication clusters of its global topic policy (r1)"
    assert broker.catalog.left_out(topic, "r1") is None
    admin.topics.create(str(topic))  # made again (as a replicator would): the kept policy applies
    assert broker.catalog.replication_clusters(topic, "r1") == {"r1"}
    broker.delete_topic(str(topic), force=True)
    assert broker.catalog.global_topic_policies(topic) == GlobalPolicies()
    assert broker.catalog.left_out(topic, "r2") is None  # the namespace's clusters list it
    # a namespace's deletion takes the policies its topics' cascading deletions kept
    admin.topics.create(str(topic))
    admin.topics.set_replication_clusters(str(topic), ["r1"], is_global=True)
    broker.delete_topic(str(topic), force=True, keep_global_policies=True)
    admin.namespaces.delete("public/geo")
    assert broker.catalog.global_topic_policies(topic) == GlobalPolicies()


def test_left_out_says_which_level_leaves_the_cluster_out(broker) -> None:
    admin = Admin(broker)
    register(admin, "r1", "r2", "r3")
    catalog = broker.catalog
    admin.namespaces.create("public/geo")
    topic = TopicName.parse("public/geo/t")
    assert catalog.left_out(topic, "r1") is None  # a local namespace: its own cluster's
    admin.namespaces.set_clusters("public/geo", ["r1", "r2"])
    assert catalog.left_out(topic, "r3") == "r3 is not among the replication clusters of its namespace (r1, r2)"
    admin.topics.create(str(topic))
    admin.topics.set_replication_clusters(str(topic), ["r1", "r2"])
    assert catalog.left_out(topic, "r1") is None
    assert catalog.left_out(topic, "r3") == \
        "r3 is not among the replication clusters of its local topic policy (r1, r2)"
    admin.namespaces.set_allowed_clusters("public/geo", ["r1", "r2"])
    admin.namespaces.set_clusters("public/geo", ["r1"])
    assert catalog.left_out(topic, "r3") == "r3 is not among the allowed clusters of its namespace (r1, r2)"
    assert catalog.left_out(TopicName.parse("public/nope/t"), "r3") is None  # no namespace: not for it to say


def _old_layout(path: Path, clock) -> Path:
    """A data directory at `path` whose topic t has a global policy kept as before: in a `topics` column, no
    table of their own; its meta.sqlite."""
    with seglog.open(path, clock=clock) as log:
        register(log.admin, "r1", "r2")
        log.admin.namespaces.set_clusters("public/default", ["r1", "r2"])
        log.create_topic("t")
        log.create_topic("u")
        log.admin.topics.set_replication_clusters("t", ["r1"], is_global=True)
    meta = path / "meta.sqlite"
    db = sqlite3.connect(meta)
    with db:
        old = db.execute("SELECT config FROM global_topic_policies WHERE name = 'public/default/t'").fetchone()[0]
        db.execute("DROP TABLE global_topic_policies")
        db.execute("ALTER TABLE topics ADD COLUMN global_policies TEXT NOT NULL DEFAULT '{}'")
        db.execute("UPDATE topics SET global_policies = ? WHERE name = 'public/default/t'", (old,))
    db.close()
    return meta


def _columns(meta: Path) -> set[str]:
    db = sqlite3.connect(meta)
    try:
        return {row[1] for row in db.execute("PRAGMA table_info(topics)")}
    finally:
        db.close()


def test_global_policies_of_a_data_directory_that_kept_them_in_the_topics_table_move_to_their_own(
        tmp_path: Path, clock) -> None:
    meta = _old_layout(tmp_path / "d", clock)
    with seglog.open(tmp_path / "d", clock=clock) as log:
        assert log.admin.topics.get_replication_clusters("t", is_global=True) == ["r1"]
        assert log.admin.topics.get_replication_clusters("u", is_global=True) is None
    assert "global_policies" not in _columns(meta)


def _open_at_once(meta: Path, openers: int) -> tuple[list[Metadata], list[BaseException]]:
    """Open `meta` from `openers` threads released together: what opened, and what failed."""
    start = threading.Barrier(openers)
    opened: list[Metadata] = []
    failures: list[BaseException] = []

    def open_() -> None:
        start.wait(10)
        try:
            opened.append(Metadata(meta))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=open_) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return opened, failures


def test_several_opening_an_old_data_directory_at_once_move_its_global_policies_once(tmp_path: Path, clock) -> None:
    for attempt in range(5):  # (the move races with itself each time)
        meta = _old_layout(tmp_path / f"d{attempt}", clock)
        opened, failures = _open_at_once(meta, 4)
        try:
            assert not failures, failures
            assert len(opened) == 4
            assert opened[0].topic_global_policies(TopicName.parse("t")).policies.replication_clusters == {"r1"}
        finally:
            for metadata in opened:
                metadata.close()
        assert "global_policies" not in _columns(meta)


def test_global_and_local_policies_are_kept_apart_and_survive_reopening(tmp_path: Path, clock) -> None:
    with seglog.open(tmp_path / "d", clock=clock) as log:
        register(log.admin, "r1", "r2")
        log.admin.namespaces.set_clusters("public/default", ["r1", "r2"])
        log.create_topic("t")
        log.admin.topics.set_replication_clusters("t", ["r1"], is_global=True)
        log.admin.topics.set_replication_clusters("t", ["r1", "r2"])
    with seglog.open(tmp_path / "d", clock=clock) as log:
        assert log.admin.topics.get_replication_clusters("t") == ["r1", "r2"]
        assert log.admin.topics.get_replication_clusters("t", is_global=True) == ["r1"]
    metadata = Metadata(tmp_path / "d" / "meta.sqlite")
    try:
        stamped = metadata.topic_global_policies(TopicName.parse("t"))
        assert stamped.updated_ms == clock() and stamped.origin == ""  # never served: no origin cluster
        assert metadata.topic_policies(TopicName.parse("t")).replication_clusters == {"r1", "r2"}
    finally:
        metadata.close()


def test_policies_keep_clusters_through_json() -> None:
    policies = Policies(replication_clusters=frozenset({"b", "a"}), allowed_clusters=frozenset({"a", "b", "c"}))
    assert policies.to_json() == {"replication_clusters": ["a", "b"], "allowed_clusters": ["a", "b", "c"]}
    assert Policies.from_json(policies.to_json()) == policies
    assert Policies.from_json({}) == Policies()


# --- the store's transaction -----------------------------------------------------------------------------------

def test_a_transaction_commits_together_or_leaves_nothing(tmp_path: Path) -> None:
    metadata = Metadata(tmp_path / "meta.sqlite")
    try:
        with pytest.raises(RuntimeError):
            with metadata.transaction():
                metadata.create_tenant("acme", {})
                metadata.create_namespace(NamespaceName.parse("acme/ns"))
                assert metadata.namespaces("acme") == ["acme/ns"]  # seen inside the transaction
                raise RuntimeError("refused after the writes")
        assert metadata.tenants() == ["public"]
        with metadata.transaction():
            metadata.create_tenant("acme", {})
            with metadata.transaction():  # joins the outer one
                metadata.create_cluster("c", {})
        assert metadata.tenants() == ["acme", "public"] and metadata.clusters() == ["c"]
        other = Metadata(tmp_path / "meta.sqlite")  # another connection, as another process has
        try:
            assert other.clusters() == ["c"]
        finally:
            other.close()
    finally:
        metadata.close()


# --- broker.conf -----------------------------------------------------------------------------------------------

def test_create_topic_to_remote_cluster_for_replication_is_on_by_default_and_takes_pulsars_name(
        tmp_path: Path) -> None:
    assert BrokerConfig().create_topic_to_remote_cluster_for_replication is True
    (tmp_path / "broker.conf").write_text("createTopicToRemoteClusterForReplication=false\n")
    assert BrokerConfig.load(tmp_path, {}).create_topic_to_remote_cluster_for_replication is False
    with pytest.raises(InvalidArgumentError, match="create_topic_to_remote_cluster_for_replication"):
        BrokerConfig.from_options({"create_topic_to_remote_cluster_for_replication": "sometimes"})
    with seglog.open(tmp_path / "d", create_topic_to_remote_cluster_for_replication=False):
        pass
