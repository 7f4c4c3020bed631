"""`seglog namespaces ...`: namespaces and their policies (retention, backlog quotas, message TTL), with
pulsar-admin's command and option names, so its command lines carry over. The getters print the JSON
pulsar-admin prints (Pulsar's names and units), which is what log.admin.namespaces returns."""

from __future__ import annotations

import click

from seglog.cli.base import SeglogGroup
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import UsageProblem
from seglog.cli.options import namespace_name, tenant_name
from seglog.cli.output import out, print_json
from seglog.errors import NotFoundError
from seglog.names import DEFAULT_TENANT
from seglog.policies import QUOTA_POLICIES, QUOTA_TYPES, BacklogQuota, Retention
from seglog.units import format_duration, format_size

_NAMESPACE = click.argument("namespace", metavar="TENANT/NAMESPACE")


@click.group(cls=SeglogGroup)
def namespaces() -> None:
    """Create, list and delete namespaces ('tenant/namespace'), and set their policies.

    A namespace's policies apply to each of its topics that sets none of its own; without them the data
    directory's defaults apply (broker.conf).
    """


@namespaces.command()
@_NAMESPACE
@pass_data
def create(data: DataDir, namespace: str) -> None:
    """Create a namespace in an existing tenant."""
    name = namespace_name(namespace)  # refused before the data directory is created
    tenant = name.split("/")[0]
    if tenant != DEFAULT_TENANT and not data.exists():  # a new data directory would hold only 'public'
        raise NotFoundError(f"tenant {tenant} does not exist; create it first")
    with data.open(create=True) as log:
        log.admin.namespaces.create(name)
    out().print(f"[green]Created namespace[/] {name}")


@namespaces.command(name="list")
@click.argument("tenant", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the namespaces as a JSON list.")
@pass_data
def list_namespaces(data: DataDir, tenant: str | None, as_json: bool) -> None:
    """List the namespaces of TENANT, or of every tenant, one a line."""
    if tenant is not None:
        tenant_name(tenant)
    with data.open() as log:
        names = log.admin.namespaces.list(tenant)
    if as_json:
        print_json(names)
        return
    for name in names:
        click.echo(name)


@namespaces.command()
@_NAMESPACE
@pass_data
def delete(data: DataDir, namespace: str) -> None:
    """Delete a namespace, which must have no topics left."""
    name = namespace_name(namespace)
    with data.open() as log:
        log.admin.namespaces.delete(name)
    out().print(f"[green]Deleted namespace[/] {name}")


# --- retention ------------------------------------------------------------------------------------------------

@namespaces.command(name="set-retention", short_help="Keep acknowledged messages up to --size and --time.")
@_NAMESPACE
@click.option("--size", "-s", "retention_size", required=True, metavar="SIZE",
              help="Acknowledged data to keep per topic: '10G', '500 MiB', bytes as an int; -1 for no limit.")
@click.option("--time", "-t", "retention_time", required=True, metavar="DURATION",
              help="How long to keep acknowledged messages: '3h', '7 days', seconds as an int; -1 for no limit.")
@pass_data
def set_retention(data: DataDir, namespace: str, retention_size: str, retention_time: str) -> None:
    """Set the retention of acknowledged messages: deleted once older than --time or beyond --size.

    Both 0 keeps nothing acknowledged; 0 for only one of them is refused, as in Pulsar.
    """
    name = namespace_name(namespace)
    with data.open() as log:
        log.admin.namespaces.set_retention(name, size=retention_size, time=retention_time)
    retention = Retention.parse(size=retention_size, time=retention_time)
    out().print(f"[green]Set retention[/] of {name}: size {format_size(retention.size_bytes)}, "
                f"time {format_duration(retention.time_ms)}")


@namespaces.command(name="get-retention", short_help="Print the retention as Pulsar's JSON (or null).")
@_NAMESPACE
@pass_data
def get_retention(data: DataDir, namespace: str) -> None:
    """Print the retention set on the namespace as Pulsar's JSON (minutes and MB, -1 for no limit), or null."""
    name = namespace_name(namespace)
    with data.open() as log:
        print_json(log.admin.namespaces.get_retention(name))


# --- backlog quotas -------------------------------------------------------------------------------------------

@namespaces.command(name="set-backlog-quota", short_help="Limit each topic's backlog by size or by age.")
@_NAMESPACE
@click.option("--limit", "-l", metavar="SIZE",
              help="For --type destination_storage: the backlog size limit, '2G', '500 MiB', bytes as an int.")
@click.option("--limitTime", "-lt", "limit_time", metavar="DURATION",
              help="For --type message_age: the age limit of the oldest unacknowledged message, seconds as an "
                   "int or '1h', '2d'.")
@click.option("--policy", "-p", required=True, metavar="|".join(QUOTA_POLICIES),
              help="What happens at the limit: hold producers' sends, fail them, or evict the oldest backlog.")
@click.option("--type", "-t", "quota_type", default=QUOTA_TYPES[0], show_default=True,
              metavar="|".join(QUOTA_TYPES), help="Limit the backlog's size or the age of its oldest message.")
@pass_data
@click.pass_context
def set_backlog_quota(ctx: click.Context, data: DataDir, namespace: str, limit: str | None, limit_time: str | None,
                      policy: str, quota_type: str) -> None:
    """Set a backlog quota: a limit on the backlog of each topic's slowest subscription, of one --type.

    --type destination_storage takes --limit, --type message_age takes --limitTime.
    """
    name = namespace_name(namespace)
    _check_quota_limit(ctx, quota_type, limit, limit_time)
    with data.open() as log:
        log.admin.namespaces.set_backlog_quota(name, limit=limit, limit_time=limit_time, policy=policy,
                                               type=quota_type)
    quota = BacklogQuota.parse(type=quota_type, limit=limit, limit_time=limit_time, policy=policy)
    shown = format_size(quota.limit) if quota_type == "destination_storage" else format_duration(quota.limit)
    out().print(f"[green]Set backlog quota[/] {quota_type} of {name}: limit {shown}, policy {policy}")


def _check_quota_limit(ctx: click.Context, quota_type: str, limit: str | None, limit_time: str | None) -> None:
    """The limit option a --type takes, named as on the command line (the library names its arguments)."""
    if quota_type not in QUOTA_TYPES:
        return  # refused by the library, with the accepted types
    options = {param.name: param for param in ctx.command.params}
    wanted, other = ("limit", "limit_time") if quota_type == "destination_storage" else ("limit_time", "limit")
    given = {"limit": limit, "limit_time": limit_time}
    example = "a size such as '2G'" if wanted == "limit" else "seconds as an int, or a duration such as '1h'"
    takes = f"--type {quota_type} takes {options[wanted].opts[0]}: {example}"
    if given[other] is not None:
        raise UsageProblem(f"Invalid value for {options[other].get_error_hint(ctx)}: {takes}", ctx)
    if given[wanted] is None:
        raise UsageProblem(f"Missing option {options[wanted].get_error_hint(ctx)}: {takes}", ctx)


@namespaces.command(name="get-backlog-quotas", short_help="Print the backlog quotas as Pulsar's JSON.")
@_NAMESPACE
@pass_data
def get_backlog_quotas(data: DataDir, namespace: str) -> None:
    """Print the backlog quotas set on the namespace as Pulsar's JSON, by type (limit in bytes, limitTime in
    seconds)."""
    name = namespace_name(namespace)
    with data.open() as log:
        print_json(log.admin.namespaces.get_backlog_quotas(name))


@namespaces.command(name="remove-backlog-quota", short_help="Remove the backlog quota of one --type.")
@_NAMESPACE
@click.option("--type", "-t", "quota_type", default=QUOTA_TYPES[0], show_default=True,
              metavar="|".join(QUOTA_TYPES), help="The quota to remove.")
@pass_data
def remove_backlog_quota(data: DataDir, namespace: str, quota_type: str) -> None:
    """Remove a backlog quota of the namespace; its topics fall back to the data directory's default."""
    name = namespace_name(namespace)
    with data.open() as log:
        log.admin.namespaces.remove_backlog_quota(name, type=quota_type)
    out().print(f"[green]Removed backlog quota[/] {quota_type} of {name}")


@namespaces.command(name="clear-backlog",
                    short_help="Acknowledge everything on the namespace's topics (asks first).")
@_NAMESPACE
@click.option("--sub", "-s", "subscription", metavar="SUBSCRIPTION",
              help="Clear only this subscription's backlog. [default: every subscription]")
@click.option("--force", "-f", is_flag=True, help="Do not ask for confirmation.")
@pass_data
def clear_backlog(data: DataDir, namespace: str, subscription: str | None, force: bool) -> None:
    """Acknowledge every message on every topic of the namespace, for one subscription or all.

    Asks for confirmation first unless --force; answering no changes nothing and exits with code 1.
    """
    name = namespace_name(namespace)
    with data.open() as log:  # a namespace that does not exist is refused before the question
        if name not in log.admin.namespaces.list(name.split("/")[0]):
            raise NotFoundError(f"namespace {name} does not exist")
    if not force:
        click.confirm("Are you sure you want to clear the backlog?", abort=True)
    with data.open() as log:
        log.admin.namespaces.clear_backlog(name, subscription=subscription)
    whose = f"subscription {subscription}" if subscription is not None else "every subscription"
    out().print(f"[green]Cleared the backlog[/] of {whose} on the topics of {name}")


# --- message TTL ----------------------------------------------------------------------------------------------

@namespaces.command(name="set-message-ttl",
                    short_help="Acknowledge messages unacknowledged for longer than --messageTTL.")
@_NAMESPACE
@click.option("--messageTTL", "-ttl", "message_ttl", required=True, metavar="DURATION",
              help="Acknowledge messages left unacknowledged this long: seconds as an int, or '2h', '1d'; "
                   "0 for no TTL.")
@pass_data
def set_message_ttl(data: DataDir, namespace: str, message_ttl: str) -> None:
    """Set the message TTL of the namespace's topics."""
    name = namespace_name(namespace)
    with data.open() as log:
        log.admin.namespaces.set_message_ttl(name, message_ttl)
        seconds = log.admin.namespaces.get_message_ttl(name)
    out().print(f"[green]Set message TTL[/] of {name}: {format_duration(seconds * 1000)}")


@namespaces.command(name="get-message-ttl", short_help="Print the message TTL in seconds (or null).")
@_NAMESPACE
@pass_data
def get_message_ttl(data: DataDir, namespace: str) -> None:
    """Print the message TTL set on the namespace in seconds, or null."""
    name = namespace_name(namespace)
    with data.open() as log:
        print_json(log.admin.namespaces.get_message_ttl(name))


@namespaces.command(name="remove-message-ttl", short_help="Remove the message TTL.")
@_NAMESPACE
@pass_data
def remove_message_ttl(data: DataDir, namespace: str) -> None:
    """Remove the message TTL of the namespace; its topics fall back to the data directory's default."""
    name = namespace_name(namespace)
    with data.open() as log:
        log.admin.namespaces.remove_message_ttl(name)
    out().print(f"[green]Removed message TTL[/] of {name}")
