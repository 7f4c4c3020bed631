"""Command and group classes every seglog command uses: library errors become clean CLI errors, click's own
usage errors are shown in the same style, Ctrl-C exits 130 (errors.py has the exit codes), and every command
takes `--data DIR` after its name too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from seglog.cli.datadir import DataDir, data_option
from seglog.cli.errors import CliError, Interrupted, as_usage_problem, from_library, from_os_error
from seglog.errors import SeglogError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@contextmanager
def ctrl_c_exits_130() -> Iterator[None]:
    """Ctrl-C inside: exit code 130 with a line on stderr, as a shell reports a command it stopped (click
    alone says "Aborted!" and exits 1); so does Ctrl-C at a confirmation prompt, which click turns into Abort."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted() from None
    except click.Abort as abort:
        if isinstance(abort.__context__, KeyboardInterrupt) or isinstance(abort.__cause__, KeyboardInterrupt):
            raise Interrupted() from None
        raise


class SeglogCommand(click.Command):
    """A command on a data directory; with --url it says it needs --data."""

    remote = False  # runs on a server too (--url): the admin commands

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(data_option())

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            raise as_usage_problem(error, ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        data = ctx.find_object(DataDir)
        if not self.remote and data is not None and data.url is not None:
            raise CliError(f"`{ctx.command_path}` works on a data directory, not on a server: give --data DIR "
                           f"instead of --url {data.url}")
        try:
            with ctrl_c_exits_130():
                return super().invoke(ctx)
        except click.UsageError as error:  # a command's own check of its options: shown as click's are
            raise as_usage_problem(error, ctx) from None
        except SeglogError as error:
            raise from_library(error, ctx, None if data is None or data.url is not None else data.path) from error
        except OSError as error:
            converted = from_os_error(error)
            if converted is error:
                raise
            raise converted from error


class AdminCommand(SeglogCommand):
    """An admin command: on the data directory, or on a server with --url (`data.admin()`)."""

    remote = True


class SeglogGroup(click.Group):
    command_class = SeglogCommand
    group_class = type  # subgroups are SeglogGroups too

    def invoke(self, ctx: click.Context) -> Any:
        with ctrl_c_exits_130():
            return super().invoke(ctx)


class AdminGroup(SeglogGroup):
    """A group of admin commands (tenants, namespaces, topics)."""

    command_class = AdminCommand

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            raise as_usage_problem(error, ctx) from None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as error:
            raise as_usage_problem(error, ctx) from None
