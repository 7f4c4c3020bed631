"""Geo-replication's configuration over `seglog serve`'s admin REST API (docs/SERVER.md, "Geo-replication:
clusters and policies"): Pulsar's paths and bodies, the status of each refusal (400 a rule of the namespace or
topic, 403 outside the tenant's allowed clusters, 412 a cluster unknown, unreachable or in use) with a reason
naming the cluster, and nothing changed by a refused request. The server is cluster `standalone`."""

from __future__ import annotations

import itertools
import subprocess
import sys

import httpx
import pytest

from helpers_server import START_TIMEOUT_S, start_server

_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("geo") / "data")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        for name in ("east", "west"):  # closed ports: the replicators the policies start fail at once and retry
            assert client.put(f"/admin/v2/clusters/{name}", json={
                "serviceUrl": "http://127.0.0.1:9", "brokerServiceUrl": "pulsar://127.0.0.1:9"}).status_code == 204
        assert client.put("/admin/v2/clusters/bare", json={}).status_code == 204
        yield client


def reason(response: httpx.Response, status: int, *fragments: str) -> str:
    assert response.status_code == status, response.text
    text = response.json()["reason"]
    for fragment in fragments:
        assert fragment in text, text
    return text


def tenant(http: httpx.Client, allowed: list[str] | None = None) -> str:
    name = f"geo{next(_names)}"
    body = {"allowedClusters": ["standalone", "east", "west", "bare"] if allowed is None else allowed}
    assert http.put(f"/admin/v2/tenants/{name}", json=body).status_code == 204
    return name


# --- clusters --------------------------------------------------------------------------------------------------

def test_a_cluster_keeps_its_token_and_cannot_go_while_used(http) -> None:
    data = {"serviceUrl": "http://far:8080", "brokerServiceUrl": "pulsar://far:6650",
            "authenticationPlugin": "token", "authenticationParameters": "token:eyJhbGciOiJIUzI1NiJ9.e30.sig"}
    assert http.put("/admin/v2/clusters/far", json=data).status_code == 204
    assert http.get("/admin/v2/clusters/far").json() == {**data, "serviceUrlTls": "", "brokerServiceUrlTls": "",
                                                         "peerClusterNames": None}
    reason(http.post("/admin/v2/clusters/far", json={**data, "authenticationPlugin": "basic"}), 400,
           "invalid authenticationPlugin 'basic'", "accepted: 'token'")
    reason(http.put("/admin/v2/clusters/bad", json={"brokerServiceUrl": "http://bad:6650"}), 400,
           "invalid brokerServiceUrl", "pulsar://HOST:PORT")
    name = tenant(http, ["standalone", "far"])
    reason(http.delete("/admin/v2/clusters/far"), 412, f"cluster far is still used by tenant {name} (allowed clusters)")
    reason(http.delete("/admin/v2/clusters/standalone"), 412, "cluster standalone is this data directory's own cluster")
    assert http.delete(f"/admin/v2/tenants/{name}").status_code == 204
    assert http.delete("/admin/v2/clusters/far").status_code == 204
    assert "bad" not in http.get("/admin/v2/clusters").json()


def test_a_tenant_update_dropping_a_cluster_in_use_is_412_active_namespaces(http) -> None:
    name = tenant(http)
    assert http.put(f"/admin/v2/namespaces/{name}/ns", json={"replication_clusters": ["standalone", "east"]}
                    ).status_code == 204
    reason(http.post(f"/admin/v2/tenants/{name}", json={"allowedClusters": ["standalone", "west"]}), 412,
           f"Active namespaces: namespace {name}/ns uses cluster east")
    assert http.get(f"/admin/v2/tenants/{name}").json()["allowedClusters"] == ["standalone", "east", "west", "bare"]
    reason(http.put(f"/admin/v2/tenants/{name}x", json={"allowedClusters": ["nope"]}), 412,
           "cluster nope is not registered")


# --- namespaces ------------------------------------------------------------------------------------------------

def test_namespace_clusters_and_allowed_clusters_round_trip(http) -> None:
    ns = f"{tenant(http)}/ns"
    base = f"/admin/v2/namespaces/{ns}"
    assert http.put(base).status_code == 204
    assert http.get(f"{base}/replication").json() == ["standalone"]  # local to this cluster
    assert http.get(f"{base}/allowedClusters").json() == ["standalone"]
    assert http.post(f"{base}/replication", json=["standalone", "east"]).status_code == 204
    assert http.get(f"{base}/replication").json() == ["east", "standalone"]
    assert http.get(f"{base}/allowedClusters").json() == ["east", "standalone"]
    assert http.post(f"{base}/allowedClusters", json=["standalone", "east", "west"]).status_code == 204
    policies = http.get(base).json()
    assert policies["replication_clusters"] == ["east", "standalone"]
    assert policies["allowed_clusters"] == ["east", "standalone", "west"]
    reason(http.get(f"/admin/v2/namespaces/{ns}x/replication"), 404, f"namespace {ns}x does not exist")


@pytest.mark.parametrize(("path", "body", "status", "said"), [
    ("replication", ["standalone", "nope"], 412, "cluster nope is not registered"),
    ("replication", ["standalone", "bare"], 412, "cluster bare is registered without a service URL"),
    ("replication", ["west"], 403, "Cluster [west] is not in the list of allowed clusters list for tenant ["),
    ("replication", ["standalone", "east", "east2"], 412, "cluster east2 is not registered"),
    ("replication", [], 400, "a list of one or more cluster names"),
    ("replication", "east", 400, "a list of one or more cluster names"),
    ("replication", {"east": True}, 400, "a list of one or more cluster names"),
    ("replication", ["b d"], 412, "invalid cluster name 'b d'"),
    ("allowedClusters", ["standalone"], 400, "cluster east, one of the clusters of"),
    ("allowedClusters", ["standalone", "east", "west"], 403, "Cluster [west] is not in the list of allowed"),
])
def test_namespace_cluster_refusals_have_pulsars_status_and_name_the_cluster(http, path, body, status, said) -> None:
    name = tenant(http, ["standalone", "east", "bare"])
    base = f"/admin/v2/namespaces/{name}/ns"
    assert http.put(base, json={"replication_clusters": ["standalone", "east"]}).status_code == 204
    reason(http.post(f"{base}/{path}", json=body), status, said)
    assert http.get(f"{base}/replication").json() == ["east", "standalone"]
    assert http.get(f"{base}/allowedClusters").json() == ["east", "standalone"]


@pytest.mark.parametrize(("policies", "status", "said"), [
    ({"replication_clusters": ["standalone", "west"]}, 403, "Cluster [west] is not in the list of allowed clusters"),
    ({"replication_clusters": ["east"], "allowed_clusters": ["standalone"]}, 400, "cluster east is not in the "
                                                                                  "allowed clusters of"),
    ({"allowed_clusters": ["standalone", "nope"]}, 412, "cluster nope is not registered"),
    ({"replication_clusters": "standalone"}, 400, "a list of one or more cluster names"),
])
def test_a_namespace_created_with_refused_clusters_is_not_created(http, policies, status, said) -> None:
    name = tenant(http, ["standalone", "east"])
    reason(http.put(f"/admin/v2/namespaces/{name}/ns", json=policies), status, said)
    assert http.get(f"/admin/v2/namespaces/{name}").json() == []


def test_a_namespace_created_with_empty_lists_is_local_as_pulsars_default_policies_say(http) -> None:
    name = tenant(http)
    assert http.put(f"/admin/v2/namespaces/{name}/ns", json={"replication_clusters": [], "allowed_clusters": []}
                    ).status_code == 204
    policies = http.get(f"/admin/v2/namespaces/{name}/ns").json()
    assert policies["replication_clusters"] == ["standalone"] and policies["allowed_clusters"] == ["standalone"]


# --- topics ----------------------------------------------------------------------------------------------------

def test_topic_replication_clusters_local_global_and_applied(http) -> None:
    ns = f"{tenant(http)}/ns"
    assert http.put(f"/admin/v2/namespaces/{ns}", json={"replication_clusters": ["standalone", "east"],
                                                          "allowed_clusters": ["standalone", "east", "west"]}
                    ).status_code == 204
    assert http.put(f"/admin/v2/persistent/{ns}/t").status_code == 204
    path = f"/admin/v2/persistent/{ns}/t/replication"
    assert http.get(path).json() is None
    assert http.get(path, params={"applied": "true"}).json() == ["east", "standalone"]  # the namespace's
    assert http.post(path, json=["west"], params={"isGlobal": "true"}).status_code == 204
    assert http.get(path, params={"isGlobal": "true"}).json() == ["west"]
    assert http.get(path, params={"applied": "true"}).json() == ["west"]
    assert http.post(path, json=["standalone", "east"]).status_code == 204
    assert http.get(path).json() == ["east", "standalone"]
    assert http.get(path, params={"applied": "true"}).json() == ["east", "standalone"]
    assert http.delete(path).status_code == 204
    assert http.get(path, params={"applied": "true"}).json() == ["west"]
    assert http.delete(path, params={"isGlobal": "true"}).status_code == 204
    assert http.get(path, params={"isGlobal": "true"}).json() is None
    assert http.get(path, params={"applied": "true"}).json() == ["east", "standalone"]


@pytest.mark.parametrize(("query", "body", "status", "said"), [
    ({}, ["east"], 400, "a local topic policy applies on standalone only"),
    ({"isGlobal": "true"}, ["standalone", "bare"], 412, "cluster bare is registered without"),
    ({}, ["standalone", "nope"], 412, "cluster nope is not registered"),
    ({"isGlobal": "true"}, ["west"], 400, "cluster west is not in the namespace's allowed clusters"),
    ({}, "standalone", 400, "a list of one or more cluster names"),
    ({"isGlobal": "maybe"}, ["standalone"], 400, "query parameter isGlobal='maybe': expected true or false"),
])
def test_topic_replication_refusals_name_the_cluster_and_change_nothing(http, query, body, status, said) -> None:
    ns = f"{tenant(http)}/ns"
    assert http.put(f"/admin/v2/namespaces/{ns}", json={"replication_clusters": ["standalone", "east"]}
                    ).status_code == 204
    assert http.put(f"/admin/v2/persistent/{ns}/t").status_code == 204
    path = f"/admin/v2/persistent/{ns}/t/replication"
    reason(http.post(path, json=body, params=query), status, said)
    assert http.get(path).json() is None and http.get(path, params={"isGlobal": "true"}).json() is None


def test_topic_replication_of_a_missing_topic_is_404(http) -> None:
    path = "/admin/v2/persistent/public/default/nope/replication"
    reason(http.get(path), 404, "topic public/default/nope does not exist")
    reason(http.post(path, json=["standalone"]), 404, "does not exist")
    reason(http.delete(path, params={"isGlobal": "true"}), 404, "does not exist")


# --- the cluster a data directory is ---------------------------------------------------------------------------

def test_a_data_directory_served_as_one_cluster_refuses_another_name(tmp_path) -> None:
    data = tmp_path / "data"
    start_server(data).stop()  # cluster standalone
    refused = subprocess.run([sys.executable, "-m", "seglog", "--data", str(data), "serve", "--cluster", "us-west",
                              "--port", "0", "--http-port", "0", "--flight-port", "0"], capture_output=True, text=True,
                             timeout=START_TIMEOUT_S)
    assert refused.returncode == 2 and refused.stdout == ""  # no port was opened, so none printed
    message = " ".join(refused.stderr.split())
    assert "Invalid value for '--cluster': invalid cluster 'us-west'" in message
    assert f"the data directory {data} is cluster 'standalone'" in message
    start_server(data).stop()  # its own name is still served
