"""`seglog clusters create|update|get|list|delete`: the clusters a data directory knows, for geo-replication,
as pulsar-admin clusters has them (docs/SERVER.md, "Geo-replication: clusters and policies")."""

from __future__ import annotations

from typing import Any

import click

from seglog.catalog.clusters import TOKEN_PLUGINS
from seglog.cli.base import AdminGroup
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import UsageProblem
from seglog.cli.output import out, print_json, print_names
from seglog.names import validate_part

# option name -> ClusterData key
_FIELDS = {"url": "serviceUrl", "url_secure": "serviceUrlTls", "broker_url": "brokerServiceUrl",
           "broker_url_secure": "brokerServiceUrlTls", "auth_plugin": "authenticationPlugin",
           "auth_parameters": "authenticationParameters"}


def _cluster_options(command: Any) -> Any:
    """pulsar-admin's options of clusters create and update, each a ClusterData key."""
    for option in reversed([
        click.option("--url", metavar="http://HOST:PORT", help="The cluster's HTTP service URL (serviceUrl)."),
        click.option("--url-secure", metavar="https://HOST:PORT", help="Its HTTPS service URL (serviceUrlTls)."),
        click.option("--broker-url", metavar="pulsar://HOST:PORT",
                     help="Its broker service URL, the binary protocol (brokerServiceUrl)."),
        click.option("--broker-url-secure", metavar="pulsar+ssl://HOST:PORT",
                     help="Its broker service URL over TLS (brokerServiceUrlTls)."),
        click.option("--auth-plugin", metavar="token",
                     help=f"How replication authenticates to the cluster: {' or '.join(TOKEN_PLUGINS)} "
                          "(authenticationPlugin)."),
        click.option("--auth-parameters", metavar="token:JWT|file:PATH",
                     help="The token, or the file holding it on the server's machine (authenticationParameters); "
                          "a file keeps the token out of `clusters get`."),
    ]):
        command = option(command)
    return command


def _given(options: dict[str, str | None]) -> dict[str, str]:
    return {_FIELDS[name]: value for name, value in options.items() if value is not None}


_CLUSTER = click.argument("cluster", metavar="NAME")


@click.group(cls=AdminGroup)
def clusters() -> None:
    """Register, show, change and forget the clusters this one knows: those tenants may use and namespaces
    and topics replicate to. `seglog serve --cluster NAME` registers its own.
    """


@clusters.command()
@_CLUSTER
@_cluster_options
@pass_data
def create(data: DataDir, cluster: str, **options: str | None) -> None:
    """Register cluster NAME with its URLs and the token replication uses toward it.

    \b
    Example:
      seglog clusters create us-west --url http://west:8080 --broker-url pulsar://west:6650 \\
          --auth-plugin token --auth-parameters file:/etc/seglog/west.token
    """
    validate_part(cluster, kind="cluster name")  # refused before the data directory is created
    with data.admin(create=True) as admin:
        admin.clusters.create(cluster, _given(options))
    out().print(f"[green]Created cluster[/] {cluster}")


@clusters.command(short_help="Change a cluster's URLs or authentication; those not given stay.")
@_CLUSTER
@_cluster_options
@pass_data
@click.pass_context
def update(ctx: click.Context, data: DataDir, cluster: str, **options: str | None) -> None:
    """Change cluster NAME's URLs or authentication; what is not given stays ('' clears a value)."""
    given = _given(options)
    if not given:
        flags = ", ".join("--" + option.replace("_", "-") for option in _FIELDS)
        raise UsageProblem(f"nothing given to change; give one or more of {flags}", ctx)
    with data.admin() as admin:
        admin.clusters.update(cluster, {**admin.clusters.get(cluster), **given})
    out().print(f"[green]Updated cluster[/] {cluster}: {', '.join(sorted(given))}")


@clusters.command()
@_CLUSTER
@pass_data
def get(data: DataDir, cluster: str) -> None:
    """Print cluster NAME's ClusterData as Pulsar's JSON."""
    with data.admin() as admin:
        print_json(admin.clusters.get(cluster))


@clusters.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the clusters as a JSON list.")
@pass_data
def list_clusters(data: DataDir, as_json: bool) -> None:
    """List the clusters, one a line."""
    with data.admin() as admin:
        print_names(admin.clusters.list(), as_json)


@clusters.command()
@_CLUSTER
@pass_data
def delete(data: DataDir, cluster: str) -> None:
    """Forget cluster NAME, which no tenant, namespace or topic may name any more."""
    with data.admin() as admin:
        admin.clusters.delete(cluster)
    out().print(f"[green]Deleted cluster[/] {cluster}")
