"""pulsar-admin's subscription commands under `seglog topics`: subscriptions, create-subscription,
unsubscribe, reset-cursor, skip, expire-messages, peek-messages, clear-backlog,
set-/get-replicated-subscription-status, with its flag names. Each
calls the admin API's topics (data.admin(): a data directory's, or a server's). pulsar-admin's message ids
(ledgerId:entryId) are PARTITION:OFFSET here."""

from __future__ import annotations

import click

from seglog.cli.base import AdminCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import CliFailure, UsageProblem
from seglog.cli.message_format import FORMATS, FORMATTERS
from seglog.cli.options import topic_name
from seglog.cli.output import err, message_count, out, print_json, print_names
from seglog.units import format_duration, parse_duration

_TOPIC = click.argument("topic", metavar="NAME")
_SUBSCRIPTION = click.option("--subscription", "-s", required=True, metavar="SUBSCRIPTION",
                             help="The subscription's name.")
_COUNT = click.option("--count", "-n", type=click.IntRange(min=1), metavar="N", required=True,
                      help="Messages per partition.")


def _message_ids(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> dict[int, int]:
    """'P:O' (repeatable) as {partition: offset}."""
    positions = {}
    for text in given:
        partition, sep, offset = text.partition(":")
        if not (sep and partition.isdigit() and offset.isdigit()):
            raise click.BadParameter(f"{text!r} is not PARTITION:OFFSET, such as 0:42", ctx, param)
        positions[int(partition)] = int(offset)
    return positions


def _consumed_elsewhere(topic: str, subscription: str) -> CliFailure:
    return CliFailure(f"subscription {subscription} of {topic} is consumed by another process; change it there, "
                      "or once it stopped")


@click.command(cls=AdminCommand, short_help="List the topic's subscriptions, one a line.")
@_TOPIC
@click.option("--json", "as_json", is_flag=True, help="Print the subscriptions as a JSON list.")
@pass_data
def subscriptions(data: DataDir, topic: str, as_json: bool) -> None:
    """List the subscriptions of topic NAME, one a line (pulsar-admin topics subscriptions)."""
    with data.admin() as admin:
        names = admin.topics.subscriptions(topic)
    print_names(names, as_json)


@click.command(name="create-subscription", cls=AdminCommand, short_help="Create a subscription.")
@_TOPIC
@_SUBSCRIPTION
@click.option("--messageId", "-m", "message_ids", multiple=True, metavar="earliest|latest|PARTITION:OFFSET",
              help="Where it starts: 'latest' (only messages written from now on), 'earliest' (every stored "
                   "message), or PARTITION:OFFSET, repeatable (partitions not given: latest). [default: latest]")
@pass_data
@click.pass_context
def create_subscription(ctx: click.Context, data: DataDir, topic: str, subscription: str,
                        message_ids: tuple[str, ...]) -> None:
    """Create SUBSCRIPTION on topic NAME, its cursor where --messageId says: messages before it count as
    acknowledged (pulsar-admin topics create-subscription)."""
    param = next(p for p in ctx.command.params if p.name == "message_ids")
    named = message_ids not in ((), ("latest",), ("earliest",))
    given = _message_ids(ctx, param, message_ids) if named else {}
    with data.admin() as admin:
        described = admin.topics.describe(topic)
        full_name, partitions = described["name"], described["partitions"]
        if not set(given) <= set(range(partitions)):
            raise click.BadParameter(f"{full_name} has partitions 0 to {partitions - 1}", ctx, param)
        ends = {row["partition"]: row["endOffset"] for row in described["partitionOffsets"]}
        position = {p: given.get(p, ends[p]) for p in range(partitions)} if named else (
            message_ids or ("latest",))[0]
        admin.topics.create_subscription(topic, subscription, position)
    out().print(f"[green]Created subscription[/] {subscription} on {full_name}")


@click.command(cls=AdminCommand, short_help="Delete a subscription (refused while it is consumed).")
@_TOPIC
@_SUBSCRIPTION
@click.option("--force", "-f", is_flag=True,
              help="Close this process's consumers first. A subscription consumed by another process is never "
                   "deleted from here (there is no broker to disconnect it): stop that consumer.")
@pass_data
def unsubscribe(data: DataDir, topic: str, subscription: str, force: bool) -> None:
    """Delete SUBSCRIPTION of topic NAME: its backlog no longer keeps messages (pulsar-admin topics
    unsubscribe). Refused while a consumer uses it."""
    with data.admin() as admin:
        admin.topics.unsubscribe(topic, subscription, force=force)
    name = topic_name(topic)
    out().print(f"[green]Deleted subscription[/] {subscription} of {name}")


@click.command(name="reset-cursor", cls=AdminCommand, short_help="Move a subscription's cursor by time or id.")
@_TOPIC
@_SUBSCRIPTION
@click.option("--time", "-t", metavar="DURATION",
              help="Go back to the messages written this long ago: '10m', '3h', '2d', seconds as an int.")
@click.option("--messageId", "-m", "message_ids", multiple=True, callback=_message_ids,
              metavar="PARTITION:OFFSET", help="Go to this offset of this partition; repeatable.")
@click.option("--exclude-reset-position", "-e", is_flag=True,
              help="With --messageId: start after the message given, not at it.")
@pass_data
@click.pass_context
def reset_cursor(ctx: click.Context, data: DataDir, topic: str, subscription: str, time: str | None,
                 message_ids: dict[int, int], exclude_reset_position: bool) -> None:
    """Move the cursor of SUBSCRIPTION of topic NAME (pulsar-admin topics reset-cursor): by --time, every
    partition to its first message written since then; by --messageId, the partitions given. Messages
    from the cursor on are unacknowledged, those before it acknowledged."""
    if (time is None) == (not message_ids):
        raise UsageProblem("give either --time or --messageId", ctx)
    if exclude_reset_position and not message_ids:
        raise UsageProblem("--exclude-reset-position goes with --messageId", ctx)
    ago_ms = None if time is None else parse_duration(time, argument="time", unit="s")  # as pulsar-admin's -t
    with data.admin() as admin:
        name = admin.topics.describe(topic)["name"]
        if ago_ms is not None:
            moved = admin.topics.reset_cursor_to_time(topic, subscription, max(admin.now_ms() - ago_ms, 0))
            where = f"the messages of the last {format_duration(ago_ms)}"
        else:
            offsets = {p: o + 1 if exclude_reset_position else o for p, o in message_ids.items()}
            moved = admin.topics.reset_cursor(topic, subscription, offsets)
            where = ", ".join(f"partition {p} offset {o}" for p, o in offsets.items())
    if not moved:
        raise _consumed_elsewhere(name, subscription)
    out().print(f"[green]Reset the cursor[/] of {subscription} on {name} to {where}")


@click.command(cls=AdminCommand, short_help="Acknowledge the next N messages of each partition.")
@_TOPIC
@_SUBSCRIPTION
@_COUNT
@pass_data
def skip(data: DataDir, topic: str, subscription: str, count: int) -> None:
    """Acknowledge the N oldest unacknowledged messages of each partition of topic NAME for SUBSCRIPTION
    (pulsar-admin topics skip)."""
    with data.admin() as admin:
        skipped = admin.topics.skip(topic, subscription, count)
    name = topic_name(topic)
    out().print(f"[green]Skipped {message_count(skipped)}[/] of {subscription} on {name}")


@click.command(name="expire-messages", cls=AdminCommand, short_help="Acknowledge the messages older than -t.")
@_TOPIC
@_SUBSCRIPTION
@click.option("--expireTime", "-t", "expire_time", required=True, metavar="DURATION",
              help="Acknowledge the messages written longer ago than this: seconds as an int, or '2h', '1d'.")
@pass_data
def expire_messages(data: DataDir, topic: str, subscription: str, expire_time: str) -> None:
    """Acknowledge, for SUBSCRIPTION, the messages of topic NAME older than --expireTime, as the message
    TTL does (pulsar-admin topics expire-messages); stats count them as expired."""
    with data.admin() as admin:
        expired = admin.topics.expire_messages(topic, subscription, expire_time)
    name = topic_name(topic)
    out().print(f"[green]Expired {message_count(expired)}[/] of {subscription} on {name}")


@click.command(name="peek-messages", cls=AdminCommand, short_help="Show the next messages without acknowledging.")
@_TOPIC
@_SUBSCRIPTION
@click.option("--count", "-n", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Messages per partition.")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="json", show_default=True,
              help="As `seglog consume` prints messages.")
@pass_data
def peek_messages(data: DataDir, topic: str, subscription: str, count: int, output_format: str) -> None:
    """Print the next N messages of each partition that SUBSCRIPTION has not acknowledged, without
    acknowledging them (pulsar-admin topics peek-messages)."""
    with data.admin() as admin:
        messages = admin.topics.peek_messages(topic, subscription, count)
    for message in messages:
        click.echo(FORMATTERS[output_format](message))
    if not messages:
        err().print(f"[dim]Subscription {subscription} has no unacknowledged message.[/]")


@click.command(name="clear-backlog", cls=AdminCommand, short_help="Acknowledge every message of a subscription.")
@_TOPIC
@_SUBSCRIPTION
@pass_data
def clear_backlog(data: DataDir, topic: str, subscription: str) -> None:
    """Acknowledge every message written to topic NAME so far, for SUBSCRIPTION (pulsar-admin topics
    clear-backlog)."""
    with data.admin() as admin:
        admin.topics.clear_backlog(topic, subscription)
    name = topic_name(topic)
    out().print(f"[green]Cleared the backlog[/] of {subscription} on {name}")


# replicated subscriptions (PIP-33, docs/REPLICATION.md)

_PARTITION = click.option("--partition", "-p", type=click.IntRange(min=0), metavar="N",
                          help="Only this partition of a partitioned topic (Pulsar's NAME-partition-N). "
                               "[default: every partition]")


@click.command(name="set-replicated-subscription-status", cls=AdminCommand,
               short_help="Replicate a subscription's position to the other clusters, or stop.")
@_TOPIC
@_SUBSCRIPTION
@click.option("--enable/--disable", "-e/-d", "enabled", default=None,
              help="Replicate the subscription, or stop (one of the two is required).")
@_PARTITION
@pass_data
@click.pass_context
def set_replicated_subscription_status(ctx: click.Context, data: DataDir, topic: str, subscription: str,
                                       enabled: bool | None, partition: int | None) -> None:
    """Whether SUBSCRIPTION's position on topic NAME is replicated to the topic's other clusters, so its
    consumers can go on from there on another cluster (pulsar-admin topics set-replicated-subscription-status).
    A consumer that asks for it (replicate_subscription_state_enabled) enables it too. Enabling is refused
    while broker.conf has enableReplicatedSubscriptions=false.

    \b
    Example:
      seglog topics set-replicated-subscription-status acme/orders/events -s billing --enable
    """
    if enabled is None:
        raise UsageProblem("give --enable or --disable", ctx)
    with data.admin() as admin:
        admin.topics.set_replicated_subscription_status(topic, subscription, enabled, partition=partition)
    where = topic_name(topic) + ("" if partition is None else f" partition {partition}")
    out().print(f"[green]{'Enabled' if enabled else 'Disabled'} replication[/] of subscription {subscription} "
                f"on {where}")


@click.command(name="get-replicated-subscription-status", cls=AdminCommand,
               short_help="Print whether a subscription is replicated, per partition (JSON).")
@_TOPIC
@_SUBSCRIPTION
@_PARTITION
@pass_data
def get_replicated_subscription_status(data: DataDir, topic: str, subscription: str, partition: int | None) -> None:
    """Print whether SUBSCRIPTION's position on topic NAME is replicated, as JSON by Pulsar's name of the
    topic, or of each partition of a partitioned one (pulsar-admin topics get-replicated-subscription-status)."""
    with data.admin() as admin:
        print_json(admin.topics.get_replicated_subscription_status(topic, subscription, partition=partition))


SUBSCRIPTION_COMMANDS = (subscriptions, create_subscription, unsubscribe, reset_cursor, skip, expire_messages,
                         peek_messages, clear_backlog, set_replicated_subscription_status,
                         get_replicated_subscription_status)
