"""`seglog repair`: finish the topic creations and deletions a crash cut short, run forced recovery on every
partition of the data directory, remove damaged compacted views and what unfinished compactions left, then
check what remains."""

from __future__ import annotations

import click
from rich.markup import escape

from seglog.broker import Broker
from seglog.cli.base import SeglogCommand
from seglog.cli.check import topic_problems
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import EXIT_DAMAGE
from seglog.cli.output import out
from seglog.cli.verify import check_with_progress, print_problems
from seglog.clock import system_clock
from seglog.lifecycle.compacted_repair import compaction_locks, repair_compacted_views
from seglog.storage.check import repair_log
from seglog.units import readable_size


@click.command(cls=SeglogCommand, short_help="Cut torn tails, rebuild indexes, report damage left.")
@pass_data
@click.pass_context
def repair(ctx: click.Context, data: DataDir) -> None:
    """Repair the data directory: finish what a crash left of a topic's creation or deletion, cut each
    partition back to its last committed batch, rebuild indexes that do not match their log, remove damaged
    compacted views and the files unfinished compactions left.

    The first is what every open of the data directory does; the next two what a writer does when it opens a
    partition, applied to every partition without trusting clean-shutdown markers; a compacted view is made
    again from the log by the next compaction; then the whole directory is checked as `seglog check` does.
    Damage inside a sealed (not the last) segment cannot be cut without losing what follows it: it is listed
    and the exit code is 1. A partition being written or compacted by a running process is refused (exit
    code 1).
    """
    path = data.require()
    broker = Broker.open(path, clock=system_clock, background=False)  # the open finishes the topics' changes
    broker.close()
    with compaction_locks(path) as compacted:
        repaired = repair_log(path)
        views = repair_compacted_views(compacted)
    report, _seconds = check_with_progress(path, label="verifying")
    report.problems += topic_problems(path)
    remaining = list(dict.fromkeys([*repaired.damaged, *report.problems]))  # Problem is hashable: no duplicates
    console = out()
    for name in broker.cleanup.finished_deletions:
        console.print(f"Finished the deletion of topic {escape(name)}, which a crash cut short")
    for name in broker.cleanup.removed_directories:
        console.print(f"Removed the directory of topic {escape(name)}, which does not exist (a crash while it was "
                      "created or deleted)")
    cut, rebuilt = repaired.cut_bytes, repaired.rebuilt_indexes
    # (space allocated ahead of a writer that a crash left is cut too: it never held a message)
    unused = (f", of which {repaired.unused_bytes:,} bytes were unused space ahead of the writer (never written)"
              if repaired.unused_bytes else "")
    console.print(f"Cut {cut:,} bytes ({readable_size(cut)}) after the last committed batches{unused}")
    console.print(f"Rebuilt {rebuilt:,} index{'es' if rebuilt != 1 else ''}")
    for problem in views.removed_views:
        console.print(f"Removed a damaged compacted view, made again by the next compaction: {escape(str(problem))}",
                      soft_wrap=True)
    for problem in views.salvaged_views:
        console.print(f"Cut a damaged compacted view that stands for the log to its sound messages (what was past "
                      f"the damage is lost): {escape(str(problem))}", soft_wrap=True)
    if views.removed_leftovers:
        left = len(views.removed_leftovers)
        console.print(f"Removed {left} file{'s' if left != 1 else ''} that unfinished compactions left")
    if repaired.lost:
        console.print("[bold yellow]Acknowledged batches were lost[/] before this repair (a power loss without "
                      "fsync, or damage) and are cut now:")
        print_problems(console, repaired.lost, style="yellow")
    if not remaining:
        console.print(f"[green]OK[/]: no damage remains in {escape(str(path))}")
        return
    console.print(f"[bold red]Damage remains[/] in {len(remaining)} place{'s' if len(remaining) > 1 else ''} "
                  "(inside sealed segments: reads stop there):")
    print_problems(console, remaining)
    ctx.exit(EXIT_DAMAGE)
