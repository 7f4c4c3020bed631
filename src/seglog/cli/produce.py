"""`seglog produce`: write one message (--value) or one message per line of stdin."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import BinaryIO

import click

from seglog.cli.base import SeglogCommand
from seglog.cli.datadir import DataDir, pass_data
from seglog.cli.output import err, out


def _properties(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> dict[str, str] | None:
    properties = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx, param)
        if not _is_utf8(item):
            raise click.BadParameter(f"{os.fsencode(item)!r} is not UTF-8 text, which properties are", ctx, param)
        properties[key] = value
    return properties or None


def _is_utf8(text: str) -> bool:
    """Whether the argument was UTF-8 on the command line (Python decodes other bytes to lone surrogates)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _as_bytes(ctx: click.Context, param: click.Parameter, given: str | None) -> bytes | None:
    """The argument's bytes exactly as they were on the command line, UTF-8 or not."""
    return None if given is None else os.fsencode(given)


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """Each line of a binary stream without its line ending ('\\n' or '\\r\\n'); a last line without one counts."""
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


@click.command(cls=SeglogCommand, short_help="Write --value, or each line of stdin, as messages.")
@click.argument("topic")
@click.option("--value", "-v", callback=_as_bytes, help="Send this one message instead of reading stdin.")
@click.option("--key", "-k", callback=_as_bytes,
              help="Message key; chooses the partition by hash unless --partition is given.")
@click.option("--partition", "-p", type=int, help="Partition to write to. [default: by key, else round robin]")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", callback=_properties,
              help="A message property; repeat for more.")
@pass_data
def produce(data: DataDir, topic: str, value: bytes | None, key: bytes | None, partition: int | None,
            properties: dict[str, str] | None) -> None:
    """Write messages to TOPIC: --value, or each line of stdin as one message.

    Lines are sent as bytes, without their line ending; an empty line is an empty message. Every message
    gets the same --key, --partition and --property values. --value and --key are sent as the bytes given,
    UTF-8 or not; properties must be UTF-8 text.
    """
    stdin = sys.stdin.buffer  # click.get_binary_stream is deprecated from click 8.5
    with data.open() as log:
        handle = log.topic(topic)
        if partition is not None:
            handle.partition_directory(partition)  # refused here, with the accepted range, before any write
        if value is None and stdin.isatty():
            err().print("[dim]Reading messages from stdin, one per line; end with Ctrl-D.[/]")
        values = iter([value]) if value is not None else _lines(stdin)
        first = last = None
        count = 0
        with handle.producer() as producer:
            send = producer.send
            for item in values:
                last = send(item, key=key, properties=properties, partition=partition)
                if first is None:
                    first = last
                count += 1
            producer.flush()
    if not count:
        out().print(f"No messages written to {handle.name} (stdin was empty).")
        return
    out().print(f"[green]Wrote {count:,} message{'s' if count > 1 else ''}[/] to {handle.name}: "
                f"first {first!r}, last {last!r}")
