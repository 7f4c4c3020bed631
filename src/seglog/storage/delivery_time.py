"""Delayed delivery's mark on a stored batch (Pulsar's deliver_at_time): the time, in ms since the epoch,
before which shared and key_shared subscriptions do not dispatch the batch's messages.

Pulsar keeps deliver_at_time in an entry's metadata, one time for the entry (its clients send a delayed
message on its own, never batched), so seglog keeps it once per stored batch, as a batch attribute
(docs/FORMAT.md): an in-process `send_batch(..., deliver_at=...)` delays all the messages of its batch."""

from __future__ import annotations

from seglog.storage.partition_view import SegmentView

DELIVER_AT = "pulsar.deliver_at"
_DELIVER_AT_BYTES = DELIVER_AT.encode()


def deliver_at_attributes(deliver_at_ms: int) -> dict[str, str]:
    """The attributes that mark a batch as not to be delivered before `deliver_at_ms`."""
    return {DELIVER_AT: str(deliver_at_ms)}


def deliver_at(view: SegmentView, position: int) -> int | None:
    """The delivery time of the stored batch at `position` of a mapped segment, None for one not delayed."""
    value = view.batch_attribute(position, _DELIVER_AT_BYTES)
    return None if value is None else int(value)
