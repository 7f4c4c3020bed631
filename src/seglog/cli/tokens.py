"""`seglog tokens create-secret-key|create`: the secret key and the tokens of `seglog serve`'s token
authentication, as Pulsar's `pulsar tokens` makes them (a key file of raw bytes, HS256 tokens whose subject
is the role), so keys and tokens from either tool work with both."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import click

from seglog.cli.base import SeglogCommand, SeglogGroup
from seglog.cli.output import out
from seglog.errors import AlreadyExistsError
from seglog.units import parse_duration

_YEARS = re.compile(r"(\d+)\s*y\b")  # Pulsar's expiry times take years too (365 days)


class TokenCommand(SeglogCommand):
    """Needs neither a data directory nor a server: runs the same beside --url or $SEGLOG_URL."""

    remote = True


class TokenGroup(SeglogGroup):
    command_class = TokenCommand


@click.group(cls=TokenGroup)
def tokens() -> None:
    """Make the secret key and the tokens of seglog serve's token authentication.

    \b
    Example:
      seglog tokens create-secret-key --output secret.key
      seglog tokens create --secret-key secret.key --subject admin
      seglog --data ./d serve --cluster standalone --auth-token-secret-key secret.key --superuser-roles admin
    """


@tokens.command(name="create-secret-key")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="File to write the key to (its raw bytes; made readable by its owner only). Never overwritten.")
def create_secret_key(output: Path) -> None:
    """Write a new random HS256 secret key (32 bytes) to FILE, for seglog serve --auth-token-secret-key.

    Anyone who reads the key can make tokens for any role, superusers included: keep it as secret as a password.
    """
    from seglog.server import create_secret_key as new_key

    try:
        descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise AlreadyExistsError(f"{output} exists already; a new key there would invalidate every token made "
                                 "with the old one: remove it first, or give another --output") from None
    with os.fdopen(descriptor, "wb") as file:
        file.write(new_key())
    out().print(f"[green]Wrote a secret key to[/] {output}")


@tokens.command()
@click.option("--secret-key", "-sk", required=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The secret key file (its raw bytes), as seglog serve --auth-token-secret-key has it.")
@click.option("--subject", "-s", required=True, metavar="ROLE", help="The role the token authenticates.")
@click.option("--expiry-time", "-e", default=None, metavar="DURATION",
              help="Valid for this long from now: '1h', '30d', '1y' (seconds as an int). [default: for ever]")
def create(secret_key: Path, subject: str, expiry_time: str | None) -> None:
    """Print a token for role ROLE, signed with the secret key (on the last line of stdout).

    \b
    Example:
      seglog tokens create --secret-key secret.key --subject alice --expiry-time 30d
    """
    from seglog.server import create_token, read_secret_key

    key = read_secret_key(secret_key, argument="secret key")
    expires_at_s = None
    if expiry_time is not None:
        given = _YEARS.sub(lambda years: f"{int(years[1]) * 365}d", expiry_time)
        seconds = parse_duration(given, argument="expiry time", unit="s") // 1000
        if seconds <= 0:
            raise click.BadParameter(f"{expiry_time!r}: a duration greater than 0, such as '1h' or '30d'",
                                     param_hint="'--expiry-time'")
        expires_at_s = int(time.time()) + seconds
    click.echo(create_token(key, subject, expires_at_s=expires_at_s))
