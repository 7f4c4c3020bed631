"""`seglog tenants create|list|get|delete`: the tenants of a data directory, as pulsar-admin has them."""

from __future__ import annotations

import click

from seglog.cli.base import AdminGroup
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.options import tenant_name
from seglog.cli.output import out, print_json


def _clusters(ctx: click.Context, param: click.Parameter, given: str | None) -> list[str] | None:
    """'a,b' as ['a', 'b']; None when not given (any cluster)."""
    if given is None:
        return None
    clusters = [name.strip() for name in given.split(",")]
    if not all(clusters):
        raise click.BadParameter(f"{given!r} is not a comma-separated list of cluster names", ctx, param)
    return clusters


@click.group(cls=AdminGroup)
def tenants() -> None:
    """Create, list, show and delete tenants: the first part of 'tenant/namespace/topic'.

    The tenant 'public' always exists.
    """


@tenants.command()
@click.argument("name")
@click.option("--allowed-clusters", "-c", metavar="A,B", callback=_clusters,
              help="Comma-separated clusters the tenant may use, kept for geo-replication. [default: any]")
@pass_data
def create(data: DataDir, name: str, allowed_clusters: list[str] | None) -> None:
    """Create tenant NAME."""
    tenant_name(name)  # refused before the data directory is created
    with data.admin(create=True) as admin:
        admin.tenants.create(name, allowed_clusters=allowed_clusters)
    out().print(f"[green]Created tenant[/] {name}")


@tenants.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the tenants as a JSON list.")
@pass_data
def list_tenants(data: DataDir, as_json: bool) -> None:
    """List the tenants, one a line."""
    with data.admin() as admin:
        names = admin.tenants.list()
    if as_json:
        print_json(names)
        return
    for name in names:
        click.echo(name)


@tenants.command()
@click.argument("name")
@pass_data
def delete(data: DataDir, name: str) -> None:
    """Delete tenant NAME, which must have no namespaces left."""
    with data.admin() as admin:
        admin.tenants.delete(name)
    out().print(f"[green]Deleted tenant[/] {name}")


@tenants.command()
@click.argument("name")
@pass_data
def get(data: DataDir, name: str) -> None:
    """Print tenant NAME's configuration as Pulsar's JSON: adminRoles and allowedClusters (null: any)."""
    tenant_name(name)
    with data.admin() as admin:
        print_json(admin.tenants.get(name))
