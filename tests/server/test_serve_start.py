"""A `seglog serve` that fails to start (a port in use) says which port and why, and leaves the data directory
as it found it: the cluster name is recorded only once the server serves, so a start with the intended name
then serves."""

from __future__ import annotations

import socket
import subprocess
import sys

import httpx
import pytest

from helpers_server import START_TIMEOUT_S, start_server


@pytest.fixture
def busy_port():
    """A port of 127.0.0.1 that this test holds (bound and listening)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("option", ["--port", "--http-port", "--flight-port"])
def test_a_start_on_a_port_in_use_fails_clearly_and_records_no_cluster(tmp_path, busy_port, option) -> None:
    data = tmp_path / "data"
    ports = {"--port": "0", "--http-port": "0", "--flight-port": "0", option: str(busy_port)}
    failed = subprocess.run([sys.executable, "-m", "seglog", "--data", str(data), "serve", "--cluster", "mistaken",
                             *(item for pair in ports.items() for item in pair)],
                            capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert failed.returncode == 1 and failed.stdout == "", failed  # nothing served, so no URL printed
    message = " ".join(failed.stderr.split())
    assert (f"cannot listen on 127.0.0.1:{busy_port} ({option}): Address already in use; give {option} another port, "
            f"or {option} 0 for a free one") in message, message
    assert "Traceback" not in failed.stderr

    server = start_server(data, "--cluster", "intended")  # (the last --cluster given wins)
    try:
        with httpx.Client(base_url=server.http_url, timeout=30) as http:
            assert http.get("/admin/v2/clusters").json() == ["intended"]
            assert http.get("/admin/v2/clusters/intended").json()["brokerServiceUrl"] == server.pulsar_url
    finally:
        assert server.stop() == 0
