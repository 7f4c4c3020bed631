"""pulsar-admin's policy commands (retention, backlog quotas, message TTL, deduplication, compaction threshold)
for one level of policies:
`seglog namespaces set-retention NS ...` and `seglog topics set-retention NAME ...`, where a topic's own
policy overrides its namespace's. Same command and option names as pulsar-admin, so its command lines carry
over; the getters print the JSON pulsar-admin prints (Pulsar's names and units), which is what
log.admin.namespaces and log.admin.topics return."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from seglog.catalog.policies import QUOTA_POLICIES, QUOTA_TYPES, BacklogQuota, Retention
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.errors import UsageProblem
from seglog.cli.options import SIZE_UNITS
from seglog.cli.output import err, out, print_json
from seglog.units import format_duration, format_size

if TYPE_CHECKING:
    from seglog.admin.api import PolicyLevel


@dataclass(frozen=True)
class PolicyScope:
    """Where the commands set policies: a namespace, or a topic."""
    noun: str                                # 'namespace' or 'topic', as the help texts say it
    metavar: str                             # the name argument in usage lines
    parse_name: Callable[[str], str]         # the full name, or InvalidNameError naming what is wrong
    admin: Callable[[Any], PolicyLevel]      # the admin API's namespaces or topics (data.admin())
    fallback: str                            # what applies once a policy is removed, as a clause


def add_policy_commands(group: click.Group, level: PolicyScope) -> None:
    """Add set-/get-/remove- retention, backlog quota and message TTL to `group`, for `level`."""
    name_argument = click.argument("name", metavar=level.metavar)
    noun = level.noun

    def add_getter(method: str, short_help: str, help_text: str,
                   note: Callable[[Any], str | None] = lambda value: None) -> None:
        @group.command(name=method.replace("_", "-"), short_help=short_help, help=help_text)
        @name_argument
        @pass_data
        def get(data: DataDir, name: str) -> None:
            name = level.parse_name(name)
            with data.admin() as admin:
                value = getattr(level.admin(admin), method)(name)
            print_json(value)
            said = note(value)
            if said is not None:  # on stderr: stdout stays the JSON pulsar-admin prints
                err().print(f"[dim]{said}[/]")

    def add_remover(method: str, what: str) -> None:
        @group.command(name=method.replace("_", "-"), short_help=f"Remove the {what}.",
                       help=f"Remove the {what} of the {noun}: {level.fallback}.")
        @name_argument
        @pass_data
        def remove(data: DataDir, name: str) -> None:
            name = level.parse_name(name)
            with data.admin() as admin:
                getattr(level.admin(admin), method)(name)
            out().print(f"[green]Removed {what}[/] of {name}")

    add_getter("get_retention", "Print the retention as Pulsar's JSON (or null).",
               f"Print the retention set on the {noun} as Pulsar's JSON (minutes and MB, -1 for no limit), or null.")
    add_remover("remove_retention", "retention")
    add_getter("get_backlog_quotas", "Print the backlog quotas as Pulsar's JSON.",
               f"Print the backlog quotas set on the {noun} as Pulsar's JSON, by type (limit in bytes, limitTime "
               "in seconds).")
    add_getter("get_message_ttl", "Print the message TTL in seconds (or null).",
               f"Print the message TTL set on the {noun} in seconds, or null; 0 is no TTL.",
               note=lambda seconds: "0: the message TTL is off" if seconds == 0 else None)
    add_remover("remove_message_ttl", "message TTL")
    add_getter("get_deduplication", "Print whether deduplication is on (or null).",
               f"Print whether the {noun} deduplicates server producers' messages by producer name and sequence "
               "id (true or false), or null when it is not set here.")
    add_remover("remove_deduplication", "deduplication setting")
    add_getter("get_compaction_threshold", "Print the compaction threshold in bytes (or null).",
               f"Print the compaction threshold set on the {noun} in bytes (the backlog that starts a compaction), "
               "or null; 0 never starts one by size.",
               note=lambda threshold: "0: no compaction is started by the backlog's size" if threshold == 0 else None)
    add_remover("remove_compaction_threshold", "compaction threshold")

    @group.command(name="set-compaction-threshold", short_help="Compact topics once their backlog reaches "
                                                               "--threshold.",
                   help=f"Set the compaction threshold of the {noun}: a topic is compacted once the part of it not "
                        "compacted yet reaches this size, as Pulsar's compaction_threshold.")
    @name_argument
    @click.option("--threshold", "-t", required=True, metavar="SIZE",
                  help=f"The backlog that starts a compaction: '10M', '1G', bytes as an int; 0 for none by size. "
                       f"{SIZE_UNITS}.")
    @pass_data
    def set_compaction_threshold(data: DataDir, name: str, threshold: str) -> None:
        name = level.parse_name(name)
        with data.admin() as admin:
            level.admin(admin).set_compaction_threshold(name, threshold)
            size = level.admin(admin).get_compaction_threshold(name)
        shown = "0 (no compaction by size)" if not size else format_size(size)
        out().print(f"[green]Set compaction threshold[/] of {name}: {shown}")

    @group.command(name="set-deduplication", short_help="Turn message deduplication on (--enable) or off.",
                   help=f"Turn on or off the deduplication of the {noun}'s messages sent through seglog serve: a "
                        "message whose sequence id is not above the last one stored for its producer name is "
                        "acknowledged and not stored again.")
    @name_argument
    @click.option("--enable/--disable", "-e/-d", "enabled", required=True, help="Deduplicate, or not.")
    @pass_data
    def set_deduplication(data: DataDir, name: str, enabled: bool) -> None:
        name = level.parse_name(name)
        with data.admin() as admin:
            level.admin(admin).set_deduplication(name, enabled)
        out().print(f"[green]Set deduplication[/] of {name}: {'on' if enabled else 'off'}")

    @group.command(name="set-retention", short_help="Keep acknowledged messages up to --size and --time.",
                   help=f"Set the retention of the {noun}'s acknowledged messages: deleted once older than "
                        "--time or beyond --size.\n\nBoth 0 keeps nothing acknowledged; 0 for only one of "
                        "them is refused, as in Pulsar.")
    @name_argument
    @click.option("--size", "-s", "retention_size", required=True, metavar="SIZE",
                  help="Acknowledged data to keep per topic, in whole MB (as Pulsar reports it): '10G', '500 MiB', "
                       f"bytes as an int; -1 for no limit. {SIZE_UNITS}.")
    @click.option("--time", "-t", "retention_time", required=True, metavar="DURATION",
                  help="How long to keep acknowledged messages, in whole minutes (as Pulsar reports it): '3h', "
                       "'7 days', seconds as an int; -1 for no limit.")
    @pass_data
    def set_retention(data: DataDir, name: str, retention_size: str, retention_time: str) -> None:
        name = level.parse_name(name)
        with data.admin() as admin:
            level.admin(admin).set_retention(name, size=retention_size, time=retention_time)
        retention = Retention.parse(size=retention_size, time=retention_time)
        out().print(f"[green]Set retention[/] of {name}: size {format_size(retention.size_bytes)}, "
                    f"time {format_duration(retention.time_ms)}")

    @group.command(name="set-backlog-quota", short_help="Limit the backlog by size or by age.",
                   help=f"Set a backlog quota of the {noun}: a limit on the backlog of each topic's slowest "
                        "subscription, of one --type.\n\n--type destination_storage takes --limit, "
                        "--type message_age takes --limitTime. Both may be given, as pulsar-admin takes them: the "
                        "quota of --type enforces its own limit only, and the note on stderr says so.")
    @name_argument
    @click.option("--limit", "-l", metavar="SIZE",
                  help=f"For --type destination_storage: the backlog size limit, '2G', '500 MiB', bytes as an int. "
                       f"{SIZE_UNITS}.")
    @click.option("--limitTime", "-lt", "limit_time", metavar="DURATION",
                  help="For --type message_age: the age limit of the oldest unacknowledged message, seconds as "
                       "an int or '1h', '2d'.")
    @click.option("--policy", "-p", required=True, metavar="|".join(QUOTA_POLICIES),
                  help="What happens at the limit: hold producers' sends, fail them, or evict the oldest backlog.")
    @click.option("--type", "-t", "quota_type", default=QUOTA_TYPES[0], show_default=True,
                  metavar="|".join(QUOTA_TYPES), help="Limit the backlog's size or the age of its oldest message.")
    @pass_data
    @click.pass_context
    def set_backlog_quota(ctx: click.Context, data: DataDir, name: str, limit: str | None, limit_time: str | None,
                          policy: str, quota_type: str) -> None:
        name = level.parse_name(name)
        unused = _check_quota_limit(ctx, quota_type, limit, limit_time)
        if unused == "limit":
            limit = None
        elif unused == "limit_time":
            limit_time = None
        with data.admin() as admin:
            level.admin(admin).set_backlog_quota(name, limit=limit, limit_time=limit_time, policy=policy,
                                               type=quota_type)
        quota = BacklogQuota.parse(type=quota_type, limit=limit, limit_time=limit_time, policy=policy)
        shown = format_size(quota.limit) if quota_type == "destination_storage" else format_duration(quota.limit)
        out().print(f"[green]Set backlog quota[/] {quota_type} of {name}: limit {shown}, policy {policy}")
        if unused is not None:
            _say_unenforced(ctx, name, quota_type, unused, policy)

    @group.command(name="remove-backlog-quota", short_help="Remove the backlog quota of one --type.",
                   help=f"Remove a backlog quota of the {noun}: {level.fallback}.")
    @name_argument
    @click.option("--type", "-t", "quota_type", default=QUOTA_TYPES[0], show_default=True,
                  metavar="|".join(QUOTA_TYPES), help="The quota to remove.")
    @pass_data
    def remove_backlog_quota(data: DataDir, name: str, quota_type: str) -> None:
        name = level.parse_name(name)
        with data.admin() as admin:
            policies = level.admin(admin)
            had = quota_type in policies.get_backlog_quotas(name)
            policies.remove_backlog_quota(name, type=quota_type)  # (refuses an unknown --type)
        if had:
            out().print(f"[green]Removed backlog quota[/] {quota_type} of {name}")
        else:  # exit 0 as pulsar-admin, which removes nothing silently; this says so
            err().print(f"Nothing removed: {name} has no backlog quota {quota_type} of its own", soft_wrap=True)

    @group.command(name="set-message-ttl", short_help="Acknowledge messages unacknowledged for longer than "
                                                      "--messageTTL.",
                   help=f"Set the message TTL of the {noun}'s topics.")
    @name_argument
    @click.option("--messageTTL", "-ttl", "message_ttl", required=True, metavar="DURATION",
                  help="Acknowledge messages left unacknowledged this long: seconds as an int, or '2h', '1d'; "
                       "0 for no TTL.")
    @pass_data
    def set_message_ttl(data: DataDir, name: str, message_ttl: str) -> None:
        name = level.parse_name(name)
        with data.admin() as admin:
            level.admin(admin).set_message_ttl(name, message_ttl)
            seconds = level.admin(admin).get_message_ttl(name)
        shown = "off (0: messages are never expired)" if not seconds else format_duration(seconds * 1000)
        out().print(f"[green]Set message TTL[/] of {name}: {shown}")


def _check_quota_limit(ctx: click.Context, quota_type: str, limit: str | None, limit_time: str | None) -> str | None:
    """The limit option a --type takes, named as on the command line (the library names its arguments).

    Both limits given is accepted, as pulsar-admin accepts it (it sends one BacklogQuota of --type with both, and
    the broker enforces the limit of that type only): the other limit is checked as its own type would check it,
    and its parameter name is returned (`limit` or `limit_time`) so that it is left out; None when it is not
    given."""
    if quota_type not in QUOTA_TYPES:
        return None  # refused by the library, with the accepted types
    options = {param.name: param for param in ctx.command.params}
    wanted, other = ("limit", "limit_time") if quota_type == "destination_storage" else ("limit_time", "limit")
    given = {"limit": limit, "limit_time": limit_time}
    example = "a size such as '2G'" if wanted == "limit" else "seconds as an int, or a duration such as '1h'"
    takes = f"--type {quota_type} takes {options[wanted].opts[0]}: {example}"
    if given[wanted] is None:
        if given[other] is not None:
            raise UsageProblem(f"Invalid value for {options[other].get_error_hint(ctx)}: {takes}", ctx)
        raise UsageProblem(f"Missing option {options[wanted].get_error_hint(ctx)}: {takes}", ctx)
    if given[other] is None:
        return None
    other_type = QUOTA_TYPES[0] if other == "limit" else QUOTA_TYPES[1]
    BacklogQuota.parse(type=other_type, limit=limit if other == "limit" else None,
                       limit_time=limit_time if other == "limit_time" else None, policy=QUOTA_POLICIES[0])
    return other


def _say_unenforced(ctx: click.Context, name: str, quota_type: str, unused: str, policy: str) -> None:
    """A note on stderr: the limit given beside the one of --type is not enforced by that quota, and the command
    that sets it as a quota of its own type."""
    flag = next(param for param in ctx.command.params if param.name == unused).opts[0]
    value = ctx.params[unused]
    other_type, what = (QUOTA_TYPES[0], "size") if unused == "limit" else (QUOTA_TYPES[1], "age")
    err().print(f"Note: a {quota_type} quota enforces its own limit only: {flag} {value} is not applied. To limit "
                f"the backlog's {what} too: {ctx.command_path} {name} --type {other_type} {flag} '{value}' "
                f"--policy {policy}", soft_wrap=True)
