"""A DoGet ticket of the Flight port: which offsets of which partition to stream, as JSON bytes.

    {"topic": "tenant/ns/name", "partition": 0, "start": 0, "end": 100,
     "read_compacted": false, "fail_on_data_loss": true, "max_horizon": 0, "schema_versions": false}

`topic`, `partition`, `start` and `end` are required, the others optional with those defaults. The range is
[start, end). A ticket that is not that is refused whole, naming the field and what it accepts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from seglog.errors import InvalidArgumentError
from seglog.names import TopicName
from seglog.storage.partition_view import MAX_OFFSET

TICKET = ('JSON {"topic": "tenant/ns/name", "partition": 0, "start": 0, "end": 100} with optional '
          '"read_compacted", "fail_on_data_loss", "schema_versions" (booleans) and "max_horizon" (an offset)')
MAX_TICKET_BYTES = 64 * 1024  # a ticket names a range: anything longer is not one


@dataclass(frozen=True)
class RangeTicket:
    """The offsets [start, end) of a partition, read as storage.range_read.read_range takes them."""

    topic: TopicName
    partition: int
    start: int
    end: int
    read_compacted: bool = False
    fail_on_data_loss: bool = True
    max_horizon: int = 0
    schema_versions: bool = False


_OFFSET = f"an offset from 0 to {MAX_OFFSET}"
_REQUIRED = {"topic": "a topic name 'tenant/namespace/topic'", "partition": "a partition number from 0",
             "start": _OFFSET, "end": _OFFSET}  # and what each accepts
_FLAGS = {"read_compacted": False, "fail_on_data_loss": True, "schema_versions": False}  # and their defaults
_FIELDS = frozenset({*_REQUIRED, "max_horizon", *_FLAGS})


def parse_ticket(data: bytes) -> RangeTicket:
    """The range a ticket names; InvalidArgumentError naming the field and what it accepts."""
    if len(data) > MAX_TICKET_BYTES:
        raise InvalidArgumentError("ticket", f"{len(data)} bytes", f"at most {MAX_TICKET_BYTES} bytes of {TICKET}")
    try:
        fields = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise InvalidArgumentError("ticket", data[:80], TICKET, detail=f"not JSON: {error}") from None
    if not isinstance(fields, dict):
        raise InvalidArgumentError("ticket", fields, TICKET, detail="not a JSON object")
    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        raise InvalidArgumentError("ticket field", unknown[0], f"one of {', '.join(sorted(_FIELDS))}")
    for field, accepted in _REQUIRED.items():
        if field not in fields:
            raise InvalidArgumentError(f"ticket field {field!r}", None, f"{accepted}, required", detail="missing")
    topic = fields["topic"]
    if not isinstance(topic, str):
        raise InvalidArgumentError("ticket field 'topic'", topic, _REQUIRED["topic"])
    name = TopicName.parse(topic)
    partition, start, end = (_integer(fields, field) for field in ("partition", "start", "end"))
    max_horizon = _integer(fields, "max_horizon") if "max_horizon" in fields else 0
    if end < start:
        raise InvalidArgumentError("ticket field 'end'", end, f"an offset at or after 'start' ({start})")
    flags: dict[str, bool] = {}
    for flag, default in _FLAGS.items():
        value = fields.get(flag, default)
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"ticket field {flag!r}", value, "true or false")
        flags[flag] = value
    return RangeTicket(name, partition, start, end, max_horizon=max_horizon, **flags)


def _integer(fields: dict[str, Any], field: str) -> int:
    value = fields[field]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise InvalidArgumentError(f"ticket field {field!r}", value, _REQUIRED.get(field, _OFFSET))
    return value
