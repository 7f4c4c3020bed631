"""The data directory a command works on: `--data DIR` (before the command or after it), else $SEGLOG_DATA,
else ./seglog-data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click

import seglog
from seglog.cli.errors import CliError
from seglog.log import METADATA_FILE

DEFAULT_DATA = "seglog-data"
ENV_VAR = "SEGLOG_DATA"
DATA_PATH = click.Path(file_okay=False, path_type=Path)


@dataclass(frozen=True)
class DataDir:
    path: Path

    def exists(self) -> bool:
        return seglog.is_data_directory(self.path)

    def require(self) -> Path:
        """The path, if it holds a seglog data directory; commands that only read never create one."""
        if not self.exists():
            raise CliError(f"no seglog data directory at '{self.path}' (no {METADATA_FILE}): create a topic "
                           f"with `seglog --data {self.path} topic create NAME`, or point --data or "
                           f"${ENV_VAR} at an existing one")
        return self.path

    @contextmanager
    def open(self, *, create: bool = False) -> Iterator[seglog.Log]:
        """The opened log; `create` allows making the directory, else it must exist already."""
        if not create:
            self.require()
        with seglog.open(self.path) as log:
            yield log


pass_data = click.make_pass_decorator(DataDir)


def _data_after_the_command(ctx: click.Context, param: click.Parameter, path: Path | None) -> None:
    """`seglog topic list --data d` as `seglog --data d topic list`: the command's context gets its own
    DataDir, which pass_data finds before the group's (so the one given last, after the command, wins)."""
    if path is not None:
        ctx.obj = DataDir(path)


def data_option() -> click.Option:
    """The `--data` every command accepts after its name (no default or environment variable of its own:
    without it the group's --data, $SEGLOG_DATA or ./seglog-data applies)."""
    return click.Option(["--data"], type=DATA_PATH, metavar="DIR", expose_value=False,
                        callback=_data_after_the_command,
                        help="Data directory, as `seglog --data DIR` before the command (this one wins).")
