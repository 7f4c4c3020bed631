"""`seglog check`: verify every batch and index of the data directory, and that every topic's creation or
deletion was finished, changing nothing."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from seglog.broker import METADATA_FILE
from seglog.catalog.metadata import listed_topics
from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import EXIT_DAMAGE
from seglog.cli.output import out
from seglog.cli.verify import check_with_progress, print_problems
from seglog.storage.check import Problem, topic_leftovers
from seglog.units import readable_size


@click.command(cls=SeglogCommand, short_help="Verify every batch and index of the data directory.")
@pass_data
@click.pass_context
def check(ctx: click.Context, data: DataDir) -> None:
    """Verify the whole data directory: every batch's header, offsets and CRC32C, every index, every
    partition's compacted view, and what a crash in the middle of creating or deleting a topic left.

    Nothing is changed. Exits with 1 and lists each problem (file, byte position, reason) if any is found;
    `seglog repair` fixes what can be fixed.
    """
    path = data.require()
    report, seconds = check_with_progress(path)
    report.problems += topic_problems(path)
    summary = Table(box=None, show_header=False)
    summary.add_column(style="bold")
    summary.add_column(justify="right")
    rate = report.bytes_checked / 1e9 / seconds if seconds > 0 else 0.0
    for label, value in (("Partitions", f"{report.partitions:,}"), ("Segments", f"{report.segments:,}"),
                         ("Batches", f"{report.batches:,}"),
                         ("Bytes", f"{report.bytes_checked:,} ({readable_size(report.bytes_checked)})"),
                         ("Seconds", f"{seconds:.3f}"), ("GB/s", f"{rate:.2f}")):
        summary.add_row(label, value)
    console = out()
    console.print(summary)
    if report.notes:
        console.print("Not damage (nothing acknowledged is lost):")
        print_problems(console, report.notes, style="yellow")
    if report.ok:
        console.print(f"[green]OK[/]: no damage in {escape(str(path))}")
        return
    count = len(report.problems)
    in_storage = any(problem.unit in ("byte", "") for problem in report.problems)  # broker.conf's are by line
    hint = " (`seglog repair` cuts what follows the last committed batch, rebuilds indexes, removes damaged " \
        "compacted views and finishes what a crash left of a topic's creation or deletion)" if in_storage else ""
    console.print(f"[bold red]{count} problem{'s' if count > 1 else ''} found[/]{hint}:")
    print_problems(console, report.problems)
    ctx.exit(EXIT_DAMAGE)


def topic_problems(path: Path) -> list[Problem]:
    """What a crash in the middle of creating or deleting a topic left in the data directory `path`."""
    return topic_leftovers(path, set(listed_topics(path / METADATA_FILE)))
