"""The admin REST API of `seglog serve` (docs/SERVER.md, "Admin REST"): Pulsar's paths, JSON shapes and
status codes, against a real server on free loopback ports, with the real pulsar-client where clients
matter (stats, delete while connected, reset-cursor, HTTP lookup)."""

from __future__ import annotations

import time

import httpx
import pytest
from helpers_rest import fresh, http_client, reason, serving

from helpers_server import pulsar
from seglog.server.rest import ROUTES, openapi


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("rest") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def http(server):
    with http_client(server) as client:
        yield client
def namespace(http: httpx.Client) -> str:
    """A new tenant and namespace: 'tenant/ns'."""
    tenant = fresh("tenant")
    assert http.put(f"/admin/v2/tenants/{tenant}", json={"adminRoles": [], "allowedClusters": ["standalone"]}
                    ).status_code == 204
    assert http.put(f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
    return f"{tenant}/ns"


# --- health, OpenAPI, errors --------------------------------------------------------------------------------

def test_health_and_unknown_paths(http):
    response = http.get("/admin/v2/brokers/health")
    assert (response.status_code, response.text) == (200, "ok")
    assert http.head("/admin/v2/brokers/health").status_code == 200
    reason(http.get("/admin/v2/nothing/here"), 404, "GET /admin/v2/nothing/here is not served")
    reason(http.delete("/admin/v2/clusters"), 405, "DELETE is not allowed")


def test_the_openapi_document_names_every_route_served(http):
    document = http.get("/admin/v2/openapi.json").json()
    assert document == openapi()
    served = {(route.method.lower(), route.path) for route in ROUTES}
    documented = {(method, path) for path, methods in document["paths"].items() for method in methods}
    assert served == documented
    assert document["paths"]["/admin/v2/tenants/{tenant}"]["put"]["responses"].keys() >= {"204", "409", "412"}


# --- clusters -----------------------------------------------------------------------------------------------

def test_clusters(http, server):
    assert "standalone" in http.get("/admin/v2/clusters").json()
    data = http.get("/admin/v2/clusters/standalone").json()
    assert data["serviceUrl"] == server.http_url and data["brokerServiceUrl"] == server.pulsar_url
    name = fresh("c")
    body = {"serviceUrl": "http://other:8080", "brokerServiceUrl": "pulsar://other:6650"}
    assert http.put(f"/admin/v2/clusters/{name}", json=body).status_code == 204
    reason(http.put(f"/admin/v2/clusters/{name}", json=body), 409, f"cluster {name} already exists")
    assert http.get(f"/admin/v2/clusters/{name}").json()["brokerServiceUrl"] == "pulsar://other:6650"
    assert http.post(f"/admin/v2/clusters/{name}", json={**body, "serviceUrl": "http://x:1"}).status_code == 204
    assert http.get(f"/admin/v2/clusters/{name}").json()["serviceUrl"] == "http://x:1"
    reason(http.post(f"/admin/v2/clusters/{name}", json={"serviceUrl": 5}), 400, "serviceUrl")
    reason(http.post("/admin/v2/clusters/nope", json=body), 404, "cluster nope does not exist")
    reason(http.put("/admin/v2/clusters/b%20d", json=body), 412, "invalid cluster name")
    tenant = fresh("t")
    assert http.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": [name]}).status_code == 204
    reason(http.delete(f"/admin/v2/clusters/{name}"), 412, f"cluster {name} is still used by tenant {tenant} "
                                                           "(allowed clusters)")
    assert http.delete(f"/admin/v2/tenants/{tenant}").status_code == 204
    assert http.delete(f"/admin/v2/clusters/{name}").status_code == 204
    reason(http.get(f"/admin/v2/clusters/{name}"), 404)


# --- tenants ------------------------------------------------------------------------------------------------

def test_tenants(http):
    name = fresh("tenant")
    info = {"adminRoles": ["admin"], "allowedClusters": ["standalone"]}
    assert http.put(f"/admin/v2/tenants/{name}", json=info).status_code == 204
    assert http.get(f"/admin/v2/tenants/{name}").json() == info
    assert name in http.get("/admin/v2/tenants").json()
    assert http.get("/admin/v2/tenants").json() == sorted(http.get("/admin/v2/tenants").json())
    reason(http.put(f"/admin/v2/tenants/{name}", json=info), 409, "already exists")
    assert http.post(f"/admin/v2/tenants/{name}", json={"adminRoles": [], "allowedClusters": None}).status_code == 204
    assert http.get(f"/admin/v2/tenants/{name}").json() == {"adminRoles": [], "allowedClusters": None}
    # empty is every cluster, as Pulsar's geo-replication documentation has it (its broker refuses it: 412)
    assert http.post(f"/admin/v2/tenants/{name}", json={"adminRoles": [], "allowedClusters": []}).status_code == 204
    assert http.get(f"/admin/v2/tenants/{name}").json() == {"adminRoles": [], "allowedClusters": []}
    reason(http.post("/admin/v2/tenants/nope", json=info), 404, "tenant nope does not exist")
    reason(http.get("/admin/v2/tenants/nope"), 404)
    assert http.put(f"/admin/v2/namespaces/{name}/ns").status_code == 204
    reason(http.delete(f"/admin/v2/tenants/{name}"), 409, "still has namespaces")
    reason(http.delete(f"/admin/v2/tenants/{name}?force=true"), 405)
    assert http.delete(f"/admin/v2/namespaces/{name}/ns").status_code == 204
    assert http.delete(f"/admin/v2/tenants/{name}").status_code == 204
    reason(http.delete(f"/admin/v2/tenants/{name}"), 404)


@pytest.mark.parametrize(("body", "status", "said"), [
    ({"allowedClusters": ["nope"]}, 412, "cluster nope is not registered"),
    ({"allowedClusters": ["b d"]}, 412, "invalid cluster name 'b d'"),
    ({"allowedClusters": "standalone"}, 400, "a list of cluster names"),
    ({"adminRoles": [1]}, 400, "a list of role names"),
    ({"allowedCluster": ["standalone"]}, 400, "unknown TenantInfo field(s) allowedCluster"),
    (["standalone"], 400, "expected TenantInfo"),
])
def test_tenant_bodies_refused_create_nothing(http, body, status, said):
    name = fresh("tenant")
    reason(http.put(f"/admin/v2/tenants/{name}", json=body), status, said)
    assert name not in http.get("/admin/v2/tenants").json()


@pytest.mark.parametrize(("content", "said"), [(b"{bad", "not JSON"), (b'{"adminRoles": [', "not JSON")])
def test_bodies_that_are_not_json(http, content, said):
    name = fresh("tenant")
    reason(http.put(f"/admin/v2/tenants/{name}", content=content), 400, said, "expected TenantInfo")
    assert name not in http.get("/admin/v2/tenants").json()


def test_invalid_names_are_412_and_change_nothing(http):
    before = http.get("/admin/v2/tenants").json()
    reason(http.put("/admin/v2/tenants/.hidden", json={}), 412, "invalid tenant name", "starts with '.'")
    reason(http.put("/admin/v2/namespaces/public/b%20d"), 412, "invalid namespace name")
    reason(http.put("/admin/v2/persistent/public/default/a%24b"), 412, "invalid topic name", "'$'")
    assert http.get("/admin/v2/tenants").json() == before


# --- namespaces and policies --------------------------------------------------------------------------------

def test_namespaces(http):
    ns = namespace(http)
    tenant = ns.split("/")[0]
    assert http.get(f"/admin/v2/namespaces/{tenant}").json() == [ns]
    reason(http.put(f"/admin/v2/namespaces/{ns}"), 409, "already exists")
    reason(http.put("/admin/v2/namespaces/nope/ns"), 404, "tenant nope does not exist")
    reason(http.get("/admin/v2/namespaces/nope"), 404)
    policies = http.get(f"/admin/v2/namespaces/{ns}").json()
    assert policies["retention_policies"] is None and policies["message_ttl_in_seconds"] is None
    assert policies["backlog_quota_map"] == {} and policies["replication_clusters"] == ["standalone"]
    assert http.put(f"/admin/v2/persistent/{ns}/t").status_code == 204
    assert http.get(f"/admin/v2/namespaces/{ns}/topics").json() == [f"persistent://{ns}/t"]
    reason(http.delete(f"/admin/v2/namespaces/{ns}"), 409, "still has topics")
    assert http.delete(f"/admin/v2/persistent/{ns}/t").status_code == 204
    assert http.delete(f"/admin/v2/namespaces/{ns}").status_code == 204
    reason(http.get(f"/admin/v2/namespaces/{ns}"), 404)


def test_namespace_created_with_policies_as_pulsar_client_tests_create_them(http):
    tenant = fresh("tenant")
    assert http.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]}).status_code == 204
    body = {"auth_policies": {"namespace_auth": {"anonymous": ["produce", "consume"]}},
            "replication_clusters": ["standalone"], "message_ttl_in_seconds": 120,
            "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100},
            "backlog_quota_map": {"message_age": {"limitTime": 3600, "policy": "producer_exception"}}}
    assert http.put(f"/admin/v2/namespaces/{tenant}/ns", json=body).status_code == 204
    policies = http.get(f"/admin/v2/namespaces/{tenant}/ns").json()
    assert policies["message_ttl_in_seconds"] == 120
    assert policies["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert policies["backlog_quota_map"] == {"message_age": {"limitSize": -1, "limitTime": 3600,
                                                             "policy": "producer_exception"}}
    reason(http.put(f"/admin/v2/namespaces/{tenant}/bad", json={"message_ttl_in_seconds": "soon"}), 400)
    assert http.get(f"/admin/v2/namespaces/{tenant}").json() == [f"{tenant}/ns"]  # the refused one is not made


def test_namespace_policies_round_trip(http):
    ns = namespace(http)
    base = f"/admin/v2/namespaces/{ns}"
    assert http.get(f"{base}/retention").json() is None
    assert http.post(f"{base}/retention", json={"retentionTimeInMinutes": 180, "retentionSizeInMB": -1}
                     ).status_code == 204
    assert http.get(f"{base}/retention").json() == {"retentionTimeInMinutes": 180, "retentionSizeInMB": -1}
    assert http.delete(f"{base}/retention").status_code == 204
    assert http.get(f"{base}/retention").json() is None
    assert http.post(f"{base}/messageTTL", json=300).status_code == 204
    assert http.get(f"{base}/messageTTL").json() == 300
    assert http.delete(f"{base}/messageTTL").status_code == 204
    assert http.get(f"{base}/messageTTL").json() is None
    assert http.get(f"{base}/deduplication").json() is None
    assert http.post(f"{base}/deduplication", json=True).status_code == 204
    assert http.get(f"{base}/deduplication").json() is True
    assert http.post(f"{base}/deduplication", json="yes").status_code == 400
    assert http.delete(f"{base}/deduplication").status_code == 204
    assert http.get(f"{base}/deduplication").json() is None
    quota = {"limitSize": 2 << 30, "limitTime": -1, "policy": "producer_request_hold"}
    assert http.post(f"{base}/backlogQuota", json=quota).status_code == 204
    age = {"limitTime": 60, "policy": "consumer_backlog_eviction"}
    assert http.post(f"{base}/backlogQuota?backlogQuotaType=message_age", json=age).status_code == 204
    assert http.get(f"{base}/backlogQuotaMap").json() == {
        "destination_storage": quota, "message_age": {"limitSize": -1, **age}}
    assert http.delete(f"{base}/backlogQuota?backlogQuotaType=message_age").status_code == 204
    assert http.get(f"{base}/backlogQuotaMap").json() == {"destination_storage": quota}
    reason(http.get("/admin/v2/namespaces/public/nope/retention"), 404, "namespace public/nope does not exist")


@pytest.mark.parametrize(("path", "body", "said"), [
    ("retention", {"retentionTimeInMinutes": 10}, "expected RetentionPolicies"),
    ("retention", {"retentionTimeInMinutes": "10", "retentionSizeInMB": 1},
     "retentionTimeInMinutes must be an integer"),
    ("retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}, "both limits 0"),
    ("retention", {"retentionTimeInMinutes": -5, "retentionSizeInMB": 10}, "integer >= -1"),
    ("messageTTL", "60", "messageTTL must be an integer"),
    ("messageTTL", -1, "integer >= 0"),
    ("backlogQuota", {"limitSize": 10}, "expected BacklogQuota"),
    ("backlogQuota", {"limitSize": 10, "policy": "drop"}, "invalid policy 'drop'"),
    ("backlogQuota", {"limitSize": 0, "policy": "producer_exception"}, "limitSize must be an integer >= 1"),
    ("backlogQuota", {"limitSize": 10, "limitTime": 5, "policy": "producer_exception"}, "limitTime goes with"),
    ("backlogQuota?backlogQuotaType=size", {"limitSize": 10, "policy": "producer_exception"}, "backlogQuotaType"),
])
def test_bad_policy_bodies_are_400_and_change_nothing(http, path, body, said):
    ns = namespace(http)
    reason(http.post(f"/admin/v2/namespaces/{ns}/{path}", json=body), 400, said)
    policies = http.get(f"/admin/v2/namespaces/{ns}").json()
    assert (policies["retention_policies"], policies["message_ttl_in_seconds"], policies["backlog_quota_map"]) \
        == (None, None, {})


def test_topic_policies_and_applied(http):
    ns = namespace(http)
    assert http.post(f"/admin/v2/namespaces/{ns}/messageTTL", json=600).status_code == 204
    assert http.put(f"/admin/v2/persistent/{ns}/t").status_code == 204
    base = f"/admin/v2/persistent/{ns}/t"
    assert http.get(f"{base}/messageTTL").json() is None
    assert http.get(f"{base}/messageTTL?applied=true").json() == 600
    assert http.post(f"{base}/messageTTL?messageTTL=30").status_code == 204
    assert (http.get(f"{base}/messageTTL").json(), http.get(f"{base}/messageTTL?applied=true").json()) == (30, 30)
    reason(http.post(f"{base}/messageTTL?messageTTL=soon"), 400, "messageTTL")
    assert http.post(f"{base}/retention", json={"retentionTimeInMinutes": 5, "retentionSizeInMB": 1}).status_code == 204
    assert http.get(f"{base}/retention").json() == {"retentionTimeInMinutes": 5, "retentionSizeInMB": 1}
    quota = {"limitSize": 4096, "policy": "producer_exception"}
    assert http.post(f"{base}/backlogQuota", json=quota).status_code == 204
    assert http.get(f"{base}/backlogQuotaMap?applied=true").json() == {
        "destination_storage": {"limitSize": 4096, "limitTime": -1, "policy": "producer_exception"}}
    reason(http.get(f"/admin/v2/persistent/{ns}/nope/retention"), 404, "does not exist")


# --- topics -------------------------------------------------------------------------------------------------

def test_topics_create_list_partitions_delete(http):
    ns = namespace(http)
    base = f"/admin/v2/persistent/{ns}"
    assert http.put(f"{base}/plain").status_code == 204
    reason(http.put(f"{base}/plain"), 409, "already exists")
    assert http.put(f"{base}/parts/partitions", content=b"3").status_code == 204
    reason(http.put(f"{base}/parts/partitions", content=b"3"), 409)
    assert http.put(f"{base}/quoted/partitions", json="2").status_code == 204
    assert http.put(f"{base}/meta/partitions", json={"partitions": 2, "properties": {}}).status_code == 204
    assert http.get(base).json() == [f"persistent://{ns}/meta-partition-0", f"persistent://{ns}/meta-partition-1",
                                     f"persistent://{ns}/parts-partition-0", f"persistent://{ns}/parts-partition-1",
                                     f"persistent://{ns}/parts-partition-2", f"persistent://{ns}/plain",
                                     f"persistent://{ns}/quoted-partition-0", f"persistent://{ns}/quoted-partition-1"]
    assert http.get(f"{base}/partitioned").json() == [f"persistent://{ns}/{t}" for t in ("meta", "parts", "quoted")]
    assert http.get(f"{base}/parts/partitions").json() == {"partitions": 3}
    assert http.get(f"{base}/plain/partitions").json() == {"partitions": 0}
    assert http.get(f"{base}/not-yet/partitions?checkAllowAutoCreation=true").json() == {"partitions": 0}
    reason(http.get("/admin/v2/persistent/public/nope/t/partitions"), 404, "namespace public/nope does not exist")
    assert http.post(f"{base}/parts/partitions", content=b"5").status_code == 204
    assert http.get(f"{base}/parts/partitions").json() == {"partitions": 5}
    reason(http.post(f"{base}/parts/partitions", content=b"4"), 400, "more than the 5 partitions")
    reason(http.put(f"{base}/zero/partitions", content=b"0"), 400, "partition count must be an integer >= 1")
    reason(http.put(f"{base}/props", json={"owner": "me"}), 400, "topic properties are not kept")
    reason(http.put("/admin/v2/persistent/public/nope/t"), 404, "namespace public/nope does not exist")
    reason(http.delete(f"{base}/parts"), 405, "partitioned topic", "/partitions")
    reason(http.delete(f"{base}/plain/partitions"), 404, "non-partitioned")
    assert http.delete(f"{base}/parts/partitions").status_code == 204
    assert http.delete(f"{base}/plain").status_code == 204
    reason(http.delete(f"{base}/plain"), 404, "does not exist")
    reason(http.get(f"/admin/v2/persistent/{ns}/nope/stats"), 404)
    reason(http.put(f"{base}/plain/compaction"), 404, "does not exist")  # (compaction: test_compaction_rest.py)


def test_stats_and_delete_with_real_clients(http, server):
    ns = namespace(http)
    topic = f"persistent://{ns}/busy"
    base = f"/admin/v2/persistent/{ns}/busy"
    client = server.client()
    producer = client.create_producer(topic, producer_name="the-producer")
    consumer = client.subscribe(topic, "sub", consumer_name="the-consumer",
                                initial_position=pulsar.InitialPosition.Earliest)
    for i in range(5):
        producer.send(f"m{i}".encode())
    consumer.acknowledge(consumer.receive(10_000))
    stats = wait_for(lambda: http.get(f"{base}/stats").json(),
                     lambda s: s["subscriptions"]["sub"]["msgBacklog"] == 4)
    assert [p["producerName"] for p in stats["publishers"]] == ["the-producer"]
    sub = stats["subscriptions"]["sub"]
    assert sub["type"] == "Exclusive" and sub["isDurable"] is True
    assert [c["consumerName"] for c in sub["consumers"]] == ["the-consumer"]
    assert sub["consumers"][0]["availablePermits"] >= 0 and stats["storageSize"] > 0
    for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "backlogSize", "replication"):
        assert key in stats
    internal = http.get(f"{base}/internalStats").json()
    assert internal["numberOfEntries"] == 5 and internal["lastConfirmedEntry"] == "0:4"
    assert internal["cursors"]["sub"]["markDeletePosition"] == "0:0"
    assert [ledger["entries"] for ledger in internal["ledgers"]] == [5]

    reason(http.delete(base), 412, "producer(s)", "consumers of subscription 'sub'")
    reason(http.delete(f"{base}/subscription/sub"), 412, "consumer")
    assert http.get(f"{base}/subscriptions").json() == ["sub"]  # refused: nothing changed
    assert http.delete(f"{base}?force=true").status_code == 204
    reason(http.get(f"{base}/stats"), 404)
    assert topic not in http.get(f"/admin/v2/persistent/{ns}").json()


def test_partitioned_stats(http, server):
    ns = namespace(http)
    base = f"/admin/v2/persistent/{ns}/p"
    assert http.put(f"{base}/partitions", content=b"2").status_code == 204
    assert http.put(f"{base}/subscription/s", json="earliest").status_code == 204
    producer = server.client().create_producer(f"persistent://{ns}/p")
    for i in range(6):
        producer.send(b"x", partition_key=str(i))
    stats = http.get(f"{base}/partitioned-stats?perPartition=true").json()
    assert stats["metadata"] == {"partitions": 2}
    parts = stats["partitions"]
    assert sorted(parts) == [f"persistent://{ns}/p-partition-0", f"persistent://{ns}/p-partition-1"]
    assert sum(p["subscriptions"]["s"]["msgBacklog"] for p in parts.values()) == 6
    assert stats["subscriptions"]["s"]["msgBacklog"] == 6
    reason(http.get(f"{base}/stats"), 405, "partitioned-stats")
    internal = http.get(f"{base}/partitioned-internalStats").json()
    assert sum(p["numberOfEntries"] for p in internal["partitions"].values()) == 6


def wait_for(get, ok, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


# --- subscriptions and cursors ------------------------------------------------------------------------------

def produced(server, http, count=10) -> tuple[str, str]:
    """A new topic with `count` messages b'0', b'1', ...: (its persistent:// name, its admin path)."""
    ns = namespace(http)
    topic = f"persistent://{ns}/t"
    producer = server.client().create_producer(topic)
    for i in range(count):
        producer.send(str(i).encode())
    producer.close()
    return topic, f"/admin/v2/persistent/{ns}/t"


def backlog(http, base, sub):
    return http.get(f"{base}/stats").json()["subscriptions"][sub]["msgBacklog"]


def test_subscriptions_create_skip_expire_clear_unsubscribe(http, server):
    topic, base = produced(server, http)
    assert http.put(f"{base}/subscription/late").status_code == 204
    assert http.put(f"{base}/subscription/all", json="earliest").status_code == 204
    assert http.put(f"{base}/subscription/mid", json={"ledgerId": 0, "entryId": 4, "partitionIndex": -1}
                    ).status_code == 204
    reason(http.put(f"{base}/subscription/all", json="earliest"), 409, "already exists")
    reason(http.put(f"{base}/subscription/bad", json={"entryId": "x"}), 400, "entryId must be an integer")
    reason(http.put(f"{base}/subscription/a%20b"), 412, "invalid subscription name")
    assert http.get(f"{base}/subscriptions").json() == ["all", "late", "mid"]
    assert (backlog(http, base, "late"), backlog(http, base, "all"), backlog(http, base, "mid")) == (0, 10, 6)
    assert http.post(f"{base}/subscription/all/skip/3").status_code == 204
    assert backlog(http, base, "all") == 7
    reason(http.post(f"{base}/subscription/all/skip/0"), 400, "integer >= 1")
    reason(http.post(f"{base}/subscription/nope/skip/1"), 404, "subscription nope")
    assert http.post(f"{base}/subscription/all/expireMessages/3600").status_code == 204
    assert backlog(http, base, "all") == 7  # nothing is an hour old
    assert http.post(f"{base}/all_subscription/expireMessages/0").status_code == 204
    assert backlog(http, base, "all") == 0 and backlog(http, base, "mid") == 0
    assert http.post(f"{base}/subscription/late/resetcursor/0").status_code == 204
    assert backlog(http, base, "late") == 10
    assert http.post(f"{base}/subscription/late/skip_all").status_code == 204
    assert backlog(http, base, "late") == 0
    assert http.delete(f"{base}/subscription/late").status_code == 204
    reason(http.delete(f"{base}/subscription/late"), 404)
    assert http.get(f"{base}/subscriptions").json() == ["all", "mid"]


def test_peek_message_with_metadata_headers(http, server):
    ns = namespace(http)
    topic = f"persistent://{ns}/t"
    producer = server.client().create_producer(topic)
    producer.send(b"first", properties={"k": "v"}, partition_key="key-1", event_timestamp=1_700_000_000_123)
    producer.send(b"second")
    base = f"/admin/v2/persistent/{ns}/t"
    assert http.put(f"{base}/subscription/s", json="earliest").status_code == 204
    first = http.get(f"{base}/subscription/s/position/1")
    assert first.status_code == 200 and first.content == b"first"
    assert first.headers["content-type"] == "application/octet-stream"
    assert first.headers["X-Pulsar-Message-ID"] == "0:0"
    assert first.headers["X-Pulsar-Partition-Key"] == "key-1"
    assert first.headers["X-Pulsar-Event-Time"] == "2023-11-14T22:13:20.123Z"
    assert first.headers["X-Pulsar-Property-k"] == "v" and first.headers["X-Pulsar-Property"] == '{"k": "v"}'
    assert "X-Pulsar-Publish-Time" in first.headers
    second = http.get(f"{base}/subscription/s/position/2")
    assert second.content == b"second" and second.headers["X-Pulsar-Message-ID"] == "0:1"
    reason(http.get(f"{base}/subscription/s/position/3"), 404, "fewer than 3")
    assert backlog(http, base, "s") == 2  # peeking acknowledges nothing


def test_reset_cursor_then_the_real_client_receives_from_there(http, server):
    topic, base = produced(server, http)
    client = server.client()
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(10):
        consumer.acknowledge(consumer.receive(10_000))
    wait_for(lambda: backlog(http, base, "s"), lambda b: b == 0)
    # by message id, while the consumer is connected: it is disconnected, subscribes again, receives from 6
    assert http.post(f"{base}/subscription/s/resetcursor", json={"ledgerId": 0, "entryId": 6, "partitionIndex": -1,
                                                                 "batchIndex": -1, "isExcluded": False}
                     ).status_code == 204
    assert [consumer.receive(10_000).data() for _ in range(4)] == [b"6", b"7", b"8", b"9"]
    consumer.close()
    # excluded: after the message
    assert http.post(f"{base}/subscription/s/resetcursor", json={"ledgerId": 0, "entryId": 7, "isExcluded": True}
                     ).status_code == 204
    consumer = client.subscribe(topic, "s")
    assert consumer.receive(10_000).data() == b"8"
    consumer.close()
    # by time: from the start
    assert http.post(f"{base}/subscription/s/resetcursor/0").status_code == 204
    consumer = client.subscribe(topic, "s")
    assert consumer.receive(10_000).data() == b"0"
    consumer.close()
    reason(http.post(f"{base}/subscription/s/resetcursor", json={"entryId": 1, "partitionIndex": 3}), 400,
           "partitionIndex 3")
    reason(http.post(f"{base}/subscription/s/resetcursor", content=b"[1"), 400, "not JSON")
    reason(http.post(f"{base}/subscription/s/resetcursor/soon"), 400, "not an integer")


# --- HTTP lookup --------------------------------------------------------------------------------------------

def test_lookup_route(http, server):
    answer = http.get("/lookup/v2/topic/persistent/public/default/any").json()
    assert answer == {"brokerUrl": server.pulsar_url, "brokerUrlTls": "", "httpUrl": server.http_url,
                      "httpUrlTls": ""}
    reason(http.get("/lookup/v2/topic/persistent/public/nope/any"), 404, "namespace public/nope does not exist")
    assert http.get("/lookup/v2/topic/non-persistent/public/default/any").json() == answer
    reason(http.get("/lookup/v2/topic/non-persistent/public/nope/any"), 404, "namespace public/nope does not exist")
    reason(http.get("/lookup/v2/topic/other/public/default/any"), 412, "persistent and non-persistent topics")


def test_the_real_client_produces_and_consumes_through_an_http_service_url(http, server):
    client = pulsar.Client(server.http_url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/{fresh('http-lookup')}"
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        for i in range(3):
            producer.send(f"via-http-{i}".encode())
        assert [consumer.receive(10_000).data() for _ in range(3)] == [b"via-http-0", b"via-http-1", b"via-http-2"]
        ns = namespace(http)
        assert http.put(f"/admin/v2/persistent/{ns}/parts/partitions", content=b"3").status_code == 204
        partitioned = client.create_producer(f"persistent://{ns}/parts")
        for i in range(6):
            partitioned.send(b"p", partition_key=str(i))
        stats = http.get(f"/admin/v2/persistent/{ns}/parts/partitioned-stats").json()
        assert stats["metadata"] == {"partitions": 3} and len(stats["publishers"]) == 3
        # a missing namespace is 404, which the C++ client's HTTP lookup reports as ConnectError (any HTTP error)
        with pytest.raises(pulsar.ConnectError):
            client.create_producer("persistent://public/nope/t")
    finally:
        client.close()


def test_unsubscribe_with_force_closes_the_servers_consumers(http, server):
    topic, base = produced(server, http, count=3)
    consumer = server.client().subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert consumer.receive(10_000).data() == b"0"
    reason(http.delete(f"{base}/subscription/s"), 412, "consumer")
    # 204 only once the subscription is gone: its consumer was closed by the server first (the client then
    # subscribes again, as with Pulsar, and makes it anew)
    assert http.delete(f"{base}/subscription/s?force=true").status_code == 204


def test_namespace_unsubscribe_and_clear_backlog(http, server):
    topic, base = produced(server, http, count=4)
    ns = base.split("/persistent/")[1].rsplit("/", 1)[0]
    for name in ("a", "b"):
        assert http.put(f"{base}/subscription/{name}", json="earliest").status_code == 204
    assert http.post(f"/admin/v2/namespaces/{ns}/clearBacklog/a").status_code == 204
    assert (backlog(http, base, "a"), backlog(http, base, "b")) == (0, 4)
    assert http.post(f"/admin/v2/namespaces/{ns}/unsubscribe/a").status_code == 204
    assert http.get(f"{base}/subscriptions").json() == ["b"]
    assert http.post(f"/admin/v2/namespaces/{ns}/clearBacklog").status_code == 204
    assert backlog(http, base, "b") == 0
    reason(http.post("/admin/v2/namespaces/public/nope/clearBacklog"), 404, "namespace public/nope does not exist")
