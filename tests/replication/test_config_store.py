"""A shared configuration store (`seglog serve --configuration-store etcd://...`) with a real etcd and clusters
of `seglog serve`: what one cluster changes (clusters, tenants, namespaces, their policies and permissions,
partitioned topics) every other sees; namespace replication is 2-way by one shared config; a cluster a namespace
leaves out deletes its topics (a global topic policy protects a topic against a clusters change, not against an
allowed-clusters change), and the CLI asks first; a restarted cluster takes what changed while it was down."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from click.testing import CliRunner

from helpers_etcd import free_port, start_etcd
from helpers_replication import (
    check_growth_travels,
    everywhere,
    read_all,
    start_shared_clusters,
    stop_clusters,
    wait_until,
)
from helpers_server import pulsar, refused_at_once, refused_serve
from seglog.cli import main

NS = "/admin/v2/namespaces/acme/orders"


@pytest.fixture
def etcd(tmp_path):
    server = start_etcd(tmp_path / "etcd")
    yield server
    server.stop()


@pytest.fixture
def shared(tmp_path, etcd):
    clusters = start_shared_clusters(tmp_path, etcd.url, "east", "west", "north")
    yield clusters
    stop_clusters(clusters)


def _make_namespace(clusters, on: str = "east", names=("east", "west")) -> None:
    clusters[on].ok("PUT", "/admin/v2/tenants/acme", {"allowedClusters": []})
    everywhere(clusters, "/admin/v2/tenants/acme", {"adminRoles": [], "allowedClusters": []})
    clusters[on].ok("PUT", NS, {"replication_clusters": list(names)})
    everywhere(clusters, f"{NS}/replication", sorted(names))


def test_clusters_tenants_namespaces_and_their_policies_made_on_one_cluster_are_seen_on_all(shared):
    # every cluster registered itself in the store: none registered the others
    everywhere(shared, "/admin/v2/clusters", ["east", "north", "west"])
    west = shared["north"].ok("GET", "/admin/v2/clusters/west")
    assert west["serviceUrl"] == shared["west"].server.http_url
    assert west["brokerServiceUrl"] == shared["west"].server.pulsar_url
    _make_namespace(shared, on="west")
    shared["north"].ok("POST", f"{NS}/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10})
    everywhere(shared, f"{NS}/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10})
    shared["east"].ok("POST", f"{NS}/permissions/reader", ["consume"])
    everywhere(shared, f"{NS}/permissions", {"reader": ["consume"]})
    shared["west"].ok("POST", f"{NS}/allowedClusters", ["east", "west", "north"])
    everywhere(shared, f"{NS}/allowedClusters", ["east", "north", "west"])
    shared["east"].ok("PUT", "/admin/v2/namespaces/acme/spare")
    everywhere(shared, "/admin/v2/namespaces/acme", ["acme/orders", "acme/spare"])
    shared["north"].ok("DELETE", "/admin/v2/namespaces/acme/spare")
    everywhere(shared, "/admin/v2/namespaces/acme", ["acme/orders"])


def test_a_partitioned_topic_made_on_one_cluster_is_on_all_and_grows(shared):
    _make_namespace(shared, names=("east", "west", "north"))
    path = "/admin/v2/persistent/acme/orders/events/partitions"
    shared["east"].ok("PUT", path, 3)
    everywhere(shared, path, {"partitions": 3})
    check_growth_travels(shared)


def test_a_partitioned_topic_deleted_on_one_cluster_goes_everywhere(shared):
    _make_namespace(shared, names=("east", "west", "north"))
    path = "/admin/v2/persistent/acme/orders/events/partitions"
    shared["east"].ok("PUT", path, 3)
    everywhere(shared, path, {"partitions": 3})
    shared["north"].ok("DELETE", "/seglog/v1/topics/acme/orders/events?force=true")
    for cluster in shared.values():
        wait_until(lambda cluster=cluster: "acme/orders/events" not in cluster.topics())
    # nothing brought it back: no replicator made the partitioned topic again, nor a partition's name a topic
    for name, cluster in shared.items():
        assert [topic for topic in cluster.topics() if topic.startswith("acme/orders/events")] == [], name
        assert cluster.answer(path) == {"partitions": 0}, name


def test_namespace_replication_is_two_way_with_one_shared_config(shared):
    _make_namespace(shared)  # set once, on east
    topic = "persistent://acme/orders/trades"
    shared["east"].client().create_producer(topic).send(b"from east")
    shared["west"].client().create_producer(topic).send(b"from west")
    for name in ("east", "west"):
        assert Counter(m.data() for m in read_all(shared[name], topic, expected=2)) == \
               Counter([b"from east", b"from west"]), name


def test_concurrent_changes_end_the_same_everywhere(shared):
    _make_namespace(shared)
    threads = [threading.Thread(target=cluster.ok, args=("POST", f"{NS}/messageTTL", ttl))
               for cluster, ttl in ((shared["east"], 100), (shared["west"], 200), (shared["north"], 300))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    wait_until(lambda: len({cluster.answer(f"{NS}/messageTTL") for cluster in shared.values()}) == 1)
    assert shared["east"].answer(f"{NS}/messageTTL") in (100, 200, 300)


def test_a_cluster_left_out_of_the_namespace_deletes_its_topics_but_those_a_global_policy_keeps(shared):
    _make_namespace(shared)
    for topic in ("kept", "dropped"):
        shared["east"].ok("PUT", f"/admin/v2/persistent/acme/orders/{topic}/partitions", 2)
        for name in ("east", "west"):
            wait_until(lambda name=name, topic=topic: f"acme/orders/{topic}" in shared[name].topics())
    shared["west"].ok("POST", "/admin/v2/persistent/acme/orders/kept/replication?isGlobal=true", ["east", "west"])
    wait_until(lambda: shared["east"].answer("/admin/v2/persistent/acme/orders/kept/replication?isGlobal=true")
               == ["east", "west"])
    shared["east"].ok("POST", f"{NS}/replication", ["east"])
    wait_until(lambda: "acme/orders/dropped" not in shared["west"].topics())
    assert "acme/orders/kept" in shared["west"].topics()
    # clients there are refused, and make nothing (the namespace's clusters leave west out)
    west = shared["west"].client()
    refused_at_once(pulsar.TopicNotFound, lambda: west.create_producer("persistent://acme/orders/dropped"))
    refused_at_once(pulsar.TopicNotFound, lambda: west.subscribe("persistent://acme/orders/new", "sub"))
    assert not {"acme/orders/dropped", "acme/orders/new"} & set(shared["west"].topics())
    assert {"acme/orders/kept", "acme/orders/dropped"} <= set(shared["east"].topics())
    # the protected topic still replicates, both ways
    topic = "persistent://acme/orders/kept"
    shared["west"].client().create_producer(topic).send(b"still here")
    assert [m.data() for m in read_all(shared["east"], topic, expected=1)] == [b"still here"]
    # leaving the allowed clusters deletes it whatever its policies
    shared["north"].ok("POST", f"{NS}/allowedClusters", ["east"])
    wait_until(lambda: "acme/orders/kept" not in shared["west"].topics())
    assert {"acme/orders/kept", "acme/orders/dropped"} <= set(shared["east"].topics())


def _cli(cluster, *args, answer: str | None = None):
    return CliRunner().invoke(main, ["--url", cluster.server.http_url, *args], input=answer)


def test_the_cli_asks_before_a_namespace_change_deletes_topics_elsewhere(shared):
    _make_namespace(shared)
    shared["east"].ok("PUT", "/admin/v2/persistent/acme/orders/events/partitions", 2)
    wait_until(lambda: "acme/orders/events" in shared["west"].topics())
    refused = _cli(shared["east"], "namespaces", "set-clusters", "acme/orders", "--clusters", "east", answer="n\n")
    assert refused.exit_code == 1, refused.output
    assert "west: acme/orders/events" in refused.output and "Continue?" in refused.output
    assert shared["west"].answer(f"{NS}/replication") == ["east", "west"]
    refused = _cli(shared["east"], "namespaces", "set-allowed-clusters", "acme/orders", "--clusters", "east,north",
                   answer="n\n")
    assert refused.exit_code == 1 and "west: acme/orders/events" in refused.output, refused.output
    # a change that leaves nobody out does not ask
    widened = _cli(shared["east"], "namespaces", "set-clusters", "acme/orders", "--clusters", "east,west,north")
    assert widened.exit_code == 0, widened.output
    done = _cli(shared["east"], "namespaces", "set-clusters", "acme/orders", "--clusters", "east", "--force")
    assert done.exit_code == 0 and "Continue?" not in done.output, done.output
    wait_until(lambda: "acme/orders/events" not in shared["west"].topics())


def test_a_restarted_cluster_takes_what_changed_while_it_was_down(shared):
    _make_namespace(shared, names=("east", "west", "north"))
    shared["east"].ok("PUT", "/admin/v2/namespaces/acme/old")
    shared["east"].ok("PUT", "/admin/v2/persistent/acme/orders/gone/partitions", 2)
    everywhere(shared, "/admin/v2/namespaces/acme", ["acme/old", "acme/orders"])
    wait_until(lambda: "acme/orders/gone" in shared["west"].topics())
    shared["west"].stop()
    shared["east"].ok("PUT", "/admin/v2/tenants/later", {"allowedClusters": []})
    shared["east"].ok("DELETE", "/admin/v2/namespaces/acme/old")
    shared["east"].ok("PUT", "/admin/v2/persistent/acme/orders/new/partitions", 4)
    shared["east"].ok("POST", f"{NS}/messageTTL", 120)
    shared["east"].ok("POST", f"{NS}/replication", ["east", "north"])  # west leaves: its topics there go
    shared["west"].restart()
    west = shared["west"]
    assert "later" in west.ok("GET", "/admin/v2/tenants")
    assert west.ok("GET", "/admin/v2/namespaces/acme") == ["acme/orders"]
    assert west.ok("GET", f"{NS}/messageTTL") == 120
    assert west.ok("GET", f"{NS}/replication") == ["east", "north"]
    assert not [topic for topic in west.topics() if topic.startswith("acme/orders/")]
    # and it follows the store again
    shared["north"].ok("POST", f"{NS}/messageTTL", 60)
    wait_until(lambda: west.answer(f"{NS}/messageTTL") == 60)


def test_configuration_store_urls_are_checked_and_an_unreachable_one_is_a_clear_error(tmp_path):
    for url, detail in (("http://127.0.0.1:2379", "the scheme must be etcd://"),
                        ("etcd://127.0.0.1", "is not HOST:PORT"),
                        ("etcd://127.0.0.1:2379/seglog", "without a path"),
                        ("etcd://127.0.0.1:99999", "a port from 1 to 65535")):
        refused = refused_serve(tmp_path / "d", "--configuration-store", url)
        assert "--configuration-store" in refused and detail in refused, refused
    nobody = f"etcd://127.0.0.1:{free_port()}"
    refused = refused_serve(tmp_path / "d", "--configuration-store", nobody, code=1)  # (a server not reached)
    assert f"the configuration store {nobody} cannot be reached" in refused, refused
