"""How the CLI reports failures: one red line on stderr (after the usage line for bad input), an exit code,
never a traceback or a Python repr. Library errors keep their own words, but the option they concern is named
as on the command line ('--segment-size', not 'segment_size'), with the value as it was typed.

Exit codes, the same for every command (docs/CLI.md, Exit codes):

- 0: done.
- 1: the command was right but failed: damage found (check, repair, a corrupt batch met while reading), a
  name that exists already, something in use or locked by another process, a port in use, an operating
  system error (permission denied, disk full: shown with the file), a server that cannot be reached.
- 2: the command line is wrong: click's usage errors, a value not accepted, a name that names nothing (no
  such topic, tenant, namespace, subscription or data directory).
- 130: interrupted by Ctrl-C (SIGINT), 128 + the signal's number as a shell reports it."""

from __future__ import annotations

import errno
import re
from pathlib import Path

import click
from click.exceptions import NoArgsIsHelpError
from rich.console import Console
from rich.text import Text

from seglog.cli.options import SIZE_METAVAR, SIZE_UNITS, typed_text
from seglog.cli.serve_record import recorded_server
from seglog.errors import (
    ConfigFileError,
    CorruptLogError,
    InvalidArgumentError,
    MetadataError,
    NotFoundError,
    OffsetOutOfRangeError,
    PartitionLockedError,
    SeglogError,
    TopicNotFoundError,
)

EXIT_FAILURE = 1
EXIT_DAMAGE = EXIT_FAILURE
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Library errors that mean the command line named something that is not there: usage errors.
_NAMES_NOTHING = (TopicNotFoundError, NotFoundError, OffsetOutOfRangeError)

# Library argument names that are not simply the parameter's name with '_' for ' ': the parameters they may be
# (a command has one of them).
_PARAMETER_ALIASES = {
    "topic name": ("name", "topic"),
    "tenant name": ("name", "tenant"),
    "tenant": ("name", "tenant"),
    "cluster name": ("cluster",),
    "namespace name": ("namespace",),
    "message TTL": ("message_ttl",),
    "compaction threshold": ("threshold",),
    "type": ("quota_type",),
    # ClusterData's keys: the options of seglog clusters create and update
    "serviceUrl": ("url",),
    "serviceUrlTls": ("url_secure",),
    "brokerServiceUrl": ("broker_url",),
    "brokerServiceUrlTls": ("broker_url_secure",),
    "authenticationPlugin": ("auth_plugin",),
    "authenticationParameters": ("auth_parameters",),
}

# The Python API's words in library messages, and what a command line user types instead.
# A message that says already which units a size is in (parse_size's accepted, Pulsar's MB of retention).
_UNITS_SAID = re.compile(r"binary|decimal|1 MB = ")

# A library argument named in words ('message TTL'), which the message keeps, not in Python ('segment_size',
# 'serviceUrl'), which the option's name replaces.
_IN_WORDS = re.compile(r"[a-z]+( [A-Za-z]+)*")

_API_WORDS = {
    "delete with force (the force argument, or seglog topics delete --force)": "delete with --force",
}


def show_error(message: str) -> None:
    """Print `message` as an error on stderr ('Error: ' in bold red), unwrapped so paths stay whole."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text.assemble(("Error: ", "bold red"), (message, "red")))


class CliError(click.ClickException):
    """A wrong command line, shown as one error line; exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: object = None) -> None:
        show_error(self.format_message())


class CliFailure(CliError):
    """A right command that failed (damage, in use, exists already, unreachable), one error line; exit code 1."""

    exit_code = EXIT_FAILURE


class Interrupted(click.ClickException):
    """Ctrl-C (SIGINT): one line saying so (and what the command left, when it says), exit code 130."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, message: str = "the command was stopped before it finished") -> None:
        super().__init__(message)

    def show(self, file: object = None) -> None:
        console = Console(stderr=True, highlight=False, soft_wrap=True)
        console.print(Text.assemble(("Interrupted: ", "bold yellow"), (self.format_message(), "yellow")))


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
    return UsageProblem(error.format_message(), error.ctx or ctx)


def from_library(error: SeglogError, ctx: click.Context, data: Path | None = None) -> click.ClickException:
    """The CLI form of a library error raised while running the command of `ctx` on the data directory
    `data` (None: on a server, or none)."""
    if isinstance(error, ConfigFileError):  # the file's fault, not the command line's: no usage line
        return CliFailure(str(error))
    if isinstance(error, InvalidArgumentError):
        return _invalid_value(error, ctx)
    if isinstance(error, _NAMES_NOTHING):
        return CliError(in_cli_words(str(error)))
    if isinstance(error, CorruptLogError):
        return CliFailure(f"{error} (run `seglog check` for a full report, `seglog repair` to fix what can be)")
    if isinstance(error, MetadataError):
        return CliFailure(str(error))
    if isinstance(error, PartitionLockedError) and data is not None:
        return CliFailure(_locked(error, data))
    return CliFailure(in_cli_words(str(error)))


def in_cli_words(message: str) -> str:
    """A library message with the Python API's words (the force argument) replaced by the command line's."""
    for api, cli in _API_WORDS.items():
        message = message.replace(api, cli)
    return message


def _invalid_value(error: InvalidArgumentError, ctx: click.Context) -> click.UsageError:
    """'Invalid value for '--option': VALUE: why; accepted: what', VALUE as typed and never a Python repr."""
    params = _parameters_for(ctx, error.argument)
    reason = f": {error.detail}" if error.detail else ""
    if not params:
        return UsageProblem(in_cli_words(f"invalid {error.argument} {shown(error.value)}{reason}; accepted: "
                                         f"{error.accepted}"), ctx)
    hint = " and ".join(param.get_error_hint(ctx) for param in params)
    value = _typed(ctx, params[0]) if len(params) == 1 else None
    named = f"invalid {error.argument} " if _IN_WORDS.fullmatch(error.argument) else ""
    message = (f"Invalid value for {hint}: {named}{value or shown(error.value)}{reason}; accepted: "
               f"{error.accepted}")
    if any(param.metavar == SIZE_METAVAR for param in params) and not _UNITS_SAID.search(message):
        message += f" ({SIZE_UNITS})"
    return UsageProblem(in_cli_words(message), ctx)


def _typed(ctx: click.Context, param: click.Parameter) -> str | None:
    """What was typed for `param`, quoted, when it is known."""
    typed = typed_text(ctx, param)
    return None if typed is None else f"'{typed}'"


def shown(value: object) -> str:
    """A value in an error message as a user would write it: 'text', 12, a,b (a list), key=value, ..."""
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, bytes):
        return f"'{value.decode('utf-8', errors='backslashreplace')}'"
    if isinstance(value, dict):
        return ", ".join(f"{key}={_bare(item)}" for key, item in value.items()) or "nothing"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(_bare(item) for item in value) or "nothing"
    if value is None:
        return "nothing"
    return str(value)


def _bare(value: object) -> str:
    """An item of a list or dict: as shown, without quotes."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value if isinstance(value, str) else shown(value)


def _parameters_for(ctx: click.Context, argument: str) -> list[click.Parameter]:
    names = _PARAMETER_ALIASES.get(argument, (argument.replace(" ", "_"),))
    return [param for param in ctx.command.params if param.name in names]


def _locked(error: PartitionLockedError, data: Path) -> str:
    """The writer-lock refusal; when the holder is the `seglog serve` of this data directory, it says so and
    where to produce instead."""
    server = recorded_server(data)
    if server is None or server.pid != error.holder_pid:
        return str(error)
    return (f"`seglog serve` (process {server.pid}) serves the data directory {data} and writes its partitions: "
            f"produce through it, at {server.broker_url} (any Pulsar client), or stop it first; seglog allows "
            f"one writing process per partition (writer lock {error.lock_path})")


def from_os_error(error: OSError) -> click.ClickException | OSError:
    """An operating system error as one line naming the file; a broken pipe is left to click (`| head`)."""
    if error.errno == errno.EPIPE:
        return error
    where = f": {error.filename}" if error.filename else ""
    return CliFailure(f"{error.strerror or error}{where}")
