"""Where output goes: results (tables, data) on stdout, progress bars and errors on stderr, JSON unstyled."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console


def out() -> Console:
    """Console for results on stdout (created per call: tests and pipes swap sys.stdout)."""
    return Console(highlight=False, soft_wrap=True)


def err() -> Console:
    """Console for progress bars and notes on stderr, so stdout stays clean for pipes."""
    return Console(stderr=True, highlight=False)


def print_json(document: Any) -> None:
    """`document` as indented JSON on stdout, no colours, no wrapping."""
    click.echo(json.dumps(document, indent=2))


def approximate_size(n: int) -> str:
    """`n` bytes rounded for reading: '21.4 MiB' (units.format_size is exact, so '22401248 B' here)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
