"""`seglog consume`'s formats: what a terminal gets for values that are not printable text, what a pipe
gets, and --start refused in the command line's words."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.testing import CliRunner

from helpers_cli import one_line, run
from seglog.cli import main

BINARY = b"a\x00b\x1b[31mred\\\xff"
ESCAPED = "a\\x00b\\x1b[31mred\\\\\\xff"


def with_values(runner: CliRunner, data: Path, *values: bytes) -> None:
    run(runner, data, "topics", "create", "t")
    run(runner, data, "produce", "t", input=b"\n".join(values) + b"\n")


def in_a_terminal(runner: CliRunner, data: Path, *args: str) -> tuple[str, str]:
    """stdout and stderr of `seglog consume ARGS` as a terminal shows them (styles removed)."""
    result = runner.invoke(main, ["--data", str(data), "consume", *args], env={"TTY_COMPATIBLE": "1"})
    assert result.exit_code == 0, result.output
    return click.unstyle(result.stdout), click.unstyle(result.stderr)


def test_a_terminal_gets_escapes_for_values_that_are_not_printable_text_and_a_note(runner: CliRunner,
                                                                                  data: Path) -> None:
    with_values(runner, data, b"plain text", BINARY, "caf\u00e9 \U0001f600".encode(), b"tab\there")
    stdout, stderr = in_a_terminal(runner, data, "t")
    assert stdout.splitlines() == ["plain text", ESCAPED, "caf\u00e9 \U0001f600", "tab\there"]
    note = one_line(stderr)
    assert "not printable" in note and "--format json" in note and "--format raw" in note


def test_a_terminal_gets_no_note_when_every_value_is_text(runner: CliRunner, data: Path) -> None:
    with_values(runner, data, b"one", b"two")
    assert in_a_terminal(runner, data, "t") == ("one\ntwo\n", "")


def test_a_pipe_gets_the_values_as_today_and_raw_gets_every_byte(runner: CliRunner, data: Path) -> None:
    with_values(runner, data, b"plain", BINARY)
    result = run(runner, data, "consume", "t")
    assert result.stdout_bytes == b"plain\n" + BINARY.decode("utf-8", errors="replace").encode() + b"\n"
    assert result.stderr == ""
    assert run(runner, data, "consume", "t", "--format", "raw").stdout_bytes == b"plain\n" + BINARY + b"\n"
    stdout, _ = in_a_terminal(runner, data, "t", "--format", "json")
    assert json.loads(stdout.splitlines()[1])["value_encoding"] == "base64"


def test_start_is_refused_in_the_command_lines_words(runner: CliRunner, data: Path) -> None:
    with_values(runner, data, b"x")
    for start in ("soon", "-5"):
        message = one_line(run(runner, data, "consume", "t", "--start", start, code=2).output)
        assert f"Invalid value for '--start' / '-s': '{start}'" in message, message
        assert "'earliest', 'latest', an offset (an int from 0 to" in message and "--from-timestamp" in message
        assert "{" not in message and "timestamp':" not in message
