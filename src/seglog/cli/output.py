"""Where output goes: results (tables, data) on stdout, progress bars and errors on stderr, JSON unstyled."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

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


def print_table(table: Table) -> None:
    """Print `table` on stdout: drawn in a terminal wide enough for it, else (a pipe, a file, a narrow
    terminal) as plain columns of text, which nothing cuts: a cell shown in part would be a wrong figure."""
    console = out()
    needed = Measurement.get(console, console.options.update_width(_UNLIMITED_WIDTH), table).maximum
    if console.is_terminal and needed <= console.width:
        console.print(table)
        return
    click.echo("\n".join(plain_columns(table)))


def plain_columns(table: Table) -> list[str]:
    """The lines of `table` as plain text: its title, a header line, a line per row (a blank line after the
    end of a section), its caption; each column as wide as its widest cell, justified as in the table."""
    columns = [[_plain(column.header), *map(_plain, column.cells)] for column in table.columns]
    widths = [max(map(len, cells)) for cells in columns]
    right = [column.justify == "right" for column in table.columns]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(width) if justify else cell.ljust(width)
                         for cell, width, justify in zip(cells, widths, right)).rstrip()

    lines = [_plain(table.title)] if table.title else []
    lines.append(line([cells[0] for cells in columns]))
    for index, row in enumerate(table.rows):
        lines.append(line([cells[index + 1] for cells in columns]))
        if row.end_section and index + 1 < len(table.rows):
            lines.append("")
    if table.caption:
        lines.append(_plain(table.caption))
    return lines


def _plain(cell: Any) -> str:
    """A cell's text without its markup or styles."""
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)
