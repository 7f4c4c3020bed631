"""Parsing option values with the library's own validation, before anything is opened or created."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import click

from seglog.catalog.config import TopicConfig
from seglog.errors import InvalidArgumentError
from seglog.names import NamespaceName, TopicName, validate_part
from seglog.units import parse_size, readable_size

SIZE_METAVAR = "SIZE"
# The README's "Units" table in one sentence: every size option's help and every bad size's error say it.
SIZE_UNITS = ("K, M, G, T and KiB, MiB, GiB, TiB are binary (1K = 1024 bytes), KB, MB, GB, TB decimal "
              "(1KB = 1000 bytes): '64m' is 64 MiB, '64MB' is 61 MiB")

_TYPED = "seglog.typed"  # ctx.meta key: {parameter name: the text typed} of options a callback converts


def topic_name(name: str) -> str:
    """The full name 'tenant/namespace/topic' of `name`; InvalidNameError names what is wrong."""
    return str(TopicName.parse(name))


def tenant_name(name: str) -> str:
    """`name` if it may be a tenant's name; InvalidNameError names what is wrong."""
    return validate_part(name, kind="tenant name")


def namespace_name(name: str) -> str:
    """The name 'tenant/namespace' of `name`; InvalidNameError names what is wrong."""
    return str(NamespaceName.parse(name))


def topic_settings(**given: Any) -> dict[str, Any]:
    """The settings given (None: not given), checked as create_topic would check them."""
    settings = {name: value for name, value in given.items() if value is not None}
    TopicConfig().updated(settings)
    return settings


def cluster_list(ctx: click.Context, param: click.Parameter, given: str | None) -> list[str] | None:
    """An option's 'a,b' as ['a', 'b'] and '' as [] (the library checks the names and whether an empty list
    is accepted); None when not given."""
    if given is None:
        return None
    clusters = [name.strip() for name in given.split(",")] if given.strip() else []
    if not all(clusters):
        raise click.BadParameter(f"{given!r} is not a comma-separated list of cluster names", ctx, param)
    return clusters


def typed_text(ctx: click.Context, param: click.Parameter) -> str | None:
    """The text typed for `param` when it is known: kept by a callback that converts it (byte_size), else the
    value itself when it is text."""
    typed = ctx.meta.get(_TYPED, {}).get(param.name, ctx.params.get(param.name or ""))
    return typed if isinstance(typed, str) else None


def byte_size(ctx: click.Context, param: click.Parameter, given: str | None) -> int | None:
    """An option's size ('256MiB', '16 MiB', '1048576') in bytes; None when not given."""
    if given is None:
        return None
    ctx.meta.setdefault(_TYPED, {})[param.name] = given
    try:
        return parse_size(given, argument=param.opts[0])
    except InvalidArgumentError as error:
        raise click.BadParameter(f"'{given}': {error.detail or 'not a size'}; accepted: {error.accepted}",
                                 ctx, param) from None


# The data of one send_batch call is indexed by int32 offsets, as in Arrow's binary arrays.
MAX_CALL_BYTES = 2**31 - 1
# What a stored message costs beyond its value, at most (record header and index entries), for estimates.
_MESSAGE_OVERHEAD = 32


def message_size_option(ctx: click.Context, param: click.Parameter, given: str) -> int:
    """`--size` of demo and bench: bytes per message, at least 1, at most what one send_batch call takes."""
    size = byte_size(ctx, param, given)
    assert size is not None  # the option has a default
    if not 1 <= size <= MAX_CALL_BYTES:
        in_bytes = "" if given.strip() == str(size) else f" ({size:,} bytes)"
        raise click.BadParameter(f"'{given}'{in_bytes}; accepted: a size from 1 byte to 2 GiB - 1 bytes, "
                                 f"such as 100 or '1 KiB' ({SIZE_UNITS})", ctx, param)
    return size


def check_throughput_workload(ctx: click.Context, *, messages: int, size: int, chunk: int, writes: int,
                              data: Path) -> None:
    """Refuse, before anything is written, what `seglog demo` or `seglog bench` could not finish: calls of
    `chunk` messages larger than a send_batch call takes, messages that do not fit in memory (they are made
    before they are written), or more bytes than the file system of the data directory `data` has free
    (`writes` times `messages` messages, the baseline's file included)."""
    typed = f"--size {typed_text(ctx, _param(ctx, 'size'))}"
    per_call = min(chunk, messages) * size
    if per_call > MAX_CALL_BYTES:
        raise click.UsageError(f"--chunk {chunk:,} messages of {typed} make {readable_size(per_call)} per "
                               "send_batch call, more than the 2 GiB - 1 bytes one call takes: give a smaller "
                               "--chunk or --size", ctx)
    memory = 2 * messages * size  # the values, and the random bytes they are cut from
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if memory > physical // 2:
        raise click.UsageError(f"--messages {messages:,} of {typed} need {readable_size(memory)} of memory to make "
                               f"them, more than half of this machine's {readable_size(physical)}: give fewer "
                               "--messages or a smaller --size", ctx)
    disk = writes * messages * (size + _MESSAGE_OVERHEAD)
    free = shutil.disk_usage(_existing_ancestor(data)).free
    if disk > free:
        raise click.UsageError(f"--messages {messages:,} of {typed} would write about {readable_size(disk)} to "
                               f"{data}, but its file system has {readable_size(free)} free: give fewer "
                               "--messages or a smaller --size", ctx)


def _param(ctx: click.Context, name: str) -> click.Parameter:
    return next(param for param in ctx.command.params if param.name == name)


def _existing_ancestor(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (where a directory not yet made will be)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
