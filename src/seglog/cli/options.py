"""Parsing option values with the library's own validation, before anything is opened or created."""

from __future__ import annotations

from typing import Any

import click

from seglog.catalog.config import TopicConfig
from seglog.errors import InvalidArgumentError
from seglog.names import NamespaceName, TopicName, validate_part
from seglog.units import parse_size


def topic_name(name: str) -> str:
    """The full name 'tenant/namespace/topic' of `name`; InvalidNameError names what is wrong."""
    return str(TopicName.parse(name))


def tenant_name(name: str) -> str:
    """`name` if it may be a tenant's name; InvalidNameError names what is wrong."""
    return validate_part(name, kind="tenant name")


def namespace_name(name: str) -> str:
    """The name 'tenant/namespace' of `name`; InvalidNameError names what is wrong."""
    return str(NamespaceName.parse(name))


def message_size(text: str) -> int:
    """Bytes per message: '100', '1 KiB', '4K' (InvalidArgumentError for 'size' otherwise)."""
    return parse_size(text, argument="size")


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


def byte_size(ctx: click.Context, param: click.Parameter, given: str | None) -> int | None:
    """An option's size ('256MiB', '16 MiB', '1048576') in bytes; None when not given."""
    if given is None:
        return None
    try:
        return parse_size(given, argument=param.opts[0])
    except InvalidArgumentError as error:
        raise click.BadParameter(str(error), ctx, param) from None
