"""Messages as `seglog consume` prints them.

value: the value as text, one a line (an empty line for a null value). To a terminal, a value that is not
printable UTF-8 text (undecodable bytes, control characters that would move the cursor or change colours) is
shown as an escape, Python-style: `\\x00`, `\\n`, `\\\\` for a backslash, printable characters as they are;
to a pipe or a file, the value decoded as UTF-8 with undecodable bytes replaced by U+FFFD (newlines
and escape sequences kept).
json: one object per line: partition, offset, timestamp (ms since the epoch), event_time (ms, or null when
the producer gave none), key (null when none), value (null for a null value), properties (an object of
strings). key and value are strings: the bytes decoded as UTF-8 when they are valid UTF-8, else base64;
key_encoding and value_encoding say which ('utf-8' or 'base64'), so no byte is ever lost or changed.
raw: the value's bytes exactly as stored, each followed by a newline (for pipes; values holding newlines
cannot be told apart)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import click

from seglog import Message
from seglog.cli.output import err, out

FORMATS = ("value", "json")  # as lines of text (FORMATTERS)
PRINTED_FORMATS = (*FORMATS, "raw")  # as MessagePrinter prints them

# C0 and C1 control characters and DEL, except tab: a terminal acts on them instead of showing them.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def as_value(message: Message) -> str:
    """The value as text, undecodable bytes replaced (what a pipe gets)."""
    return "" if message.value is None else message.value.decode("utf-8", errors="replace")


def as_readable_value(message: Message) -> tuple[str, bool]:
    """The value for a terminal, and whether it had to be escaped (it is not printable UTF-8 text)."""
    if message.value is None:
        return "", False
    try:
        text = message.value.decode("utf-8")
        if not _CONTROL.search(text):
            return text, False
    except UnicodeDecodeError:
        pass
    text = message.value.replace(b"\\", b"\\\\").decode("utf-8", errors="backslashreplace")
    return _CONTROL.sub(lambda match: _NAMED_ESCAPES.get(match[0], f"\\x{ord(match[0]):02x}"), text), True


def as_raw(message: Message) -> bytes:
    return b"" if message.value is None else message.value


def as_json(message: Message) -> str:
    key, key_encoding = _text(message.key)
    value, value_encoding = _text(message.value)
    document: dict[str, Any] = {
        "partition": message.partition, "offset": message.offset, "timestamp": message.timestamp,
        "event_time": message.event_time, "key": key, "key_encoding": key_encoding, "value": value,
        "value_encoding": value_encoding, "properties": message.properties or {},
    }
    return json.dumps(document, ensure_ascii=False)


def _text(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


FORMATTERS = {"value": as_value, "json": as_json}


BINARY_NOTE = ("[yellow]Values that are not printable UTF-8 text are shown with \\x escapes[/] (\\\\ for a "
               "backslash): --format json gives their bytes (base64), --format raw writes them as they are.")


class MessagePrinter:
    """Prints messages on stdout in one of PRINTED_FORMATS; to a terminal, `value` escapes what is not printable text,
    with a note on stderr (once) naming the formats that keep every byte."""

    def __init__(self, output_format: str) -> None:
        self._format = output_format
        self._terminal = out().is_terminal
        self._noted = False

    def print(self, messages: list[Message]) -> None:
        if self._format == "raw":
            click.echo(b"".join(as_raw(message) + b"\n" for message in messages), nl=False)
        elif self._format == "json":
            click.echo("\n".join(map(as_json, messages)))
        elif not self._terminal:  # color=True: click would cut ANSI sequences out of the values
            click.echo("\n".join(map(as_value, messages)), color=True)
        else:
            shown = [as_readable_value(message) for message in messages]
            click.echo("\n".join(text for text, _ in shown))
            if not self._noted and any(escaped for _, escaped in shown):
                self._noted = True
                err().print(BINARY_NOTE, soft_wrap=True)
