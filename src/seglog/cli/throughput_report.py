"""Showing throughput measurements: rich progress bars while they run, then a table or JSON."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from seglog.cli.errors import CliFailure
from seglog.cli.output import err
from seglog.cli.throughput import Advance, Measurement, ReadBackError, measure, ratio
from seglog.topic import Topic

CAPTION = ("Best of {rounds} rounds; 1st round: messages/s of the first, which also pays what a process does "
           "once. Writes include opening and closing the producer. Baselines, same run and values: "
           "f.write(struct.pack('<I', len(v)) + v) per message, and the loop reading the file back.")


class RichPhases:
    """One progress bar per measured phase."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def phase(self, description: str, total: int) -> Advance:
        task = self._progress.add_task(description, total=total)
        update = self._progress.update

        def advance(n: int) -> None:
            update(task, advance=n)
        return advance


@contextmanager
def progress_bars(console: Console) -> Iterator[RichPhases]:
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        yield RichPhases(progress)


def table(measurements: list[Measurement], rounds: int, title: str | None = None) -> Table:
    """Writes, then reads, each group ending with its baseline: the best of `rounds` rounds, the ratio its
    messages/s over the baseline's, and the first round's messages/s last."""
    result = Table(title=title, title_justify="left", caption=CAPTION.format(rounds=rounds),
                   caption_justify="left")
    result.add_column("Operation", no_wrap=True)
    for name in ("Messages", "Seconds", "Messages/s", "MB/s", "vs baseline", "1st round"):
        result.add_column(name, justify="right", no_wrap=True)
    for m in measurements:
        versus = ratio(m, measurements)
        shown = "-" if versus is None else ("1.00x" if m.baseline else f"{versus:.2f}x")
        style = "dim" if m.baseline else ("green" if versus and versus >= 1 else "yellow")
        result.add_row(m.operation, f"{m.messages:,}", f"{m.seconds:.3f}", _millions(m.messages_per_second),
                       f"{m.megabytes_per_second:,.1f}", shown, _millions(m.first_round_messages_per_second),
                       style=style, end_section=m.baseline)
    return result


def as_json(measurements: list[Measurement]) -> list[dict[str, Any]]:
    """One object per measurement, its figures from the best round (and the first round's seconds and rate);
    a rate that could not be measured (0 seconds) is null."""
    return [{"operation": m.operation, "kind": m.kind, "baseline": m.baseline, "messages": m.messages,
             "payload_bytes": m.payload_bytes, "seconds": m.seconds,
             "messages_per_second": _finite(m.messages_per_second),
             "megabytes_per_second": _finite(m.megabytes_per_second),
             "ratio_to_baseline": _finite(ratio(m, measurements)),
             "first_round_seconds": m.first_round_seconds,
             "first_round_messages_per_second": _finite(m.first_round_messages_per_second)}
            for m in measurements]


def _millions(rate: float) -> str:
    return f"{rate / 1e6:,.2f} M"


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def measure_with_progress(topic: Topic, messages: int, size: int, *, scratch_dir: Path, chunk: int,
                          rounds: int) -> list[Measurement]:
    """Run the measurements with progress bars on stderr; a read-back mismatch is reported as damage."""
    try:
        with progress_bars(err()) as phases:
            return measure(topic, messages, size, scratch_dir=scratch_dir, phases=phases, chunk=chunk,
                           rounds=rounds)
    except ReadBackError as error:
        raise CliFailure(str(error)) from error
