"""Fixtures of the server tests: a `seglog serve` subprocess on a temporary data directory, stopped by its pid,
and raw sockets to it."""

from __future__ import annotations

import pytest

from helpers_server import RawConnection, start_server


@pytest.fixture
def server(tmp_path):
    running = start_server(tmp_path / "data")
    yield running
    running.stop()


@pytest.fixture
def raw(server):
    connections: list[RawConnection] = []

    def make() -> RawConnection:
        connections.append(RawConnection(server.port))
        return connections[-1]

    yield make
    for connection in connections:
        connection.close()
