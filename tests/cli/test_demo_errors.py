"""`seglog demo` and `seglog bench`: every option checked before anything is written, in the command line's
words; the table as plain columns where it would be cut; what the demo leaves on disk and how to remove it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from helpers_cli import one_line, run
from seglog.cli import main

SMALL = ("--messages", "2000", "--size", "50")


@pytest.mark.parametrize("command, options, named, accepted", [
    (command, ["--size", "0"], "Invalid value for '--size': '0'", "from 1 byte to 2 GiB - 1 bytes")
    for command in ("demo", "bench")] + [
    (command, ["--size", "3GiB", "--messages", "1"], "Invalid value for '--size': '3GiB' (3,221,225,472 bytes)",
     "from 1 byte to 2 GiB - 1 bytes") for command in ("demo", "bench")] + [
    ("demo", ["--size", "1MiB"], "--messages 1,000,000 of --size 1MiB need 1.9 TiB of memory", "fewer --messages"),
    ("bench", ["--size", "1MiB", "--chunk", "10"], "--messages 1,000,000 of --size 1MiB need 1.9 TiB of memory",
     "fewer --messages"),
])
def test_sizes_are_refused_before_anything_is_written_in_the_command_lines_words(
        runner: CliRunner, data: Path, command: str, options: list[str], named: str, accepted: str) -> None:
    message = one_line(run(runner, data, command, *options, code=2).output)
    assert named in message and accepted in message, message
    assert "batch_size" not in message and "split the call" not in message and "send_batch call (" not in message
    assert not data.exists()


def test_a_size_error_explains_the_units(runner: CliRunner, data: Path) -> None:
    message = one_line(run(runner, data, "demo", "--size", "0", code=2).output)
    assert "'64m' is 64 MiB, '64MB' is 61 MiB" in message


def test_bench_refuses_calls_larger_than_a_send_batch_call_takes(runner: CliRunner, data: Path) -> None:
    message = one_line(run(runner, data, "bench", "--size", "64KiB", "--messages", "100000", code=2).output)
    assert "--chunk 65,536 messages of --size 64KiB make 4 GiB per send_batch call" in message, message
    assert not data.exists()


def test_more_than_the_disk_has_free_is_refused(runner: CliRunner, data: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    message = one_line(run(runner, data, "demo", *SMALL, code=2).output)
    assert "would write about" in message and "has 1000 B free" in message, message
    assert not data.exists()


def test_the_table_is_plain_columns_in_a_pipe_and_in_a_narrow_terminal(runner: CliRunner, data: Path) -> None:
    for terminal in ({}, {"TTY_COMPATIBLE": "1"}):
        result = runner.invoke(main, ["--data", str(data), "demo", *SMALL], env={"COLUMNS": "80", **terminal})
        assert result.exit_code == 0, result.output
        stdout = click.unstyle(result.stdout)
        assert "…" not in stdout and "┃" not in stdout and "│" not in stdout
        assert re.search(r"^Operation +Messages +Seconds +Messages/s +MB/s +vs baseline +1st round$", stdout,
                         re.MULTILINE), stdout
        assert re.search(r"^baseline: f\.write +2,000 ", stdout, re.MULTILINE), stdout
    result = runner.invoke(main, ["--data", str(data), "demo", *SMALL], env={"COLUMNS": "200", "TTY_COMPATIBLE": "1"})
    assert "┃ Operation" in click.unstyle(result.stdout)  # drawn where it fits


def test_demo_says_what_it_left_on_disk_and_how_to_remove_it(runner: CliRunner, data: Path) -> None:
    message = one_line(run(runner, data, "demo", *SMALL).stdout)
    assert re.search(rf"{re.escape(str(data))} takes [0-9.]+ [KM]iB on disk; to remove it: `seglog --data "
                     rf"{re.escape(str(data))} topics delete demo` \(its messages\), or `rm -r {re.escape(str(data))}` "
                     r"\(the whole data directory\)", message), message


def test_demo_never_proposes_to_remove_a_data_directory_with_other_topics(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "precious")
    message = one_line(run(runner, data, "demo", *SMALL).stdout)
    assert "topics delete demo" in message and "rm -r" not in message


def test_size_options_say_which_units_are_binary_and_which_decimal(runner: CliRunner) -> None:
    for command in (["demo"], ["bench"], ["serve"]):
        text = one_line(run(runner, None, *command, "--help").output)
        assert "KB, MB, GB, TB decimal (1KB = 1000 bytes): '64m' is 64 MiB, '64MB' is 61 MiB" in text, command
