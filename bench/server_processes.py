"""The server processes of bench_server.py and bench_replication.py: `seglog serve` (as clusters of
geo-replication too), the do-nothing stub broker (stub_broker.py), nats-server with JetStream, redis-server,
pulsar-lite (a native Rust broker, PyPI pulsar-lite), and pulsar-client producer processes (producer_worker.py).

Every process binds 127.0.0.1 on a free port, is started by this module and stopped by its pid (SIGTERM,
then SIGKILL after a bounded wait); every wait here is bounded. A server this machine lacks (nats-server,
redis-server, or its Python client) is a pytest skip saying what to install."""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

HERE = Path(__file__).parent
START_TIMEOUT_S = 30.0
T = TypeVar("T")
STOP_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 300.0  # a producer worker's round (the real sizes take seconds; a hang fails the round)
_LIBC = ctypes.CDLL(None, use_errno=True)  # glibc's clock_getcpuclockid, which Python's time module lacks


class Process:
    """A process this module started: its CPU time, and stop() by its pid."""

    def __init__(self, name: str, popen: subprocess.Popen, log: Path | None = None) -> None:
        self.name, self.popen, self.log = name, popen, log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu_seconds(self) -> float:
        """The CPU time of the process (all its threads, those gone included), to the nanosecond: its CPU-time
        clock (clock_getcpuclockid). /proc/PID/stat's utime + stime count in 10 ms ticks, 3% of the 0.3 s a
        server spends in a round of bench_replication's markers' test, more than what that test measures."""
        clock = ctypes.c_int()
        error = _LIBC.clock_getcpuclockid(self.pid, ctypes.byref(clock))
        if error:
            raise OSError(error, f"clock_getcpuclockid({self.name}, pid {self.pid}): {os.strerror(error)}")
        return time.clock_gettime(clock.value)

    def check_running(self) -> None:
        if self.popen.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.popen.returncode}; its log: {self.tail()}")

    def tail(self, size: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log and self.log.exists() else ""

    def stop(self) -> int:
        """SIGTERM by pid and a bounded wait; SIGKILL if it does not exit in time. Its exit code."""
        if self.popen.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        try:
            return self.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            return self.popen.wait(STOP_TIMEOUT_S)
        finally:
            for stream in (self.popen.stdin, self.popen.stdout):
                if stream is not None:
                    stream.close()


def spawn(name: str, argv: list[str], log: Path, *, stdout: int | None = None, stdin: int | None = None,
           text: bool = False) -> Process:
    """Start a process with its stderr (and, without `stdout`, its stdout too) in the file `log`."""
    with log.open("wb") as err:
        popen = subprocess.Popen(argv, stdin=stdin, stdout=err if stdout is None else stdout, stderr=err, text=text)
    return Process(name, popen, log)


def _first_line(process: Process) -> str:
    """The first line the process prints on stdout (bounded wait)."""
    stdout = process.popen.stdout
    ready, _, _ = select.select([stdout], [], [], START_TIMEOUT_S)
    line = stdout.readline() if ready else b""
    if not line:
        process.stop()
        raise AssertionError(f"{process.name} printed nothing on stdout in {START_TIMEOUT_S}s: {process.tail()}")
    return line.decode() if isinstance(line, bytes) else line


def start_seglog(data: Path, logs: Path) -> tuple[Process, str]:
    """`seglog serve` on a data directory, free ports; (the process, its pulsar:// URL)."""
    process, pulsar_url, _ = start_cluster("standalone", data, logs, "seglog-serve.log")
    return process, pulsar_url


def start_cluster(name: str, data: Path, logs: Path, log_name: str | None = None) -> tuple[Process, str, str]:
    """`seglog serve --cluster NAME` on a data directory, free ports; (the process, its pulsar:// URL, its
    http:// URL)."""
    process = spawn("seglog serve", [sys.executable, "-m", "seglog", "--data", str(data), "serve", "--cluster",
                                      name, "--port", "0", "--http-port", "0", "--flight-port", "0"],
                     logs / (log_name or f"seglog-serve-{name}.log"), stdout=subprocess.PIPE)
    pulsar_url, http_url = _first_line(process).split()[:2]
    return process, pulsar_url, http_url


def start_stub(logs: Path) -> tuple[Process, str]:
    """The do-nothing broker of stub_broker.py; (the process, its pulsar:// URL)."""
    process = spawn("stub broker", [sys.executable, str(HERE / "stub_broker.py"), "--port", "0"],
                     logs / "stub-broker.log", stdout=subprocess.PIPE)
    return process, _first_line(process).split()[0]


def start_pulsar_lite(data: Path, logs: Path) -> tuple[Process, str]:
    """pulsar-lite (PyPI `pulsar-lite`, a Rust broker speaking Pulsar's protocol over RocksDB) on a free
    port with its database under `data`; (the process, its pulsar:// URL). Its Prometheus endpoint, on
    0.0.0.0:8080 by default, is turned off by a config file of its own (port 8080 belongs to other tests).
    Ready once it accepts a connection (it prints nothing on stdout)."""
    try:
        from pulsar_lite.binary_finder import find_pulsar_lite_binary
    except ImportError:
        pytest.skip("pulsar-lite is not installed (pip install pulsar-lite==0.2.0): its figures are left out")
    data.mkdir(parents=True, exist_ok=True)
    config = data / "pulsar-lite.toml"
    config.write_text("[metrics]\nenabled = false\n")
    port = free_port()
    process = spawn("pulsar-lite", [find_pulsar_lite_binary(), "--config", str(config), "--addr",
                                     f"127.0.0.1:{port}", "--db-path", str(data / "db"), "--log-level", "warn"],
                     logs / "pulsar-lite.log")

    def accepts() -> str:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return f"pulsar://127.0.0.1:{port}"

    return process, wait_until_ready(process, accepts, "accepted no connection")


def wait_until_ready(process: Process, ready: Callable[[], T | None], failing: str) -> T:
    """The first answer of `ready()` other than None (an OSError: not ready yet), asked every 20 ms while
    `process` runs, for at most START_TIMEOUT_S; past that the process is stopped and AssertionError says it
    `failing` (what it did not do), with its log's tail."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            answer = ready()
            if answer is not None:
                return answer
        except OSError:
            pass
        process.check_running()
        if time.monotonic() > deadline:
            process.stop()
            raise AssertionError(f"{process.name} {failing} in {START_TIMEOUT_S}s: {process.tail()}")
        time.sleep(0.02)


def free_port() -> int:
    """A port free on 127.0.0.1 now (for servers that cannot pick their own and say which)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _require(binary: str, module: str, install: str) -> None:
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} is not installed ({install}): its figures are left out")
    try:
        __import__(module)
    except ImportError:
        pytest.skip(f"the Python client {module!r} is not installed (pip install {module.replace('_', '-')}): "
                    f"{binary}'s figures are left out")


def start_nats(store: Path, logs: Path) -> tuple[Process, str]:
    """nats-server with JetStream (file storage under `store`) on a random port; (the process, nats:// URL)."""
    _require("nats-server", "nats", "apt-get install nats-server; pip install nats-py")
    store.mkdir(parents=True, exist_ok=True)
    process = spawn("nats-server", ["nats-server", "--addr", "127.0.0.1", "--port", "-1",
                                     "--jetstream", "--store_dir", str(store), "--ports_file_dir", str(store)],
                     logs / "nats-server.log")
    ports_file = store / f"nats-server_{process.pid}.ports"

    def url() -> str | None:
        try:
            return json.loads(ports_file.read_text())["nats"][0]
        except (ValueError, KeyError, IndexError):  # (written in part so far)
            return None

    return process, wait_until_ready(process, url, "wrote no ports file")


def start_redis(directory: Path, logs: Path) -> tuple[Process, int]:
    """redis-server on a free port: no snapshots; an append-only file written without fsync (as seglog's
    fsync='never' leaves its segments to the OS); (the process, its port)."""
    _require("redis-server", "redis", "apt-get install redis-server; pip install redis")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    process = spawn("redis-server", ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir",
                                      str(directory), "--save", "", "--appendonly", "yes", "--appendfsync", "no",
                                      "--daemonize", "no"],
                     logs / "redis-server.log")

    def pong() -> int | None:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
            probe.sendall(b"PING\r\n")
            return port if probe.recv(64).startswith(b"+PONG") else None

    return process, wait_until_ready(process, pong, "did not answer PING")


class ProducerWorker(Process):
    """A producer_worker.py process: a pulsar-client producer in a process of its own."""

    def __init__(self, logs: Path, number: int) -> None:
        started = spawn(f"producer worker {number}", [sys.executable, str(HERE / "producer_worker.py")],
                         logs / f"producer-{number}.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        super().__init__(started.name, started.popen, started.log)

    def request(self, **command) -> None:
        self.popen.stdin.write(json.dumps(command) + "\n")
        self.popen.stdin.flush()

    def answer(self) -> dict:
        ready, _, _ = select.select([self.popen.stdout], [], [], ANSWER_TIMEOUT_S)
        line = self.popen.stdout.readline() if ready else ""
        if not line:
            raise AssertionError(f"{self.name} gave no answer in {ANSWER_TIMEOUT_S}s: {self.tail()}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise AssertionError(f"{self.name} failed: {answer}; its log: {self.tail()}")
        return answer

    def stop(self) -> int:
        """Ask it to close its producer and client, then stop it by its pid (bounded)."""
        if self.popen.poll() is None:
            try:
                self.request(op="close")
                self.popen.wait(STOP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return super().stop()
