"""log.admin's geo-replication configuration (docs/SERVER.md, "Geo-replication: clusters and policies"):
clusters, tenants' allowed clusters, namespaces' clusters and allowed clusters, topics' replication clusters.
Every refusal names the offending cluster, raises the error its REST status comes from, and changes nothing;
every change tells the catalog's listeners (the replication service) at once."""

from __future__ import annotations

from pathlib import Path

import pytest

import seglog
from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.errors import (
    ClusterInUseError,
    ClusterNotAllowedError,
    InvalidArgumentError,
    InvalidNameError,
    NotFoundError,
    TopicNotFoundError,
    UnusableClusterError,
)
from seglog.names import TopicName

LOCAL = "here"


def urls(name: str) -> dict[str, str]:
    return {"serviceUrl": f"http://{name}:8080", "brokerServiceUrl": f"pulsar://{name}:6650"}


def open_broker(path: Path, local: str | None) -> Broker:
    broker = Broker.open(path, clock=seglog.ManualClock(), background=False)
    if local is not None:
        broker.catalog.record_local_cluster(local)  # as `seglog serve --cluster` does
    return broker


@pytest.fixture
def broker(tmp_path: Path):
    """A data directory served as cluster `here` (registered without URLs: its own need none), with remote
    clusters east and west (with URLs) and bare (without)."""
    opened = open_broker(tmp_path / "data", LOCAL)
    admin = Admin(opened)
    admin.clusters.create(LOCAL)
    admin.clusters.create("east", urls("east"))
    admin.clusters.create("west", urls("west"))
    admin.clusters.create("bare")
    yield opened
    opened.close()


@pytest.fixture
def admin(broker) -> Admin:
    return Admin(broker)


# --- clusters --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "argument", "accepted"), [
    ({"serviceUrl": "pulsar://x:6650"}, "serviceUrl", "a URL http://HOST:PORT"),
    ({"serviceUrlTls": "http://x:8443"}, "serviceUrlTls", "a URL https://HOST:PORT"),
    ({"brokerServiceUrl": "http://x:6650"}, "brokerServiceUrl", "a URL pulsar://HOST:PORT"),
    ({"brokerServiceUrlTls": "pulsar://"}, "brokerServiceUrlTls", "a URL pulsar+ssl://HOST:PORT"),
    ({"serviceUrl": 8080}, "serviceUrl", "a URL http://HOST:PORT"),
    ({"authenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationTls",
      "authenticationParameters": "tlsCertFile:/c"}, "authenticationPlugin", "'token' or"),
    ({"authenticationPlugin": "token"}, "authenticationParameters", "'token:<JWT>', or 'file:<path>'"),
    ({"authenticationPlugin": "token", "authenticationParameters": "eyJhbGciOi"}, "authenticationParameters",
     "'token:<JWT>'"),
    ({"authenticationPlugin": "token", "authenticationParameters": "token:"}, "authenticationParameters",
     "'token:<JWT>'"),
    ({"authenticationParameters": "token:abc"}, "authenticationParameters", "no parameters without an "
                                                                           "authenticationPlugin"),
    ({"peerClusterNames": "west"}, "peerClusterNames", "a list of cluster names"),
    (["http://x:8080"], "cluster data", "a JSON object"),
])
def test_cluster_data_refused_names_the_key_and_what_is_accepted(admin, data, argument, accepted) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        admin.clusters.create("new", data)
    assert refused.value.argument == argument and accepted in refused.value.accepted
    assert "new" not in admin.clusters.list()
    with pytest.raises(InvalidArgumentError):
        admin.clusters.update("east", data)
    assert admin.clusters.get("east")["serviceUrl"] == "http://east:8080"


@pytest.mark.parametrize("parameters", ["token:eyJhbGciOiJIUzI1NiJ9.e30.x", "file:/etc/seglog/west.token",
                                        "file:///etc/seglog/west.token"])
@pytest.mark.parametrize("plugin", ["token", "org.apache.pulsar.client.impl.auth.AuthenticationToken"])
def test_a_cluster_keeps_the_token_replication_authenticates_with(admin, plugin, parameters) -> None:
    admin.clusters.create("far", {**urls("far"), "authenticationPlugin": plugin,
                                  "authenticationParameters": parameters})
    data = admin.clusters.get("far")
    assert (data["authenticationPlugin"], data["authenticationParameters"]) == (plugin, parameters)
    assert admin.clusters.get("east")["authenticationPlugin"] is None


def test_a_service_url_may_list_several_brokers(admin) -> None:
    admin.clusters.create("many", {"serviceUrl": "http://a:8080,b:8080", "brokerServiceUrl": "pulsar://a:6650,b:6650"})
    assert admin.clusters.get("many")["serviceUrl"] == "http://a:8080,b:8080"


def test_a_cluster_in_use_or_the_local_one_cannot_be_deleted(admin) -> None:
    admin.tenants.create("acme", ["here", "east", "west"])
    admin.namespaces.create("acme/ns", clusters=["here", "east"], allowed_clusters=["here", "east", "west"])
    admin.topics.create("acme/ns/t")
    admin.topics.set_replication_clusters("acme/ns/t", ["here", "west"])
    admin.topics.set_replication_clusters("acme/ns/t", ["east"], is_global=True)
    with pytest.raises(ClusterInUseError) as refused:
        admin.clusters.delete("east")
    assert str(refused.value) == ("cluster east is still used by tenant acme (allowed clusters); namespace acme/ns "
                                  "(clusters, allowed clusters); topic acme/ns/t (global replication clusters); "
                                  "remove it from them first")
    with pytest.raises(ClusterInUseError, match="cluster here is this data directory's own cluster"):
        admin.clusters.delete("here")
    with pytest.raises(NotFoundError, match="cluster nope does not exist"):
        admin.clusters.delete("nope")
    assert admin.clusters.list() == ["bare", "east", "here", "west"]
    admin.topics.remove_replication_clusters("acme/ns/t", is_global=True)
    admin.topics.delete("acme/ns/t")
    admin.namespaces.delete("acme/ns")
    admin.tenants.delete("acme")
    admin.clusters.delete("east")
    assert admin.clusters.list() == ["bare", "here", "west"]


# --- tenants ---------------------------------------------------------------------------------------------------

def test_a_tenant_allows_registered_clusters_only_and_empty_allows_every_cluster(admin) -> None:
    with pytest.raises(UnusableClusterError, match="cluster nope is not registered") as refused:
        admin.tenants.create("acme", ["east", "nope"])
    assert refused.value.argument == "allowed_clusters" and "registered clusters: bare, east, here, west" in str(
        refused.value)
    assert "acme" not in admin.tenants.list()
    with pytest.raises(InvalidNameError, match="invalid cluster name 'a b'"):
        admin.tenants.create("acme", ["a b"])
    admin.tenants.create("acme", [])
    assert admin.tenants.get("acme") == {"adminRoles": [], "allowedClusters": []}
    admin.namespaces.create("acme/ns", clusters=["east", "west"])  # empty: every cluster
    admin.tenants.update("acme", None)
    admin.tenants.update("acme", ["west", "east", "here", "east"])  # each once, in the order given
    assert admin.tenants.get("acme")["allowedClusters"] == ["west", "east", "here"]


def test_a_tenant_update_that_drops_a_cluster_a_namespace_uses_is_refused(admin) -> None:
    admin.tenants.create("acme", ["here", "east", "west"])
    admin.namespaces.create("acme/replicated", clusters=["here", "east"])
    admin.namespaces.create("acme/allowing", allowed_clusters=["here", "west"])
    admin.namespaces.create("acme/local")
    for allowed, namespace, cluster in ((["here", "west"], "acme/replicated", "east"),
                                        (["here", "east"], "acme/allowing", "west"),
                                        (["east", "west"], "acme/allowing", "here")):
        with pytest.raises(ClusterInUseError) as refused:
            admin.tenants.update("acme", allowed)
        assert str(refused.value).startswith(f"Active namespaces: namespace {namespace} uses cluster {cluster}, ")
        assert admin.tenants.get("acme")["allowedClusters"] == ["here", "east", "west"]
    admin.namespaces.delete("acme/allowing")
    admin.namespaces.set_clusters("acme/replicated", ["here"])
    with pytest.raises(ClusterInUseError, match="namespace acme/local uses cluster here"):  # local: its cluster
        admin.tenants.update("acme", ["east"])
    admin.tenants.update("acme", ["here"])
    assert admin.tenants.get("acme")["allowedClusters"] == ["here"]


# --- namespaces ------------------------------------------------------------------------------------------------

def test_a_namespace_without_clusters_is_local_and_one_with_clusters_replicates(admin) -> None:
    admin.namespaces.create("public/local")
    assert admin.namespaces.get_clusters("public/local") == ["here"]
    assert admin.namespaces.get_allowed_clusters("public/local") == ["here"]
    admin.namespaces.create("public/geo", clusters=["here", "east"])
    assert admin.namespaces.get_clusters("public/geo") == ["east", "here"]
    assert admin.namespaces.get_allowed_clusters("public/geo") == ["east", "here"]  # its clusters
    admin.namespaces.set_allowed_clusters("public/geo", ["here", "east", "west"])
    admin.namespaces.set_clusters("public/geo", ["west", "here"])
    assert admin.namespaces.get_clusters("public/geo") == ["here", "west"]
    assert admin.namespaces.get_allowed_clusters("public/geo") == ["east", "here", "west"]
    with pytest.raises(NotFoundError, match="namespace public/nope does not exist"):
        admin.namespaces.get_clusters("public/nope")
    with pytest.raises(NotFoundError, match="namespace public/nope does not exist"):
        admin.namespaces.set_clusters("public/nope", ["here"])


@pytest.mark.parametrize(("clusters", "allowed", "error", "argument", "said"), [
    (["here", "nope"], None, UnusableClusterError, "clusters", "cluster nope is not registered"),
    (["here", "bare"], None, UnusableClusterError, "clusters", "cluster bare is registered without a service URL "
                                                               "(serviceUrl or serviceUrlTls) and a broker service "
                                                               "URL (brokerServiceUrl or brokerServiceUrlTls)"),
    (None, ["here", "bare"], UnusableClusterError, "allowed_clusters", "cluster bare is registered without"),
    (["west"], None, ClusterNotAllowedError, "clusters",
     "Cluster [west] is not in the list of allowed clusters list for tenant [acme]"),
    (None, ["here", "west"], ClusterNotAllowedError, "allowed_clusters", "Cluster [west] is not in the list"),
    (["here", "east"], ["here"], InvalidArgumentError, "clusters", "cluster east is not in the allowed clusters of "
                                                                   "acme/new"),
    (None, ["east"], InvalidArgumentError, "allowed_clusters",
     "cluster here, one of the clusters of acme/new (this cluster: the namespace sets none), would not be allowed"),
    ([], None, InvalidArgumentError, "clusters", "a list of one or more cluster names"),
    ("here", None, InvalidArgumentError, "clusters", "a list of one or more cluster names"),
    ({"here": 1}, None, InvalidArgumentError, "clusters", "a list of one or more cluster names"),
    (None, [], InvalidArgumentError, "allowed_clusters", "a list of one or more cluster names"),
    (["a b"], None, InvalidNameError, "cluster name", "invalid cluster name 'a b'"),
])
def test_a_namespace_created_with_clusters_that_break_a_rule_is_not_created(admin, clusters, allowed, error,
                                                                           argument, said) -> None:
    admin.tenants.create("acme", ["here", "east", "bare"])
    with pytest.raises(error) as refused:
        admin.namespaces.create("acme/new", clusters=clusters, allowed_clusters=allowed)
    assert type(refused.value) is error and refused.value.argument == argument
    assert said in str(refused.value)
    assert admin.namespaces.list("acme") == []


def test_the_local_cluster_needs_no_urls_but_every_remote_does(admin) -> None:
    admin.namespaces.set_clusters("public/default", ["here", "east"])  # `here` is registered without URLs
    with pytest.raises(UnusableClusterError, match="cluster bare is registered without"):
        admin.namespaces.set_clusters("public/default", ["here", "bare"])
    admin.clusters.update("bare", {"serviceUrlTls": "https://bare:8443", "brokerServiceUrlTls": "pulsar+ssl://bare:6651"})
    admin.namespaces.set_clusters("public/default", ["here", "bare"])  # TLS URLs do


def test_refused_namespace_changes_leave_its_clusters_as_they_were(admin) -> None:
    admin.tenants.create("acme", ["here", "east", "west"])
    admin.namespaces.create("acme/ns", clusters=["here", "east"], allowed_clusters=["here", "east"])
    refusals = [
        (admin.namespaces.set_clusters, ["here", "west"], InvalidArgumentError, "cluster west is not in the allowed "
                                                                                "clusters of acme/ns"),
        (admin.namespaces.set_clusters, ["bare"], UnusableClusterError, "cluster bare is registered without"),
        (admin.namespaces.set_allowed_clusters, ["here"], InvalidArgumentError, "cluster east, one of the clusters "
                                                                                "of acme/ns, would not be allowed"),
        (admin.namespaces.set_allowed_clusters, ["here", "east", "bare"], UnusableClusterError, "cluster bare"),
    ]
    for setter, clusters, error, said in refusals:
        with pytest.raises(error, match=said.replace("(", r"\(").replace(")", r"\)")):
            setter("acme/ns", clusters)
        assert admin.namespaces.get_clusters("acme/ns") == ["east", "here"]
        assert admin.namespaces.get_allowed_clusters("acme/ns") == ["east", "here"]
    admin.tenants.update("acme", ["here", "east"])
    with pytest.raises(ClusterNotAllowedError, match=r"Cluster \[west\] is not in the list of allowed clusters list "
                                                     r"for tenant \[acme\]"):
        admin.namespaces.set_allowed_clusters("acme/ns", ["here", "east", "west"])


# --- topics ----------------------------------------------------------------------------------------------------

def test_topic_replication_clusters_stay_within_the_namespace_and_a_local_policy_keeps_this_cluster(admin) -> None:
    admin.namespaces.create("public/geo", clusters=["here", "east"])
    admin.topics.create("public/geo/t")
    with pytest.raises(InvalidArgumentError, match="cluster west is not in the namespace's allowed clusters") as out:
        admin.topics.set_replication_clusters("public/geo/t", ["here", "west"])
    assert "accepted: clusters among the namespace's allowed clusters: east, here" in str(out.value)
    with pytest.raises(InvalidArgumentError, match="a local topic policy applies on here only"):
        admin.topics.set_replication_clusters("public/geo/t", ["east"])
    with pytest.raises(UnusableClusterError, match="cluster nope is not registered"):
        admin.topics.set_replication_clusters("public/geo/t", ["here", "nope"], is_global=True)
    with pytest.raises(TopicNotFoundError, match="public/geo/nope does not exist"):
        admin.topics.set_replication_clusters("public/geo/nope", ["here"])
    for is_global in (False, True):
        assert admin.topics.get_replication_clusters("public/geo/t", is_global=is_global) is None
    admin.topics.set_replication_clusters("public/geo/t", ["east"], is_global=True)  # a global one may leave it out
    admin.topics.set_replication_clusters("public/geo/t", ["here"])
    assert admin.topics.get_replication_clusters("public/geo/t") == ["here"]
    assert admin.topics.get_replication_clusters("public/geo/t", is_global=True) == ["east"]
    assert admin.topics.get_replication_clusters("public/geo/t", applied=True) == ["here"]
    admin.topics.set_retention("public/geo/t", size="1G", time="1h")  # other topic policies are untouched
    admin.topics.remove_replication_clusters("public/geo/t")
    assert admin.topics.get_retention("public/geo/t") == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}
    assert admin.topics.get_replication_clusters("public/geo/t", applied=True) == ["east"]
    admin.topics.remove_replication_clusters("public/geo/t", is_global=True)
    assert admin.topics.get_replication_clusters("public/geo/t", applied=True) == ["east", "here"]


# --- a data directory never served -----------------------------------------------------------------------------

def test_before_the_first_serve_the_checks_that_need_the_local_cluster_are_skipped(tmp_path: Path) -> None:
    broker = open_broker(tmp_path / "d", None)
    try:
        admin = Admin(broker)
        admin.clusters.create("a", urls("a"))
        admin.clusters.create("b", urls("b"))
        admin.clusters.create("c")
        assert admin.namespaces.get_clusters("public/default") == []  # local, and no cluster yet
        assert admin.namespaces.get_allowed_clusters("public/default") == []
        admin.topics.create("t")
        admin.topics.set_replication_clusters("t", ["b"])  # whether b is this cluster is not known yet
        assert admin.topics.get_replication_clusters("t", applied=True) == ["b"]
        admin.topics.remove_replication_clusters("t")
        assert admin.topics.get_replication_clusters("t", applied=True) == []
        with pytest.raises(UnusableClusterError, match="cluster c is registered without"):  # c may be remote
            admin.namespaces.set_clusters("public/default", ["a", "c"])
        admin.tenants.create("acme", ["a"])
        admin.namespaces.create("acme/local")
        admin.tenants.update("acme", ["b"])  # a local namespace uses no named cluster yet
        admin.clusters.delete("a")
    finally:
        broker.close()


# --- listeners -------------------------------------------------------------------------------------------------

def test_every_change_tells_the_listeners_at_once_and_a_refused_one_does_not(broker, admin) -> None:
    """naming the topic when the change is to one topic's own policies, None when it may reach any"""
    changes: list[TopicName | None] = []
    broker.catalog.on_topic_policies_changed(changes.append)
    admin.topics.create("t")
    t = TopicName.parse("t")
    steps = [
        (lambda: admin.clusters.create("far", urls("far")), None),
        (lambda: admin.clusters.update("far", urls("far2")), None),
        (lambda: admin.tenants.create("acme", ["here", "east"]), None),
        (lambda: admin.tenants.update("acme", ["here", "east", "west"]), None),
        (lambda: admin.namespaces.create("acme/ns", clusters=["here"]), None),
        (lambda: admin.namespaces.set_allowed_clusters("public/default", ["here", "east"]), None),
        (lambda: admin.namespaces.set_clusters("public/default", ["here", "east"]), None),
        (lambda: admin.namespaces.set_retention("public/default", size="1G", time="1h"), None),
        (lambda: admin.topics.set_replication_clusters("t", ["here"]), t),
        (lambda: admin.topics.set_replication_clusters("t", ["east"], is_global=True), t),
        (lambda: admin.topics.remove_replication_clusters("t"), t),
        (lambda: admin.topics.remove_replication_clusters("t", is_global=True), t),
        (lambda: admin.topics.set_retention("t", size="1G", time="1h"), t),
        (lambda: broker.set_topic_config("t", {"retention_time": "2h"}), t),
        (lambda: admin.clusters.delete("far"), None),
    ]
    for step, named in steps:
        step()
        assert changes[-1] == named
    assert len(changes) == len(steps)
    with pytest.raises(UnusableClusterError):
        admin.namespaces.set_clusters("acme/ns", ["nope"])
    assert len(changes) == len(steps)


# --- cascading deletions with a shared configuration store (replication/config_store.py) --------------------

def test_cascading_deletions_name_by_cluster_left_out_the_topics_it_would_delete(broker, admin) -> None:
    admin.namespaces.create("public/geo", clusters=[LOCAL, "east", "west"])
    for topic in ("public/geo/plain", "public/geo/kept", "public/geo/mine"):
        admin.topics.create(topic)
    admin.topics.set_replication_clusters("public/geo/kept", [LOCAL, "east", "west"], is_global=True)
    admin.topics.set_replication_clusters("public/geo/mine", [LOCAL, "west"])  # local: keeps it here
    # independent stores: a namespace change only stops replication
    assert admin.namespaces.cascading_deletions("public/geo", clusters=["east"]) == {}
    broker.catalog.share_configuration("etcd://127.0.0.1:2379")
    assert admin.namespaces.cascading_deletions("public/geo", clusters=["east"]) == {
        LOCAL: ["public/geo/plain"], "west": ["public/geo/mine", "public/geo/plain"]}
    assert admin.namespaces.cascading_deletions("public/geo", clusters=[LOCAL, "east", "west"]) == {}
    # leaving the allowed clusters deletes whatever the topics' policies
    assert admin.namespaces.cascading_deletions("public/geo", allowed_clusters=[LOCAL, "east"]) == {
        "west": ["public/geo/kept", "public/geo/mine", "public/geo/plain"]}
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        admin.namespaces.cascading_deletions("public/geo")
