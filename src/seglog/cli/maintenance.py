"""`seglog maintenance` (run every lifecycle rule now) and `seglog metrics` (Prometheus text)."""

from __future__ import annotations

import click

from seglog.cli.base import AdminCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.output import out
from seglog.units import readable_size


@click.command(cls=AdminCommand)
@pass_data
def maintenance(data: DataDir) -> None:
    """Apply retention, TTL, backlog-quota eviction and segment eviction now (log.run_maintenance)."""
    with data.admin() as admin:
        report = admin.run_maintenance()
    out().print(f"Deleted {len(report.deleted_segments)} segments ({readable_size(report.freed_bytes)}), "
                f"expired {report.expired} and evicted {report.evicted} messages")
    for topic, partition, reason in report.skipped_partitions:
        out().print(f"[yellow]Skipped[/] {topic} partition {partition}: {reason}")


@click.command(cls=AdminCommand)
@pass_data
def metrics(data: DataDir) -> None:
    """Every topic's stats in Prometheus text format."""
    with data.admin() as admin:
        click.echo(admin.metrics(), nl=False)
