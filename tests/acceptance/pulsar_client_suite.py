"""pulsar-client-python's own test suite against `seglog serve` (docs/SERVER.md, "pulsar-client-python's own
tests"). Not part of seglog's suite: it runs a file of the Apache project, which seglog does not copy.

    git clone https://github.com/apache/pulsar-client-python
    python tests/acceptance/pulsar_client_suite.py pulsar-client-python/tests [pytest options]

Its fixtures assume a fresh Pulsar test service on localhost:6650 and :8080, so this starts `seglog serve`
there on a new data directory, makes what Pulsar's test service makes (the namespace public/default-2, the
tenant `private` with the namespace private/auth, and the token file the token tests read; authentication
off, as in that service's standalone.conf), runs tests/pulsar_test.py with pytest, and stops the server by
its pid. The exit status is pytest's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PORTS = (6650, 8080)
START_TIMEOUT_S = 30.0


def main(arguments: list[str]) -> int:
    if not arguments or not (Path(arguments[0]) / "pulsar_test.py").is_file():
        print(__doc__, file=sys.stderr)
        print("error: give the tests folder of a pulsar-client-python checkout (it holds pulsar_test.py)",
              file=sys.stderr)
        return 2
    tests, pytest_options = Path(arguments[0]).resolve(), arguments[1:]
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                print(f"error: port {port} is in use; the suite needs 6650 and 8080 free", file=sys.stderr)
                return 2
    with tempfile.TemporaryDirectory(prefix="seglog-acceptance-") as scratch:
        server = subprocess.Popen([sys.executable, "-m", "seglog", "--data", str(Path(scratch) / "data"), "serve",
                                   "--cluster", "standalone", "--port", "6650", "--http-port", "8080"],
                                  stdout=subprocess.DEVNULL)
        try:
            _wait_healthy(server)
            _make_fixtures(tests)
            return subprocess.call([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--timeout", "60",
                                    str(tests / "pulsar_test.py"), *pytest_options], cwd=tests)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait(START_TIMEOUT_S)


def _wait_healthy(server: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            raise SystemExit(f"seglog serve exited with {server.returncode}")
        try:
            with urllib.request.urlopen("http://127.0.0.1:8080/admin/v2/brokers/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # the port is not open yet (bounded by the deadline)


def _make_fixtures(tests: Path) -> None:
    """What Pulsar's test service makes before the suite runs."""
    for path, body in (("/admin/v2/namespaces/public/default-2", b"{}"),
                       ("/admin/v2/tenants/private", b'{"adminRoles": [], "allowedClusters": ["standalone"]}'),
                       ("/admin/v2/namespaces/private/auth", b"{}")):
        request = urllib.request.Request(f"http://127.0.0.1:8080{path}", data=body, method="PUT",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10):
            pass
    # read by the token tests; authentication is off, so any token does (as in Pulsar's test service)
    (tests / ".test-token.txt").write_text("seglog-acceptance-token\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
