"""What a replicator sends for the messages its cursor gives it: Pulsar entries with their original metadata,
and which stored batches must not leave (Pulsar's GeoPersistentReplicator filter).

A stored batch that came from another cluster (`replicated_from`) is never sent on: every cluster replicates
its own messages to every other, so nothing loops. One whose `replicate_to` lists clusters other than the
remote stays too (`__local__` included: it lists no remote). The rest is sent with the metadata a consumer
would be given (producer name, sequence id, publish time, event time, key, ordering key, properties, null
value, chunk fields), plus `replicated_from` = the local cluster.

Messages go as batch entries of the messages that follow each other and agree on what Pulsar keeps per
entry: producer name, publish time, `replicate_to`, and sequence ids one apart (message i of a batch entry
has its first's plus i). So a stored batch whose messages share their publish time goes as one entry, one
written in-process with different timestamps as an entry per run of equal ones, and unbatched messages a
producer sent within the same millisecond as one entry, not one each: every message keeps every field it
has, and the receiving cluster stores a batch of them for the cost of a few unbatched ones (Pulsar's
replicator forwards each entry as it is, batching off; packing them is seglog's choice). A stored batch is
never cut: it joins the entry before it only if the whole of it fits within PACK_MESSAGES_MAX messages and
PACK_BYTES_MAX bytes. A chunk is an entry of its own, and so is an encrypted entry, whole, with the payload
and fields it was stored with (server/protocol/encryption.py): it cannot be unpacked, packed or cut.

An entry's messages are at consecutive origin offsets, and its SEND carries the origin offset of its last
as its sequence id, which the remote deduplicates on: of a SEND that reaches past what the remote stored,
it stores only the messages after it (a replicator that sends again may pack a run otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from seglog._core._messages import Message
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import pack
from seglog.server.protocol.encryption import entry_metadata
from seglog.server.protocol.metadata import (
    CHUNK,
    ENCRYPTION,
    MARKER_PRODUCER,
    PRODUCER,
    REPLICATE_TO,
    REPLICATED_FROM,
    message_metadata,
    sequence_id,
)
from seglog.subscriptions.delivery import Piece

# Packing messages of different stored batches into one entry stops at pulsar-client's own batching limits
# (batchingMaxMessages, batchingMaxBytes): far below any broker's maximum message size
PACK_MESSAGES_MAX = 1_000
PACK_BYTES_MAX = 128 * 1024


@dataclass(slots=True)  # (not frozen: a frozen dataclass took 1.1 µs to make, one a message unbatched)
class Entry:
    """One SEND to the remote. A marker carries no messages (offsets empty) and the origin offset before it
    as its sequence id."""
    offsets: np.ndarray  # the origin offsets of its messages: consecutive
    metadata: bytes
    payload: bytes = b""
    marker_sequence_id: int | None = None
    starts: list[int] | None = None  # of a batch entry: where each message's item starts in the payload

    @property
    def sequence_id(self) -> int:
        return int(self.offsets[-1]) if self.marker_sequence_id is None else self.marker_sequence_id

    def split(self, at: int) -> tuple[Entry, Entry]:
        """This batch entry as two: its messages before origin offset `at` (one at least), and the rest (one
        at least), for a marker to go between them."""
        assert self.starts is not None, "only a batch entry holds more than one message"
        count = at - int(self.offsets[0])
        assert 0 < count < len(self.offsets), f"offset {at} does not cut entry {self.offsets[[0, -1]]}"
        head, tail = api.MessageMetadata.FromString(self.metadata), api.MessageMetadata.FromString(self.metadata)
        head.num_messages_in_batch = count
        tail.num_messages_in_batch = len(self.offsets) - count
        tail.sequence_id = head.sequence_id + count
        cut = self.starts[count]
        return (Entry(self.offsets[:count], head.SerializeToString(), self.payload[:cut], starts=self.starts[:count]),
                Entry(self.offsets[count:], tail.SerializeToString(), self.payload[cut:],
                      starts=[start - cut for start in self.starts[count:]]))


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


def entries(pieces: list[Piece], local: str, remote: str) -> tuple[list[Entry], list[np.ndarray]]:
    """The entries that carry to `remote` the messages of `pieces` (a take's, in offset order) that leave
    for it, and the offsets of those that stay (leaves_for). (A stored batch's attributes are read with its
    messages: reading them first as well cost a replicator of unbatched messages a tenth of its takes, and a
    batch that stays is rarely read: those replicated here are acknowledged unread.)"""
    packer = _Packer(local)
    staying: list[np.ndarray] = []
    for piece in pieces:
        messages = piece.messages()
        attributes = messages[0].batch_attributes
        if not leaves_for(attributes, remote):
            staying.append(piece.offsets)
        elif ENCRYPTION in attributes:
            packer.add_encrypted(piece)
        else:
            packer.add(messages, piece.base)
    return packer.finish(), staying


class _Packer:
    """Makes entries of the messages it is given, in offset order (the module's doc says which go
    together)."""

    def __init__(self, local: str) -> None:
        self.local = local
        self.entries: list[Entry] = []
        self.run: list[Message] = []  # the messages of the entry being made
        self.first_base = 0  # the first offset of the stored batch of run[0]
        self.first_sequence_id = 0  # run[0]'s
        self.last_base = 0  # the first offset of the stored batch of run[-1]
        self.attributes: Mapping[str, str] = {}  # of run[0]'s stored batch
        self.size = 0  # bytes of value in the run

    def add(self, messages: list[Message], base: int) -> None:
        """The messages taken of the stored batch that starts at offset `base`."""
        attributes = messages[0].batch_attributes
        if CHUNK in attributes:  # (a piece of a large message, an entry of its own)
            self._close()
            self._start(messages[0], base, attributes)
            self._close()
            return
        # (the messages of another stored batch join a run only if all of them fit in it: a stored batch is
        # never cut, so a run may take only what it can hold whole)
        fits = not self.run or (len(self.run) + len(messages) <= PACK_MESSAGES_MAX and self.size + sum(
            len(message.value or b"") for message in messages) <= PACK_BYTES_MAX)
        for message in messages:
            run = self.run
            if run and self._joins(message, run[-1], base, attributes, fits):
                run.append(message)
                self.size += len(message.value or b"")
                self.last_base = base
            else:
                self._close()
                self._start(message, base, attributes)

    def add_encrypted(self, piece: Piece) -> None:
        """The encrypted entry stored in `piece`'s batch: an entry of its own, whole (all of its offsets, should
        the piece hold only some)."""
        self._close()
        offsets = np.arange(piece.base, piece.base + piece.count, dtype=np.int64)
        first = piece.with_offsets(offsets[:1]).messages()[0]
        listed = first.batch_attributes.get(REPLICATE_TO)
        self.entries.append(Entry(offsets, entry_metadata(first, self.local, listed.split(",") if listed else []),
                                  first.value or b""))

    def _joins(self, message: Message, last: Message, base: int, attributes: Mapping[str, str], fits: bool) -> bool:
        if message.offset != last.offset + 1 or message.timestamp != last.timestamp:
            return False
        if base == self.last_base:  # (the same stored batch: the same producer, its sequence ids one apart)
            return True
        return (fits and attributes.get(PRODUCER) == self.attributes.get(PRODUCER)
                and attributes.get(REPLICATE_TO) == self.attributes.get(REPLICATE_TO)
                and sequence_id(message, base) == self.first_sequence_id + len(self.run))

    def _start(self, message: Message, base: int, attributes: Mapping[str, str]) -> None:
        self.run = [message]
        self.first_base = self.last_base = base
        self.first_sequence_id = sequence_id(message, base)
        self.attributes = attributes
        self.size = len(message.value or b"")

    def _close(self) -> None:
        """Make the entry of the run, if there is one."""
        run = self.run
        if not run:
            return
        self.run = []
        first = run[0]
        offsets = np.arange(first.offset, first.offset + len(run), dtype=np.int64)
        listed = self.attributes.get(REPLICATE_TO)
        replicate_to = listed.split(",") if listed else []
        if len(run) == 1:
            self.entries.append(Entry(offsets, message_metadata(first, self.first_base, self.local, replicate_to),
                                      first.value or b""))
            return
        metadata = api.MessageMetadata(producer_name=self.attributes.get(PRODUCER, ""),
                                       sequence_id=self.first_sequence_id, publish_time=first.timestamp,
                                       num_messages_in_batch=len(run), replicated_from=self.local,
                                       replicate_to=replicate_to)
        payload, starts = pack(run, self.first_sequence_id)
        self.entries.append(Entry(offsets, metadata.SerializeToString(), payload, starts=starts))

    def finish(self) -> list[Entry]:
        self._close()
        return self.entries
