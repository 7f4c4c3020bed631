"""Writes through the Flight port of `seglog serve` (docs/SERVER.md, "Flight (Arrow data port)"), with
pyarrow.flight's client: DoPut stages task attempts, the action "publish" publishes the committed ones in task order
(a streaming sink's micro-batch once, one cut short completed), "abort" drops them; the produce permission; bad
requests named; the server's memory bounded while four clients put at once."""

from __future__ import annotations

import json
import os
import threading
import time

import pyarrow as pa
import pytest
from pyarrow import flight
from test_flight_memory import MIB

import seglog
from helpers_hostile import AnonPeak, rss_anon
from helpers_server import start_server
from seglog.errors import parse_error_message
from seglog.remote import Credentials, RemoteAdmin
from seglog.server.auth import create_secret_key, create_token
from seglog.storage.staged_writes import STAGED, STAGING_DIRECTORY

WRITE = "0123456789abcdef0123456789abcdef"
SINK = "00112233445566aa"


def rows(values: list[bytes], partitions: list[int | None] | None = None, keys=None) -> pa.RecordBatch:
    n = len(values)
    return pa.record_batch([pa.array(values, pa.binary()), pa.array(keys or [None] * n, pa.binary()),
                            pa.array(partitions or [None] * n, pa.int32()), pa.array([None] * n, pa.int64()),
                            pa.array([None] * n, STAGED.field("properties").type)], schema=STAGED)


def put(client: flight.FlightClient, batches: list[pa.RecordBatch], *, stage: str = WRITE, task: int = 0,
        attempt: int = 0, topic: str = "out", options=None, schema: pa.Schema = STAGED) -> None:
    descriptor = flight.FlightDescriptor.for_command(json.dumps({"stage": stage, "task": task, "attempt": attempt,
                                                                 "topic": topic}).encode())
    writer, _ = client.do_put(descriptor, schema, options)
    with writer:
        for batch in batches:
            writer.write_batch(batch)


def act(client: flight.FlightClient, name: str, options=None, **body) -> list[dict]:
    return [json.loads(result.body.to_pybytes()) for result in
            client.do_action(flight.Action(name, json.dumps(body).encode()), options)]


def publish(client: flight.FlightClient, attempts: list[list[int]], *, stage: str = WRITE, topic: str = "out",
            sink: str | None = None, batch_id: int = -1, options=None) -> bool:
    return act(client, "publish", options, stage=stage, topic=topic, attempts=attempts, sink=sink,
               batch_id=batch_id)[0]["published"]


def stored(server, client: flight.FlightClient, partition: int, topic: str = "out") -> list[bytes]:
    """The values of the partition, read by a DoGet up to its end offset (asked of the admin REST API)."""
    admin = RemoteAdmin(server.http_url, Credentials())
    try:
        end = admin.topics.offsets(topic)[partition]["endOffset"]
    finally:
        admin.close()
    ticket = flight.Ticket(json.dumps({"topic": f"public/default/{topic}", "partition": partition, "start": 0,
                                       "end": end}).encode())
    return [v for chunk in client.do_get(ticket) for v in chunk.data.column("value").to_pylist()]


def seglog_error(raised: pytest.ExceptionInfo) -> tuple[str, str]:
    assert isinstance(raised.value, flight.FlightServerError), raised.value
    parsed = parse_error_message(str(raised.value))
    assert parsed is not None, str(raised.value)
    return parsed


@pytest.fixture
def served(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic("out", partitions=2)
    server = start_server(data)
    client = flight.connect(server.flight_url)
    yield server, client
    client.close()
    server.stop()


def test_put_attempts_are_published_in_task_order_and_their_staging_removed(served):
    server, client = served
    put(client, [rows([b"t1-a", b"t1-b"], [0, 1])], task=1)
    put(client, [rows([b"t0-failed"], [0])], task=0, attempt=0)  # an attempt Spark does not commit
    put(client, [rows([b"t0-a"], [0]), rows([b"t0-b", b"t0-c"], [1, 0])], task=0, attempt=1)
    put(client, [rows([b"t2-replaced"], [0])], task=2)
    put(client, [rows([b"t2"], [1])], task=2)  # the same attempt again: its file replaced
    staging = server.data / STAGING_DIRECTORY / WRITE
    assert sorted(p.name for p in staging.iterdir()) == ["000000-0.arrow", "000000-1.arrow", "000001-0.arrow",
                                                          "000002-0.arrow", "topic"]
    assert publish(client, [[2, 0], [1, 0], [0, 1]]) is True
    assert stored(server, client, 0) == [b"t0-a", b"t0-c", b"t1-a"]
    assert stored(server, client, 1) == [b"t0-b", b"t1-b", b"t2"]
    assert not staging.exists()


def test_rows_without_a_partition_go_by_key_then_in_turn_and_a_missing_topic_is_created(served):
    server, client = served
    put(client, [rows([b"a", b"b"]), rows([b"c"])], topic="created")
    assert publish(client, [[0, 0]], topic="created") is True
    assert stored(server, client, 0, "created") == [b"a", b"b", b"c"]  # created with one partition


def test_a_replayed_micro_batch_publishes_nothing_more(served):
    server, client = served
    stage = f"{SINK}-5"
    for _ in range(2):  # Spark runs batch 5 again after a crash between its offset and commit logs
        put(client, [rows([b"x", b"y"], [0, 1])], stage=stage)
        published = publish(client, [[0, 0]], stage=stage, sink=SINK, batch_id=5)
    assert published is False
    assert stored(server, client, 0) == [b"x"] and stored(server, client, 1) == [b"y"]
    put(client, [rows([b"z"], [0])], stage=f"{SINK}-4")  # an older batch id: published already too
    assert publish(client, [[0, 0]], stage=f"{SINK}-4", sink=SINK, batch_id=4) is False
    assert stored(server, client, 0) == [b"x"]


def test_a_micro_batch_cut_short_is_completed_not_repeated(served):
    """The server died after publishing partition 0's first two rows of batch 7 (the journal names the batch and
    the end offsets before it; the rows are there), and a producer appended to partition 1 since."""
    server, client = served
    journal = server.data / "spark-sinks" / f"{SINK}.json"
    journal.parent.mkdir()
    journal.write_text(json.dumps({"batchId": 6, "publishing": {"batchId": 7, "ends": {"0": 0, "1": 0}}}))
    put(client, [rows([b"a0", b"a1"], [0, 0])], stage=WRITE)
    publish(client, [[0, 0]], stage=WRITE)  # the prefix the dead publishing wrote
    put(client, [rows([b"foreign"], [1])], stage=WRITE)
    publish(client, [[0, 0]], stage=WRITE)
    stage = f"{SINK}-7"
    put(client, [rows([b"a0", b"a1", b"b0", b"a2"], [0, 0, 1, 0])], stage=stage)
    assert publish(client, [[0, 0]], stage=stage, sink=SINK, batch_id=7) is True
    assert stored(server, client, 0) == [b"a0", b"a1", b"a2"]
    assert stored(server, client, 1) == [b"foreign", b"b0"]
    assert json.loads(journal.read_text()) == {"batchId": 7}


def test_abort_removes_the_staged_attempts(served):
    server, client = served
    put(client, [rows([b"dropped"], [0])])
    assert (server.data / STAGING_DIRECTORY / WRITE).exists()
    assert act(client, "abort", stage=WRITE) == []
    assert not (server.data / STAGING_DIRECTORY / WRITE).exists()
    assert act(client, "abort", stage=WRITE) == []  # gone already: nothing to do
    with pytest.raises(flight.FlightServerError) as raised:
        publish(client, [[0, 0]])
    name, message = seglog_error(raised)
    assert name == "NotFoundError" and "task 0's staged rows" in message
    assert stored(server, client, 0) == []


@pytest.mark.parametrize("descriptor, field", [
    (b"not json", "invalid DoPut descriptor"),
    (json.dumps({"stage": "../../metadata", "task": 0, "attempt": 0, "topic": "out"}).encode(), "invalid stage"),
    (json.dumps({"stage": f"{SINK}-1/..", "task": 0, "attempt": 0, "topic": "out"}).encode(), "invalid stage"),
    (json.dumps({"stage": WRITE, "task": -1, "attempt": 0, "topic": "out"}).encode(), "invalid task"),
    (json.dumps({"stage": WRITE, "task": 0, "attempt": 0}).encode(), "it has no 'topic'"),
    (json.dumps({"stage": WRITE, "task": 0, "attempt": 0, "topic": "out", "x": 1}).encode(),
     "invalid DoPut descriptor field 'x'"),
    (json.dumps({"stage": WRITE, "task": 0, "attempt": 0, "topic": "non-persistent://public/default/o"}).encode(),
     "invalid topic"),
])
def test_bad_descriptors_are_refused_naming_what_is_wrong(served, descriptor, field):
    server, client = served
    writer, _ = client.do_put(flight.FlightDescriptor.for_command(descriptor), STAGED)
    with pytest.raises(flight.FlightServerError) as raised:
        writer.write_batch(rows([b"v"]))
        writer.close()
    name, message = seglog_error(raised)
    assert name == "InvalidArgumentError" and field in message, message
    assert not (server.data / STAGING_DIRECTORY).exists() or not any((server.data / STAGING_DIRECTORY).iterdir())


def test_bad_schemas_actions_and_attempts_are_refused_naming_what_is_wrong(served):
    server, client = served
    with pytest.raises(flight.FlightServerError, match="invalid DoPut schema.*accepted: the staged rows' schema"):
        put(client, [pa.record_batch([pa.array([b"v"])], names=["value"])],
            schema=pa.schema([("value", pa.binary())]))
    with pytest.raises(flight.FlightServerError, match="invalid action 'drop'; accepted: 'publish' or 'abort'"):
        act(client, "drop", stage=WRITE)
    with pytest.raises(flight.FlightServerError, match="invalid attempts .*a task is named twice"):
        publish(client, [[0, 0], [0, 1]])
    with pytest.raises(flight.FlightServerError, match=f"invalid stage '{WRITE}'.*accepted: micro-batch 3 of sink"):
        publish(client, [[0, 0]], sink=SINK, batch_id=3)
    put(client, [rows([b"v"])])
    with pytest.raises(flight.FlightServerError, match="invalid topic .*the topic write .* stages its rows for"):
        put(client, [rows([b"v"])], task=1, topic="other")
    with pytest.raises(flight.FlightServerError, match="invalid topic .*the topic write .* staged its rows for"):
        publish(client, [[0, 0]], topic="other")
    assert (server.data / STAGING_DIRECTORY / WRITE / "000000-0.arrow").exists()  # left as it was


def test_writes_need_the_produce_permission(tmp_path):
    key = create_secret_key()
    (tmp_path / "secret.key").write_bytes(key)
    with seglog.open(tmp_path / "data") as log:
        log.create_topic("out")
        log.admin.namespaces.grant_permission("public/default", "reader", ["consume"])
        log.admin.namespaces.grant_permission("public/default", "writer", ["produce"])
    server = start_server(tmp_path / "data", "--auth-token-secret-key", str(tmp_path / "secret.key"))
    try:
        with flight.connect(server.flight_url) as client:
            def as_role(role: str) -> flight.FlightCallOptions:
                return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {create_token(key, role)}"
                                                          .encode())])
            with pytest.raises(flight.FlightUnauthenticatedError):
                put(client, [rows([b"v"])])
            with pytest.raises(flight.FlightUnauthorizedError, match="not authorized to produce to topic "
                                                                     "public/default/out"):
                put(client, [rows([b"v"])], options=as_role("reader"))
            put(client, [rows([b"v"])], options=as_role("writer"))
            for refused in ("reader", "stranger"):
                with pytest.raises(flight.FlightUnauthorizedError):
                    publish(client, [[0, 0]], options=as_role(refused))
                with pytest.raises(flight.FlightUnauthorizedError):
                    act(client, "abort", as_role(refused), stage=WRITE)
            assert publish(client, [[0, 0]], options=as_role("writer")) is True
    finally:
        server.stop()
    with seglog.open(tmp_path / "data") as log:
        assert [m.value for m in log.topic("out").reader("earliest")] == [b"v"]


CLIENTS = 4
PUT_BATCHES = 250
PUT_BATCH = pa.array([b"w" * 1000] * 1000, pa.binary())  # 1 MB: 250 MB per client, 1 GB in all
# Each stream holds the batch being written and what gRPC receives within its flow-control window, which it tunes
# to the link (tens of MiB per stream on loopback, the same for streams of 100 MB or 400 MB; measured here: 147 to
# 195 MiB in all, with the allocator's slack); buffering what the clients send would be 1000 MB
BOUND = 320 * MIB


def test_four_clients_putting_at_once_keep_the_servers_memory_flat(served):
    server, client = served
    put(client, [rows([b"warm"] * 10)], task=99)  # gRPC's and pyarrow's allocations of a first DoPut
    idle = rss_anon(server.process.pid)
    errors: list[BaseException] = []
    batch = pa.record_batch([PUT_BATCH, pa.nulls(1000, pa.binary()), pa.nulls(1000, pa.int32()),
                             pa.nulls(1000, pa.int64()), pa.nulls(1000, STAGED.field("properties").type)],
                            schema=STAGED)

    def put_all(task: int) -> None:
        try:
            with flight.connect(server.flight_url) as own:
                put(own, (batch for _ in range(PUT_BATCHES)), task=task)
        except BaseException as error:  # (reported by the test thread)
            errors.append(error)

    putters = [threading.Thread(target=put_all, args=(task,)) for task in range(CLIENTS)]
    with AnonPeak(server.process.pid, idle) as peak:
        for putter in putters:
            putter.start()
        for putter in putters:
            putter.join(120)
    assert not errors, errors
    sizes = [(server.data / STAGING_DIRECTORY / WRITE / f"{task:06d}-0.arrow").stat().st_size
             for task in range(CLIENTS)]
    assert all(size > PUT_BATCHES * 1_000_000 for size in sizes), sizes
    grown = peak.growth
    assert grown < BOUND, f"RssAnon grew by {grown / MIB:.1f} MiB over idle ({idle / MIB:.1f} MiB)"


# --- in-process: the bounds, stale writes, quotas and the replication -------------------------------------------

@pytest.fixture
def writes(tmp_path):
    """FlightWrites on a broker of its own (authentication off), the service's appends recorded."""
    from seglog.admin.api import Admin
    from seglog.broker import Broker
    from seglog.server.auth import OPEN, AuthConfig, Authority
    from seglog.server.flight.writes import FlightWrites
    from seglog.server.service import BrokerService, Settings

    def make(**bounds) -> FlightWrites:
        return FlightWrites(service, Authority(AuthConfig(), Admin(broker), broker.clock), **bounds)

    broker = Broker.open(tmp_path / "data", clock=seglog.ManualClock(), background=False)
    service = BrokerService(broker, Settings("standalone", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    service.appends = []
    service.on_append = lambda *append: service.appends.append(append)
    yield make, service, OPEN
    broker.close()


def descriptor(task: int = 0, attempt: int = 0, topic: str = "out") -> bytes:
    return json.dumps({"stage": WRITE, "task": task, "attempt": attempt, "topic": topic}).encode()


def test_an_attempt_over_the_size_bound_is_refused_and_leaves_no_file(writes):
    make, service, principal = writes
    flight_writes = make(max_attempt_bytes=10_000)
    put_request = flight_writes.check_put(principal, descriptor())
    with pytest.raises(seglog.errors.InvalidArgumentError, match="more than 10,000 bytes.*at most 10,000 bytes of "
                                                                  "rows per task attempt"):
        flight_writes.put(put_request, STAGED, iter([rows([b"x" * 6000]), rows([b"y" * 6000])]))
    directory = service.broker.path / STAGING_DIRECTORY / WRITE
    assert sorted(p.name for p in directory.iterdir()) == ["topic"]


def test_writes_left_by_a_dead_driver_are_removed_after_their_age(writes):
    make, service, principal = writes
    flight_writes = make()
    for task in (0, 1):
        flight_writes.put(flight_writes.check_put(principal, descriptor(task)), STAGED, iter([rows([b"v"])]))
    stale = service.broker.path / STAGING_DIRECTORY / WRITE
    fresh = service.broker.path / STAGING_DIRECTORY / f"{SINK}-0"
    fresh.mkdir()
    day_ago = time.time() - 24 * 3600 - 60
    os.utime(stale, (day_ago, day_ago))
    make()  # the server starting again
    assert not stale.exists() and fresh.exists()
    os.utime(fresh, (day_ago, day_ago))
    flight_writes.abort(principal, json.dumps({"stage": f"{SINK}-1"}).encode())  # any publish or abort sweeps
    assert not fresh.exists()


def test_publishing_applies_the_backlog_quotas_and_tells_the_replication(writes):
    make, service, principal = writes
    broker = service.broker
    broker.create_topic("public/default/out", 1, {})
    broker.subscriptions.create(broker.topic("public/default/out"), "slow", "earliest")
    from seglog.admin.api import Admin
    Admin(broker).namespaces.set_backlog_quota("public/default", limit="10KiB", policy="producer_exception")
    flight_writes = make()
    for task, size in ((0, 2000), (1, 20_000), (2, 10)):
        flight_writes.put(flight_writes.check_put(principal, descriptor(task)), STAGED,
                          iter([rows([b"x" * size])]))
    body = json.dumps({"stage": WRITE, "topic": "out", "attempts": [[0, 0], [1, 0], [2, 0]], "sink": None,
                       "batch_id": -1}).encode()
    with pytest.raises(seglog.errors.ProducerBlockedQuotaExceededError, match="backlog quota exceeded"):
        flight_writes.publish(principal, body)
    assert broker.store.end_offset(broker.topic("out").name, 0) == 1  # task 0's row; task 1's refused
    assert service.appends == [("public/default/out", 0, 0, 1, None)]
