"""`seglog check`'s work: broker.conf, then every partition (seglog.storage.check.check_log) with a progress bar
over the bytes to read; and listing problems."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from seglog.catalog.config import broker_file_problem
from seglog.cli.output import err
from seglog.storage.check import CheckReport, Problem, check_log, total_log_bytes


def check_with_progress(path: Path, label: str = "checking") -> tuple[CheckReport, float]:
    """The check report of the data directory `path` and the seconds it took; the bar goes to stderr."""
    with Progress(TextColumn(label), BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=err(), transient=True) as progress:
        task = progress.add_task(label, total=total_log_bytes(path))
        started = time.perf_counter()
        report = check_log(path, progress=lambda n: progress.update(task, advance=n))
        config_error = broker_file_problem(path)
        if config_error is not None:
            report.problems.insert(0, Problem(config_error.path, config_error.lines[0], config_error.reason,
                                              unit="line"))
        return report, time.perf_counter() - started


def print_problems(console: Console, problems: list[Problem], style: str = "red") -> None:
    """One line per problem: file, byte position, reason (never wrapped, so the path stays whole)."""
    for problem in problems:
        console.print(f"  {escape(str(problem))}", style=style, soft_wrap=True)
