"""`seglog topics create|list|describe|delete|stats|partitioned-stats|internal-stats|explain|...`: managing the
topics of a data directory or server, with pulsar-admin's group name (`seglog topic` is a hidden alias that older
scripts use), a topic's own policies (policy_commands.py), its subscriptions (subscriptions.py), compaction
(compaction.py) and its replication clusters."""

from __future__ import annotations

import textwrap
from datetime import datetime, timezone
from typing import Any

import click
from rich.measure import Measurement
from rich.table import Table

from seglog.catalog.config import ADMIN_NAMES, TopicConfig
from seglog.cli.base import AdminGroup
from seglog.cli.compaction import COMPACTION_COMMANDS
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import UsageProblem
from seglog.cli.options import cluster_list, namespace_name, topic_name, topic_settings
from seglog.cli.output import out, print_json, print_names, print_unclipped
from seglog.cli.policy_commands import PolicyScope, add_policy_commands
from seglog.cli.subscriptions import SUBSCRIPTION_COMMANDS
from seglog.cli.topic_settings import SETTING_FLAGS, setting_options
from seglog.errors import NotFoundError
from seglog.log import MAX_PARTITIONS
from seglog.units import format_duration, readable_size

_UNLIMITED_WIDTH = 1 << 20  # a table's natural width is measured without a limit
PERSISTENT = "persistent://"  # Pulsar's domain of a topic's full name, as pulsar-admin lists them

@click.group(name="topics", cls=AdminGroup)
def topic() -> None:
    """Create, list, describe and delete topics; their stats, policies and subscriptions (pulsar-admin topics).

    NAME is 'topic' (in public/default), 'tenant/namespace/topic' or 'persistent://tenant/namespace/topic', as
    in Pulsar.
    """


# `seglog topic ...`, the group's first name: hidden from the help, kept for the scripts that use it (the
# commands are the same objects: one dictionary for both groups)
topic_alias = AdminGroup(name="topic", commands=topic.commands, hidden=True,
                         help="The same commands as `seglog topics` (pulsar-admin's name), under their older name.")


@topic.command()
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(1, MAX_PARTITIONS), default=1, show_default=True,
              help="Number of partitions.")
@setting_options(show_defaults=True)
@pass_data
def create(data: DataDir, name: str, partitions: int, **given: Any) -> None:
    """Create topic NAME. Settings not given follow the data directory's defaults."""
    full_name = topic_name(name)
    settings = topic_settings(**given)
    with data.admin(create=True) as admin:
        created = admin.topics.create(name, partitions, **settings)
    out().print(f"[green]Created topic[/] {full_name} with {created['partitions']} partition"
                f"{'s' if created['partitions'] > 1 else ''}")


@topic.command(short_help="Change a topic's settings; those not given keep their values.")
@click.argument("name")
@setting_options(show_defaults=False)
@pass_data
@click.pass_context
def update(ctx: click.Context, data: DataDir, name: str, **given: Any) -> None:
    """Change settings of topic NAME after its creation (log.admin.topics.set_config); those not given
    keep their values. The settings are checked as a whole first: a refused change changes nothing."""
    full_name = topic_name(name)
    settings = topic_settings(**given)
    if not settings:
        raise UsageProblem(f"no setting given to change; give one or more of {', '.join(SETTING_FLAGS)}", ctx)
    with data.admin() as admin:
        admin.topics.set_config(name, **settings)
    changed = ", ".join(f"{name.replace('_', '-')} {value}" for name, value in settings.items())
    out().print(f"[green]Updated topic[/] {full_name}: {changed}")


@topic.command(name="update-partitioned-topic", short_help="Give a topic more partitions (never fewer).")
@click.argument("name")
@click.option("--partitions", "-p", type=int, required=True, metavar="N",
              help="The topic's new number of partitions: more than it has.")
@pass_data
def update_partitioned_topic(data: DataDir, name: str, partitions: int) -> None:
    """Give topic NAME more partitions, as pulsar-admin topics update-partitioned-topic. Fewer is refused
    (their messages would go), and so is a topic that producers or consumers use (they would go on with the
    partitions they started with). Subscriptions read the new partitions from their start."""
    with data.admin() as admin:
        admin.topics.update_partitions(name, partitions)
    full_name = topic_name(name)
    out().print(f"[green]Updated topic[/] {full_name}: {partitions} partitions")


@topic.command(name="list")
@click.argument("namespace", metavar="[TENANT/NAMESPACE]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the topics and their settings as JSON.")
@pass_data
def list_topics(data: DataDir, namespace: str | None, as_json: bool) -> None:
    """List the topics of TENANT/NAMESPACE (of every namespace without it) with their partitions and main
    settings; when stdout is not a terminal (a pipe, a file), as pulsar-admin topics list prints them: one
    persistent:// name a line, a partitioned topic as its partitions' NAME-partition-N names.

    RETENTION TIME is the topic's own --retention-time, '-' when it has none (the retention policies of its
    namespace and of the data directory still apply to acknowledged messages). Names are never cut: the
    table is as wide as the longest name needs.
    """
    topics = _topics_of(data, namespace)
    if as_json:
        print_json(topics)
        return
    if not out().is_terminal:  # for scripts: `for t in $(seglog topics list ns)`, as pulsar-admin topics list
        for t in topics:
            for partition_name in _partition_names(t):
                click.echo(partition_name)
        return
    table = Table("NAME", "PARTITIONS", "RETENTION TIME", "SEGMENT SIZE", "TIMESTAMP TYPE", box=None,
                  header_style="bold")
    for t in topics:
        config = _config(t)
        retention = config.retention_time
        table.add_row(f"{PERSISTENT}{t['name']}", str(t["partitions"]),
                      "-" if retention is None else format_duration(retention), readable_size(config.segment_size),
                      config.timestamp_type)
    print_unclipped(table)


@topic.command(name="list-partitioned-topics", short_help="List a namespace's partitioned topics.")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--json", "as_json", is_flag=True, help="Print the names as a JSON list.")
@pass_data
def list_partitioned_topics(data: DataDir, namespace: str, as_json: bool) -> None:
    """List the topics of TENANT/NAMESPACE that have more than one partition (Pulsar's partitioned topics), one
    persistent:// name a line, as pulsar-admin topics list-partitioned-topics."""
    print_names([f"{PERSISTENT}{t['name']}" for t in _topics_of(data, namespace) if t["partitions"] > 1], as_json)


@topic.command(name="create-partitioned-topic", short_help="Create a topic of --partitions partitions.")
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(1, MAX_PARTITIONS), required=True, metavar="N",
              help="Number of partitions.")
@pass_data
def create_partitioned_topic(data: DataDir, name: str, partitions: int) -> None:
    """Create topic NAME with N partitions and the data directory's default settings, as pulsar-admin topics
    create-partitioned-topic (`seglog topics create NAME -p N` takes settings too)."""
    full_name = topic_name(name)
    with data.admin(create=True) as admin:
        admin.topics.create(full_name, partitions)
    out().print(f"[green]Created partitioned topic[/] {full_name} with {partitions} partition"
                f"{'s' if partitions > 1 else ''}")


@topic.command(name="get-partitioned-topic-metadata", short_help="Print {\"partitions\": N} (0: not partitioned).")
@click.argument("name")
@pass_data
def get_partitioned_topic_metadata(data: DataDir, name: str) -> None:
    """Print topic NAME's partition count as pulsar-admin topics get-partitioned-topic-metadata prints it:
    {"partitions": N}, 0 for a topic of one partition (a non-partitioned topic in Pulsar)."""
    with data.admin() as admin:
        partitions = admin.topics.describe(topic_name(name))["partitions"]
    print_json({"partitions": partitions if partitions > 1 else 0})


def _topics_of(data: DataDir, namespace: str | None) -> list[dict[str, Any]]:
    """The topics with their settings (admin list_with_settings), of `namespace` only when given (which must
    exist)."""
    if namespace is not None:
        namespace = namespace_name(namespace)
    with data.admin() as admin:
        if namespace is not None and namespace not in admin.namespaces.list(namespace.split("/")[0]):
            raise NotFoundError(f"namespace {namespace} does not exist")
        topics = admin.topics.list_with_settings()
    return [t for t in topics if namespace is None or t["name"].startswith(f"{namespace}/")]


def _partition_names(topic: dict[str, Any]) -> list[str]:
    """A listed topic as Pulsar's topic list names it: itself, or each of its partitions when it has several."""
    if topic["partitions"] == 1:
        return [f"{PERSISTENT}{topic['name']}"]
    return [f"{PERSISTENT}{topic['name']}-partition-{p}" for p in range(topic["partitions"])]


@topic.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@pass_data
def describe(data: DataDir, name: str, as_json: bool) -> None:
    """Show a topic's settings, each partition's offsets and the storage it uses."""
    with data.admin() as admin:
        described = admin.topics.describe(name)
    partitions = described["partitionOffsets"]
    storage = described["storageSize"]
    if as_json:  # the policies in force as stats shows them: Pulsar's JSON with the levels
        print_json({key: value for key, value in described.items() if key != "policiesInForce"})
        return
    policies = described["policiesInForce"]
    config = _config(described)
    settings = Table(box=None, show_header=False)
    settings.add_column(style="bold")
    settings.add_column()
    for label, value in (
            ("Topic", described["name"]), ("Partitions", str(described["partitions"])),
            ("Segment size", readable_size(config.segment_size)),
            ("Segment roll time", _off(config.segment_roll_time, format_duration)),
            ("Segment max messages", _off(config.segment_max_messages, "{:,}".format)),
            ("Timestamp type", config.timestamp_type), ("Fsync", config.fsync),
            ("Retention time", _off(config.retention_time, format_duration)),
            ("Max partition size", _off(config.max_partition_size, readable_size)),
            ("Retention min timestamp", _min_timestamp(config.retention_min_timestamp)),
            ("Cleanup policy", config.cleanup_policy),
            ("Min compaction lag", format_duration(config.min_compaction_lag)),
            ("Max compaction lag", _off(config.max_compaction_lag, format_duration)),
            ("Delete retention", format_duration(config.delete_retention)),
            ("Min cleanable dirty ratio", f"{config.min_cleanable_dirty_ratio:g}"),
            *_policy_rows(policies),
            ("Storage size", f"{readable_size(storage)} ({storage:,} bytes)")):
        settings.add_row(label, value)
    offsets = Table("PARTITION", "EARLIEST OFFSET", "END OFFSET", "MESSAGES", box=None, header_style="bold")
    for row in partitions:
        offsets.add_row(str(row["partition"]), f"{row['earliestOffset']}", f"{row['endOffset']}",
                        f"{row['endOffset'] - row['earliestOffset']:,}")
    print_unclipped(settings)
    out().print()
    print_unclipped(offsets)


@topic.command()
@click.argument("name")
@click.option("-f", "--force", is_flag=True,
              help="Delete it even while producers or consumers use it: they are fenced (their next send, ack "
                   "or read fails), as pulsar-admin topics delete -f.")
@pass_data
def delete(data: DataDir, name: str, force: bool) -> None:
    """Delete topic NAME and all its messages (refused while it has producers or consumers, unless --force)."""
    with data.admin() as admin:
        admin.topics.delete(name, force=force)
    full_name = topic_name(name)
    out().print(f"[green]Deleted topic[/] {full_name}")


def _config(described: dict[str, Any]) -> TopicConfig:
    """The settings of a topic as the admin API lists or describes them (TopicConfig.to_admin's names)."""
    return TopicConfig(**{name: described[admin_name] for name, admin_name in ADMIN_NAMES.items()})


def _off(value: int | None, show: Any) -> str:
    return "off" if value is None else show(value)


def _min_timestamp(ms: int) -> str:
    if not ms:
        return "off"
    return f"{ms} ({datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec='milliseconds')})"


def _policy_rows(policies: dict[str, Any]) -> list[tuple[str, str]]:
    """The policies in force (describe's policiesInForce: ms and bytes), each with the level it comes from."""
    retention, ttl = policies["retention"], policies["messageTtlMs"]
    kept = f"time {format_duration(retention['timeMs'])}, size {readable_size(retention['sizeBytes'])}"
    threshold = policies["compactionThreshold"]
    rows = [("Retention", f"{kept} ({retention['level']})"),
            ("Message TTL", f"{_off(ttl['value'] or None, format_duration)} ({ttl['level']})"),
            ("Compaction threshold", f"{_off(threshold['value'] or None, readable_size)} ({threshold['level']})")]
    for quota_type, quota in policies["backlogQuotas"].items():
        limit = readable_size if quota_type == "destination_storage" else format_duration
        shown = f"{limit(quota['limit'])}, {quota['policy']} ({quota['level']})"
        rows.append((f"Backlog quota {quota_type}", shown))
    return rows


@topic.command()
@click.argument("name")
@pass_data
def stats(data: DataDir, name: str) -> None:
    """Topic stats as JSON, as pulsar-admin topics stats: storage, backlog per subscription, quotas, and
    `replication`: per remote cluster, the backlog of its replicator's cursor and, with --url, what the
    server's replicators do (on a data directory no replicator runs: nothing is connected)."""
    with data.admin() as admin:
        print_json(admin.topics.stats(name))


@topic.command(name="partitioned-stats", short_help="Print a partitioned topic's stats as Pulsar's JSON.")
@click.argument("name")
@click.option("--per-partition", is_flag=True, help="Each partition's stats too, by its NAME-partition-N name.")
@pass_data
def partitioned_stats(data: DataDir, name: str, per_partition: bool) -> None:
    """Stats of topic NAME, which has several partitions (a partitioned topic in Pulsar), as pulsar-admin topics
    partitioned-stats prints them: Pulsar's TopicStats of every partition together, `metadata` with the
    partition count and, with --per-partition, each partition's TopicStats under `partitions`. Publishers and
    replicators' connections are a server's: on a data directory there are none."""
    with data.admin() as admin:
        print_json(admin.topics.partitioned_stats(name, per_partition=per_partition))


@topic.command(name="internal-stats")
@click.argument("name")
@pass_data
def internal_stats(data: DataDir, name: str) -> None:
    """Segments and cursors of every partition as JSON, as pulsar-admin topics stats-internal."""
    with data.admin() as admin:
        print_json(admin.topics.internal_stats(name))


topic.add_command(internal_stats, name="stats-internal")  # pulsar-admin's name


@topic.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@pass_data
def explain(data: DataDir, name: str, as_json: bool) -> None:
    """Why disk is not freed: for each segment, the rule that keeps it, or the rule that deletes it next
    and when. A table when it fits the terminal's width (else, and in a pipe narrower than the table, one
    wrapped paragraph a segment)."""
    with data.admin() as admin:
        explained = admin.topics.explain_retention(name)
    if as_json:
        print_json(explained)
        return
    now = explained["nowMs"]
    rows = [(partition, str(fate["baseOffset"]), readable_size(fate["size"]),
             "delete" if fate["deletedNextPass"] else "keep", fate["rule"], _deleted_when(fate["deletedAtMs"], now),
             fate["reason"]) for partition, fates in explained["partitions"].items() for fate in fates]
    table = Table("PARTITION", "BASE OFFSET", "SIZE", "NEXT PASS", "RULE", "DELETED AT", "WHY", box=None,
                  header_style="bold")
    for row in rows:
        table.add_row(*row)
    console = out()
    if Measurement.get(console, console.options.update_width(_UNLIMITED_WIDTH), table).maximum <= console.width:
        console.print(table)  # (every cell whole at this width)
        return
    for partition, base, size, next_pass, rule, when, why in rows:
        text = (f"Partition {partition}, segment at offset {base} ({size}): {next_pass} on the next pass; "
                f"rule {rule}, deleted {when if when != '-' else 'never by it'}. {why}")
        click.echo(textwrap.fill(text, width=max(console.width, 40), subsequent_indent="  "))


def _deleted_when(at_ms: int | None, now_ms: int) -> str:
    """When a segment goes, to the second (rounded up: it is not gone before)."""
    if at_ms is None:
        return "-"
    if at_ms <= now_ms:
        return "now"
    return f"in {format_duration(-(-(at_ms - now_ms) // 1000) * 1000)}"


add_policy_commands(topic, PolicyScope("topic", "NAME", topic_name, lambda admin: admin.topics,
                                       "the topic falls back to its namespace's policy, else the data "
                                       "directory's default"))
for command in (*SUBSCRIPTION_COMMANDS, *COMPACTION_COMMANDS):
    topic.add_command(command)


# replication clusters (geo-replication: docs/SERVER.md, "Geo-replication: clusters and policies")

_GLOBAL = click.option("--global", "-g", "is_global", is_flag=True,
                       help="The global policy, meant for every cluster of the set. [default: the local one, for "
                            "this cluster only]")


@topic.command(name="set-replication-clusters", short_help="Set the clusters the topic replicates among.")
@click.argument("name")
@click.option("--clusters", "-c", required=True, metavar="A,B", callback=cluster_list,
              help="Comma-separated registered clusters within the namespace's allowed clusters; a local policy "
                   "must include this cluster.")
@_GLOBAL
@click.option("--force", "-f", is_flag=True, help="Do not ask before a global policy that deletes the topic on "
                                                  "the clusters it leaves out.")
@pass_data
def set_replication_clusters(data: DataDir, name: str, clusters: list[str], is_global: bool, force: bool) -> None:
    """Set the clusters topic NAME replicates among, over its namespace's clusters: a local policy (this cluster
    only) wins over a global one, which wins over the namespace's.

    A global policy travels to the other clusters, and a cluster it leaves out deletes the topic (its
    partitions and subscriptions) unless a local policy there keeps it: asks first, naming those clusters,
    unless --force; answering no changes nothing and exits with code 1.

    \b
    Example:
      seglog topics set-replication-clusters acme/orders/events --clusters us-east,eu --global
    """
    full_name = topic_name(name)
    with data.admin() as admin:
        if is_global and not force:
            before = admin.topics.get_replication_clusters(full_name, applied=True) or []
            leaving = sorted(set(before) - set(clusters))
            if leaving:
                click.confirm(f"This deletes topic {full_name} on {', '.join(leaving)} (a global policy deletes the "
                              "topic on the clusters it leaves out). Continue?", abort=True)
        admin.topics.set_replication_clusters(full_name, clusters, is_global=is_global)
        shown = admin.topics.get_replication_clusters(full_name, is_global=is_global) or []
    out().print(f"[green]Set {'global' if is_global else 'local'} replication clusters[/] of {full_name}: "
                f"{', '.join(shown)}")


@topic.command(name="get-replication-clusters", short_help="Print the topic's replication clusters (JSON).")
@click.argument("name")
@click.option("--applied", "-a", is_flag=True, help="The clusters in force, whichever level set them.")
@_GLOBAL
@pass_data
def get_replication_clusters(data: DataDir, name: str, applied: bool, is_global: bool) -> None:
    """Print topic NAME's local (or --global) replication clusters as a JSON list, null when unset; with
    --applied, those in force: local, else global, else the namespace's."""
    full_name = topic_name(name)
    with data.admin() as admin:
        print_json(admin.topics.get_replication_clusters(full_name, applied=applied, is_global=is_global))


@topic.command(name="remove-replication-clusters", short_help="Remove the topic's replication clusters.")
@click.argument("name")
@_GLOBAL
@pass_data
def remove_replication_clusters(data: DataDir, name: str, is_global: bool) -> None:
    """Remove topic NAME's local (or --global) replication clusters: the next level applies again."""
    full_name = topic_name(name)
    with data.admin() as admin:
        admin.topics.remove_replication_clusters(full_name, is_global=is_global)
    out().print(f"[green]Removed {'global' if is_global else 'local'} replication clusters[/] of {full_name}")
