"""The Flight port of `seglog serve` (docs/SERVER.md, "Flight (Arrow data port)"), with pyarrow.flight's client:
the port on the first line and in GET /seglog/v1/flight; DoGet of a range giving what the in-process read gives
(across segments, compacted views, schema versions); seglog's errors by class name; bad tickets; tokens and
permissions as on the other ports; TLS; and the port stopped with the server."""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from passlib.hash import apr_md5_crypt
from pyarrow import flight

import seglog
from helpers_server import refused_serve, rest, start_server
from helpers_tls import make_certificates, make_client_certificate
from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.errors import parse_error_message
from seglog.server.auth import AuthConfig, Authority, create_secret_key, create_token
from seglog.server.flight import FlightPort
from seglog.server.flight.streams import MAX_BYTES, MAX_ROWS, StreamSlots, wire_batches

SEGMENT_MESSAGES = 10


def ticket(topic: str = "events", partition: int = 0, start: int = 0, end: int = 0, **options) -> flight.Ticket:
    return flight.Ticket(json.dumps({"topic": f"public/default/{topic}", "partition": partition, "start": start,
                                     "end": end, **options}).encode())


def batches_of(client: flight.FlightClient, wanted: flight.Ticket, options=None) -> list[pa.RecordBatch]:
    return [chunk.data for chunk in client.do_get(wanted, options)]


def seglog_error(raised: pytest.ExceptionInfo) -> tuple[str, str]:
    """(class name, message) of the seglog error a Flight call raised, as a client reads it back."""
    assert isinstance(raised.value, flight.FlightServerError), raised.value
    parsed = parse_error_message(str(raised.value))
    assert parsed is not None, str(raised.value)
    return parsed


def write_events(log, name: str = "events", partitions: int = 2, **settings) -> None:
    """Per partition, 5 batches of 7 messages ('p<partition>-v<offset>', keys k<offset % 3>) in segments of
    SEGMENT_MESSAGES messages."""
    topic = log.create_topic(name, partitions=partitions, segment_max_messages=SEGMENT_MESSAGES, **settings)
    with topic.producer() as producer:
        for p in range(partitions):
            for i in range(5):
                offsets = range(i * 7, i * 7 + 7)
                producer.send_batch([b"p%d-v%d" % (p, o) for o in offsets], keys=[b"k%d" % (o % 3) for o in offsets],
                                    properties=[{"n": str(o)} for o in offsets], partition=p)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the reads: `events` (2 partitions), `prices` (compacted: keys a..d twice, then a again
    past the horizon) and `lost` (its first 50 offsets deleted by retention); with the in-process reads of
    each, made before the server took the directory."""
    data = tmp_path_factory.mktemp("flight") / "data"
    clock = seglog.ManualClock()
    with seglog.open(data, clock=clock) as log:
        write_events(log)
        prices = log.create_topic("prices")
        with prices.producer() as producer:
            producer.send_batch([b"a0", b"b0", b"c0", b"d0"], keys=[b"a", b"b", b"c", b"d"])
            producer.send_batch([b"a1", None, b"c1", b""], keys=[b"a", b"b", b"c", b"d"])
        log.admin.topics.compact("prices")
        with prices.producer() as producer:
            producer.send(b"a2", key=b"a")
        lost = log.create_topic("lost", segment_max_messages=SEGMENT_MESSAGES, retention_time="1h")
        with lost.producer() as producer:
            for _ in range(5):
                producer.send_batch([b"x"] * SEGMENT_MESSAGES)
        clock.advance(2 * 3600 * 1000)
        with lost.producer() as producer:
            producer.send_batch([b"y"] * SEGMENT_MESSAGES)
        log.run_maintenance()  # offsets 0..49 go
        local = {(name, p, start, end, compacted): list(log.topic(name).read_range(p, start, end,
                                                                                    read_compacted=compacted,
                                                                                    max_horizon=end))
                 for name, p, start, end, compacted in [("events", 0, 0, 35, False), ("events", 1, 3, 31, False),
                                                         ("events", 0, 12, 13, False), ("prices", 0, 0, 9, True),
                                                         ("prices", 0, 5, 8, True), ("prices", 0, 0, 9, False)]}
    server = start_server(data)
    client = flight.connect(server.flight_url)
    yield server, client, local
    client.close()
    server.stop()


# --- the port -----------------------------------------------------------------------------------------------

def test_the_first_line_and_the_discovery_route_name_the_flight_port(served):
    server, _, _ = served
    host, port = server.flight_url.removeprefix("grpc://").rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert rest(server.http_url, "GET", "/seglog/v1/flight") == (200, {"port": int(port), "tls": False})
    status, document = rest(server.http_url, "GET", "/admin/v2/openapi.json")
    assert "get" in document["paths"]["/seglog/v1/flight"]


def test_the_flight_port_must_be_a_port_of_its_own(tmp_path):
    message = refused_serve(tmp_path / "data", "--http-port", "18080", "--flight-port", "18080")
    assert "invalid --flight-port 18080; accepted: a port of its own: --http-port is 18080 too" in message, message


def test_sigterm_stops_the_flight_port_with_the_server_even_mid_stream(tmp_path):
    with seglog.open(tmp_path / "data") as log:
        write_events(log, partitions=1)
    server = start_server(tmp_path / "data")
    client = flight.connect(server.flight_url)
    try:
        reader = client.do_get(ticket(end=35))
        reader.read_chunk()  # a stream open, not read to its end
        started = time.monotonic()
        assert server.stop(signal.SIGTERM) == 0
        assert time.monotonic() - started < 15
        with pytest.raises(flight.FlightUnavailableError):
            flight.connect(server.flight_url).do_get(ticket(end=1)).read_all()
    finally:
        client.close()


# --- DoGet ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("partition, start, end", [(0, 0, 35), (1, 3, 31), (0, 12, 13)])
def test_a_range_gives_what_the_in_process_read_gives_batch_for_batch(served, partition, start, end):
    _, client, local = served
    expected = local[("events", partition, start, end, False)]
    got = batches_of(client, ticket(partition=partition, start=start, end=end))
    assert [b.num_rows for b in got] == [b.num_rows for b in expected]  # the stored batches, not messages
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(expected))
    assert got[0].column("offset")[0].as_py() == start and got[-1].column("offset")[-1].as_py() == end - 1
    assert got[0].schema.names == ["offset", "timestamp", "key", "value", "properties"]


def test_an_empty_range_is_an_empty_stream_of_the_schema(served):
    _, client, _ = served
    table = client.do_get(ticket(start=10, end=10)).read_all()
    assert table.num_rows == 0 and table.schema.names == ["offset", "timestamp", "key", "value", "properties"]


@pytest.mark.parametrize("start, end", [(0, 9), (5, 8)])
def test_compacted_reads_give_the_view_then_the_log(served, start, end):
    _, client, local = served
    got = pa.Table.from_batches(batches_of(client, ticket("prices", start=start, end=end, read_compacted=True,
                                                                      max_horizon=end)))
    assert got.equals(pa.Table.from_batches(local[("prices", 0, start, end, True)]))
    expected = {(0, 9): [(4, b"a1"), (6, b"c1"), (7, b""), (8, b"a2")], (5, 8): [(6, b"c1"), (7, b"")]}
    assert list(zip(got.column("offset").to_pylist(), got.column("value").to_pylist())) == expected[start, end]
    whole = pa.Table.from_batches(batches_of(client, ticket("prices", start=0, end=9)))
    assert whole.equals(pa.Table.from_batches(local[("prices", 0, 0, 9, False)])) and whole.num_rows == 9


def test_a_compaction_past_max_horizon_is_an_error_of_its_class(served):
    _, client, _ = served
    with pytest.raises(flight.FlightServerError) as raised:
        client.do_get(ticket("prices", start=0, end=9, read_compacted=True, max_horizon=7)).read_all()
    name, message = seglog_error(raised)
    assert name == "OffsetOutOfRangeError"
    assert message.startswith("public/default/prices partition 0: compacted up to offset 8 since the query was "
                              "planned to read its compacted view up to offset 7 at most")


def test_schema_versions_add_their_column(served):
    _, client, _ = served
    got = client.do_get(ticket(start=0, end=8, schema_versions=True)).read_all()
    assert got.schema.names[-1] == "schema_version" and got.schema.field("schema_version").type == pa.int64()
    assert got.column("schema_version").to_pylist() == [None] * 8  # written without a schema


def test_data_loss_reaches_the_client_as_its_seglog_error(served):
    _, client, _ = served
    with pytest.raises(flight.FlightServerError) as raised:
        client.do_get(ticket("lost", start=0, end=55)).read_all()
    assert seglog_error(raised) == ("OffsetOutOfRangeError", "public/default/lost partition 0: offsets 0 to 49 were "
                                    "deleted (retention) before they were read. Set the option failOnDataLoss to "
                                    "'false' to read on from offset 50, as Spark's Kafka source does")
    kept = client.do_get(ticket("lost", start=0, end=55, fail_on_data_loss=False)).read_all()
    assert kept.column("offset").to_pylist() == list(range(50, 55))


@pytest.mark.parametrize("data, said", [
    (b"not json", ("InvalidArgumentError", "invalid ticket b'not json': not JSON")),
    (b"[1]", ("InvalidArgumentError", "invalid ticket a list of 1: not a JSON object")),
    (json.dumps({"topic": "public/default/events", "partition": 0, "start": 0}).encode(),
     ("InvalidArgumentError", "invalid ticket field 'end' None: missing; accepted: an offset from 0 to "
                              "9223372036854775807, required")),
    (json.dumps({"topic": "public/default/events", "partition": 0, "start": 0, "end": 1, "limit": 5}).encode(),
     ("InvalidArgumentError", "invalid ticket field 'limit'; accepted: one of end, fail_on_data_loss")),
    (ticket(start=-1, end=5).ticket, ("InvalidArgumentError", "invalid ticket field 'start' -1; accepted: an offset")),
    (ticket(start=5, end=4).ticket, ("InvalidArgumentError", "invalid ticket field 'end' 4; accepted: an offset at "
                                                              "or after 'start' (5)")),
    (ticket(start="0", end=4).ticket, ("InvalidArgumentError", "invalid ticket field 'start' '0'")),
    (ticket(partition=True, end=4).ticket, ("InvalidArgumentError", "invalid ticket field 'partition' True")),
    (ticket(end=4, read_compacted="yes").ticket,
     ("InvalidArgumentError", "invalid ticket field 'read_compacted' 'yes'; accepted: true or false")),
    (json.dumps({"topic": "a/b/c/d", "partition": 0, "start": 0, "end": 1}).encode(),
     ("InvalidNameError", "invalid topic name 'a/b/c/d'")),
    (ticket("missing", end=1).ticket, ("TopicNotFoundError", "topic public/default/missing does not exist")),
    (ticket(partition=2, end=1).ticket,
     ("TopicNotFoundError", "topic public/default/events has no partition 2: its partitions are 0 to 1")),
])
def test_a_bad_ticket_is_refused_naming_what_is_wrong(served, data, said):
    _, client, _ = served
    with pytest.raises(flight.FlightServerError) as raised:
        client.do_get(flight.Ticket(data)).read_all()
    name, message = seglog_error(raised)
    assert name == said[0] and said[1] in message, message
    assert "Traceback" not in str(raised.value)


def test_other_flight_methods_are_not_offered(served):
    _, client, _ = served
    with pytest.raises(pa.ArrowNotImplementedError):
        list(client.list_flights())


# --- authentication and authorization -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """Token and basic authentication; superuser admin; public/default grants reader (and basic user bob)
    consume, writer produce only."""
    directory = tmp_path_factory.mktemp("flight-auth")
    key = create_secret_key()
    (directory / "secret.key").write_bytes(key)
    (directory / ".htpasswd").write_text(f"bob:{apr_md5_crypt.hash('bob pw')}\n")
    with seglog.open(directory / "data") as log:
        write_events(log, partitions=1)
        log.admin.namespaces.grant_permission("public/default", "reader", ["consume"])
        log.admin.namespaces.grant_permission("public/default", "bob", ["consume"])
        log.admin.namespaces.grant_permission("public/default", "writer", ["produce"])
    server = start_server(directory / "data", "--auth-token-secret-key", str(directory / "secret.key"),
                          "--auth-basic-file", str(directory / ".htpasswd"), "--superuser-roles", "admin")
    client = flight.connect(server.flight_url)
    yield server, client, key
    client.close()
    server.stop()


def bearer(key: bytes, role: str, *, timeout: float | None = None, **token_options) -> flight.FlightCallOptions:
    header = f"Bearer {create_token(key, role, **token_options)}".encode()
    return flight.FlightCallOptions(headers=[(b"authorization", header)], timeout=timeout)


def http_refusal(server, headers: dict[str, str]) -> tuple[int, str]:
    """(status, reason) of GET /seglog/v1/flight with `headers`."""
    request = urllib.request.Request(f"{server.http_url}/seglog/v1/flight", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)["reason"]


def test_roles_allowed_to_consume_read(secured):
    server, client, key = secured
    for role in ("reader", "admin"):
        assert client.do_get(ticket(end=35), bearer(key, role)).read_all().num_rows == 35
    basic = flight.FlightCallOptions(headers=[(b"authorization", b"Basic " + base64.b64encode(b"bob:bob pw"))])
    assert client.do_get(ticket(end=5), basic).read_all().num_rows == 5


def test_a_call_without_valid_credentials_is_refused_as_http_refuses_it(secured):
    server, client, key = secured
    cases = {"no credentials": None, "another key": bearer(create_secret_key(), "reader"),
             "expired": bearer(key, "reader", expires_at_s=int(time.time()) - 60),
             "wrong password": flight.FlightCallOptions(headers=[(b"authorization",
                                                                  b"Basic " + base64.b64encode(b"bob:no"))])}
    for case, options in cases.items():
        with pytest.raises(flight.FlightUnauthenticatedError) as raised:
            client.do_get(ticket(end=5), options).read_all()
        headers = dict(options.headers) if options is not None else {}
        status, reason = http_refusal(server, {k.decode(): v.decode() for k, v in headers.items()})
        assert status == 401 and str(raised.value).startswith(f"{reason}. Detail:"), (case, raised.value, reason)


def test_a_role_without_consume_is_refused_naming_role_topic_and_action(secured):
    _, client, key = secured
    for role in ("writer", "stranger"):
        with pytest.raises(flight.FlightUnauthorizedError) as raised:
            client.do_get(ticket(end=5), bearer(key, role)).read_all()
        assert str(raised.value).startswith(
            f"role {role!r} is not authorized to consume topic public/default/events: it needs the 'consume' "
            "permission on namespace public/default"), raised.value
    with pytest.raises(flight.FlightUnauthorizedError):  # refused before the topic is looked up
        client.do_get(ticket("missing", end=5), bearer(key, "writer")).read_all()


def test_any_authenticated_role_may_ask_where_the_flight_port_is(secured):
    server, _, key = secured
    port = int(server.flight_url.rsplit(":", 1)[1])
    answer = http_refusal(server, {"Authorization": f"Bearer {create_token(key, 'stranger')}"})
    assert answer == (200, {"port": port, "tls": False})
    status, reason = http_refusal(server, {})
    assert status == 401 and reason.startswith("authentication required")


def test_without_authentication_anyone_reads(served):
    _, client, _ = served
    assert client.do_get(ticket(end=3), bearer(create_secret_key(), "anyone")).read_all().num_rows == 3


# --- TLS ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("flight-certs"))


def test_with_a_certificate_the_port_serves_tls_only(tmp_path, certificates):
    with seglog.open(tmp_path / "data") as log:
        write_events(log, partitions=1)
    server = start_server(tmp_path / "data", "--tls-cert-file", str(certificates.cert), "--tls-key-file",
                          str(certificates.key), ca=certificates.ca)
    try:
        assert server.flight_url.startswith("grpc+tls://127.0.0.1:")
        port = int(server.flight_url.rsplit(":", 1)[1])
        assert rest_tls(server, certificates) == {"port": port, "tls": True}
        with flight.connect(server.flight_url, tls_root_certs=certificates.ca.read_bytes()) as client:
            assert client.do_get(ticket(end=35)).read_all().num_rows == 35
        plain = server.flight_url.replace("grpc+tls://", "grpc://")
        with flight.connect(plain) as client, pytest.raises(flight.FlightUnavailableError):
            client.do_get(ticket(end=1), flight.FlightCallOptions(timeout=5)).read_all()
    finally:
        server.stop()


def rest_tls(server, certificates) -> dict:
    context = ssl.create_default_context(cafile=certificates.ca)
    with urllib.request.urlopen(f"{server.http_url}/seglog/v1/flight", timeout=10, context=context) as answer:
        return json.load(answer)


def test_trusted_client_certificates_required_on_the_flight_port_carry_no_role(tmp_path, certificates):
    """--tls-require-trusted-client-cert: a client without a certificate the CAs sign fails the handshake; with
    --auth-tls the certificate is still no Flight role (gRPC's peer identity is not Pulsar's common name)."""
    with seglog.open(tmp_path / "data") as log:
        write_events(log, partitions=1)
    key = create_secret_key()
    (tmp_path / "secret.key").write_bytes(key)
    cert, cert_key = make_client_certificate(certificates.authority, tmp_path / "client", "admin")
    server = start_server(tmp_path / "data", "--tls-port", "0", "--tls-cert-file", str(certificates.cert),
                          "--tls-key-file", str(certificates.key), "--tls-trust-certs-file", str(certificates.ca),
                          "--tls-require-trusted-client-cert", "--auth-tls", "--auth-token-secret-key",
                          str(tmp_path / "secret.key"), "--superuser-roles", "admin", ca=certificates.ca)
    try:
        root = certificates.ca.read_bytes()
        with flight.connect(server.flight_url, tls_root_certs=root, cert_chain=cert.read_bytes(),
                            private_key=cert_key.read_bytes()) as client:
            with pytest.raises(flight.FlightUnauthenticatedError, match="authentication required"):
                client.do_get(ticket(end=7)).read_all()
            assert client.do_get(ticket(end=7), bearer(key, "admin")).read_all().num_rows == 7
        with flight.connect(server.flight_url, tls_root_certs=root) as client, \
                pytest.raises(flight.FlightUnavailableError):
            client.do_get(ticket(end=1), bearer(key, "admin", timeout=5)).read_all()
    finally:
        server.stop()


# --- in-process: the port's life -------------------------------------------------------------------------------

def test_a_stopped_port_leaves_no_thread_behind(tmp_path):
    """A port's threads (gRPC's sync server threads, the thread that stops it) are gone once it stopped; gRPC
    keeps only its few process-wide ones (event engine, timer), the same whatever the ports started."""
    def server_threads() -> list[str]:
        """The OS names of this process's threads that serve gRPC calls, and Python's threads but the main one."""
        names = []
        for task in os.listdir("/proc/self/task"):
            try:
                names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
            except FileNotFoundError:  # (a thread that exited meanwhile)
                continue
        others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        return [name for name in names if name.startswith("grpcpp_sync")] + others

    broker = Broker.open(tmp_path / "data", clock=seglog.ManualClock(), background=False)
    try:
        authority = Authority(AuthConfig(), Admin(broker), broker.clock)
        for _ in range(3):
            port = FlightPort(broker, authority, "127.0.0.1", 0, None)
            with flight.connect(f"grpc://127.0.0.1:{port.port}") as client, pytest.raises(flight.FlightServerError):
                client.do_get(ticket("missing", end=1)).read_all()
            assert server_threads()  # the port's own, while it serves
            assert port.stop(10)
            deadline = time.monotonic() + 5  # (an OS thread leaves /proc a moment after it returned)
            while server_threads() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server_threads() == []
    finally:
        broker.close()


# --- in-process: the bounds --------------------------------------------------------------------------------------

def test_batches_over_the_wire_bounds_are_sliced_without_copying():
    many = pa.record_batch([pa.array(range(MAX_ROWS * 2 + 5), pa.int64())], names=["offset"])
    large = pa.record_batch([pa.array([b"x" * 1000] * 20_000, pa.binary())], names=["value"])  # 20 MB
    small = pa.record_batch([pa.array([b"y"] * 10, pa.binary())], names=["value"])
    pieces = list(wire_batches(iter([many, large, small])))
    assert [p.num_rows for p in pieces[:3]] == [MAX_ROWS, MAX_ROWS, 5]
    assert all(p.nbytes <= MAX_BYTES for p in pieces) and pieces[-1] is small
    assert sum(p.num_rows for p in pieces[3:-1]) == 20_000 and len(pieces[3:-1]) == 3
    data = large.column(0).buffers()[2].address
    assert all(p.column(0).buffers()[2].address == data for p in pieces[3:-1])  # views of the batch's memory


def test_streams_beyond_the_slots_wait_then_are_refused_and_slots_come_back():
    batch = pa.record_batch([pa.array([1])], names=["a"])
    full = StreamSlots(max_streams=1, wait_s=0.05)
    reading = full.admitted(iter([batch, batch]))
    next(reading)
    with pytest.raises(flight.FlightUnavailableError, match="streams 1 ranges at once already, and none ended "
                                                            "within 0.05 s; try again"):
        next(full.admitted(iter([batch])))
    slots = StreamSlots(max_streams=2, wait_s=30)
    first, second = slots.admitted(iter([batch, batch])), slots.admitted(iter([batch]))
    next(first), next(second)  # two streams reading
    second.close()  # a client gone mid-stream: its generator is closed, its slot given back
    third = slots.admitted(iter([batch, batch]))
    assert next(third) is batch
    waiting = slots.admitted(iter([batch]))
    freed = threading.Timer(0.05, lambda: list(first))  # the first stream ends while another waits
    freed.start()
    assert next(waiting) is batch
    freed.join()
    slots.close()  # the server stopping: streams end at their next batch, none is admitted
    with pytest.raises(flight.FlightUnavailableError, match="the server is stopping"):
        next(third)
    with pytest.raises(flight.FlightUnavailableError, match="the server is stopping"):
        next(slots.admitted(iter([batch])))
