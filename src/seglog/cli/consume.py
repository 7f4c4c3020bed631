"""`seglog consume`: print the messages of a topic (every partition, or --partition P), directly or through a
subscription that acknowledges what is printed; with --follow keep printing new ones."""

from __future__ import annotations

import signal
import threading
from functools import partial
from typing import Any

import click
from click.core import ParameterSource

from seglog._core._messages import Message
from seglog._wait import wait_until
from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import EXIT_INTERRUPTED, UsageProblem
from seglog.cli.message_format import PRINTED_FORMATS, MessagePrinter
from seglog.cli.message_sources import PartitionReaders, SubscriptionMessages
from seglog.cli.output import err, message_count
from seglog.errors import InvalidArgumentError
from seglog.subscriptions.registry import INITIAL_POSITIONS, SUBSCRIPTION_TYPES_ACCEPTED, parse_subscription_type
from seglog.topic import Topic

CHUNK = 1024  # messages printed at a time: output flows while a long backlog is read
def _start_position(ctx: click.Context, start: str, from_timestamp: int | None) -> Any:
    """What Reader accepts as start: 'earliest', 'latest', an offset, or {'timestamp': ms}."""
    if from_timestamp is not None:
        if _given(ctx, "start"):
            raise UsageProblem("--start and --from-timestamp cannot be used together", ctx)
        return {"timestamp": from_timestamp}
    text = start.strip()
    if text.lower() in INITIAL_POSITIONS:  # (in any case, as a subscription's initial position)
        return text.lower()
    if not text.isdigit():
        raise UsageProblem(f"Invalid value for '--start' / '-s': '{start}'; accepted: 'earliest', 'latest', an "
                           f"offset (an int from 0 to {2**63 - 1}), or --from-timestamp MS to start at a time", ctx)
    return int(text)


def _subscription_type(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--subscription-type as the API takes it: any case, Pulsar's spellings (Shared, Key_Shared) too."""
    try:
        return parse_subscription_type(value)
    except InvalidArgumentError:
        raise click.BadParameter(f"'{value}'; accepted: {SUBSCRIPTION_TYPES_ACCEPTED}", ctx, param) from None


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


def _check_subscription_options(ctx: click.Context, subscription: str | None, start: str) -> None:
    """A subscription spans every partition and resumes at its cursor: --start only places a new one."""
    params = {param.name: param for param in ctx.command.params}
    if subscription is None:
        if _given(ctx, "subscription_type"):
            raise UsageProblem(f"{params['subscription_type'].get_error_hint(ctx)} needs --subscription", ctx)
        return
    for name in ("partition", "from_timestamp"):
        if _given(ctx, name):
            raise UsageProblem(f"{params[name].get_error_hint(ctx)} cannot be used with --subscription, which "
                               "reads every partition from its cursor (move it with `seglog topics "
                               "reset-cursor`)", ctx)
    if start.strip().lower() not in INITIAL_POSITIONS:
        raise UsageProblem(f"Invalid value for {params['start'].get_error_hint(ctx)}: {start!r}; with "
                           "--subscription it is where a new subscription starts: 'earliest' or 'latest' (an "
                           "existing one goes on at its cursor; move it with `seglog topics reset-cursor`)", ctx)


def _say_what_is_past_the_end(ctx: click.Context, topic: Topic, readers: PartitionReaders, follow: bool,
                              partitions: list[int]) -> None:
    """A --start past the end of a partition is said, not met with silence: a note for each such partition,
    and an error when nothing at all can be read (without --follow)."""
    past = readers.past_the_end(topic)
    if not follow and len(past) == len(partitions):
        ends = ", ".join(f"partition {p} ends at offset {end}" for p, _, end in past)
        raise UsageProblem(f"Invalid value for '--start' / '-s': offset {past[0][1]} is past the end of "
                           f"{topic.name} ({ends}): nothing to read; the end offset is where the next message "
                           "written goes (--follow waits for it)", ctx)
    for partition, start, end in past:
        what = "waiting for it" if follow else "nothing read there"
        err().print(f"[yellow]Partition {partition} ends at offset {end}, before --start {start}:[/] {what}")


@click.command(cls=SeglogCommand, short_help="Print a topic's messages (--follow for new ones).")
@click.argument("topic")
@click.option("--partition", "-p", type=int, metavar="P",
              help="Read only partition P. [default: every partition, as fluvio consume -A]")
@click.option("--start", "-s", default="earliest", show_default=True, metavar="earliest|latest|OFFSET",
              help="Where to start in each partition: the first stored message, the end, or an offset. With "
                   "--subscription: where a new subscription starts (earliest or latest).")
@click.option("--from-timestamp", type=int, metavar="MS",
              help="Start at the first message whose timestamp (ms since the epoch) is >= MS.")
@click.option("--subscription", metavar="NAME",
              help="Consume through the durable subscription NAME (created if new): what is printed is "
                   "acknowledged, so the next run goes on after it.")
@click.option("--subscription-type", default="exclusive", show_default=True, metavar="TYPE",
              callback=_subscription_type,
              help="The subscription's type, as in Pulsar (with --subscription): exclusive, failover, shared or "
                   "key_shared, in any case (Pulsar's Shared, Key_Shared).")
@click.option("--count", "-n", type=click.IntRange(min=0), metavar="N", help="Stop after N messages.")
@click.option("--follow", "-f", is_flag=True,
              help="At the end, wait for new messages until Ctrl-C (or until --count messages were printed).")
@click.option("--format", "output_format", type=click.Choice(PRINTED_FORMATS), default="value", show_default=True,
              help="value: the value as UTF-8 text (to a terminal, what is not printable text as \\x escapes; to "
                   "a pipe, bad bytes replaced); json: one JSON object per line with partition, offset, "
                   "timestamp, event_time, key, value, properties (key and value as UTF-8 text, else base64, "
                   "as key_encoding and value_encoding say); raw: the value's bytes as stored, one a line.")
@pass_data
@click.pass_context
def consume(ctx: click.Context, data: DataDir, topic: str, partition: int | None, start: str,
            from_timestamp: int | None, subscription: str | None, subscription_type: str, count: int | None,
            follow: bool, output_format: str) -> None:
    """Print the messages of TOPIC, one per line: every partition's (taken in turn), or --partition P's,
    from --start to the end; or, with --subscription, those the subscription has not acknowledged yet,
    acknowledging each once printed.

    Values containing newlines are printed as they are; use --format json for an unambiguous stream. Ctrl-C
    (with --follow: after the messages being printed) exits with 130.
    """
    _check_subscription_options(ctx, subscription, start)
    position = _start_position(ctx, start, from_timestamp) if subscription is None else start.strip()
    printer = MessagePrinter(output_format)
    printed = 0
    with data.open() as log:
        handle = log.topic(topic)
        if subscription is not None:
            source: PartitionReaders | SubscriptionMessages = SubscriptionMessages(
                handle, subscription, subscription_type, position)
        else:
            partitions = list(range(handle.partitions)) if partition is None else [partition]
            source = PartitionReaders(handle, partitions, position)
            _say_what_is_past_the_end(ctx, handle, source, follow, partitions)
        # With --follow, Ctrl-C asks the loop to stop between chunks: raised in the middle of one it could
        # land after a chunk was printed and before it was counted (or acknowledged).
        stopping = threading.Event()

        def take_unless_stopping(wanted: int) -> list[Message] | bool:
            return stopping.is_set() or source.take(wanted)

        previous = signal.signal(signal.SIGINT, lambda *_: stopping.set()) if follow else None
        try:
            while (count is None or printed < count) and not stopping.is_set():
                wanted = CHUNK if count is None else min(CHUNK, count - printed)
                messages = (wait_until(None, partial(take_unless_stopping, wanted)) if follow
                            else source.take(wanted))
                if messages is True or not messages:
                    break
                printer.print(messages)
                source.printed(messages)
                printed += len(messages)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            source.close()
        if stopping.is_set():
            err().print(f"[dim]Stopped after {message_count(printed)}.[/]")
            ctx.exit(EXIT_INTERRUPTED)
