"""What the Flight port's writes ask for, as JSON bytes: a DoPut's descriptor (one task attempt's staged rows),
and the bodies of the actions "publish" and "abort" (storage/staged_writes.py says what a write is).

    DoPut   FlightDescriptor.for_command({"stage": WRITE, "task": 3, "attempt": 0, "topic": "tenant/ns/name"})
    publish {"stage": WRITE, "topic": "tenant/ns/name", "attempts": [[0, 0], [1, 2]], "sink": null, "batch_id": -1}
    abort   {"stage": WRITE}

WRITE is a batch write's id (32 hex digits) or a micro-batch's, SINK-BATCH; a publish of a micro-batch names its
sink (16 hex digits) and batch id, which the WRITE must be made of. A request that is not that is refused whole,
naming the field and what it accepts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from seglog.errors import InvalidArgumentError
from seglog.storage.staged_writes import MAX_TASK, check_sink_id, check_write_id, micro_batch_write_id

PUT = '{"stage": WRITE, "task": 0, "attempt": 0, "topic": "tenant/ns/name"}'
PUBLISH = ('{"stage": WRITE, "topic": "tenant/ns/name", "attempts": [[task, attempt], ...], "sink": SINK or null, '
           '"batch_id": N}')
ABORT = '{"stage": WRITE}'
MAX_REQUEST_BYTES = 1 << 20  # a publish names one attempt per task: a million bytes names tens of thousands


@dataclass(frozen=True)
class PutDescriptor:
    """One task attempt's rows, staged for write `write_id` to `topic`."""

    write_id: str
    task: int
    attempt: int
    topic: str


@dataclass(frozen=True)
class PublishRequest:
    """The committed attempts of write `write_id`, (task, attempt) in any order, to publish to `topic`: once per
    `batch_id` of streaming sink `sink` when one is named."""

    write_id: str
    topic: str
    attempts: tuple[tuple[int, int], ...]
    sink: str | None
    batch_id: int


def parse_put(data: bytes) -> PutDescriptor:
    """A DoPut's descriptor command; InvalidArgumentError naming the field and what it accepts."""
    fields = _fields(data, "DoPut descriptor", PUT, {"stage", "task", "attempt", "topic"})
    return PutDescriptor(check_write_id(fields["stage"]), _number(fields, "task"), _number(fields, "attempt"),
                         _topic(fields))


def parse_publish(data: bytes) -> PublishRequest:
    """The body of the action "publish"; InvalidArgumentError naming the field and what it accepts."""
    fields = _fields(data, "publish action", PUBLISH, {"stage", "topic", "attempts", "sink", "batch_id"})
    write_id = check_write_id(fields["stage"])
    attempts = fields["attempts"]
    accepted = "a list of [task, attempt] pairs of integers, one per task"
    if not isinstance(attempts, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in attempts):
        raise InvalidArgumentError("attempts", attempts, accepted)
    pairs = tuple((_number({"task": task}, "task"), _number({"attempt": attempt}, "attempt"))
                  for task, attempt in attempts)
    tasks = [task for task, _ in pairs]
    if len(set(tasks)) != len(tasks):
        raise InvalidArgumentError("attempts", attempts, accepted, detail="a task is named twice")
    sink, batch_id = fields["sink"], fields["batch_id"]
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < -1:
        raise InvalidArgumentError("batch_id", batch_id, "a micro-batch's id (an integer from 0), or -1 without a sink")
    if sink is not None and write_id != micro_batch_write_id(check_sink_id(sink), batch_id):
        raise InvalidArgumentError("stage", write_id, f"micro-batch {batch_id} of sink {sink}: "
                                   f"{micro_batch_write_id(sink, batch_id)}")
    return PublishRequest(write_id, _topic(fields), pairs, sink, batch_id)


def parse_abort(data: bytes) -> str:
    """The write id of the action "abort"; InvalidArgumentError naming the field and what it accepts."""
    return check_write_id(_fields(data, "abort action", ABORT, {"stage"})["stage"])


def _fields(data: bytes, what: str, form: str, names: set[str]) -> dict[str, Any]:
    if len(data) > MAX_REQUEST_BYTES:
        raise InvalidArgumentError(what, f"{len(data)} bytes", f"at most {MAX_REQUEST_BYTES} bytes of {form}")
    try:
        fields = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise InvalidArgumentError(what, data[:80], f"JSON {form}", detail=f"not JSON: {error}") from None
    if not isinstance(fields, dict):
        raise InvalidArgumentError(what, fields, f"JSON {form}", detail="not a JSON object")
    unknown = sorted(set(fields) - names)
    if unknown:
        raise InvalidArgumentError(f"{what} field", unknown[0], f"one of {', '.join(sorted(names))}")
    missing = sorted(names - set(fields))
    if missing:
        raise InvalidArgumentError(what, fields, f"JSON {form}", detail=f"it has no {missing[0]!r}")
    return fields


def _number(fields: dict[str, Any], field: str) -> int:
    value = fields[field]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TASK:
        raise InvalidArgumentError(field, value, f"an integer from 0 to {MAX_TASK}")
    return value


def _topic(fields: dict[str, Any]) -> str:
    topic = fields["topic"]
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError("topic", topic, "a topic name, 'name' or 'tenant/namespace/name'")
    return topic
