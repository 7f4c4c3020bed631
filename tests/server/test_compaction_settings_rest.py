"""Compaction over `seglog serve`'s HTTP port (issue 29): a topic's Kafka settings where the other topic settings
are set (/seglog/v1), and Pulsar's compactionThreshold policy at its namespace and topic paths."""

from __future__ import annotations

import itertools

import httpx
import pytest

from helpers_server import start_server

_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("compaction-rest") / "data")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        yield client


def fresh(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def refused(response: httpx.Response, status: int, *fragments: str) -> dict:
    assert response.status_code == status, response.text
    for fragment in fragments:
        assert fragment in response.json()["reason"], response.text
    return response.json()


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
