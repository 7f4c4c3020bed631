"""Compaction over `seglog serve`'s HTTP port (issue 29): a topic's Kafka settings where the other topic settings
are set (/seglog/v1), and Pulsar's compactionThreshold policy at its namespace and topic paths."""

from __future__ import annotations

import pytest
from helpers_rest import fresh, http_client, refused, serving


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("compaction-settings-rest") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def http(server):
    with http_client(server) as client:
        yield client
def test_topic_settings_created_updated_and_described(http):
    topic = fresh("table")
    path = f"/seglog/v1/topics/public/default/{topic}"
    created = http.put(path, json={"settings": {"cleanup_policy": "delete,compact", "min_compaction_lag": "1h",
                                                "min_cleanable_dirty_ratio": 0.2}})
    assert created.status_code == 200, created.text
    described = http.get(path).json()
    assert {k: described[k] for k in ("cleanupPolicy", "minCompactionLagMs", "maxCompactionLagMs",
                                       "deleteRetentionMs", "minCleanableDirtyRatio")} == {
        "cleanupPolicy": "compact,delete", "minCompactionLagMs": 3_600_000, "maxCompactionLagMs": None,
        "deleteRetentionMs": 86_400_000, "minCleanableDirtyRatio": 0.2}
    assert http.post(f"{path}/settings", json={"cleanup_policy": "compact", "delete_retention": "2h"}
                     ).status_code == 204
    described = http.get(path).json()
    assert (described["cleanupPolicy"], described["deleteRetentionMs"]) == ("compact", 7_200_000)
    listed = {t["name"]: t for t in http.get("/seglog/v1/topics").json()}
    assert listed[f"public/default/{topic}"]["cleanupPolicy"] == "compact"


@pytest.mark.parametrize(("settings", "argument", "fragment"), [
    ({"cleanup_policy": "Compact"}, "cleanup_policy", "'delete', 'compact' or 'compact,delete'"),
    ({"min_compaction_lag": 3600}, "min_compaction_lag", "a bare number is ambiguous"),
    ({"min_compaction_lag": "3h", "max_compaction_lag": "1h"}, "min_compaction_lag",
     "Kafka refuses min.compaction.lag.ms > max.compaction.lag.ms"),
    ({"min_cleanable_dirty_ratio": 1.5}, "min_cleanable_dirty_ratio", "a number from 0 to 1"),
])
def test_refused_settings_are_400_naming_the_setting_and_change_nothing(http, settings, argument, fragment):
    topic = fresh("table")
    path = f"/seglog/v1/topics/public/default/{topic}"
    body = refused(http.put(path, json={"settings": settings}), 400, fragment)
    assert body["argument"] == argument
    assert http.get(path).status_code == 404  # not created
    assert http.put(path).status_code == 200
    body = refused(http.post(f"{path}/settings", json={**settings, "segment_size": "64 MiB"}), 400, fragment)
    assert body["argument"] == argument
    described = http.get(path).json()
    assert (described["cleanupPolicy"], described["segmentSize"], described["minCompactionLagMs"]) == (
        "delete", 1 << 30, 0)


def namespace(http) -> str:
    tenant = fresh("tenant")
    assert http.put(f"/admin/v2/tenants/{tenant}", json={"adminRoles": [], "allowedClusters": ["standalone"]}
                    ).status_code == 204
    assert http.put(f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
    return f"{tenant}/ns"


def test_namespace_compaction_threshold_on_pulsars_path(http):
    path = f"/admin/v2/namespaces/{namespace(http)}/compactionThreshold"
    assert (http.get(path).status_code, http.get(path).json()) == (200, None)
    assert http.put(path, json=10 << 20).status_code == 204  # Pulsar's method: PUT, a bare number of bytes
    assert http.get(path).json() == 10 << 20
    assert http.post(path, json=0).status_code == 204  # 0: no compaction by size
    assert http.get(path).json() == 0
    refused(http.put(path, json=-1), 412, "compactionThreshold must be 0 or more")
    refused(http.put(path, json="10M"), 400, "compactionThreshold must be an integer >= 0")
    refused(http.put(path, json=1.5), 400, "compactionThreshold must be an integer >= 0")
    assert http.get(path).json() == 0  # unchanged by the refusals
    assert http.delete(path).status_code == 204
    assert http.get(path).json() is None
    assert http.put("/admin/v2/namespaces/public/nope/compactionThreshold", json=1).status_code == 404


def test_topic_compaction_threshold_and_the_value_applied(http):
    ns = namespace(http)
    topic = fresh("ledger")
    assert http.put(f"/admin/v2/persistent/{ns}/{topic}").status_code == 204
    path = f"/admin/v2/persistent/{ns}/{topic}/compactionThreshold"
    assert http.get(path).json() is None
    assert http.get(path, params={"applied": "true"}).json() == 0  # the broker's default: off
    assert http.put(f"/admin/v2/namespaces/{ns}/compactionThreshold", json=5 << 20).status_code == 204
    assert http.get(path, params={"applied": "true"}).json() == 5 << 20
    assert http.post(path, json=1 << 20).status_code == 204  # Pulsar's method for a topic: POST
    assert (http.get(path).json(), http.get(path, params={"applied": "true"}).json()) == (1 << 20, 1 << 20)
    refused(http.post(path, json=-7), 412, "compactionThreshold must be 0 or more")
    assert http.get(path).json() == 1 << 20
    described = http.get(f"/seglog/v1/topics/{ns}/{topic}").json()
    assert described["policiesInForce"]["compactionThreshold"] == {"value": 1 << 20, "level": "topic"}
    assert http.delete(path).status_code == 204
    assert (http.get(path).json(), http.get(path, params={"applied": "true"}).json()) == (None, 5 << 20)
    assert http.post(f"/admin/v2/persistent/{ns}/nope/compactionThreshold", json=1).status_code == 404
