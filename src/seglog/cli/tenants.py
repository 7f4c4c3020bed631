"""`seglog tenants create|list|get|update|delete`: the tenants of a data directory, as pulsar-admin has them."""

from __future__ import annotations

import click

from seglog.cli.base import AdminGroup
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.options import cluster_list, tenant_name
from seglog.cli.output import out, print_json


def _roles(ctx: click.Context, param: click.Parameter, given: str | None) -> list[str] | None:
    """'a,b' as ['a', 'b']; '' as []; None when not given."""
    if given is None:
        return None
    roles = [role.strip() for role in given.split(",")] if given.strip() else []
    if not all(roles):
        raise click.BadParameter(f"{given!r} is not a comma-separated list of role names", ctx, param)
    return roles


_ADMIN_ROLES_HELP = ("Comma-separated roles that administer the tenant on a server with authentication (they may do "
                     "everything within it)")


@click.group(cls=AdminGroup)
def tenants() -> None:
    """Create, list, show and delete tenants: the first part of 'tenant/namespace/topic'.

    The tenant 'public' always exists.
    """


@tenants.command()
@click.argument("name")
@click.option("--allowed-clusters", "-c", metavar="A,B", callback=cluster_list,
              help="Comma-separated registered clusters the tenant's namespaces may use; '' for every cluster. "
                   "[default: every cluster]")
@click.option("--admin-roles", "-r", metavar="R1,R2", callback=_roles, help=f"{_ADMIN_ROLES_HELP}. [default: none]")
@pass_data
def create(data: DataDir, name: str, allowed_clusters: list[str] | None, admin_roles: list[str] | None) -> None:
    """Create tenant NAME."""
    tenant_name(name)  # refused before the data directory is created
    with data.admin(create=True) as admin:
        admin.tenants.create(name, allowed_clusters=allowed_clusters, admin_roles=admin_roles)
    out().print(f"[green]Created tenant[/] {name}")


@tenants.command()
@click.argument("name")
@click.option("--allowed-clusters", "-c", metavar="A,B", callback=cluster_list,
              help="Comma-separated registered clusters the tenant's namespaces may use; '' for every cluster. "
                   "Refused when it drops one a namespace uses. [default: those it has]")
@click.option("--admin-roles", "-r", metavar="R1,R2", callback=_roles,
              help=f"{_ADMIN_ROLES_HELP}; '' for none. [default: those it has]")
@pass_data
def update(data: DataDir, name: str, allowed_clusters: list[str] | None, admin_roles: list[str] | None) -> None:
    """Change tenant NAME's allowed clusters and/or admin roles; what is not given stays (pulsar-admin tenants
    update)."""
    tenant_name(name)
    if allowed_clusters is None and admin_roles is None:
        raise click.UsageError("give --allowed-clusters, --admin-roles or both")
    with data.admin() as admin:
        info = admin.tenants.get(name)
        admin.tenants.update(name, info["allowedClusters"] if allowed_clusters is None else allowed_clusters,
                             admin_roles=info["adminRoles"] if admin_roles is None else admin_roles)
        info = admin.tenants.get(name)
    clusters = ", ".join(info["allowedClusters"] or ["every cluster"])
    out().print(f"[green]Updated tenant[/] {name}: admin roles {', '.join(info['adminRoles']) or 'none'}; "
                f"allowed clusters {clusters}")


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
    """Print tenant NAME's configuration as Pulsar's JSON: adminRoles and allowedClusters (null or []: every
    cluster)."""
    tenant_name(name)
    with data.admin() as admin:
        print_json(admin.tenants.get(name))
