"""Pulsar's topic compaction over `seglog serve`'s HTTP port (issue 29): PUT .../compaction answers at once and
compacts in the server's thread pool, GET answers Pulsar's LongRunningProcessStatus (RUNNING, then SUCCESS, or
ERROR with lastError), a second PUT while one runs is 409 with Pulsar's reason, partitioned topics and partition
names, the compacted ledger of internalStats and the `compaction` section of stats, and the tenant-admin rule of
Pulsar's TopicOperation.COMPACT. The RUNNING window is held open in-process, where the run can be made to wait."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from aiohttp.test_utils import TestClient, TestServer
from helpers_rest import fresh, http_client, serving

import seglog
from helpers_server import start_server
from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.lifecycle.compaction import CompactionRunningError
from seglog.names import TopicName
from seglog.server.auth import create_secret_key, create_token
from seglog.server.rest import make_app
from seglog.server.rest.base import RestContext
from seglog.server.service import BrokerService, Settings
from seglog.storage.check import topic_directory
from seglog.storage.compacted import compacted_directory
from seglog.storage.lock import ExclusiveFileLock

SETTLE_S = 30.0  # the most a compaction of these few messages may take to end
NOT_RUN = {"status": "NOT_RUN", "lastError": ""}
SUCCESS = {"status": "SUCCESS", "lastError": ""}
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("compaction-rest") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def http(server):
    with http_client(server) as client:
        yield client

def produce(server, topic: str, keyed: list[tuple[str, bytes]]) -> None:
    """Send (key, value) pairs with the real client, unbatched, one message an entry."""
    producer = server.client().create_producer(f"persistent://public/default/{topic}", batching_enabled=False)
    for key, value in keyed:
        producer.send(value, partition_key=key)
    producer.close()


def settled(http, path: str) -> tuple[dict, set[str]]:
    """GET `path` until the status is not RUNNING (bounded): the last answer and every status seen."""
    seen: set[str] = set()
    deadline = time.monotonic() + SETTLE_S
    while True:
        answer = http.get(path)
        assert answer.status_code == 200, answer.text
        seen.add(answer.json()["status"])
        if answer.json()["status"] != "RUNNING" or time.monotonic() > deadline:
            return answer.json(), seen
        time.sleep(0.01)


def test_put_answers_at_once_and_get_says_how_it_went(server, http):
    topic = fresh("prices")
    path = f"/admin/v2/persistent/public/default/{topic}/compaction"
    produce(server, topic, [("apple", b"101"), ("apple", b"99"), ("pear", b"7"), ("fig", b"1"), ("pear", b"8")])
    assert http.get(path).json() == NOT_RUN

    put = http.put(path)
    assert (put.status_code, put.content) == (204, b"")
    status, seen = settled(http, path)
    assert status == SUCCESS and seen <= {"RUNNING", "SUCCESS"}

    internal = http.get(f"/admin/v2/persistent/public/default/{topic}/internalStats").json()
    assert internal["compactedLedger"] == {"ledgerId": 1, "entries": 3, "size": internal["compactedLedger"]["size"],
                                           "offloaded": False, "underReplicated": False}
    assert internal["compactedLedger"]["size"] > 0 and internal["compactionHorizon"] == 5
    compaction = http.get(f"/admin/v2/persistent/public/default/{topic}/stats").json()["compaction"]
    assert compaction["lastCompactionRemovedEventCount"] == 2
    assert compaction["lastCompactionSucceedTimestamp"] > 0 and compaction["lastCompactionFailedTimestamp"] == 0
    assert compaction["lastCompactionDurationTimeInMills"] >= 0


def test_a_topic_never_compacted_has_no_compacted_ledger(server, http):
    topic = fresh("plain")
    produce(server, topic, [("k", b"v")])
    internal = http.get(f"/admin/v2/persistent/public/default/{topic}/internalStats").json()
    assert internal["compactedLedger"] == {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                                           "underReplicated": False}
    assert internal["compactionHorizon"] == 0
    assert http.get(f"/admin/v2/persistent/public/default/{topic}/stats").json()["compaction"] == {
        "lastCompactionRemovedEventCount": 0, "lastCompactionSucceedTimestamp": 0,
        "lastCompactionFailedTimestamp": 0, "lastCompactionDurationTimeInMills": 0}


def test_a_partitioned_topic_compacts_every_partition(server, http):
    topic = fresh("parted")
    assert http.put(f"/admin/v2/persistent/public/default/{topic}/partitions", json=3).status_code == 204
    produce(server, topic, [(f"key{i % 4}", b"%d" % i) for i in range(40)])
    base = f"/admin/v2/persistent/public/default/{topic}"
    assert http.put(f"{base}/compaction").status_code == 204
    assert settled(http, f"{base}/compaction")[0] == SUCCESS
    internal = http.get(f"{base}/partitioned-internalStats").json()["partitions"]
    ledgers = [internal[f"persistent://public/default/{topic}-partition-{p}"]["compactedLedger"] for p in range(3)]
    assert sum(ledger["entries"] for ledger in ledgers if ledger["ledgerId"] > 0) == 4  # each key once
    assert all(ledger["ledgerId"] == 1 for ledger in ledgers if ledger["entries"] > 0)
    per_partition = http.get(f"{base}/partitioned-stats", params={"perPartition": "true"}).json()["partitions"]
    assert sum(p["compaction"]["lastCompactionRemovedEventCount"] for p in per_partition.values()) == 36

    # a partition's name: the status is its topic's, and a compaction asked there compacts the topic again
    partition = f"{base}-partition-1/compaction"
    assert http.get(partition).json() == SUCCESS
    assert http.put(partition).status_code == 204
    assert settled(http, partition)[0] == SUCCESS


def test_a_failed_compaction_is_error_with_last_error(server, http):
    topic = fresh("locked")
    produce(server, topic, [("a", b"1"), ("a", b"2")])
    path = f"/admin/v2/persistent/public/default/{topic}/compaction"
    partition = topic_directory(server.data, TopicName.parse(topic)) / "0"
    compacted_directory(partition).mkdir(exist_ok=True)
    held = ExclusiveFileLock(compacted_directory(partition) / ".lock", busy=CompactionRunningError)
    try:  # another process holds the partition's compaction lock: this one fails
        assert http.put(path).status_code == 204
        status, _ = settled(http, path)
    finally:
        held.release()
    assert status["status"] == "ERROR"
    assert "a compaction of this partition is running" in status["lastError"], status
    assert http.put(path).status_code == 204  # once it is free, a compaction succeeds
    assert settled(http, path)[0] == SUCCESS


@pytest.mark.parametrize("method", ["PUT", "GET"])
def test_a_missing_topic_is_404(http, method):
    answer = http.request(method, "/admin/v2/persistent/public/default/nothing-here/compaction")
    assert answer.status_code == 404 and "does not exist" in answer.json()["reason"]


def test_the_openapi_document_lists_the_routes(http):
    paths = http.get("/admin/v2/openapi.json").json()["paths"]
    compaction = paths["/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction"]
    assert set(compaction["put"]["responses"]) >= {"204", "409"} and "200" in compaction["get"]["responses"]
    assert "409" in paths["/seglog/v1/topics/{tenant}/{namespace}/{topic}/compaction"]["post"]["responses"]


# --- the RUNNING window, in-process: the run waits until released ---------------------------------------------

@pytest.fixture
def gated(tmp_path, monkeypatch):
    """(the broker, the REST app, a gate the compaction's run waits on): a topic `public/default/held` of keyed
    messages; the run in the pool starts only once the gate is set."""
    with seglog.open(tmp_path / "data", background=False) as log, log.create_topic("held").producer() as producer:
        for value in (b"1", b"2", b"3"):
            producer.send(value, key=b"k")
    broker = Broker.open(tmp_path / "data", clock=ManualClock(1_000), background=False)
    gate = threading.Event()
    run = broker.compactor.run

    def held_run(ref, delete_retention_ms=None):
        assert gate.wait(SETTLE_S)
        return run(ref, delete_retention_ms)
    monkeypatch.setattr(broker.compactor, "run", held_run)
    executor = ThreadPoolExecutor(4)
    service = BrokerService(broker, Settings("standalone", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    app = make_app(RestContext(broker, Admin(broker), service, executor))
    yield broker, app, gate
    gate.set()
    executor.shutdown(wait=True)
    broker.close()


def test_running_at_once_then_409_until_it_ends(gated):
    broker, app, gate = gated
    path = "/admin/v2/persistent/public/default/held/compaction"

    async def exchange() -> list[tuple[int, object]]:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            answers = []
            for method in ("PUT", "GET", "PUT"):
                response = await client.request(method, path)
                answers.append((response.status, await response.json() if response.status != 204 else None))
            gate.set()
            deadline = time.monotonic() + SETTLE_S
            while broker.compactor.status(broker.topic("public/default/held")).status == "RUNNING" \
                    and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            response = await client.get(path)
            answers.append((response.status, await response.json()))
            return answers

    answers = asyncio.run(exchange())
    assert answers[0] == (204, None)
    assert answers[1] == (200, {"status": "RUNNING", "lastError": ""})
    assert answers[2] == (409, {"reason": "Compaction already in progress"})
    assert answers[3] == (200, SUCCESS)


# --- authorization: Pulsar's TopicOperation.COMPACT is for the tenant's admins, its status too -----------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("compaction-auth")
    key = create_secret_key()
    (directory / "secret.key").write_bytes(key)
    with seglog.open(directory / "data") as log:
        log.admin.tenants.create("acme", admin_roles=["acme-admin"])
        log.admin.namespaces.create("acme/ns")
        log.admin.namespaces.grant_permission("acme/ns", "app", ["produce", "consume"])
        with log.create_topic("acme/ns/orders").producer() as producer:
            producer.send(b"v", key=b"k")
    running = start_server(directory / "data", "--auth-token-secret-key", str(directory / "secret.key"),
                           "--superuser-roles", "admin")
    yield running, key
    running.stop()


@pytest.mark.parametrize(("role", "method", "status"), [
    ("admin", "GET", 200), ("acme-admin", "GET", 200), ("acme-admin", "PUT", 204),
    ("app", "GET", 403), ("app", "PUT", 403), ("nobody", "PUT", 403),
])
def test_only_the_tenants_admins_compact_or_ask(secured, role, method, status):
    server, key = secured
    with httpx.Client(base_url=server.http_url, timeout=30,
                      headers={"Authorization": f"Bearer {create_token(key, role)}"}) as client:
        answer = client.request(method, "/admin/v2/persistent/acme/ns/orders/compaction")
        assert answer.status_code == status, answer.text
        if status == 204:
            assert settled(client, "/admin/v2/persistent/acme/ns/orders/compaction")[0] == SUCCESS
