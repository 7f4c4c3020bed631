"""Malformed requests to the admin REST API of a real `seglog serve`, sent as raw HTTP (what no well-behaved
client sends): every one is answered 4xx with Pulsar's error body, `{"reason": ...}` with the keys of every
other error body, naming what was wrong and what is accepted; and a 500 never tells what failed in the server's
code (middleware.INTERNAL_ERROR, the exception logged)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import socket
import time
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from helpers_server import start_server
from seglog.server.rest.base import CONTEXT, MAX_JSON_DEPTH, REQUEST_BODY_TIMEOUT_S, RestContext
from seglog.server.rest.middleware import INTERNAL_ERROR, dispatch

_names = itertools.count()
IO_TIMEOUT_S = 30.0
BODY_LIMIT = 1 << 20  # rest.make_app's client_max_size
INVALID_ARGUMENT = {"reason", "error", "argument", "accepted", "detail"}  # rest/errors.py's error_body


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("malformed") / "data")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.http_url, timeout=IO_TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="module")
def error_keys(http) -> set[str]:
    """The keys of an error body the server gives a well-formed request (an unknown path)."""
    response = http.get("/admin/v2/no/such/path")
    assert response.status_code == 404
    return set(response.json())


def routes(http) -> dict[str, tuple[str, str, str]]:
    """Representative routes that take a JSON body, each on names made for this test: label -> (method, path,
    a fragment of what its refusals say is expected)."""
    tenant = f"tenant{next(_names)}"
    assert http.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]}).status_code == 204
    assert http.put(f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
    topic = f"/admin/v2/persistent/{tenant}/ns/t{next(_names)}"
    return {
        "create tenant": ("PUT", f"/admin/v2/tenants/other{next(_names)}", "TenantInfo"),
        "create namespace with policies": ("PUT", f"/admin/v2/namespaces/{tenant}/ns{next(_names)}", "Policies"),
        "set retention": ("POST", f"/admin/v2/namespaces/{tenant}/ns/retention", "RetentionPolicies"),
        "set clusters": ("POST", f"/admin/v2/namespaces/{tenant}/ns/replication", "cluster"),
        "create topic": ("PUT", topic, "topic properties"),
        "create partitioned topic": ("PUT", f"{topic}p/partitions", "the partition count"),
    }


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, seconds: float) -> None:
        self.status, self.headers, self.body, self.seconds = status, headers, body, seconds

    def json(self) -> Any:
        assert self.headers.get("content-type", "").startswith("application/json"), self.headers
        return httpx.Response(self.status, content=self.body).json()


def send_raw(server, method: str, path: str, body: bytes, *, content_length: int | str | None = None,
             close_after_body: bool = False) -> Answer | None:
    """Send one request as raw bytes (with `content_length` as its Content-Length, whatever the body's length),
    and read the first answer; None when the server closes the connection without one."""
    host, port = server.http_url.removeprefix("http://").split(":")
    length = len(body) if content_length is None else content_length
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=IO_TIMEOUT_S) as connection:
        try:
            connection.sendall(head + body)
        except (BrokenPipeError, ConnectionResetError):  # (the server may answer and close before all is sent)
            pass
        if close_after_body:
            connection.shutdown(socket.SHUT_WR)
        received = b""
        while b"\r\n\r\n" not in received:
            try:
                chunk = connection.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                assert not received, received
                return None
            received += chunk
        head_text, _, rest = received.partition(b"\r\n\r\n")
        lines = head_text.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", "0"))  # (none on a 204)
        while len(rest) < length:
            chunk = connection.recv(65536)
            assert chunk, "the connection closed inside the answer's body"
            rest += chunk
    return Answer(status, headers, rest[:length], time.monotonic() - started)


def refused(answer: Answer | None, status: int, error_keys: set[str], *fragments: str) -> str:
    """The reason of a refusal with `status`, checked to have the shape of every other error body, to name each
    of `fragments` and no Python exception."""
    assert answer is not None
    assert answer.status == status, (answer.status, answer.body)
    body = answer.json()
    assert set(body) == error_keys == {"reason"}, body
    reason = body["reason"]
    for fragment in fragments:
        assert fragment in reason, reason
    assert not re.search(r"\b\w+(Error|Exception)\b", reason), reason
    return reason


def test_a_body_that_is_not_utf8_is_400(server, http, error_keys) -> None:
    for label, (method, path, expected) in routes(http).items():
        body = b'{"retentionTimeInMinutes": "\xff\xfe caf\xe9"}'
        reason = refused(send_raw(server, method, path, body), 400, error_keys, "not UTF-8", "byte 28 is ff",
                         expected)
        assert "as JSON in UTF-8" in reason, label


@pytest.mark.parametrize("depth", [100_000, MAX_JSON_DEPTH + 1])
def test_json_nested_too_deep_is_400(server, http, error_keys, depth) -> None:
    for opening, closing in (b"[", b"]"), (b'{"a":', b"}"):
        for method, path, expected in routes(http).values():
            body = opening * depth + b"1" + closing * depth
            refused(send_raw(server, method, path, body), 400, error_keys,
                    f"nests JSON arrays or objects more than {MAX_JSON_DEPTH} deep", expected)


def test_json_nested_within_the_limit_is_judged_by_its_type(server, http, error_keys) -> None:
    method, path, expected = routes(http)["set retention"]
    body = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    reason = refused(send_raw(server, method, path, body), 400, error_keys, expected)
    assert "deep" not in reason


@pytest.mark.parametrize("body", [b"[1, 2]", b'"forty"', b"null", b"true", b"1e999", b"-1", b"[[]]",
                                  b'{"retentionTimeInMinutes": []}', b'{"partitions": {}}', b"NaN"])
def test_json_of_the_wrong_type_is_400(server, http, error_keys, body) -> None:
    for label, (method, path, _) in routes(http).items():
        answer = send_raw(server, method, path, body)
        assert answer is not None
        if answer.status == 204:  # (null: no body; an object's keys a route does not know are ignored, as Pulsar's
            # Jackson ignores unknown properties)
            optional = ("create topic", "create namespace with policies", "create tenant")
            assert label in optional and (body == b"null" or body.startswith(b"{") and label != "create topic")
            continue
        assert 400 <= answer.status < 500, (label, answer.status, answer.body)
        refusal = answer.json()
        # refused by the route ({"reason"}) or by the admin API with seglog's InvalidArgumentError fields, as
        # any other invalid argument is
        assert set(refusal) in (error_keys, INVALID_ARGUMENT | {"value"}, INVALID_ARGUMENT | {"valueRepr"}), refusal
        assert not re.search(r"\b\w+(Error|Exception)\b", refusal["reason"]), refusal


def test_a_truncated_json_body_is_400(server, http, error_keys) -> None:
    for method, path, expected in routes(http).values():
        refused(send_raw(server, method, path, b'{"partitions": 4, "prop'), 400, error_keys, "not JSON", expected)


def partitions(http, path: str) -> int:
    """The partitions of the topic of a `.../partitions` path (0: none such, as Pulsar answers)."""
    return http.get(path).json()["partitions"]


def test_a_body_shorter_than_its_content_length_is_408_in_bounded_time(server, http, error_keys) -> None:
    method, path, expected = routes(http)["create partitioned topic"]
    answer = send_raw(server, method, path, b"4", content_length=10)
    refused(answer, 408, error_keys, f"did not arrive within {REQUEST_BODY_TIMEOUT_S:g} s", "Content-Length 10",
            expected)
    assert REQUEST_BODY_TIMEOUT_S <= answer.seconds < REQUEST_BODY_TIMEOUT_S + 10
    assert partitions(http, path) == 0  # nothing was made


def test_a_body_cut_off_by_the_client_is_no_failure_of_the_server(server, http) -> None:
    method, path, _ = routes(http)["create partitioned topic"]
    log_before = len(server.log())
    answer = send_raw(server, method, path, b'{"partitions"', content_length=100, close_after_body=True)
    assert answer is None or answer.status == 400  # (the client is gone: an answer may not reach it)
    assert partitions(http, path) == 0
    assert http.get("/admin/v2/brokers/health").text == "ok"
    assert "Traceback" not in server.log()[log_before:]


@pytest.mark.parametrize("body, content_length", [(b'{"partitions": 4}', 5), (b"4", -1), (b"4", "4x")])
def test_a_content_length_shorter_than_the_body_or_invalid_is_400(server, http, body, content_length) -> None:
    """Bytes past the declared length, and a length that is no number, make a message HTTP cannot parse:
    aiohttp's parser answers these before any route, 400 in plain text (docs/SERVER.md)."""
    method, path, _ = routes(http)["create partitioned topic"]
    answer = send_raw(server, method, path, body, content_length=content_length)
    assert answer is not None and answer.status == 400, answer and answer.body
    assert not re.search(rb"\b\w+(Error|Exception)\b", answer.body), answer.body
    assert partitions(http, path) == 0


def test_a_body_past_the_size_limit_is_413(server, http, error_keys) -> None:
    for method, path, expected in routes(http).values():
        body = b"[" + b"1," * (BODY_LIMIT // 2) + b"1]"
        refused(send_raw(server, method, path, body), 413, error_keys, f"larger than {BODY_LIMIT} bytes", expected)
    assert http.get("/admin/v2/brokers/health").text == "ok"


def test_a_well_formed_body_is_still_taken(http) -> None:
    """(the checks above refuse what is malformed, not what is valid: non-ASCII UTF-8 included, whatever
    charset the request names)"""
    method, path, _ = routes(http)["create tenant"]
    tenant = {"adminRoles": ["équipe ☃"], "allowedClusters": ["standalone"]}
    response = http.request(method, path, content=json.dumps(tenant, ensure_ascii=False).encode(),
                            headers={"Content-Type": "application/json; charset=latin-1"})
    assert response.status_code == 204, response.text
    assert http.get(path).json() == tenant
    method, path, _ = routes(http)["set retention"]
    response = http.request(method, path, json={"retentionTimeInMinutes": 60, "retentionSizeInMB": 10})
    assert response.status_code == 204, response.text
    assert http.get(path).json() == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}


def test_a_500_names_no_exception_and_logs_it(caplog) -> None:
    """A handler that fails unexpectedly: the answer is the generic reason, the log has the exception."""
    async def failing(request: web.Request) -> web.Response:
        raise ValueError("secret internals at /srv/seglog/thing.py")

    async def run() -> tuple[int, Any]:
        app = web.Application(middlewares=[dispatch])
        app[CONTEXT] = RestContext(None, None, None, None)  # type: ignore[arg-type]  # (no authority: open)
        app.router.add_get("/fails", failing)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            response = await client.get("/fails")
            return response.status, await response.json()

    with caplog.at_level(logging.ERROR, logger="seglog.server"):
        status, body = asyncio.run(run())
    assert (status, body) == (500, {"reason": INTERNAL_ERROR})
    assert "secret internals" in caplog.text and "ValueError" in caplog.text
