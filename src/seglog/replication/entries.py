"""What a replicator sends for the messages its cursor gives it: Pulsar entries with their original metadata,
and which stored batches must not leave (Pulsar's GeoPersistentReplicator filter).

A stored batch that came from another cluster (`replicated_from`) is never sent on: every cluster replicates
its own messages to every other, so nothing loops. One whose `replicate_to` lists clusters other than the
remote stays too (`__local__` included: it lists no remote). The rest is sent with the metadata a consumer
would be given (producer name, sequence id, publish time, event time, key, ordering key, properties, null
value, chunk fields), plus `replicated_from` = the local cluster. A stored batch whose messages share their
publish time goes as one batch entry; one whose messages were stored with different timestamps (written
in-process) goes as an entry per run of equal timestamps, so each keeps its publish time. Each entry's
SEND carries the origin offset of its last message as its sequence id, which the remote deduplicates on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from seglog._core._messages import Message
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import pack
from seglog.server.protocol.metadata import (
    CHUNK,
    MARKER_PRODUCER,
    PRODUCER,
    REPLICATE_TO,
    REPLICATED_FROM,
    message_metadata,
    sequence_id,
)
from seglog.subscriptions.dispatch import Piece


@dataclass(slots=True)  # (not frozen: a frozen dataclass took 1.1 µs to make, one a message unbatched)
class Entry:
    """One SEND to the remote. A marker carries no messages (offsets empty) and the origin offset before it
    as its sequence id."""
    offsets: np.ndarray  # the origin offsets of its messages
    metadata: bytes
    payload: bytes = b""
    marker_sequence_id: int | None = None

    @property
    def sequence_id(self) -> int:
        return int(self.offsets[-1]) if self.marker_sequence_id is None else self.marker_sequence_id


def marker(after: int, marker_type: int, payload: bytes, local: str, remote: str, now: int) -> Entry:
    """A marker entry (Pulsar's producer `pulsar.marker`, `marker_type` set) sent to `remote` once every
    message before origin offset `after` was: the receiving server hands it to its replication instead of
    storing it."""
    metadata = api.MessageMetadata(producer_name=MARKER_PRODUCER, sequence_id=0, publish_time=now,
                                   marker_type=marker_type, replicated_from=local)
    metadata.replicate_to.append(remote)
    return Entry(np.empty(0, dtype=np.int64), metadata.SerializeToString(), payload, after - 1)


def leaves_for(attributes: Mapping[str, str], remote: str) -> bool:
    """Whether a stored batch with these attributes is replicated to `remote`."""
    if REPLICATED_FROM in attributes:
        return False
    listed = attributes.get(REPLICATE_TO)
    return not listed or remote in listed.split(",")


def entries(piece: Piece, local: str, remote: str) -> list[Entry] | None:
    """The entries that carry the messages of `piece` to `remote`; None if its stored batch does not leave
    for it (leaves_for). (Its attributes are read with its messages: reading them first as well cost a
    replicator of unbatched messages a tenth of its takes, and a batch that stays is rarely read: those
    replicated here are acknowledged unread.)"""
    messages, offsets = piece.messages(), piece.offsets
    if not leaves_for(messages[0].batch_attributes, remote):
        return None
    if len(messages) == 1:  # (an unbatched message: most entries of a topic of them, so no run search)
        return [_entry(messages, offsets, piece.base, local)]
    runs = []
    start = 0
    for end in range(1, len(messages) + 1):
        if end == len(messages) or messages[end].timestamp != messages[start].timestamp:
            runs.append(_entry(messages[start:end], offsets[start:end], piece.base, local))
            start = end
    return runs


def _entry(run: list[Message], offsets: np.ndarray, base_offset: int, local: str) -> Entry:
    first = run[0]
    listed = first.batch_attributes.get(REPLICATE_TO)
    replicate_to = listed.split(",") if listed else []
    if len(run) == 1 or CHUNK in first.batch_attributes:  # (a chunk is an entry of one message)
        return Entry(offsets, message_metadata(first, base_offset, local, replicate_to), first.value or b"")
    entry = api.MessageMetadata(producer_name=first.batch_attributes.get(PRODUCER, ""),
                                sequence_id=sequence_id(first, base_offset), publish_time=first.timestamp,
                                num_messages_in_batch=len(run), replicated_from=local, replicate_to=replicate_to)
    return Entry(offsets, entry.SerializeToString(), pack(run, base_offset))
