"""`seglog namespaces ...`: namespaces, clearing their backlog, their policies (retention, backlog quotas,
message TTL: policy_commands.py) and their clusters (geo-replication), with pulsar-admin's command and option
names."""

from __future__ import annotations

from typing import Any

import click

from seglog.catalog.policies import TOPIC_TYPES
from seglog.cli.base import AdminGroup
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.options import cluster_list, namespace_name, tenant_name
from seglog.cli.output import out, print_json, print_names
from seglog.cli.policy_commands import PolicyScope, add_policy_commands
from seglog.cli.schemas import NAMESPACE_COMMANDS as SCHEMA_POLICY_COMMANDS
from seglog.errors import NotFoundError
from seglog.names import DEFAULT_TENANT

_NAMESPACE = click.argument("namespace", metavar="TENANT/NAMESPACE")


@click.group(cls=AdminGroup)
def namespaces() -> None:
    """Create, list and delete namespaces ('tenant/namespace'), and set their policies.

    A namespace's policies apply to each of its topics that sets none of its own; without them the data
    directory's defaults apply (broker.conf).
    """


@namespaces.command()
@_NAMESPACE
@click.option("--clusters", "-c", metavar="A,B", callback=cluster_list,
              help="Comma-separated clusters its topics replicate among (as set-clusters). [default: this cluster]")
@click.option("--allowed-clusters", metavar="A,B,C", callback=cluster_list,
              help="Comma-separated clusters its topics may reach at all (as set-allowed-clusters). "
                   "[default: its clusters]")
@pass_data
def create(data: DataDir, namespace: str, clusters: list[str] | None, allowed_clusters: list[str] | None) -> None:
    """Create a namespace in an existing tenant; without clusters it is local to this cluster."""
    name = namespace_name(namespace)  # refused before the data directory is created
    tenant = name.split("/")[0]
    if tenant != DEFAULT_TENANT and not data.exists():  # a new data directory would hold only 'public'
        raise NotFoundError(f"tenant {tenant} does not exist; create it first")
    with data.admin(create=True) as admin:
        admin.namespaces.create(name, clusters=clusters, allowed_clusters=allowed_clusters)
    out().print(f"[green]Created namespace[/] {name}")


@namespaces.command(name="list")
@click.argument("tenant", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the namespaces as a JSON list.")
@pass_data
def list_namespaces(data: DataDir, tenant: str | None, as_json: bool) -> None:
    """List the namespaces of TENANT, or of every tenant, one a line."""
    if tenant is not None:
        tenant_name(tenant)
    with data.admin() as admin:
        names = admin.namespaces.list(tenant)
    print_names(names, as_json)


@namespaces.command()
@_NAMESPACE
@pass_data
def delete(data: DataDir, namespace: str) -> None:
    """Delete a namespace, which must have no topics left."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.namespaces.delete(name)
    out().print(f"[green]Deleted namespace[/] {name}")


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
    with data.admin() as admin:  # a namespace that does not exist is refused before the question
        if name not in admin.namespaces.list(name.split("/")[0]):
            raise NotFoundError(f"namespace {name} does not exist")
    if not force:
        click.confirm("Are you sure you want to clear the backlog?", abort=True)
    with data.admin() as admin:
        admin.namespaces.clear_backlog(name, subscription=subscription)
    whose = f"subscription {subscription}" if subscription is not None else "every subscription"
    out().print(f"[green]Cleared the backlog[/] of {whose} on the topics of {name}")


@namespaces.command(short_help="Print the namespace's policies as Pulsar's JSON.")
@_NAMESPACE
@pass_data
def policies(data: DataDir, namespace: str) -> None:
    """Print the policies set on the namespace as pulsar-admin namespaces policies prints them (Pulsar's Policies,
    with its field names): retention, message TTL, backlog quotas, clusters, permissions, auto topic creation.
    A policy not set is null (its default applies)."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        print_json(admin.namespaces.policies(name))


add_policy_commands(namespaces, PolicyScope("namespace", "TENANT/NAMESPACE", namespace_name,
                                            lambda admin: admin.namespaces,
                                            "its topics fall back to the data directory's default (broker.conf)"))
for command in SCHEMA_POLICY_COMMANDS:  # (schemas.py: beside `seglog schemas`)
    namespaces.add_command(command)


# topic auto-creation (what seglog serve does with a topic a client names that does not exist)

@namespaces.command(name="set-auto-topic-creation", short_help="Whether seglog serve creates the namespace's "
                                                               "topics on first use, and as what.")
@_NAMESPACE
@click.option("--enable", "-e", is_flag=True, help="Create topics on first use. [default: do not]")
@click.option("--type", "-t", "topic_type", type=click.Choice(TOPIC_TYPES), default="non-partitioned",
              show_default=True, help="The kind of topic created.")
@click.option("--num-partitions", "-n", "partitions", type=int, metavar="N",
              help="The partition count of a partitioned topic created (required with --type partitioned).")
@pass_data
def set_auto_topic_creation(data: DataDir, namespace: str, enable: bool, topic_type: str,
                            partitions: int | None) -> None:
    """Override the data directory's allowAutoTopicCreation settings (broker.conf) for the namespace: with
    --enable, a producer or consumer naming a topic that does not exist creates it; without, it gets
    TopicNotFound.

    \b
    Example:
      seglog namespaces set-auto-topic-creation public/default --enable --type partitioned -n 4
    """
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.namespaces.set_auto_topic_creation(name, enable, topic_type, partitions)
        shown = admin.namespaces.get_auto_topic_creation(name)
    out().print(f"[green]Set auto topic creation[/] of {name}: {_auto_topic_creation_text(shown)}")


def _auto_topic_creation_text(override: dict[str, Any] | None) -> str:
    if override is None or not override["allowAutoTopicCreation"]:
        return "off"
    partitions = override.get("defaultNumPartitions")
    return f"on, {override['topicType']}" + (f" with {partitions} partitions" if partitions else "")


@namespaces.command(name="get-auto-topic-creation", short_help="Print the namespace's auto topic creation "
                                                               "override (JSON, null when unset).")
@_NAMESPACE
@pass_data
def get_auto_topic_creation(data: DataDir, namespace: str) -> None:
    """Print the namespace's override as Pulsar's AutoTopicCreationOverride JSON, or null when the data
    directory's settings apply."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        print_json(admin.namespaces.get_auto_topic_creation(name))


@namespaces.command(name="remove-auto-topic-creation", short_help="Remove the namespace's auto topic creation "
                                                                  "override.")
@_NAMESPACE
@pass_data
def remove_auto_topic_creation(data: DataDir, namespace: str) -> None:
    """Remove the override: the data directory's allowAutoTopicCreation settings (broker.conf) apply again."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.namespaces.remove_auto_topic_creation(name)
    out().print(f"[green]Removed auto topic creation[/] override of {name}")


# permissions (enforced by `seglog serve` with --auth-token-secret-key; docs/SERVER.md, Security)

def _actions(ctx: click.Context, param: click.Parameter, given: str) -> list[str]:
    """'produce,consume' as ['produce', 'consume'] (the library checks each)."""
    actions = [action.strip() for action in given.split(",")]
    if not all(actions):
        raise click.BadParameter(f"{given!r} is not a comma-separated list of actions (produce, consume)", ctx, param)
    return actions


@namespaces.command(name="grant-permission", short_help="Let a role produce and/or consume on the namespace.")
@_NAMESPACE
@click.option("--role", required=True, help="The role (a token's subject).")
@click.option("--actions", required=True, metavar="A,B", callback=_actions,
              help="Comma-separated: produce, consume, or both. Replaces what the role had.")
@pass_data
def grant_permission(data: DataDir, namespace: str, role: str, actions: list[str]) -> None:
    """Let ROLE produce to and/or consume from every topic of the namespace, on a server with authentication.

    \b
    Example:
      seglog namespaces grant-permission public/default --role app --actions produce,consume
    """
    name = namespace_name(namespace)
    with data.admin() as admin:
        admin.namespaces.grant_permission(name, role, actions)
        granted = admin.namespaces.permissions(name)[role]
    out().print(f"[green]Granted[/] {', '.join(granted)} on {name} to role {role}")


@namespaces.command(name="revoke-permission", short_help="Take a role's permissions on the namespace.")
@_NAMESPACE
@click.option("--role", required=True, help="The role (a token's subject).")
@pass_data
def revoke_permission(data: DataDir, namespace: str, role: str) -> None:
    """Take every action on the namespace from ROLE (its producers and consumers already open stay)."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        had = admin.namespaces.revoke_permission(name, role)
    if had:
        out().print(f"[green]Revoked[/] the permissions of role {role} on {name}")
    else:
        out().print(f"Role {role} had no permissions on {name}: nothing to revoke")


@namespaces.command(short_help="Print the roles' permissions on the namespace (JSON).")
@_NAMESPACE
@pass_data
def permissions(data: DataDir, namespace: str) -> None:
    """Print the permissions granted on the namespace as pulsar-admin does: {"role": ["consume", "produce"]}."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        print_json(admin.namespaces.permissions(name))


# clusters (geo-replication: docs/SERVER.md, "Geo-replication: clusters and policies")

_FORCE = click.option("--force", "-f", is_flag=True, help="Do not ask before a change that deletes the namespace's "
                                                          "topics on the clusters it leaves out (shared "
                                                          "configuration store).")


def _confirm_deletions(admin: Any, name: str, **change: list[str]) -> None:
    """With a shared configuration store, ask before a change that has other clusters delete the namespace's
    topics, naming them (answering no aborts: exit code 1)."""
    deletions = admin.namespaces.cascading_deletions(name, **change)
    if deletions:
        lines = [f"  {cluster}: {', '.join(topics) or 'no topic known here'}, and any topic of {name} only it has"
                 for cluster, topics in sorted(deletions.items())]
        click.confirm(f"This deletes topics of {name} on the clusters it leaves out (the clusters share their "
                      "configuration: Pulsar's cascading deletion):\n" + "\n".join(lines) + "\nContinue?",
                      abort=True)


@namespaces.command(name="set-clusters", short_help="Set the clusters the namespace's topics replicate among.")
@_NAMESPACE
@click.option("--clusters", "-c", required=True, metavar="A,B", callback=cluster_list,
              help="Comma-separated registered clusters, within the tenant's and the namespace's allowed clusters.")
@_FORCE
@pass_data
def set_clusters(data: DataDir, namespace: str, clusters: list[str], force: bool) -> None:
    """Set the clusters the namespace's topics replicate among (their topic-level replication clusters aside).

    With a shared (or synchronized) configuration store, a cluster this leaves out deletes the namespace's
    topics, but those whose replication policy lists it: asks first, naming the clusters and topics, unless
    --force; answering no changes nothing and exits with code 1.

    \b
    Example:
      seglog namespaces set-clusters acme/orders --clusters us-east,us-west
    """
    name = namespace_name(namespace)
    with data.admin() as admin:
        if not force:
            _confirm_deletions(admin, name, clusters=clusters)
        admin.namespaces.set_clusters(name, clusters)
        shown = admin.namespaces.get_clusters(name)
    out().print(f"[green]Set clusters[/] of {name}: {', '.join(shown)}")


@namespaces.command(name="get-clusters", short_help="Print the namespace's clusters (JSON).")
@_NAMESPACE
@pass_data
def get_clusters(data: DataDir, namespace: str) -> None:
    """Print the clusters the namespace's topics replicate among, as a JSON list: those set, else this
    cluster (none before the data directory is first served)."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        print_json(admin.namespaces.get_clusters(name))


@namespaces.command(name="set-allowed-clusters", short_help="Set the clusters the namespace's topics may reach.")
@_NAMESPACE
@click.option("--clusters", "-c", "allowed_clusters", required=True, metavar="A,B,C", callback=cluster_list,
              help="Comma-separated registered clusters, within the tenant's, including every cluster of the "
                   "namespace.")
@_FORCE
@pass_data
def set_allowed_clusters(data: DataDir, namespace: str, allowed_clusters: list[str], force: bool) -> None:
    """Set the clusters the namespace's topics may reach at all (PIP-321): a topic's replication clusters and a
    message's replication list stay within them.

    With a shared (or synchronized) configuration store, a cluster this leaves out deletes every topic of the
    namespace, whatever its replication policy: asks first, naming the clusters and topics, unless --force;
    answering no changes nothing and exits with code 1.

    \b
    Example:
      seglog namespaces set-allowed-clusters acme/orders --clusters us-east,us-west,eu
    """
    name = namespace_name(namespace)
    with data.admin() as admin:
        if not force:
            _confirm_deletions(admin, name, allowed_clusters=allowed_clusters)
        admin.namespaces.set_allowed_clusters(name, allowed_clusters)
        shown = admin.namespaces.get_allowed_clusters(name)
    out().print(f"[green]Set allowed clusters[/] of {name}: {', '.join(shown)}")


@namespaces.command(name="get-allowed-clusters", short_help="Print the namespace's allowed clusters (JSON).")
@_NAMESPACE
@pass_data
def get_allowed_clusters(data: DataDir, namespace: str) -> None:
    """Print the clusters the namespace's topics may reach, as a JSON list: those set, else its clusters."""
    name = namespace_name(namespace)
    with data.admin() as admin:
        print_json(admin.namespaces.get_allowed_clusters(name))
