"""What the CLI tests share: running `seglog` through click's CliRunner and looking at its data directory."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner, Result

import seglog
from seglog.cli import main


def run(runner: CliRunner, data: Path | None, *args: str, input: str | bytes | None = None,  # noqa: A002 - click's name
        code: int = 0) -> Result:
    """Invoke `seglog [--data DATA] ARGS` and check the exit code."""
    argv = (["--data", str(data)] if data is not None else []) + list(args)
    result = runner.invoke(main, argv, input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, result.output
    return result


def make_data(data: Path) -> None:
    """An empty data directory (commands other than create refuse a missing one)."""
    with seglog.open(data):
        pass


def in_a_terminal(runner: CliRunner, data: Path, *args: str, columns: int = 200) -> str:
    """The output of `seglog --data DATA ARGS` as a terminal shows it (styles removed)."""
    result = runner.invoke(main, ["--data", str(data), *args], env={"TTY_COMPATIBLE": "1", "COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return click.unstyle(result.output)


def one_line(text: str) -> str:
    return " ".join(text.split())


def segment_logs(data: Path, topic: str = "t", partition: int = 0) -> list[Path]:
    return sorted((data / "topics" / "public" / "default" / topic / str(partition)).glob("*.log"))


def flip_byte(path: Path, position: int) -> None:
    content = bytearray(path.read_bytes())
    content[position] ^= 0xFF
    path.write_bytes(bytes(content))


def floors(data: Path, subscription: str, topic: str = "t") -> list[int]:
    """Where each partition's cursor of SUBSCRIPTION would deliver next (its mark-delete position + 1)."""
    with seglog.open(data) as log:
        cursors = log.topic(topic).internal_stats()["partitions"]
    return [cursors[p]["cursors"][subscription]["markDeletePosition"] + 1 for p in sorted(cursors, key=int)]
