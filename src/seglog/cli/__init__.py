"""The `seglog` command line (also `python -m seglog`), in the style of pulsar-admin and fluvio.

    seglog [--data DIR] demo | bench | produce | consume | check | repair
    seglog [--data DIR] serve --cluster NAME [--port 6650] [--http-port 8080] [--auth-token-secret-key FILE ...]
    seglog tokens create-secret-key|create
    seglog [--data DIR] topics create|list|describe|update|delete|create-partitioned-topic|list-partitioned-topics
    seglog [--data DIR] clusters create|update|get|list|delete
    seglog [--data DIR] tenants create|list|delete
    seglog [--data DIR] namespaces create|list|delete|set-retention|get-retention|set-backlog-quota|...
    seglog [--data DIR] topics stats|internal-stats|explain|update-partitioned-topic NAME | maintenance | metrics
    seglog [--data DIR] topics subscriptions|create-subscription|unsubscribe|reset-cursor|skip|... NAME -s SUB
    seglog [--data DIR] schemas get|upload|delete|compatibility TOPIC [--filename FILE]
    seglog --url http://HOST:PORT clusters|tenants|namespaces|topics|schemas|maintenance|metrics ...
                                                                                          (on a seglog serve)

--data may also follow the command. One module per command group; errors.py and base.py turn library errors
into clean messages and exit codes."""

from __future__ import annotations

from pathlib import Path

import click

from seglog.cli.auth_options import auth_options
from seglog.cli.base import CONTEXT_SETTINGS, SeglogGroup
from seglog.cli.bench import bench
from seglog.cli.check import check
from seglog.cli.clusters import clusters
from seglog.cli.consume import consume
from seglog.cli.datadir import DATA_PATH, DEFAULT_DATA, ENV_VAR, URL_ENV_VAR, DataDir
from seglog.cli.demo import demo
from seglog.cli.errors import CliError
from seglog.cli.maintenance import maintenance, metrics
from seglog.cli.namespaces import namespaces
from seglog.cli.produce import produce
from seglog.cli.repair import repair
from seglog.cli.schemas import TOPIC_COMMANDS as TOPIC_SCHEMA_COMMANDS
from seglog.cli.schemas import schemas
from seglog.cli.serve import serve
from seglog.cli.tenants import tenants
from seglog.cli.tokens import tokens
from seglog.cli.topic import topic, topic_alias
from seglog.version import __version__

__all__ = ["main"]


@click.group(name="seglog", cls=SeglogGroup, context_settings=CONTEXT_SETTINGS)
@click.option("--data", type=DATA_PATH, envvar=ENV_VAR, default=DEFAULT_DATA, show_default="./seglog-data",
              show_envvar=True, metavar="DIR",
              help=f"Data directory (also accepted after the command). Without it: ${ENV_VAR}, else "
                   f"./{DEFAULT_DATA}.")
@click.option("--url", envvar=URL_ENV_VAR, show_envvar=True, metavar="http://HOST:PORT",
              help="Run the admin command on a seglog serve at this HTTP URL instead of on a data directory "
                   "(clusters, tenants, namespaces, topics, schemas, maintenance, metrics; not with --data). A "
                   "server with authentication takes a token (--token); an https:// one whose CA the system does not "
                   "trust, the CA's certificate file in $SEGLOG_TLS_TRUST_CERTS.")
@auth_options
@click.version_option(__version__, "--version", "-V", prog_name="seglog", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context, data: Path, url: str | None) -> None:
    """seglog: an embeddable segmented message log. Start with `seglog demo`.

    \b
    Examples:
      seglog demo
      seglog --data ./d topics create events --partitions 4 --segment-size '64 MiB'
      printf 'a\\nb\\n' | seglog --data ./d produce events --key user-1
      seglog --data ./d consume events --partition 0 --format json --follow
      seglog --data ./d check
      seglog --data ./d namespaces set-retention public/default --size 10G --time 3h
      seglog --url http://127.0.0.1:8080 topics stats events
    """
    ctx.obj = DataDir(data, _url(ctx, data, url))


def _url(ctx: click.Context, data: Path, url: str | None) -> str | None:
    """--url, unless --data says otherwise: both on the command line (or both from the environment) is an
    error naming both; one on the command line wins over the other from the environment."""
    if url is None:
        return None
    sources = (ctx.get_parameter_source("data"), ctx.get_parameter_source("url"))
    given = {click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT}
    if sources[0] in given and sources[0] == sources[1]:
        where = "" if sources[0] == click.core.ParameterSource.COMMANDLINE else f" (${ENV_VAR} and ${URL_ENV_VAR})"
        raise CliError(f"give --data or --url, not both: --data {data} and --url {url}{where}")
    if sources[0] == click.core.ParameterSource.COMMANDLINE:
        return None
    return url


for command in (demo, bench, topic, produce, consume, check, repair, clusters, tenants, namespaces, schemas,
                maintenance, metrics, serve, tokens):
    main.add_command(command)
for command in TOPIC_SCHEMA_COMMANDS:  # a topic's schema policies, beside its other policies
    topic.add_command(command)
main.add_command(topic_alias)  # `seglog topic`: hidden, the same commands (older scripts)
