"""Where output goes: results (tables, data) on stdout, progress bars and errors on stderr, JSON unstyled."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

_UNLIMITED_WIDTH = 1 << 20


def out() -> Console:
    """Console for results on stdout (created per call: tests and pipes swap sys.stdout)."""
    return Console(highlight=False, soft_wrap=True)


def err() -> Console:
    """Console for progress bars and notes on stderr, so stdout stays clean for pipes."""
    return Console(stderr=True, highlight=False)


def print_json(document: Any) -> None:
    """`document` as indented JSON on stdout, no colours, no wrapping."""
    click.echo(json.dumps(document, indent=2))


def print_names(names: list[str], as_json: bool) -> None:
    """A list of names: a JSON array, or one name a line (for scripts reading plain lines)."""
    if as_json:
        print_json(names)
        return
    for name in names:
        click.echo(name)


def message_count(count: int) -> str:
    """'1 message', '2,000 messages'."""
    return f"{count:,} message{'' if count == 1 else 's'}"


def print_unclipped(table: Table) -> None:
    """Print `table` on stdout without ever cutting or folding a cell (a topic's name shown in part is a
    wrong name): as wide as its widest row needs, wider than the terminal if need be, which then wraps the
    lines as it wraps any long line."""
    console = out()
    needed = Measurement.get(console, console.options.update_width(_UNLIMITED_WIDTH), table).maximum
    if needed > console.width:
        console = Console(highlight=False, soft_wrap=True, width=needed)
    console.print(table)
