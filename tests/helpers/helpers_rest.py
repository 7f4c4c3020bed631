"""What the REST tests of `seglog serve` share: a module's server and its HTTP client, fresh names, and the
reason of a refusal."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from helpers_server import Server, start_server

_names = itertools.count()


@contextmanager
def serving(data: Path) -> Iterator[Server]:
    """A `seglog serve` of `data` for a module's tests, stopped by its pid after them."""
    running = start_server(data)
    try:
        yield running
    finally:
        running.stop()


@contextmanager
def http_client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.http_url, timeout=30) as client:
        yield client


def fresh(prefix: str) -> str:
    """A name no other test of the run uses: `prefix` and a number."""
    return f"{prefix}{next(_names)}"


def refused(response: httpx.Response, status: int, *fragments: str) -> dict:
    """The body of a refusal answered with `status`, its reason checked to hold each of `fragments`."""
    assert response.status_code == status, response.text
    body = response.json()
    for fragment in fragments:
        assert fragment in body["reason"], body["reason"]
    return body


def reason(response: httpx.Response, status: int, *fragments: str) -> str:
    """The reason of a refusal answered with `status`, checked to hold each of `fragments`."""
    return refused(response, status, *fragments)["reason"]
