"""`seglog --url URL --token TOKEN`: the token a server with authentication takes, given as seglog's --token
(else $SEGLOG_TOKEN) or as pulsar-admin's --auth-params token:TOKEN / file:///path (with --auth-plugin naming the
token plugin, if given at all), and $SEGLOG_TLS_TRUST_CERTS, the CA file an https:// server's certificate is
checked against. Apart from seglog.remote so that the group's options do not import httpx."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

TOKEN_ENV_VAR = "SEGLOG_TOKEN"
TRUST_ENV_VAR = "SEGLOG_TLS_TRUST_CERTS"
TOKEN_PLUGINS = ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken")
_TOKEN_META = "seglog.token"  # the token the options gave, in the click context's meta (shared by subcommands)


def _read_token_file(ctx: click.Context, location: str) -> str:
    path = location.removeprefix("file://")
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not a UTF-8 text file"
        raise click.BadParameter(f"cannot read the token file {path}: {reason}", ctx,
                                 param_hint="'--auth-params'") from None


def _token_option(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """--token, --auth-params and --auth-plugin (each once the others are parsed: the last one resolves them):
    the token in the context's meta, or a usage error naming what is accepted."""
    ctx.meta.setdefault("seglog.auth", {})[param.name] = value
    given = ctx.meta["seglog.auth"]
    if len(given) < 3:
        return
    plugin, params, token = given["auth_plugin"], given["auth_params"], given["token"]
    if plugin is not None and plugin not in TOKEN_PLUGINS:
        raise click.BadParameter(f"{plugin} is not supported; accepted: {' or '.join(TOKEN_PLUGINS)} (tokens "
                                 "only)", ctx, param_hint="'--auth-plugin'")
    if params is not None:
        if token is not None and ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("give --token or --auth-params, not both", ctx)
        if params.startswith("token:"):
            token = params.removeprefix("token:")
        elif params.startswith("file:"):
            token = _read_token_file(ctx, params)
        else:
            raise click.BadParameter("expected token:TOKEN or file:///path/to/token", ctx,
                                     param_hint="'--auth-params'")
    ctx.meta[_TOKEN_META] = token.strip() if token else None


def auth_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The token options of `seglog --url`: --token (or $SEGLOG_TOKEN), pulsar-admin's --auth-params and
    --auth-plugin."""
    for option in reversed((
            click.option("--token", envvar=TOKEN_ENV_VAR, show_envvar=True, metavar="TOKEN", expose_value=False,
                         callback=_token_option,
                         help="With --url: the token to authenticate with (`seglog tokens create` makes one)."),
            click.option("--auth-params", metavar="token:TOKEN|file:///PATH", expose_value=False,
                         callback=_token_option,
                         help="With --url: the token as pulsar-admin takes it, inline or from a file."),
            click.option("--auth-plugin", metavar="PLUGIN", expose_value=False, callback=_token_option,
                         help=f"With --url: pulsar-admin's authentication plugin; only tokens: "
                              f"{' or '.join(TOKEN_PLUGINS)}."))):
        command = option(command)
    return command


def given_token() -> str | None:
    """The token the command line gave (auth_options), else $SEGLOG_TOKEN."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and _TOKEN_META in ctx.meta:
        return ctx.meta[_TOKEN_META]
    return os.environ.get(TOKEN_ENV_VAR)
