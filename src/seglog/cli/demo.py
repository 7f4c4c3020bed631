"""`seglog demo`: the first thing to run: write and read a million messages, next to a plain-Python baseline."""

from __future__ import annotations

import click
from rich.markup import escape

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.options import message_size, topic_name
from seglog.cli.output import out
from seglog.cli.throughput import CHUNK, ROUNDS
from seglog.cli.throughput_report import measure_with_progress, table
from seglog.errors import TopicNotFoundError
from seglog.readable_size import readable_size


@click.command(cls=SeglogCommand, short_help="Write and read messages; throughput vs a Python baseline.")
@click.option("--messages", "-n", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Messages to write with each write method (send_batch, then send()).")
@click.option("--size", default="100", show_default=True, metavar="SIZE",
              help="Bytes per message: a number of bytes or a size such as '1 KiB'.")
@click.option("--topic", default="demo", show_default=True,
              help="Topic to write to; created if it does not exist, else appended to.")
@pass_data
def demo(data: DataDir, messages: int, size: str, topic: str) -> None:
    """Write and read back messages, and show the throughput next to a plain-Python file loop.

    Writes MESSAGES messages with send_batch (lists of 64k messages) and as many with per-message send(),
    reads all of them back with read_batch() (Arrow, zero copy) and by iterating Message objects, and
    measures in the same run a loop of f.write(struct.pack('<I', len(v)) + v) and the loop reading it back;
    all of it three times, showing the best round. The machine may be busy: compare the ratios, not the
    absolute numbers.
    """
    name = topic_name(topic)
    size_bytes = message_size(size)
    console = out()
    console.print(f"[bold]seglog demo[/]: {messages:,} messages of {readable_size(size_bytes)}, written twice in "
                  f"each of {ROUNDS} rounds, to topic {name} in {escape(str(data.path))}", soft_wrap=True)
    with data.open(create=True) as log:
        try:
            handle = log.topic(name)
        except TopicNotFoundError:
            handle = log.create_topic(name)
        results = measure_with_progress(handle, messages, size_bytes, scratch_dir=data.path, chunk=CHUNK,
                                        rounds=ROUNDS)
        console.print(table(results, ROUNDS, title=f"{messages:,} messages of {readable_size(size_bytes)}"))
        total = sum(handle.end_offset(p) - handle.earliest_offset(p) for p in range(handle.partitions))
        console.print(f"Topic {name} now holds {total:,} messages ({readable_size(handle.storage_size())}).")
    prefix = escape(f"seglog --data {data.path}")
    console.print("Next:")
    for command in (f"consume {topic} -n 3", f"topic describe {topic}", "check"):
        console.print(f"  [bold]{prefix} {command}[/]", soft_wrap=True)
