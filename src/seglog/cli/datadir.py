"""What a command works on: a data directory, `--data DIR` (before the command or after it), else $SEGLOG_DATA,
else ./seglog-data; or, for the admin commands, a server, `--url http://HOST:PORT` (or $SEGLOG_URL).

The admin commands take `data.admin()`: seglog.admin's API on the data directory, or the same API over the
server's HTTP port (seglog.remote). Every other command needs a data directory (`data.open()`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

import seglog
from seglog.cli.auth_options import TOKEN_ENV_VAR, TRUST_ENV_VAR, given_token
from seglog.cli.errors import CliError
from seglog.log import METADATA_FILE

DEFAULT_DATA = "seglog-data"
ENV_VAR = "SEGLOG_DATA"
URL_ENV_VAR = "SEGLOG_URL"
DATA_PATH = click.Path(file_okay=False, path_type=Path)


@dataclass(frozen=True)
class DataDir:
    path: Path
    url: str | None = None  # a server's HTTP URL: the admin commands run there

    def exists(self) -> bool:
        return self.url is not None or seglog.is_data_directory(self.path)

    def require(self) -> Path:
        """The path, if it holds a seglog data directory; commands that only read never create one."""
        if self.url is not None:
            raise CliError(f"this command works on a data directory, not on a server: give --data DIR instead of "
                           f"--url {self.url}")
        if not self.exists():
            raise CliError(f"no seglog data directory at '{self.path}' (no {METADATA_FILE}): create a topic "
                           f"with `seglog --data {self.path} topic create NAME`, or point --data or "
                           f"${ENV_VAR} at an existing one")
        return self.path

    @contextmanager
    def open(self, *, create: bool = False) -> Iterator[seglog.Log]:
        """The opened log; `create` allows making the directory, else it must exist already."""
        if not create or self.url is not None:
            self.require()
        with seglog.open(self.path) as log:
            yield log

    @contextmanager
    def admin(self, *, create: bool = False) -> Iterator[Any]:
        """The admin API (seglog.admin.api.Admin's methods): the data directory's (`create` allows making
        it), or the server's at --url (seglog.remote), with the token and CA file the command line gives."""
        if self.url is None:
            with self.open(create=create) as log:
                yield log.admin
            return
        from seglog.remote import Credentials, RemoteAdmin  # httpx only when --url is given
        credentials = Credentials(given_token(), os.environ.get(TRUST_ENV_VAR),
                                  how_to_give_token=f"--token TOKEN, --auth-params token:TOKEN|file:///PATH or "
                                                    f"${TOKEN_ENV_VAR}",
                                  trust_file_given_as=f"${TRUST_ENV_VAR}")
        remote = RemoteAdmin(self.url, credentials)
        try:
            yield remote
        finally:
            remote.close()


pass_data = click.make_pass_decorator(DataDir)


def _data_after_the_command(ctx: click.Context, param: click.Parameter, path: Path | None) -> None:
    """`seglog topic list --data d` as `seglog --data d topic list`: the command's context gets its own
    DataDir, which pass_data finds before the group's (so the one given last, after the command, wins)."""
    if path is not None:
        given = ctx.find_object(DataDir)
        if given is not None and given.url is not None:
            raise CliError(f"give --data or --url, not both: --data {path} and --url {given.url}")
        ctx.obj = DataDir(path)


def data_option() -> click.Option:
    """The `--data` every command accepts after its name (no default or environment variable of its own:
    without it the group's --data, $SEGLOG_DATA or ./seglog-data applies)."""
    return click.Option(["--data"], type=DATA_PATH, metavar="DIR", expose_value=False,
                        callback=_data_after_the_command,
                        help="Data directory, as `seglog --data DIR` before the command (this one wins).")
