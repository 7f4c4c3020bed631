"""The messages of one SEND, unpacked from its MessageMetadata and payload into seglog's columns.

A batch entry (its metadata has num_messages_in_batch) holds `[u32 size][SingleMessageMetadata][payload]`
items back to back, after decompression; an entry without it is one message whose fields are the entry's
metadata. Each becomes one seglog message: value = payload (None for Pulsar's null value), key = partition
key, ordering key, properties, event time (0 = none), timestamp = the entry's publish time. A chunk of a
large message is one message whose value is the chunk as sent (not decompressed: the client reassembles
the pieces first). What the entry says of itself goes to the batch's attributes (metadata.py). An encrypted
entry cannot be unpacked: it is stored as one record holding its payload and a null record for each other
message of it (encryption.py)."""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as Message_

from seglog._core import _pulsar_wire as encoders
from seglog._core._messages import Message
from seglog._core._pulsar_send import UnpackedEntry, read_entry
from seglog._core._pulsar_send import unpack as unpack_columns
from seglog._core._writer import BatchSource
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.compression import DecompressionError, decompress
from seglog.server.protocol.encryption import encryption_attribute, is_encrypted
from seglog.server.protocol.frames import MAX_FRAME_SIZE
from seglog.server.protocol.metadata import ENCRYPTION, SEQUENCE_ID, entry_attributes, is_chunk, send_entry_attributes
from seglog.storage.writer import PartitionWriter

_U32 = struct.Struct(">I")


class BatchError(Exception):
    """A SEND whose metadata or payload cannot be unpacked, or that is over the server's limits."""


@dataclass(frozen=True)
class UnpackLimits:
    """What one SEND may unpack to: its payload inflated (a declared size over it is refused before anything
    is inflated) and its messages (each costs the broker a few hundred bytes while its batch is written, so a
    few MiB of empty messages would otherwise cost hundreds of MiB)."""
    max_uncompressed_size: int = MAX_FRAME_SIZE  # the max message size
    max_messages: int = 10_000


@dataclass
class Messages:
    """The columns of one SEND, as PartitionWriter.source takes them (event_times: None = none given)."""

    values: list[bytes | None] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    event_times: list[int | None] = field(default_factory=list)
    properties: list[dict[str, str]] = field(default_factory=list)
    ordering_keys: list[bytes | None] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)  # of the entry (metadata.py)

    def add(self, value: bytes, metadata: api.MessageMetadata | api.SingleMessageMetadata, timestamp: int) -> None:
        self.values.append(None if metadata.null_value else value)
        self.keys.append(_key(metadata))
        self.timestamps.append(timestamp)
        self.event_times.append(metadata.event_time or None)
        # (a dict built only when there are properties: most messages have none, and it costs 0.6 µs)
        self.properties.append(_properties(metadata.properties) if metadata.properties else {})
        self.ordering_keys.append(metadata.ordering_key if metadata.HasField("ordering_key") else None)

    @property
    def count(self) -> int:
        return len(self.values)

    def key_list(self) -> list[bytes | None]:
        return self.keys

    def source(self, writer: PartitionWriter) -> BatchSource:
        """The source `writer` appends these messages from, stamped by its clock."""
        keys = None if all(key is None for key in self.keys) else self.keys
        properties = self.properties if any(self.properties) else None
        ordering_keys = None if all(key is None for key in self.ordering_keys) else self.ordering_keys
        return writer.source(self.values, keys, self.timestamps, properties, event_times=self.event_times,
                             ordering_keys=ordering_keys, attributes=self.attributes)

    def without_first(self, count: int) -> Messages:
        """These messages but the first `count` (of a replicated entry, those the receiving server stored
        already); the entry's first sequence id moves on with them."""
        attributes = dict(self.attributes)
        attributes[SEQUENCE_ID] = str(int(attributes[SEQUENCE_ID]) + count)
        return Messages(self.values[count:], self.keys[count:], self.timestamps[count:], self.event_times[count:],
                        self.properties[count:], self.ordering_keys[count:], attributes)


class NativeMessages:
    """The messages of a SEND unpacked natively (unpack_native), already in the stored columns: what
    BrokerService.append takes of Messages, with no Python object per message."""

    def __init__(self, columns: UnpackedEntry, attributes: dict[str, str]) -> None:
        self.columns = columns
        self.attributes = attributes  # of the entry (metadata.py)

    @property
    def count(self) -> int:
        return self.columns.count

    def key_list(self) -> list[bytes | None]:
        return self.columns.key_list()

    def source(self, writer: PartitionWriter) -> BatchSource:
        return self.columns.source(self.attributes, writer.clock(), writer.config.log_append_time)


def unpack_native(metadata: bytes, payload: bytes, highest_sequence_id: int = 0,
                  limits: UnpackLimits = UnpackLimits()) -> NativeMessages | None:
    """The messages of a SEND as unpack gives them, unpacked natively; None when the entry is one for unpack
    to take (encrypted, a chunk, a marker, anything unusual: _core/_pulsar_send.pyx), which then gives its
    exact answer. BatchError for a payload that does not decompress, as unpack."""
    entry = read_entry(metadata)
    if entry is None:
        return None
    data = payload
    if entry.compression != api.NONE:
        try:
            data = decompress(entry.compression, payload, entry.uncompressed_size, limits.max_uncompressed_size)
        except DecompressionError as error:
            raise BatchError(str(error)) from None
    columns = unpack_columns(entry, data, limits.max_messages)
    if columns is None:
        return None
    return NativeMessages(columns, send_entry_attributes(entry, columns.count, highest_sequence_id))


def parse_metadata(data: bytes) -> api.MessageMetadata:
    metadata = api.MessageMetadata()
    try:
        metadata.ParseFromString(data)
    except DecodeError as error:
        raise BatchError(f"the message metadata does not parse: {error}") from None
    _check_text(metadata, "the message metadata")
    return metadata


def _check_text(message: Message_, what: str) -> None:
    """BatchError if a string field of `message` (or of a message in it) is not UTF-8: protobuf's parser
    gives such a proto2 field as bytes, which nothing downstream takes (a key, a property, a producer name)."""
    for descriptor, value in message.ListFields():
        items = value if descriptor.is_repeated else (value,)
        if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
            for item in items:
                _check_text(item, what)
        elif descriptor.type == FieldDescriptor.TYPE_STRING:
            for item in items:
                if not isinstance(item, str):
                    raise BatchError(f"{what}: {descriptor.name} {item!r} is not UTF-8 text")


def unpack(metadata: api.MessageMetadata, payload: bytes, highest_sequence_id: int = 0,
           limits: UnpackLimits = UnpackLimits()) -> Messages:
    """The messages of a SEND whose CommandSend says `highest_sequence_id` (0 when it says none); BatchError
    if they cannot be unpacked or are over `limits`."""
    if is_encrypted(metadata):
        return _encrypted(metadata, payload, highest_sequence_id, limits)
    publish_time = metadata.publish_time
    out = Messages()
    if is_chunk(metadata):
        out.add(payload, metadata, publish_time)
        out.attributes = entry_attributes(metadata, 1, highest_sequence_id)
        return out
    try:
        data = decompress(metadata.compression, payload, metadata.uncompressed_size, limits.max_uncompressed_size)
    except DecompressionError as error:
        raise BatchError(str(error)) from None
    if not metadata.HasField("num_messages_in_batch"):
        out.add(data, metadata, publish_time)
        out.attributes = entry_attributes(metadata, 1, highest_sequence_id)
        return out
    count = metadata.num_messages_in_batch
    if count > limits.max_messages:
        raise BatchError(f"the batch holds {count} messages, over the {limits.max_messages} a batch may hold on "
                         "this server (--max-messages-per-batch)")
    position = 0
    for index in range(count):
        if len(data) - position < 4:
            raise BatchError(f"batch message {index} of {count}: the payload ends before its size")
        (size,) = _U32.unpack_from(data, position)
        position += 4
        single = api.SingleMessageMetadata()
        try:
            single.ParseFromString(data[position:position + size])
        except DecodeError as error:
            raise BatchError(f"batch message {index} of {count}: its metadata does not parse: {error}") from None
        _check_text(single, f"batch message {index} of {count}")
        position += size
        end = position + single.payload_size
        if single.payload_size < 0 or end > len(data):
            raise BatchError(f"batch message {index} of {count}: its payload runs past the batch")
        out.add(data[position:end], single, publish_time)
        position = end
    if position != len(data):
        raise BatchError(f"{len(data) - position} bytes follow the {count} messages of the batch")
    out.attributes = entry_attributes(metadata, count, highest_sequence_id)
    return out


def _encrypted(metadata: api.MessageMetadata, payload: bytes, highest_sequence_id: int,
               limits: UnpackLimits) -> Messages:
    """The records of an encrypted entry: its payload as sent, then a null record for each other message of
    its batch, each with the entry's key, ordering key, properties and event time; its encryption fields in
    the attributes."""
    count = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
    if not 0 < count <= limits.max_messages:
        raise BatchError(f"the encrypted batch holds {count} messages; a batch holds 1 to {limits.max_messages} "
                         "on this server (--max-messages-per-batch)")
    key = _key(metadata)
    ordering_key = metadata.ordering_key if metadata.HasField("ordering_key") else None
    properties = _properties(metadata.properties) if metadata.properties else {}
    out = Messages([payload] + [None] * (count - 1), [key] * count, [metadata.publish_time] * count,
                   [metadata.event_time or None] * count, [properties] * count, [ordering_key] * count)
    out.attributes = entry_attributes(metadata, count, highest_sequence_id)
    out.attributes[ENCRYPTION] = encryption_attribute(metadata)
    return out


def pack(messages: Sequence[Message], first_sequence_id: int) -> tuple[bytes, list[int]]:
    """The payload of a batch entry (uncompressed) holding `messages`, message i with sequence id
    `first_sequence_id` + i in its SingleMessageMetadata (the inverse of unpack's batch branch), and where
    each message's item starts in it. The entry's own metadata, with num_messages_in_batch, is the caller's."""
    parts: list[bytes] = []
    starts: list[int] = []
    size = 0
    for index, message in enumerate(messages):
        single = encoders.single_message_metadata(message, first_sequence_id + index)
        value = message.value or b""
        parts += (_U32.pack(len(single)), single, value)
        starts.append(size)
        size += 4 + len(single) + len(value)
    return b"".join(parts), starts


def _key(metadata: api.MessageMetadata | api.SingleMessageMetadata) -> bytes | None:
    if not metadata.HasField("partition_key") or metadata.null_partition_key:
        return None
    if metadata.partition_key_b64_encoded:
        try:
            return base64.b64decode(metadata.partition_key, validate=True)
        except (binascii.Error, ValueError):  # (ValueError: not ASCII)
            raise BatchError(f"partition key {metadata.partition_key!r} is not base64, as its flag says") from None
    return metadata.partition_key.encode()


def _properties(pairs) -> dict[str, str]:  # (a protobuf repeated field of KeyValue)
    return {pair.key: pair.value for pair in pairs}
