"""The exit codes of every command, as docs/CLI.md lists them: 2 for a usage error, 1 for a failure, 130 for
Ctrl-C; and the Ctrl-C of a command run as a process (a subprocess, stopped by its pid, bounded in time)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import one_line, run
from seglog.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 60.0
# Python leaves SIGINT ignored if the test process was started with it ignored (a background job): restore it.
PROGRAM = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
           "from seglog.cli import main; main(sys.argv[1:], prog_name='seglog')")
# `seglog demo` that, once it has written its first round, creates the file its first argument names and waits
# for the SIGINT there: Ctrl-C lands mid-measurement however fast the demo runs or however loaded the machine is
# (a demo left to run may finish before the signal arrives). The wait is bounded: without the signal, the demo
# goes on and exits 0.
DEMO_WAITING_FOR_CTRL_C = f"""
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
from seglog.cli import main
from seglog.cli.throughput_report import RichPhases

started = Path(sys.argv[1])
phase = RichPhases.phase

def phase_then_wait(self, description, total):
    advance = phase(self, description, total)

    def advance_then_wait(n):
        advance(n)
        if not started.exists():
            started.touch()
            time.sleep({EXIT_TIMEOUT_S})  # the SIGINT ends it

    return advance_then_wait

RichPhases.phase = phase_then_wait
main(sys.argv[2:], prog_name="seglog")
"""


@pytest.mark.parametrize("args", [
    ["produce", "t", "--no-such-option"],  # click's usage errors
    ["topics", "create"],
    ["consume", "t", "--count", "-1"],  # values click refuses
    ["topics", "create", "t2", "--segment-size", "64 parsecs"],  # values the library refuses
    ["namespaces", "set-retention", "public/default", "--size", "1x", "--time", "1h"],
    ["tenants", "create", "no spaces"],
    ["consume", "t", "--start", "soon"],
    ["consume", "no-such-topic"],  # names that name nothing
    ["topics", "delete", "no-such-topic"],
    ["topics", "skip", "t", "-s", "no-such-subscription", "-n", "1"],
    ["namespaces", "delete", "public/no-such-namespace"],
    ["demo", "--size", "0"],
    ["bench", "--rounds", "0"],
    ["serve", "--port", "65536"],
])
def test_a_usage_error_exits_2(runner: CliRunner, data: Path, args: list[str]) -> None:
    run(runner, data, "topics", "create", "t")
    result = run(runner, data, *args, code=EXIT_USAGE)
    assert "Error" in result.output and "Traceback" not in result.output


def test_no_data_directory_is_a_usage_error(runner: CliRunner, data: Path) -> None:
    assert "no seglog data directory" in run(runner, data, "consume", "t", code=EXIT_USAGE).output


def test_what_exists_already_is_a_failure_not_a_usage_error(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    assert "already exists" in run(runner, data, "topics", "create", "t", code=EXIT_FAILURE).output
    assert "already exists" in run(runner, data, "tenants", "create", "public", code=EXIT_FAILURE).output
    run(runner, data, "topics", "create-subscription", "t", "-s", "s")
    assert "already exists" in run(runner, data, "topics", "create-subscription", "t", "-s", "s",
                                   code=EXIT_FAILURE).output


def test_a_partition_locked_by_another_writer_is_a_failure(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    with seglog.open(data) as log, log.topic("t").producer() as producer:
        producer.send(b"held")
        for args in (["produce", "t", "--value", "x"], ["repair"]):
            assert "writer lock" in run(runner, data, *args, code=EXIT_FAILURE).output


def test_a_topic_in_use_is_a_failure_named_in_the_command_lines_words(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    with seglog.open(data) as log, log.topic("t").producer() as producer:
        producer.send(b"held")
        message = one_line(run(runner, data, "topics", "delete", "t", code=EXIT_FAILURE).output)
    assert "has producers" in message or "has a producer" in message, message
    assert message.endswith("close them first, or delete with --force, which fences them"), message


def test_damage_is_a_failure(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    run(runner, data, "produce", "t", "--value", "x")
    (data / "broker.conf").write_text("segmentSize=lots\n")
    run(runner, data, "check", code=EXIT_FAILURE)


def command(data: Path, *args: str, stdin: int | None = None, program: str = PROGRAM,
            program_args: tuple[str, ...] = ()) -> subprocess.Popen:
    """`seglog --data DATA ARGS` as a process of its own running `program` (given `program_args` first), its
    output in pipes."""
    return subprocess.Popen([sys.executable, "-c", program, *program_args, "--data", str(data), *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "SEGLOG_DATA": ""})


def interrupt(process: subprocess.Popen, ready: Callable[[], bool]) -> tuple[str, str]:
    """Once `ready()`, SIGINT to `process` by its pid; its stdout and stderr once it exited (bounded: killed
    by its pid if it did not)."""
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the command was not ready in time"
            time.sleep(0.05)  # waiting for the process, bounded by the deadline
        os.kill(process.pid, signal.SIGINT)
        return process.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.communicate()


def test_ctrl_c_exits_130_saying_so(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    lock = data / "topics" / "public" / "default" / "t" / "0" / ".lock"
    process = command(data, "produce", "t", stdin=subprocess.PIPE)
    process.stdin.write("first\n")  # its writer (and lock) is taken with it; then produce waits for more
    process.stdin.flush()
    _, err = interrupt(process, lock.exists)
    assert process.returncode == EXIT_INTERRUPTED, err
    assert "Interrupted" in err and "Traceback" not in err and "Aborted!" not in err


def test_ctrl_c_of_consume_follow_exits_130(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    run(runner, data, "produce", "t", "--value", "only")
    process = command(data, "consume", "t", "--follow")
    printed: list[str] = []
    out, err = interrupt(process, lambda: printed.append(process.stdout.readline()) or True)
    assert printed == ["only\n"] and out == ""
    assert process.returncode == EXIT_INTERRUPTED, err
    assert "Stopped after 1 message." in err


def test_ctrl_c_of_demo_exits_130_saying_what_it_left_and_how_to_remove_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    started = tmp_path / "wrote a round"
    process = command(data, "demo", "--messages", "100000", program=DEMO_WAITING_FOR_CTRL_C,
                      program_args=(str(started),))
    _, err = interrupt(process, started.exists)
    assert process.returncode == EXIT_INTERRUPTED, err
    message = one_line(err)
    assert re.search(rf"Interrupted: nothing measured; {re.escape(str(data))} takes [0-9.]+ [KMG]?i?B on disk",
                     message), message
    assert f"seglog --data {data} topics delete demo" in message and f"rm -r {data}" in message
    assert "Traceback" not in err


def test_the_exit_codes_are_documented() -> None:
    text = (ROOT / "docs" / "CLI.md").read_text()
    section = text[text.index("## Exit codes"):]
    for code in (0, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED):
        assert f"| {code} |" in section
