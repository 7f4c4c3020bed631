"""`seglog bench`: the demo's measurements with every knob, in a scratch topic, as a table or JSON."""

from __future__ import annotations

import uuid

import click

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.options import SIZE_METAVAR, SIZE_UNITS, check_throughput_workload, message_size_option
from seglog.cli.output import out, print_json, print_table
from seglog.cli.throughput import CHUNK, ROUNDS, WRITES_PER_ROUND
from seglog.cli.throughput_report import as_json, measure_with_progress, table
from seglog.log import MAX_PARTITIONS
from seglog.units import readable_size


@click.command(cls=SeglogCommand, short_help="Throughput benchmark vs Python baselines (table or JSON).")
@click.option("--messages", "-n", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Messages to write with each write method (send_batch, then send()).")
@click.option("--size", default="100", show_default=True, metavar=SIZE_METAVAR, callback=message_size_option,
              help=f"Bytes per message: a number of bytes or a size such as '1 KiB' ({SIZE_UNITS}).")
@click.option("--partitions", "-p", type=click.IntRange(1, MAX_PARTITIONS), default=1, show_default=True,
              help="Partitions of the scratch topic; writes go round robin, reads cover every partition.")
@click.option("--chunk", type=click.IntRange(min=1), default=CHUNK, show_default=True,
              help="Messages per send_batch call (and per batch that send() gathers).")
@click.option("--rounds", type=click.IntRange(min=1), default=ROUNDS, show_default=True,
              help="Times each measurement runs; the figures are the best round's (the first also pays "
                   "once-per-process work, shown apart).")
@click.option("--json", "as_json_output", is_flag=True, help="Print the results as JSON instead of a table.")
@click.option("--keep", is_flag=True, help="Keep the scratch topic instead of deleting it afterwards.")
@pass_data
@click.pass_context
def bench(ctx: click.Context, data: DataDir, messages: int, size: int, partitions: int, chunk: int, rounds: int,
          as_json_output: bool, keep: bool) -> None:
    """Measure write and read throughput against plain-Python file baselines.

    Creates a scratch topic 'bench-<random>' (deleted afterwards unless --keep) with PARTITIONS partitions,
    and ROUNDS times writes MESSAGES messages with send_batch and as many with send(), reads them back with
    read_batch() and by iterating Messages, and runs the file write and read loops for the ratios. The
    operations and baselines are those of the repository's bench/ (bench_append.py, bench_read.py).
    """
    check_throughput_workload(ctx, messages=messages, size=size, chunk=chunk,
                              writes=WRITES_PER_ROUND * rounds + 1, data=data.path)
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with data.open(create=True) as log:
        topic = log.create_topic(name, partitions=partitions)
        try:
            results = measure_with_progress(topic, messages, size, scratch_dir=data.path, chunk=chunk,
                                            rounds=rounds)
        finally:
            if not keep:
                log.delete_topic(name)
    if as_json_output:
        print_json({"messages": messages, "size": size, "partitions": partitions, "chunk": chunk,
                    "rounds": rounds, "topic": topic.name if keep else None, "results": as_json(results)})
        return
    title = (f"{messages:,} messages of {readable_size(size)}, {partitions} partition"
             f"{'s' if partitions > 1 else ''}, {chunk:,} per call")
    print_table(table(results, rounds, title=title))
    if keep:
        out().print(f"Kept topic {topic.name}.")
