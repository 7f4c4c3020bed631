"""Pulsar message ids and seglog offsets (docs/SERVER.md, "Message ids").

A Pulsar id is (ledgerId, entryId, partition, batchIndex), compared by (ledgerId, entryId, batchIndex); a
seglog message is (partition, offset). seglog maps them with one rule that keeps order and round-trips:

    ledgerId   = LEDGER_ID, the same for every message of every partition
    entryId    = the offset of the first message of the entry (a SEND: one message, or one batch)
    batchIndex = offset - entryId inside a batch entry (-1 for an entry of one unbatched message)
    partition  = the seglog partition of a partitioned topic (-1 for a non-partitioned topic)

so offset = entryId + max(batchIndex, 0). Offsets are dense and increasing, so the client's comparison of
ids is the order of offsets."""

from __future__ import annotations

from seglog.server.protocol import pulsar_api_pb2 as api

LEDGER_ID = 0
UINT64_MINUS_ONE = (1 << 64) - 1  # -1 in the protocol's uint64 fields (entryId -1: "before the first entry")
# the id of a SEND_RECEIPT for a duplicate that deduplication dropped: (-1, -1), as Pulsar's broker answers
DUPLICATE_ID = api.MessageIdData(ledger_id=UINT64_MINUS_ONE, entry_id=UINT64_MINUS_ONE)


def message_id(offset: int, partition: int | None = None, batch_index: int | None = None) -> api.MessageIdData:
    """The id of the entry whose first message is at `offset` (as a SEND_RECEIPT carries it); `partition`
    for a message of a partitioned topic sent to a consumer (as Pulsar's broker fills it in there); with
    `batch_index`, of that message of the batch entry."""
    mid = api.MessageIdData(ledger_id=LEDGER_ID, entry_id=offset)
    if partition is not None:
        mid.partition = partition
    if batch_index is not None:
        mid.batch_index = batch_index
    return mid


def signed(value: int) -> int:
    """A uint64 of the protocol as the int64 it means (entryId -1 arrives as 2**64 - 1)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def offset_of(entry_id: int, batch_index: int = -1) -> int:
    """The seglog offset of a message named by Pulsar's (entryId, batchIndex)."""
    return entry_id + max(batch_index, 0)


def split_offset(offset: int, entry_offset: int) -> tuple[int, int]:
    """(entryId, batchIndex) of the message at `offset` in the batch entry starting at `entry_offset`."""
    return entry_offset, offset - entry_offset
