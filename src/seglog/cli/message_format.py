"""Messages as `seglog consume` prints them.

value: the value decoded as UTF-8, undecodable bytes replaced by U+FFFD (an empty line for a null value).
json: one object per line: partition, offset, timestamp (ms since the epoch), event_time (ms, or null when
the producer gave none), key (null when none), value (null for a null value), properties (an object of
strings). key and value are strings: the bytes decoded as UTF-8 when they are valid UTF-8, else base64;
key_encoding and value_encoding say which ('utf-8' or 'base64'), so no byte is ever lost or changed."""

from __future__ import annotations

import base64
import json
from typing import Any

from seglog import Message

FORMATS = ("value", "json")


def as_value(message: Message) -> str:
    return "" if message.value is None else message.value.decode("utf-8", errors="replace")


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
