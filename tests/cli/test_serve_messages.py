"""What `seglog serve` says: its ready and stopped lines at the default log level, the option to change when a
port is in use, and, to a command refused by the writer lock of a partition it writes, that it is the server
of that data directory and where to produce instead. Servers bind 127.0.0.1 on free ports, stopped by pid."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from helpers_cli import one_line, run
from helpers_server import STOP_TIMEOUT_S, start_server
from seglog.cli.serve_record import RECORD_FILE


def serve(data: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "seglog", "--data", str(data), "serve", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stopped(process: subprocess.Popen, signum: int | None = signal.SIGTERM) -> tuple[str, str]:
    """Signal the server by its pid (None: wait for it to exit by itself); its stdout and stderr once it
    exited (killed by its pid if it does not)."""
    try:
        if signum is not None and process.poll() is None:
            os.kill(process.pid, signum)
        return process.communicate(timeout=STOP_TIMEOUT_S)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.communicate()


def test_cluster_defaults_to_standalone_and_ready_and_stopped_are_logged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    process = serve(data, "--port", "0", "--http-port", "0", "--flight-port", "0")
    try:
        urls = process.stdout.readline().split()
        assert [url.split("://")[0] for url in urls] == ["pulsar", "http", "grpc"], urls
        record = json.loads((data / RECORD_FILE).read_text())
        assert record == {"pid": process.pid, "urls": urls}
    finally:
        out, err = stopped(process)
    assert process.returncode == 0, err
    assert re.search(rf"INFO seglog\.serve: ready: serving {re.escape(str(data))} as cluster standalone on "
                     rf"{re.escape(' '.join(urls))}\n", err), err
    assert re.search(r"INFO seglog\.serve: stopped: ", err), err
    assert not (data / RECORD_FILE).exists()


def test_a_port_in_use_names_the_option_to_change_and_exits_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for option in ("--port", "--http-port", "--flight-port"):
            others = [word for other in ("--port", "--http-port", "--flight-port") if other != option
                      for word in (other, "0")]
            process = serve(tmp_path / "data", option, port, *others)
            out, err = stopped(process, None)
            assert process.returncode == 1 and out == "", err
            message = one_line(err)
            assert message == (f"Error: cannot listen on 127.0.0.1:{port} ({option}): Address already in use; "
                               f"give {option} another port, or {option} 0 for a free one")


def test_the_writer_lock_of_the_server_says_to_produce_through_it(runner: CliRunner, tmp_path: Path) -> None:
    data = tmp_path / "data"
    run(runner, data, "topics", "create", "t")
    server = start_server(data)
    try:
        producer = server.client().create_producer("persistent://public/default/t")
        producer.send(b"through the server")  # the server now holds the partition's writer lock
        message = one_line(run(runner, data, "produce", "t", "--value", "x", code=1).output)
        assert message.startswith(f"Error: `seglog serve` (process {server.process.pid}) serves the data directory "
                                  f"{data} and writes its partitions: produce through it, at {server.pulsar_url} ")
        assert "writer lock" in message
    finally:
        assert server.stop() == 0
