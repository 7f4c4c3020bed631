"""End-to-end encrypted entries (docs/SERVER.md, "End-to-end encryption"): what the server keeps of them and
gives back.

A producer with encryption keys encrypts each entry's payload (one message, or a whole batch after
compression) with a data key, and sends that key encrypted for each consumer key it names, in the entry's
MessageMetadata. The broker cannot read the payload, so it cannot unpack a batch: an encrypted entry of N
messages is stored as one seglog batch of N records, the first holding the payload as sent and the others
null, with the fields the consumer needs to decrypt and unpack it (encryption_keys, encryption_algo,
encryption_param, compression, uncompressed_size, num_messages_in_batch, null_value) in one attribute,
`pulsar.encryption`: the base64 of a MessageMetadata holding only those fields. It is sent back as one entry
whose metadata is the first record's (metadata.message_metadata) followed by those fields: a protobuf
message's serialized fields may come in any order, so the two parse as one MessageMetadata.

Each record keeps the entry's partition key, ordering key, properties and event time (Pulsar encrypts the
payload only), so Key_Shared routes the N records of an entry together, by the entry's key, as Pulsar's
broker routes the entry."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence

import numpy as np

from seglog._core._messages import Message
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.metadata import ENCRYPTION, message_metadata

# what a consumer needs to decrypt an entry and unpack its messages, besides what seglog stores per message
_KEPT = ("encryption_keys", "encryption_algo", "encryption_param", "compression", "uncompressed_size",
         "num_messages_in_batch", "null_value")


def is_encrypted(metadata: api.MessageMetadata) -> bool:
    """Whether a SEND's entry is encrypted: it carries encryption keys (as Pulsar's broker tells)."""
    return len(metadata.encryption_keys) > 0


def encryption_attribute(metadata: api.MessageMetadata) -> str:
    """The `pulsar.encryption` attribute of the stored batch of an encrypted entry."""
    kept = api.MessageMetadata()
    for name in _KEPT:
        if name == "encryption_keys":
            kept.encryption_keys.extend(metadata.encryption_keys)
        elif metadata.HasField(name):
            setattr(kept, name, getattr(metadata, name))
    return base64.b64encode(kept.SerializePartialToString()).decode("ascii")


def entry_metadata(first: Message, replicated_from: str | None = None, replicate_to: Sequence[str] = ()) -> bytes:
    """The MessageMetadata (serialized) of the encrypted entry whose first record is `first`: the record's
    (metadata.message_metadata, with `replicated_from` and `replicate_to` as it takes them), then the
    entry's encryption fields."""
    attributes = first.batch_attributes
    return (message_metadata(first, first.offset, replicated_from, replicate_to)
            + base64.b64decode(attributes[ENCRYPTION]))


def ack_set(indexes: Iterable[int]) -> list[int]:
    """The MESSAGE command's ack_set of an entry of which only the messages at `indexes` (batch indexes) are
    delivered: a bit set, bit i of word i // 64 set for each (as Java's BitSet.toLongArray, which the
    clients read), as int64 words. The client skips the messages whose bit is clear."""
    words: list[int] = []
    for index in indexes:
        word, bit = divmod(index, 64)
        if word >= len(words):
            words.extend([0] * (word + 1 - len(words)))
        words[word] |= 1 << bit
    return [word - (1 << 64) if word >= 1 << 63 else word for word in words]


def cleared_indexes(words: Sequence[int], count: int) -> np.ndarray:
    """The batch indexes below `count` whose bit is clear in an ACK's ack_set (a client with batch index
    acks sends the bits of the messages it has not acknowledged yet), ascending: those it acknowledges.
    Words missing past the last one sent are clear (Java's BitSet.toLongArray drops trailing zero words)."""
    bits = np.zeros((count + 63) // 64, dtype=np.uint64)
    sent = np.array(words[:len(bits)], dtype=np.int64).view(np.uint64)
    bits[:len(sent)] = sent
    return np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")[:count] == 0)
