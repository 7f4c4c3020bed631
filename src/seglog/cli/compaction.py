"""pulsar-admin's compaction commands under `seglog topics`: compact (Pulsar's topic compaction now, docs/LIFECYCLE.md)
and compaction-status (-w/--wait-complete, as pulsar-admin). Each calls the admin API's topics (data.admin(): a
data directory's, or a server's, where `compact` runs through seglog's route and waits for the end, so that it can
say what was done)."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.table import Table

from seglog.cli.base import AdminCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import CliFailure
from seglog.cli.options import topic_name
from seglog.cli.output import message_count, out, print_json, print_table

# --wait-complete asks again after this long, doubling up to the most (pulsar-admin asks every second)
FIRST_POLL_S, MOST_POLL_S = 0.05, 1.0
_TOPIC = click.argument("name")


@click.command(cls=AdminCommand, short_help="Compact a topic now: each key's latest message (Pulsar's compaction).")
@_TOPIC
@click.option("--json", "as_json", is_flag=True, help="Print what was done per partition as JSON.")
@pass_data
def compact(data: DataDir, name: str, as_json: bool) -> None:
    """Compact topic NAME now, as pulsar-admin topics compact asks a broker to: each partition's compacted view
    then holds each key's latest message up to the partition's end (read with read_compacted, or pulsar-client's
    is_read_compacted); the log itself is unchanged. Prints what was done per partition: the view's new
    horizon, the messages read (the previous view's and the new ones), kept and left out. With --url it runs on
    the server, and the command waits for its end (pulsar-admin only asks for it to start: `seglog topics
    compaction-status NAME` says how it went either way)."""
    full_name = topic_name(name)
    with data.admin() as admin:
        done = admin.topics.compact(name)
    if as_json:
        print_json(done)
        return
    partitions = done["partitions"]
    removed = sum(p["removed"] for p in partitions)
    out().print(f"[green]Compacted topic[/] {full_name}: {message_count(sum(p['kept'] for p in partitions))} kept, "
                f"{removed:,} left out")
    table = Table("PARTITION", "HORIZON", "READ", "KEPT", "REMOVED", "TOOK", box=None, header_style="bold")
    for column in table.columns[1:]:
        column.justify = "right"
    for p in partitions:
        table.add_row(str(p["partition"]), f"{p['horizon']:,}", f"{p['read']:,}", f"{p['kept']:,}",
                      f"{p['removed']:,}", f"{p['durationMs']:,} ms")
    print_table(table)


@click.command(name="compaction-status", cls=AdminCommand, short_help="Say how the topic's last compaction went.")
@_TOPIC
@click.option("-w", "--wait-complete", "--wait", "wait", is_flag=True,
              help="While it runs, wait until it ends (as pulsar-admin's --wait-complete; Ctrl-C stops waiting).")
@pass_data
def compaction_status(data: DataDir, name: str, wait: bool) -> None:
    """Pulsar's status of the last compaction of topic NAME asked of the server (--url) since it started, or,
    on a data directory, of this command's own broker, which has run none (the status is kept by the process
    that compacted; `seglog topics internal-stats NAME` shows each partition's compacted view): not run,
    running, a success, or an error, printed as pulsar-admin prints them; an error exits with 1 and says what
    failed."""
    full_name = topic_name(name)
    with data.admin() as admin:
        status = _status(admin, name, wait)
    state = status["status"]
    if state == "NOT_RUN":  # (on a data directory, the broker started is this command's)
        click.echo(f"Compaction has not been run for {full_name} since broker startup")
    elif state == "RUNNING":
        click.echo("Compaction is currently running")
    elif state == "SUCCESS":
        click.echo("Compaction was a success")
    else:
        click.echo("Error in compaction")
        raise CliFailure(f"Error compacting: {status['lastError']}")


def _status(admin: Any, name: str, wait: bool) -> dict[str, Any]:
    """The topic's compaction status; with `wait`, the first that is not RUNNING."""
    status = admin.topics.compaction_status(name)
    pause = FIRST_POLL_S
    while wait and status["status"] == "RUNNING":
        time.sleep(pause)
        pause = min(pause * 2, MOST_POLL_S)
        status = admin.topics.compaction_status(name)
    return status


COMPACTION_COMMANDS = (compact, compaction_status)
