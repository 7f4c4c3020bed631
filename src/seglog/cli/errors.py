"""How the CLI reports failures: one red line on stderr (after the usage line for bad input), an exit code,
never a traceback. Library errors keep their own message; the option they concern is named as on the
command line ('--segment-size', not 'segment_size').

Exit codes: 0 success, 1 damage found (check, repair, a corrupt batch met while reading, a metadata file
SQLite cannot use) or an operating system error (permission denied, disk full: shown with the file), 2 bad
usage or a refused request (invalid value, unknown topic, partition locked by another process, no data
directory)."""

from __future__ import annotations

import errno

import click
from click.exceptions import NoArgsIsHelpError
from rich.console import Console
from rich.text import Text

from seglog.errors import ConfigFileError, CorruptLogError, InvalidArgumentError, MetadataError, SeglogError

EXIT_FAILURE = 1
EXIT_DAMAGE = EXIT_FAILURE
EXIT_USAGE = 2

# Library argument names that are not simply the parameter's name with '_' for ' ': the parameters they may be
# (a command has one of them), or that together make the value (retention: --size and --time).
_PARAMETER_ALIASES = {
    "topic name": ("name", "topic"),
    "tenant name": ("name", "tenant"),
    "tenant": ("name", "tenant"),
    "cluster name": ("cluster",),
    "namespace name": ("namespace",),
    "message TTL": ("message_ttl",),
    "type": ("quota_type",),
    "retention": ("retention_size", "retention_time"),
    # ClusterData's keys: the options of seglog clusters create and update
    "serviceUrl": ("url",),
    "serviceUrlTls": ("url_secure",),
    "brokerServiceUrl": ("broker_url",),
    "brokerServiceUrlTls": ("broker_url_secure",),
    "authenticationPlugin": ("auth_plugin",),
    "authenticationParameters": ("auth_parameters",),
}


def show_error(message: str) -> None:
    """Print `message` as an error on stderr ('Error: ' in bold red), unwrapped so paths stay whole."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text.assemble(("Error: ", "bold red"), (message, "red")))


class CliError(click.ClickException):
    """A failure shown as one error line, with `exit_code` (2 unless given)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: object = None) -> None:
        show_error(self.format_message())


class UsageProblem(click.UsageError):
    """Bad input: the command's usage line and help hint, then the error in red; exit code 2."""

    def show(self, file: object = None) -> None:
        if self.ctx is not None:
            hint = f"Try '{self.ctx.command_path} --help' for help."
            Console(stderr=True, highlight=False, soft_wrap=True).print(
                Text(f"{self.ctx.get_usage()}\n{hint}\n", style="dim"))
        show_error(self.format_message())


def as_usage_problem(error: click.UsageError, ctx: click.Context) -> click.UsageError:
    """Click's own parsing error, shown the same way as ours (the help shown for no arguments is kept)."""
    if isinstance(error, (UsageProblem, NoArgsIsHelpError)):
        return error
    problem = UsageProblem(error.format_message(), error.ctx or ctx)
    problem.exit_code = error.exit_code
    return problem


def from_library(error: SeglogError, ctx: click.Context) -> click.ClickException:
    """The CLI form of a library error raised while running the command of `ctx`."""
    if isinstance(error, ConfigFileError):  # the file's fault, not the command line's: no usage line
        return CliError(str(error), EXIT_USAGE)
    if isinstance(error, InvalidArgumentError):
        params = _parameters_for(ctx, error.argument)
        if params:
            hint = " and ".join(param.get_error_hint(ctx) for param in params)
            return UsageProblem(f"Invalid value for {hint}: {error}", ctx)
        return UsageProblem(str(error), ctx)
    if isinstance(error, CorruptLogError):
        return CliError(f"{error} (run `seglog check` for a full report, `seglog repair` to fix what can be)",
                        EXIT_DAMAGE)
    if isinstance(error, MetadataError):
        return CliError(str(error), EXIT_DAMAGE)
    return CliError(str(error), EXIT_USAGE)


def _parameters_for(ctx: click.Context, argument: str) -> list[click.Parameter]:
    names = _PARAMETER_ALIASES.get(argument, (argument.replace(" ", "_"),))
    return [param for param in ctx.command.params if param.name in names]


def from_os_error(error: OSError) -> click.ClickException | OSError:
    """An operating system error as one line naming the file; a broken pipe is left to click (`| head`)."""
    if error.errno == errno.EPIPE:
        return error
    where = f": {error.filename}" if error.filename else ""
    return CliError(f"{error.strerror or error}{where}", EXIT_FAILURE)
