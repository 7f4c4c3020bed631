"""Pulsar's message metadata and seglog's batch attributes, both ways (docs/SERVER.md, "One data model").

Per message, seglog stores what Pulsar keeps per message: value (None for Pulsar's null value), key (the
partition key), ordering key, properties, event time, publish time as the timestamp. What Pulsar keeps per
entry (one SEND: a message or a batch, or one chunk of a large message) is stored in the seglog batch's
attributes, under these names:

| attribute | Pulsar field | |
|---|---|---|
| pulsar.producer | producer_name | |
| pulsar.deliver_at | deliver_at_time | ms since the epoch (storage.delivery_time: dispatch reads it) |
| pulsar.sequence_id | sequence_id | the first message's; message i of a batch has sequence_id + i |
| pulsar.highest_sequence_id | highest_sequence_id of the SEND | the last message's |
| pulsar.replicate_to | replicate_to | cluster names joined by "," |
| pulsar.replicated_from | replicated_from | the cluster a replicated message came from |
| pulsar.replicated_offset | a replicator SEND's sequence_id | the origin offset of the entry's last message |
| pulsar.chunk | uuid, chunk_id, num_chunks_from_msg, total_chunk_msg_size | "uuid,chunk_id,num_chunks,total_size" |
| pulsar.compression | compression, uncompressed_size | of a chunk, stored as it came: "codec,size" |
| pulsar.schema_version | schema_version | hex of the bytes sent: the schema version (8 bytes, big-endian) |
| pulsar.encryption | encryption_*, compression, uncompressed_size, num_messages_in_batch | encryption.py |

A replicator (seglog.replication) sends each entry with its origin's offset as the SEND's sequence id, and the
receiving server deduplicates replicated entries by it (replication_key): the producer's own sequence ids
stay as they were, and messages written in-process, which have none, are deduplicated too.

A chunk's payload is a piece of the whole message as the producer compressed it, so it is stored and sent
back byte for byte with its compression named; the client reassembles and decompresses it. An encrypted
entry likewise: its payload is stored as sent, in its first record, and sent back with its fields
(encryption.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from seglog._core import _pulsar_wire as encoders
from seglog._core._messages import Message
from seglog._core._pulsar_send import SendEntry
from seglog.names import REPLICATOR_PREFIX
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.storage.delivery_time import deliver_at_attributes
from seglog.storage.range_read import SCHEMA_VERSION_ATTRIBUTE

PRODUCER = "pulsar.producer"
SEQUENCE_ID = "pulsar.sequence_id"
HIGHEST_SEQUENCE_ID = "pulsar.highest_sequence_id"
REPLICATE_TO = "pulsar.replicate_to"
REPLICATED_FROM = "pulsar.replicated_from"
REPLICATED_OFFSET = "pulsar.replicated_offset"
CHUNK = "pulsar.chunk"
# the durable subscription through which `seglog serve --configuration-sync-topic` applies the configuration
# changes of other clusters (replication/config_sync.py); not under REPLICATOR_PREFIX, where a cursor
# `pulsar.repl.X` is read as the replicator to cluster X (stats) and X may be any cluster's name
CONFIGURATION_SYNC_SUBSCRIPTION = "seglog.configuration-sync"
MARKER_PRODUCER = "pulsar.marker"  # the producer name of Pulsar's marker entries
LOCAL_ONLY = "__local__"  # replicate_to of a message sent with disable_replication: no other cluster
COMPRESSION = "pulsar.compression"
# A schema version is per entry in Pulsar too (MessageMetadata; a batch's messages share it), so the batch that
# stores the entry keeps it for all its messages (docs/SERVER.md, "Schemas")
SCHEMA_VERSION = SCHEMA_VERSION_ATTRIBUTE
ENCRYPTION = "pulsar.encryption"
# what an entry a consumer is sent carries of its stored batch (_pulsar_wire.DeliveryEncoder's `fields`): its
# producer name, first sequence id (absent for a batch written in-process: the offsets stand for them), the
# cluster it was replicated from, and its schema version
DELIVERED_FIELDS = (PRODUCER, SEQUENCE_ID, REPLICATED_FROM, SCHEMA_VERSION)
# stored batches sent otherwise than as their messages (DeliveryEncoder's `whole_entry`): an encrypted entry
# goes whole as the producer sent it, a chunk with its chunk fields
WHOLE_ENTRY = (ENCRYPTION, CHUNK)


def is_chunk(metadata: api.MessageMetadata) -> bool:
    return metadata.HasField("uuid") and metadata.HasField("chunk_id")


def entry_attributes(metadata: api.MessageMetadata, count: int, highest_sequence_id: int) -> dict[str, str]:
    """The attributes of the seglog batch that stores a SEND of `count` messages."""
    attributes = _attributes(metadata.producer_name, metadata.sequence_id, count, highest_sequence_id,
                             metadata.replicate_to,
                             metadata.replicated_from if metadata.HasField("replicated_from") else None,
                             metadata.schema_version,
                             metadata.deliver_at_time if metadata.HasField("deliver_at_time") else None)
    if is_chunk(metadata):
        attributes[CHUNK] = (f"{metadata.uuid},{metadata.chunk_id},{metadata.num_chunks_from_msg},"
                             f"{metadata.total_chunk_msg_size}")
        attributes[COMPRESSION] = f"{metadata.compression},{metadata.uncompressed_size}"
    return attributes


def send_entry_attributes(entry: SendEntry, count: int, highest_sequence_id: int) -> dict[str, str]:
    """entry_attributes of an entry read natively (never a chunk: those take the reference path)."""
    return _attributes(entry.producer_name, entry.sequence_id, count, highest_sequence_id, entry.replicate_to,
                       entry.replicated_from, entry.schema_version, entry.deliver_at_time)


def _attributes(producer_name: str, first_sequence_id: int, count: int, highest_sequence_id: int,
                replicate_to: Sequence[str], replicated_from: str | None, schema_version: bytes,
                deliver_at_time: int | None) -> dict[str, str]:
    attributes = {PRODUCER: producer_name, SEQUENCE_ID: str(first_sequence_id),
                  HIGHEST_SEQUENCE_ID: str(max(highest_sequence_id, first_sequence_id + count - 1))}
    if replicate_to:
        attributes[REPLICATE_TO] = ",".join(replicate_to)
    if replicated_from is not None:
        attributes[REPLICATED_FROM] = replicated_from
    if schema_version:
        attributes[SCHEMA_VERSION] = schema_version.hex()
    if deliver_at_time is not None:
        attributes.update(deliver_at_attributes(deliver_at_time))
    return attributes


def sequence_ids(attributes: Mapping[str, str]) -> tuple[str, int, int] | None:
    """(producer name, first sequence id, highest sequence id) of a stored entry; None if no server producer
    wrote it (in-process producers have no sequence ids)."""
    producer = attributes.get(PRODUCER)
    if producer is None:
        return None
    return producer, int(attributes[SEQUENCE_ID]), int(attributes[HIGHEST_SEQUENCE_ID])


def replicator_name(local: str, remote: str) -> str:
    """The producer name of cluster `local`'s replicator to `remote` (Pulsar's `pulsar.repl.LOCAL-->REMOTE`):
    the inverse of replicator_origin."""
    return f"{REPLICATOR_PREFIX}{local}-->{remote}"


def replicator_origin(producer_name: str) -> str | None:
    """The cluster a replicator producer replicates from (`pulsar.repl.A-->B` -> A), or None for any other
    producer (as Pulsar's Producer.parseRemoteClusterName)."""
    if not producer_name.startswith(REPLICATOR_PREFIX):
        return None
    origin = producer_name[len(REPLICATOR_PREFIX):].split("-->", 1)[0]
    return origin or None


def reserved_subscription(name: str) -> str | None:
    """Why clients may not consume the durable subscription `name` (a cursor the server keeps for itself, as
    Pulsar keeps replicators' cursors), or None when they may."""
    if name.startswith(REPLICATOR_PREFIX):
        return f"names starting with {REPLICATOR_PREFIX!r} are replicators' cursors"
    if name == CONFIGURATION_SYNC_SUBSCRIPTION:
        return "it is the cursor of the synchronized configuration store (--configuration-sync-topic)"
    return None


def replication_key(origin: str) -> str:
    """The name replicated entries from cluster `origin` are deduplicated under."""
    return REPLICATOR_PREFIX + origin


def deduplication_ids(attributes: Mapping[str, str]) -> tuple[str, int] | None:
    """(name, highest id) a stored entry counts under for deduplication: a replicated entry's origin and
    origin offset, else its producer and highest sequence id; None for an entry of an in-process producer."""
    offset = attributes.get(REPLICATED_OFFSET)
    if offset is not None:
        return replication_key(attributes[REPLICATED_FROM]), int(offset)
    ids = sequence_ids(attributes)
    return None if ids is None else (ids[0], ids[2])


def sequence_id(message: Message, base_offset: int) -> int:
    """The sequence id of `message`, stored in the batch that starts at `base_offset`: its entry's first
    plus its place in the entry, or for a message written in-process (no sequence ids), its offset."""
    first = message.batch_attributes.get(SEQUENCE_ID)
    return message.offset if first is None else int(first) + message.offset - base_offset


def message_metadata(message: Message, base_offset: int, replicated_from: str | None = None,
                     replicate_to: Sequence[str] = ()) -> bytes:
    """The MessageMetadata (serialized) a consumer is sent with `message` (an entry of its own), stored in
    the batch that starts at `base_offset`: its fields, and those of the entry it was sent in (a message
    written in-process has no producer name). A replicator names the cluster it replicates from as
    `replicated_from` (else the stored entry's, if it was replicated) and the entry's `replicate_to`."""
    attributes = message.batch_attributes
    chunk = attributes.get(CHUNK)
    encoded = encoders.message_metadata(
        message, attributes.get(PRODUCER, ""), sequence_id(message, base_offset),
        replicated_from if replicated_from is not None else attributes.get(REPLICATED_FROM), replicate_to,
        None if chunk is None else _chunk_fields(chunk, attributes[COMPRESSION]))
    schema_version = attributes.get(SCHEMA_VERSION)
    return encoded if schema_version is None else encoded + _schema_version_field(schema_version)


@lru_cache(maxsize=256)
def _schema_version_field(schema_version: str) -> bytes:
    """The serialized schema_version field of a stored version (hex), appended to a message's metadata (protobuf
    takes a field after the others, so the kernel's encoder needs no part in it): made once a version, not
    once a message."""
    return api.MessageMetadata(schema_version=bytes.fromhex(schema_version)).SerializePartialToString()


def _chunk_fields(chunk: str, compression: str) -> tuple[str, int, int, int, int, int]:
    """(uuid, chunk_id, num_chunks_from_msg, total_chunk_msg_size, compression, uncompressed_size) of a
    stored chunk, from its attributes."""
    uuid, chunk_id, chunks, total = chunk.rsplit(",", 3)
    codec, size = compression.split(",")
    return uuid, int(chunk_id), int(chunks), int(total), int(codec), int(size)
