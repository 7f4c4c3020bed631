"""`seglog consume`: print the messages of one partition, and with --follow keep printing new ones."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import UsageProblem
from seglog.cli.message_format import FORMATS, FORMATTERS
from seglog.cli.output import err

FOLLOW_POLL_SECONDS = 0.5


def _start_position(ctx: click.Context, start: str, from_timestamp: int | None) -> Any:
    """What Reader accepts as start: 'earliest', 'latest', an offset, or {'timestamp': ms}."""
    if from_timestamp is not None:
        if ctx.get_parameter_source("start") != ParameterSource.DEFAULT:
            raise UsageProblem("--start and --from-timestamp cannot be used together", ctx)
        return {"timestamp": from_timestamp}
    text = start.strip()
    return int(text) if text.lstrip("-").isdigit() else text  # the reader refuses anything else, with --start


@click.command(cls=SeglogCommand, short_help="Print the messages of a partition (--follow for new ones).")
@click.argument("topic")
@click.option("--partition", "-p", type=int, default=0, show_default=True, help="Partition to read.")
@click.option("--start", "-s", default="earliest", show_default=True, metavar="earliest|latest|OFFSET",
              help="Where to start: the first stored message, the end, or an offset.")
@click.option("--from-timestamp", type=int, metavar="MS",
              help="Start at the first message whose timestamp (ms since the epoch) is >= MS.")
@click.option("--count", "-n", type=click.IntRange(min=0), metavar="N", help="Stop after N messages.")
@click.option("--follow", "-f", is_flag=True,
              help="At the end, wait for new messages until Ctrl-C (or until --count messages were printed).")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="value", show_default=True,
              help="value: the value as UTF-8 text (bad bytes replaced); json: one JSON object per line with "
                   "partition, offset, timestamp, event_time, key, value, properties (key and value as UTF-8 "
                   "text, else base64, as key_encoding and value_encoding say).")
@pass_data
@click.pass_context
def consume(ctx: click.Context, data: DataDir, topic: str, partition: int, start: str,
            from_timestamp: int | None, count: int | None, follow: bool, output_format: str) -> None:
    """Print the messages of one partition of TOPIC, one per line, from --start to the end.

    Values containing newlines are printed as they are; use --format json for an unambiguous stream.
    """
    position = _start_position(ctx, start, from_timestamp)
    show = FORMATTERS[output_format]
    printed = 0
    with data.open() as log, log.topic(topic).reader(position, partition) as reader:
        try:
            while count is None or printed < count:
                wanted = None if count is None else count - printed
                messages = reader.read_messages(max_messages=wanted,
                                                timeout=FOLLOW_POLL_SECONDS if follow else None)
                if not messages:
                    if follow:
                        continue
                    break
                printed += len(messages)
                click.echo("\n".join(map(show, messages)))
        except KeyboardInterrupt:
            if not follow:
                raise
            err().print(f"[dim]Stopped after {printed:,} message{'' if printed == 1 else 's'}.[/]")
