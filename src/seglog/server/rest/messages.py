"""A message as Pulsar's admin API answers it (peek, examine): the payload as the body
(application/octet-stream) and its metadata in headers, the ones Pulsar's admin clients read:

    X-Pulsar-Message-ID                  ledgerId:entryId, `0:offset` by the message-id rule (`0:offset:partition`
                                         for a partition of a partitioned topic)
    X-Pulsar-Publish-Time                the timestamp, ISO 8601 in UTC with milliseconds
    X-Pulsar-Event-Time                  the event time, likewise (absent when the message has none)
    X-Pulsar-Partition-Key               the key (base64 with X-Pulsar-Partition-Key-B64-Encoded: true when it
                                         is not UTF-8)
    X-Pulsar-Property                    the properties as a JSON object
    X-Pulsar-Property-<name>             each property (older clients read these)

`message_headers` and `parse_time` are the two halves of the time format: what one writes the other reads back
to the same millisecond."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from typing import Any

from seglog._core._messages import Message
from seglog.server.protocol.message_ids import LEDGER_ID

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


def format_time(ms: int) -> str:
    """ms since the epoch as ISO 8601 with milliseconds ('2024-05-01T12:00:00.123Z'); the bare integer
    where a datetime cannot hold it."""
    try:
        moment = _EPOCH + ms * _MS
    except OverflowError:
        return str(ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(text: str) -> int:
    """format_time's text back to ms since the epoch."""
    if text.lstrip("-").isdigit():
        return int(text)
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _MS


def message_headers(message: Message, partitioned: bool) -> dict[str, str]:
    message_id = f"{LEDGER_ID}:{message.offset}" + (f":{message.partition}" if partitioned else "")
    headers = {"X-Pulsar-Message-ID": message_id, "X-Pulsar-Publish-Time": format_time(message.timestamp),
               "X-Pulsar-Property": json.dumps(message.properties)}
    if message.event_time is not None:
        headers["X-Pulsar-Event-Time"] = format_time(message.event_time)
    key = message.key
    if key is not None:
        try:
            headers["X-Pulsar-Partition-Key"] = key.decode("ascii")
        except UnicodeDecodeError:
            headers["X-Pulsar-Partition-Key"] = base64.b64encode(key).decode("ascii")
            headers["X-Pulsar-Partition-Key-B64-Encoded"] = "true"
    for name, value in message.properties.items():
        if name.isascii() and name.isprintable() and value.isascii() and value.isprintable():
            headers[f"X-Pulsar-Property-{name}"] = value
    return headers


def message_json(message: Message) -> dict[str, Any]:
    """seglog's exact form of a message (the seglog routes' peek): every field, key and value in base64."""
    return {"partition": message.partition, "offset": message.offset, "timestamp": message.timestamp,
            "eventTime": message.event_time,
            "key": _base64(message.key), "value": _base64(message.value), "properties": message.properties}


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
