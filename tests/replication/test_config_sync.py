"""The synchronized configuration store (`seglog serve --configuration-sync-topic`, PIP-136): three clusters of
`seglog serve`, each with its own data directory and catalog, the sync topic's namespace replicated among them.
What one cluster changes (clusters, tenants, namespaces, their policies and permissions, partitioned topics)
every other gets; concurrent changes end alike; a cluster a namespace leaves out deletes its topics; a restarted
cluster gets what changed while it was down. The conflict rule itself is checked in this process, on events
made up for it, where no timing decides the outcome.

The three clusters are started once for the module (bootstrapping them takes two starts each); each test works
in a tenant of its own."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from helpers_replication import check_growth_travels, everywhere, start_synchronized_clusters, stop_clusters, wait_until
from helpers_server import pulsar, refused_serve
from seglog.broker import Broker
from seglog.catalog.metadata import SharedChange
from seglog.catalog.stamps import Stamp
from seglog.clock import ManualClock
from seglog.errors import ConfigurationStoreError, InvalidArgumentError, NotFoundError
from seglog.names import NamespaceName, TopicName
from seglog.replication.config_sync import SEGMENT_SIZE, ConfigurationSync, SyncEvent, parse_sync_topic
from seglog.server.protocol.metadata import CONFIGURATION_SYNC_SUBSCRIPTION

SYNC_TOPIC = "sync/config/events"


@pytest.fixture(scope="module")
def synchronized(tmp_path_factory):
    clusters = start_synchronized_clusters(tmp_path_factory.mktemp("synchronized"), SYNC_TOPIC,
                                           "east", "west", "north")
    yield clusters
    stop_clusters(clusters)


def _make_namespace(clusters, namespace: str, names: list[str], *, on: str = "east") -> None:
    tenant = namespace.split("/")[0]
    clusters[on].ok("PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": []})
    clusters[on].ok("PUT", f"/admin/v2/namespaces/{namespace}", {"replication_clusters": names})
    everywhere(clusters, f"/admin/v2/namespaces/{namespace}/replication", sorted(names))


def test_configuration_made_on_one_cluster_is_seen_on_all(synchronized):
    synchronized["west"].ok("PUT", "/admin/v2/tenants/acme", {"adminRoles": ["ops"], "allowedClusters": []})
    everywhere(synchronized, "/admin/v2/tenants/acme", {"adminRoles": ["ops"], "allowedClusters": []})
    ns = "/admin/v2/namespaces/acme/orders"
    synchronized["west"].ok("PUT", ns, {"replication_clusters": ["east", "west", "north"]})
    everywhere(synchronized, f"{ns}/replication", ["east", "north", "west"])
    synchronized["north"].ok("POST", f"{ns}/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10})
    everywhere(synchronized, f"{ns}/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10})
    synchronized["east"].ok("POST", f"{ns}/permissions/reader", ["consume"])
    everywhere(synchronized, f"{ns}/permissions", {"reader": ["consume"]})
    # a partitioned topic made on one cluster is made on all, with its partitions
    synchronized["east"].ok("PUT", "/admin/v2/persistent/acme/orders/events/partitions", 3)
    everywhere(synchronized, "/admin/v2/persistent/acme/orders/events/partitions", {"partitions": 3})
    check_growth_travels(synchronized)
    # a growth applied from the sync topic is not written back to it: one event, not one a cluster (each cluster
    # would write its echo in the growth's transaction, before it answers with the partitions)
    def events(cluster) -> int:
        return cluster.ok("GET", f"/admin/v2/persistent/{SYNC_TOPIC}/internalStats")["numberOfEntries"]
    wait_until(lambda: len({events(cluster) for cluster in synchronized.values()}) == 1)
    before = events(synchronized["east"])
    synchronized["east"].ok("POST", "/admin/v2/persistent/acme/orders/events/partitions", 5)
    everywhere(synchronized, "/admin/v2/persistent/acme/orders/events/partitions", {"partitions": 5})
    assert [events(cluster) for cluster in synchronized.values()] == [before + 1] * 3
    # a cluster registered on one cluster, and a namespace deleted on another
    synchronized["north"].ok("PUT", "/admin/v2/clusters/south", {"serviceUrl": "http://127.0.0.1:1"})
    everywhere(synchronized, "/admin/v2/clusters", ["east", "north", "south", "west"])
    synchronized["east"].ok("PUT", "/admin/v2/namespaces/acme/spare")
    everywhere(synchronized, "/admin/v2/namespaces/acme", ["acme/orders", "acme/plain", "acme/spare"])
    synchronized["west"].ok("DELETE", "/admin/v2/namespaces/acme/spare")
    everywhere(synchronized, "/admin/v2/namespaces/acme", ["acme/orders", "acme/plain"])


def test_concurrent_changes_of_a_policy_end_the_same_everywhere(synchronized):
    _make_namespace(synchronized, "race/ns", ["east", "west", "north"])
    path = "/admin/v2/namespaces/race/ns/messageTTL"
    threads = [threading.Thread(target=synchronized[name].ok, args=("POST", path, ttl))
               for name, ttl in (("east", 100), ("west", 200), ("north", 300))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    wait_until(lambda: len({cluster.answer(path) for cluster in synchronized.values()}) == 1)
    assert synchronized["east"].answer(path) in (100, 200, 300)


def test_a_cluster_left_out_of_a_namespace_deletes_its_topics(synchronized):
    _make_namespace(synchronized, "left/ns", ["east", "west"])
    synchronized["east"].ok("PUT", "/admin/v2/persistent/left/ns/events/partitions", 2)
    wait_until(lambda: "left/ns/events" in synchronized["west"].topics())
    assert "left/ns/events" not in synchronized["north"].topics()  # (the namespace leaves north out)
    synchronized["east"].ok("POST", "/admin/v2/namespaces/left/ns/replication", ["east"])
    wait_until(lambda: "left/ns/events" not in synchronized["west"].topics())
    assert "left/ns/events" in synchronized["east"].topics()


def test_a_restarted_cluster_gets_what_changed_while_it_was_down(synchronized):
    _make_namespace(synchronized, "later/ns", ["east", "west", "north"])
    synchronized["east"].ok("PUT", "/admin/v2/namespaces/later/old")
    wait_until(lambda: "later/old" in synchronized["west"].answer("/admin/v2/namespaces/later"))
    west = synchronized["west"]
    west.stop()  # (SIGTERM, by its pid)
    east = synchronized["east"]
    east.ok("PUT", "/admin/v2/tenants/meanwhile", {"allowedClusters": []})
    east.ok("DELETE", "/admin/v2/namespaces/later/old")
    east.ok("POST", "/admin/v2/namespaces/later/ns/messageTTL", 120)
    east.ok("PUT", "/admin/v2/persistent/later/ns/new/partitions", 4)
    west.restart()
    wait_until(lambda: west.answer("/admin/v2/persistent/later/ns/new/partitions") == {"partitions": 4})
    assert "meanwhile" in west.ok("GET", "/admin/v2/tenants")
    assert west.ok("GET", "/admin/v2/namespaces/later") == ["later/ns"]
    assert west.ok("GET", "/admin/v2/namespaces/later/ns/messageTTL") == 120
    # and it goes on synchronizing, both ways
    west.ok("POST", "/admin/v2/namespaces/later/ns/messageTTL", 60)
    everywhere(synchronized, "/admin/v2/namespaces/later/ns/messageTTL", 60)


def test_clients_may_not_consume_the_sync_subscription(synchronized):
    with pytest.raises(pulsar.NotAllowedError):
        synchronized["east"].client().subscribe(f"persistent://{SYNC_TOPIC}", CONFIGURATION_SYNC_SUBSCRIPTION)


def test_bad_options_are_refused(tmp_path):
    for given in ("events", "sync/events", "sync/config/events/more", "sync/config/.events", "http://a/b/c"):
        with pytest.raises(InvalidArgumentError, match="invalid --configuration-sync-topic .*TENANT/NAMESPACE/TOPIC"):
            parse_sync_topic(given)
    assert parse_sync_topic(f"persistent://{SYNC_TOPIC}") == TopicName.parse(SYNC_TOPIC)
    refused = refused_serve(tmp_path / "d", "--configuration-sync-topic", "sync/events")
    assert "invalid --configuration-sync-topic 'sync/events'" in refused and "TENANT/NAMESPACE/TOPIC" in refused
    refused = refused_serve(tmp_path / "d", "--configuration-sync-topic", SYNC_TOPIC,
                            "--configuration-store", "etcd://127.0.0.1:2379")
    assert "--configuration-store and --configuration-sync-topic exclude each other" in refused, refused
    refused = refused_serve(tmp_path / "d", "--configuration-sync-topic", SYNC_TOPIC)
    assert "namespace sync/config does not exist" in refused and "Create tenant sync" in refused, refused


# the conflict rule, on events made up for it

NAMESPACE = "acme/orders"


def _ttl_event(ttl_ms: int, time_ms: int, origin: str) -> SyncEvent:
    value = {"policies": {"message_ttl_ms": ttl_ms}, "permissions": {}}
    return SyncEvent(SharedChange("namespace", NAMESPACE, value), Stamp(time_ms, origin))


@contextmanager
def _east(data):
    """Cluster east's data directory, open in this process, and its synchronization (not started: events are
    given to it)."""
    broker = Broker.open(data, clock=ManualClock(), background=False)
    try:
        yield broker, ConfigurationSync(broker, "east", SYNC_TOPIC)
    finally:
        broker.close()


def _ttl(broker) -> int | None:
    """The namespace's message TTL; None when there is no such namespace."""
    try:
        return broker.catalog.metadata.namespace_policies(NAMESPACE).message_ttl_ms
    except NotFoundError:
        return None


def test_the_newest_change_wins_and_a_tie_goes_to_the_smaller_cluster_name(tmp_path):
    older, tie_west, tie_north = _ttl_event(60, 100, "west"), _ttl_event(200, 200, "west"), \
        _ttl_event(300, 200, "north")
    for index, order in enumerate(([older, tie_west, tie_north], [tie_north, tie_west, older],
                                   [tie_west, older, tie_north])):
        with _east(tmp_path / str(index)) as (broker, sync):
            sync.apply(order)
            assert _ttl(broker) == 300, order  # (north sorts before west; 100 is older)
    # the stamps outlive a restart: an event delivered again, or an older one arriving now, changes nothing
    with _east(tmp_path / "0") as (broker, sync):
        assert not sync.apply([tie_north, tie_west, _ttl_event(250, 199, "east")])
        assert _ttl(broker) == 300
        assert sync.apply([_ttl_event(400, 201, "west")])
        assert _ttl(broker) == 400


def test_a_deletion_wins_over_older_changes_and_loses_to_newer_ones(tmp_path):
    deletion = SyncEvent(SharedChange("namespace", NAMESPACE, None), Stamp(150, "north"))
    with _east(tmp_path) as (broker, sync):
        sync.apply([_ttl_event(60, 100, "west"), deletion, _ttl_event(70, 120, "east")])
        assert _ttl(broker) is None
        sync.apply([_ttl_event(80, 151, "west")])
        assert _ttl(broker) == 80


def test_events_that_are_not_configuration_events_are_refused():
    for data in (b"", b"[]", b'{"kind": "topic"}', b'{"kind": "queue", "key": "k", "value": null, "origin": "a", '
                                                    b'"time_ms": 1}',
                 b'{"kind": "tenant", "key": "t", "value": null, "origin": "a", "time_ms": "1"}'):
        with pytest.raises(ValueError, match="not a configuration event"):
            SyncEvent.from_json(data)
    event = _ttl_event(60, 100, "west")
    assert SyncEvent.from_json(event.to_json()) == event


@contextmanager
def _synchronizing(data):
    """A broker on `data` (its clock at 5,000 ms) whose synchronization through SYNC_TOPIC runs, as east's."""
    broker = Broker.open(data, clock=ManualClock(5_000), background=False)
    metadata = broker.catalog.metadata
    metadata.create_tenant("sync", {})
    metadata.create_namespace(NamespaceName.parse("sync/config"))
    sync = ConfigurationSync(broker, "east", SYNC_TOPIC)
    sync.start()
    try:
        yield broker
    finally:
        sync.stop()
        broker.close()


def test_a_change_is_stamped_and_written_in_its_transaction_and_refused_when_it_cannot_be_written(tmp_path):
    with _synchronizing(tmp_path) as broker:
        metadata = broker.catalog.metadata
        metadata.create_tenant("acme", {})
        assert metadata.shared_stamp("tenant", "acme") == Stamp(5_000, "east")
        metadata.set_tenant_config("acme", {"admin_roles": ["ops"]})  # (the same ms: the stamp still moves on)
        assert metadata.shared_stamp("tenant", "acme") == Stamp(5_001, "east")
        assert broker.store.end_offset(TopicName.parse(SYNC_TOPIC), 0) == 2
        assert broker.topic(SYNC_TOPIC).config.segment_size == SEGMENT_SIZE  # (made small: its events are)
        broker.delete_topic(SYNC_TOPIC, force=True)
        with pytest.raises(ConfigurationStoreError, match=f"the configuration sync topic {SYNC_TOPIC} could not"):
            metadata.create_tenant("later", {})
        assert "later" not in metadata.tenants() and metadata.shared_stamp("tenant", "later") == Stamp()


def test_a_change_made_here_supersedes_what_came_from_a_cluster_whose_clock_runs_ahead():
    ahead = Stamp(5_000, "west")
    mine = ahead.following("east", 1_000)
    assert mine == Stamp(5_001, "east") and mine.supersedes(ahead) and not ahead.supersedes(mine)
    assert Stamp(100, "east").following("east", 2_000) == Stamp(2_000, "east")
    assert not mine.supersedes(mine)


def test_a_change_the_topic_took_and_the_catalog_then_refused_is_made_when_its_own_event_is_read_back(tmp_path):
    """The sync topic is where a change is made: once its event is written, every cluster applies it, this
    one too (its catalog's stamp rolled back with the refused commit, so its own event is newer), though the
    call that made it failed."""
    refusals = []

    def refuse_once(change: SharedChange) -> None:  # (told after the sync topic took the change)
        if not refusals:
            refusals.append(change)
            raise OSError("the disk is full")

    with _synchronizing(tmp_path) as broker:
        metadata = broker.catalog.metadata
        metadata.on_shared_change(refuse_once)
        with pytest.raises(OSError, match="the disk is full"):
            metadata.create_tenant("acme", {"admin_roles": ["ops"]})
        assert broker.store.end_offset(TopicName.parse(SYNC_TOPIC), 0) == 1  # (the event was written)
        wait_until(lambda: "acme" in metadata.tenants())
        assert metadata.tenant_config("acme") == {"admin_roles": ["ops"]}
        assert metadata.shared_stamp("tenant", "acme") == Stamp(5_000, "east")
