"""etcd for the shared configuration store tests: one `etcd` (Debian's etcd-server, which
.ci/install-system-packages installs) on free loopback client and peer ports with a data directory of its own,
healthy before use, stopped by its pid."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ETCD = shutil.which("etcd")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Etcd:
    process: subprocess.Popen
    client_url: str  # http://127.0.0.1:PORT
    log: Path

    @property
    def url(self) -> str:
        """What `seglog serve --configuration-store` is given."""
        return "etcd://" + self.client_url.removeprefix("http://")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_S)
            raise AssertionError(f"etcd did not exit within {STOP_TIMEOUT_S}s of SIGTERM") from None


def start_etcd(directory: Path) -> Etcd:
    """etcd with its data in `directory`, once /health answers true; the test is skipped where there is no etcd
    (CI installs it)."""
    if ETCD is None:
        pytest.skip("no etcd on the PATH: install Debian's etcd-server package (.ci/install-system-packages does)")
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    directory.mkdir(parents=True, exist_ok=True)
    log = directory.with_suffix(".log")
    with log.open("ab") as output:
        process = subprocess.Popen([ETCD, "--name", "seglog-test", "--data-dir", str(directory),
                                    "--listen-client-urls", client, "--advertise-client-urls", client,
                                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                    "--initial-cluster", f"seglog-test={peer}"],
                                   stdout=output, stderr=subprocess.STDOUT)
    etcd = Etcd(process, client, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise AssertionError(f"etcd exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{client}/health", timeout=2) as response:
                if b'"true"' in response.read():
                    return etcd
        except OSError:
            pass
        if time.monotonic() > deadline:
            etcd.stop()
            raise AssertionError(f"etcd was not healthy within {START_TIMEOUT_S}s: {log.read_text()[-2000:]}")
        time.sleep(0.1)
