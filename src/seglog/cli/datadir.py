"""The data directory a command works on: `--data DIR`, else $SEGLOG_DATA, else ./seglog-data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click

import seglog
from seglog.log import METADATA_FILE
from seglog.cli.errors import CliError

DEFAULT_DATA = "seglog-data"
ENV_VAR = "SEGLOG_DATA"


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
