"""Helpers of the server tests: `seglog serve` as a subprocess on free loopback ports, the real Pulsar client
(pulsar-client, the test extra) and a raw socket speaking frames."""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import seglog
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Frame, FrameDecoder, Type, command, encode_command
from seglog.subscriptions.delivery import ConsumerState

pulsar = pytest.importorskip("pulsar")  # the test extra

START_TIMEOUT_S = 30.0
AT_ONCE_S = 5.0  # the client's operation timeout is 10 s: an error it retried would take at least that long
STOP_TIMEOUT_S = 30.0


@dataclass
class Server:
    data: Path
    process: subprocess.Popen
    pulsar_url: str
    http_url: str
    stderr: Path
    ca: Path | None = None  # the CA the server's TLS certificate is signed by (TLS servers)
    tls_url: str | None = None  # pulsar+ssl:// of --tls-port
    https_url: str | None = None  # https:// of --https-port
    flight_url: str = ""  # grpc:// (grpc+tls:// with a certificate) of --flight-port
    clients: list = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.pulsar_url.rsplit(":", 1)[1])

    def client(self, url: str | None = None, **options):
        """A client of `url` (default: the binary port), trusting the server's CA; closed by stop()."""
        if self.ca is not None:
            options.setdefault("tls_trust_certs_file_path", str(self.ca))
        options.setdefault("operation_timeout_seconds", 10)
        client = pulsar.Client(url or self.pulsar_url, logger=logging.getLogger("pulsar-client"), **options)
        self.clients.append(client)
        return client

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Signal the server by its pid and wait (bounded) for it to exit; its exit code. The server is
        stopped even when closing a client fails (one a test closed already): that error is raised after."""
        try:
            for client in self.clients:
                client.close()
        finally:
            self.clients.clear()
            return_code = self._stop_process(signum)
        return return_code

    def _stop_process(self, signum: int) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_S)
            raise AssertionError(f"seglog serve did not exit within {STOP_TIMEOUT_S}s of signal {signum}") from None
        finally:
            self.process.stdout.close()

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


def start_server(data: Path, *extra: str, ca: Path | None = None) -> Server:
    """`seglog serve` on free loopback ports with `extra` options, once healthy; `ca`: the CA that signs its TLS
    certificate (with --tls-cert-file among `extra`)."""
    stderr = data.parent / f"{data.name}-serve-{time.monotonic_ns()}.err"
    with stderr.open("wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "seglog", "--data", str(data), "serve", "--cluster",
                                    "standalone", "--port", "0", "--http-port", "0", "--flight-port", "0", *extra],
                                   stdout=subprocess.PIPE, stderr=err)
    try:
        # one URL a port: --port and --http-port, then --tls-port's and --https-port's when given, then
        # --flight-port's
        pulsar_url, http_url, *tls_urls, flight_url = _first_line(process).split()
        by_scheme = {url.split("://", 1)[0]: url for url in tls_urls}
        assert len(by_scheme) == len(tls_urls) and set(by_scheme) <= {"pulsar+ssl", "https"}, tls_urls
        assert flight_url.startswith(("grpc://", "grpc+tls://")), flight_url
        server = Server(data, process, pulsar_url, http_url, stderr, ca, by_scheme.get("pulsar+ssl"),
                        by_scheme.get("https"), flight_url)
        _wait_healthy(server)
        return server
    except BaseException:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_S)
        process.stdout.close()
        raise


def _first_line(process: subprocess.Popen) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(START_TIMEOUT_S):
            raise AssertionError(f"seglog serve printed nothing in {START_TIMEOUT_S}s")
    line = process.stdout.readline().decode()
    if not line:
        raise AssertionError(f"seglog serve exited with {process.wait(STOP_TIMEOUT_S)} before serving")
    return line


def _wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            context = ssl.create_default_context(cafile=server.ca) if server.ca is not None else None
            with urllib.request.urlopen(f"{server.http_url}/admin/v2/brokers/health", timeout=5,
                                        context=context) as response:
                assert response.status == 200 and response.read() == b"ok"
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # waiting for the port, bounded by the deadline



class RawConnection:
    """A socket speaking frames by hand, for what the real client never sends."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.decoder = FrameDecoder()
        self.frames: list = []

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def connect(self, **credentials) -> api.CommandConnected:
        """CONNECT, with `auth_method_name` and `auth_data` when given; the CONNECTED answer."""
        self.send(encode_command(command(Type.CONNECT, client_version="raw-test", protocol_version=20,
                                         **credentials)))
        reply = self.receive()
        assert reply.type == Type.CONNECTED, reply
        return reply.connected

    def receive(self, timeout: float = 10.0) -> api.BaseCommand:
        """The next command from the server; ConnectionError if the server closed the connection."""
        return self.receive_frame(timeout).command

    def receive_frame(self, timeout: float = 10.0) -> Frame:
        """The next frame from the server (a MESSAGE's metadata and payload with it)."""
        deadline = time.monotonic() + timeout
        while not self.frames:
            self.socket.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.socket.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.frames.extend(self.decoder.feed(data))
        return self.frames.pop(0)

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        try:
            while True:
                self.receive(timeout)
        except ConnectionError:
            return True

    def close(self) -> None:
        self.socket.close()



U32 = struct.Struct(">I")


def refused_serve(data: Path, *extra: str, code: int = 2) -> str:
    """Run `seglog serve` with options it must refuse: its stderr, one line, after checking it exited with `code`
    (2: the command line is wrong; 1: a file it names cannot be used) before printing its URLs (killed by its pid
    if it does not exit)."""
    process = subprocess.Popen([sys.executable, "-m", "seglog", "--data", str(data), "serve", "--cluster",
                                "standalone", "--port", "0", "--http-port", "0", "--flight-port", "0", *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(30)
    refused = " ".join(stderr.decode().split())
    assert process.returncode == code, f"exit code {process.returncode}, expected {code}: {refused}"
    assert stdout == b"", f"a refused start printed on stdout: {stdout.decode()}"
    return refused


def rest(http_url: str, method: str, path: str, body=None) -> tuple[int, object]:
    """An admin REST call with a JSON body: (status, the JSON answer or None), error statuses included."""
    request = urllib.request.Request(f"{http_url}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def refused_at_once(expected, call) -> str:
    """`call()` raising `expected` within AT_ONCE_S (not retried by the client until its timeout); its text."""
    started = time.monotonic()
    with pytest.raises(expected) as refused:
        call()
    elapsed = time.monotonic() - started
    assert elapsed < AT_ONCE_S, f"{expected} after {elapsed:.1f}s: the client retried it"
    return str(refused.value)


def topics_of(data) -> list[str]:
    """The topics of a data directory (beside its server)."""
    with seglog.open(data) as log:
        return log.list_topics()


def round_trip(client, topic: str, payload: bytes) -> None:
    """Subscribe, produce `payload`, receive and acknowledge it."""
    consumer = client.subscribe(topic, "s")
    client.create_producer(topic).send(payload)
    message = consumer.receive(10_000)
    consumer.acknowledge(message)
    assert message.data() == payload


def received_values(consumer, count: int) -> list[bytes]:
    """The values of the next `count` messages of `consumer` (each within 10 s), acknowledged one by one."""
    values = []
    for _ in range(count):
        message = consumer.receive(10_000)
        consumer.acknowledge(message)
        values.append(message.data())
    return values


def receive_until(consumers: list, count: int, *, ack: bool = True, seconds: float = 20) -> list[list]:
    """Receive from each consumer in turn until `count` messages came in all, or `seconds` passed; per
    consumer, what it received (acknowledged as it came, with `ack`)."""
    got: list[list] = [[] for _ in consumers]
    deadline = time.monotonic() + seconds
    while sum(map(len, got)) < count and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(50)
            except pulsar.Timeout:
                continue
            got[index].append(message)
            if ack:
                consumer.acknowledge(message)
    return got


def dispatched(path: Path, now: int, topic: str, *batches: dict) -> tuple[list[int], list[tuple[Any, list]]]:
    """Write each batch (writer.source's arguments; published `now`, no event times unless given) on a broker
    at `path` as the server stores a SEND, one stored batch each; (each batch's base offset, the pieces an
    exclusive consumer is given of them from the earliest, each with its messages read back)."""
    broker = Broker.open(path, clock=ManualClock(now), background=False)
    try:
        ref = broker.create_topic(topic, 1, {})
        writer = broker.store.acquire_writer(ref.name, 0, ref.config)
        bases = [writer.append(writer.source(**{"timestamps": [now] * len(batch["values"]),
                                                 "event_times": [None] * len(batch["values"])} | batch))
                 for batch in batches]
        broker.store.release_writer(ref.name, 0, broker.store.fence(ref.name))
        subscription = broker.subscriptions.open(broker.topic(topic), "read", "exclusive", "earliest")
        state = ConsumerState("r", None, lambda partition: None, lambda: None)
        subscription.attach(state, "exclusive")
        given = []
        while pieces := subscription.next_delivery(state, 1000):
            given += [(piece, piece.messages()) for piece in pieces]
        broker.subscriptions.release(subscription)
        return bases, given
    finally:
        broker.close()
