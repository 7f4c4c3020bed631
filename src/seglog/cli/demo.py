"""`seglog demo`: the first thing to run: write and read a million messages, next to a plain-Python baseline;
then say what it left on disk and how to remove it (after Ctrl-C too)."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.markup import escape

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import Interrupted
from seglog.cli.options import (
    MAX_CALL_BYTES,
    SIZE_METAVAR,
    SIZE_UNITS,
    check_throughput_workload,
    message_size_option,
    topic_name,
)
from seglog.cli.output import out, print_table
from seglog.cli.throughput import CHUNK, ROUNDS, WRITES_PER_ROUND
from seglog.cli.throughput_report import measure_with_progress, table
from seglog.errors import TopicNotFoundError
from seglog.units import readable_size


@click.command(cls=SeglogCommand, short_help="Write and read messages; throughput vs a Python baseline.")
@click.option("--messages", "-n", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Messages to write with each write method (send_batch, then send()).")
@click.option("--size", default="100", show_default=True, metavar=SIZE_METAVAR, callback=message_size_option,
              help=f"Bytes per message: a number of bytes or a size such as '1 KiB' ({SIZE_UNITS}).")
@click.option("--topic", default="demo", show_default=True,
              help="Topic to write to; created if it does not exist, else appended to.")
@pass_data
@click.pass_context
def demo(ctx: click.Context, data: DataDir, messages: int, size: int, topic: str) -> None:
    """Write and read back messages, and show the throughput next to a plain-Python file loop.

    Writes MESSAGES messages with send_batch (lists of 64k messages) and as many with per-message send(),
    reads all of them back with read_batch() (Arrow, zero copy) and by iterating Message objects, and
    measures in the same run a loop of f.write(struct.pack('<I', len(v)) + v) and the loop reading it back;
    all of it three times, showing the best round. The machine may be busy: compare the ratios, not the
    absolute numbers. At the end it says how much the data directory takes on disk and how to remove it.
    """
    name = topic_name(topic)
    chunk = min(CHUNK, MAX_CALL_BYTES // size)  # a large --size takes fewer messages per call
    check_throughput_workload(ctx, messages=messages, size=size, chunk=chunk,
                              writes=WRITES_PER_ROUND * ROUNDS + 1, data=data.path)
    console = out()
    shown_size = readable_size(size)
    console.print(f"[bold]seglog demo[/]: {messages:,} messages of {shown_size}, written twice in each of {ROUNDS} "
                  f"rounds, to topic {name} in {escape(str(data.path))}", soft_wrap=True)
    others: list[str] = []
    try:
        with data.open(create=True) as log:
            others = [other for other in log.list_topics() if other != name]
            try:
                handle = log.topic(name)
            except TopicNotFoundError:
                handle = log.create_topic(name)
            results = measure_with_progress(handle, messages, size, scratch_dir=data.path, chunk=chunk,
                                            rounds=ROUNDS)
            print_table(table(results, ROUNDS, title=f"{messages:,} messages of {shown_size}"))
            total = sum(handle.end_offset(p) - handle.earliest_offset(p) for p in range(handle.partitions))
            console.print(f"Topic {name} now holds {total:,} messages ({readable_size(handle.storage_size())}).")
    except KeyboardInterrupt:
        raise Interrupted(f"nothing measured; {_left_behind(data.path, topic, others)}") from None
    console.print(f"{_left_behind(data.path, topic, others)}.", soft_wrap=True)
    prefix = escape(f"seglog --data {data.path}")
    console.print("Next:")
    for command in (f"consume {topic} -n 3", f"topics describe {topic}", "check"):
        console.print(f"  [bold]{prefix} {command}[/]", soft_wrap=True)


def _left_behind(path: Path, topic: str, others: list[str]) -> str:
    """What the data directory `path` takes on disk, and the commands that remove the demo's topic (or the
    whole directory, when it holds no other topic)."""
    if not path.exists():
        return f"it left nothing on disk ({path} was not created)"
    remove = f"`seglog --data {path} topics delete {topic}`"
    if not others:
        remove += f" (its messages), or `rm -r {path}` (the whole data directory)"
    return f"{path} takes {readable_size(disk_usage(path))} on disk; to remove it: {remove}"


def disk_usage(path: Path) -> int:
    """Bytes of disk the files under `path` hold, as `du` counts them (segment files are sparse: their
    length is not what they take)."""
    total = 0
    for directory, _, files in os.walk(path):
        for file in files:
            try:
                total += os.lstat(os.path.join(directory, file)).st_blocks * 512
            except FileNotFoundError:  # removed meanwhile (a segment deleted by retention)
                continue
    return total
