from collections.abc import Iterable

import numpy as np

from seglog._core._messages import Message

def message_metadata(message: Message, producer_name: str, sequence_id: int, replicated_from: str | None = None,
                     replicate_to: Iterable[str] = (), chunk: tuple[str, int, int, int, int, int] | None = None) -> bytes:
    """The MessageMetadata of `message` sent as an entry of its own (protobuf's encoding): the message's
    publish time (its timestamp), properties, key, event time, ordering key and null value, with the entry's
    `producer_name`, `sequence_id`, `replicated_from` (None: none), `replicate_to` (cluster names) and
    `chunk`: None, or (uuid, chunk_id, num_chunks_from_msg, total_chunk_msg_size, compression,
    uncompressed_size) of a chunk of a large message. OverflowError for a field out of its type's range."""

def single_message_metadata(message: Message, sequence_id: int) -> bytes:
    """The SingleMessageMetadata of `message` as an item of a batch entry (protobuf's encoding): its payload
    size, properties, key, event time, ordering key and null value, and its `sequence_id`."""

def send_command(producer_id: int, sequence_id: int, num_messages: int) -> bytes:
    """The BaseCommand of a SEND (type SEND, and its CommandSend's `producer_id`, `sequence_id` and
    `num_messages`), encoded."""

def payload_frame(command: bytes, metadata: bytes, payload: bytes) -> bytes:
    """The payload frame of an encoded BaseCommand, MessageMetadata and payload, with the CRC32C block as
    clients at protocol version 6 and above write it: [u32 total][u32 command size][command][u16 0x0e01]
    [u32 CRC32C of what follows][u32 metadata size][metadata][payload] (frames.py)."""

def send_receipts(buffer: bytes | bytearray | memoryview, position: int) -> tuple[list[tuple[int, int]], int]:
    """The SEND_RECEIPT frames that follow one another from `position` in `buffer`, each whole and
    well-formed, as (producer_id, sequence_id) pairs in order, and the position after the last: ([],
    position) if the frame there is anything else (another command, cut short, malformed), which is then
    frames.py's to decode. The same fields protobuf's parser reads (any other field skipped)."""

def stored_message_frames(buffer: object, position: int, rows: np.ndarray, offsets: np.ndarray, consumer_id: int,
                          partition: int, redelivery_count: int, producer_name: str, has_sequence_ids: bool,
                          first_sequence_id: int, base_offset: int, replicated_from: str | None,
                          metadata_suffix: bytes, batched: bool, max_entry_messages: int,
                          max_entry_bytes: int) -> tuple[bytes, list[tuple[int, int]]]:
    """The MESSAGE frames that deliver records `rows` (ascending, int64) of the stored batch at `position`
    of `buffer` (a mapped segment), at `offsets` (int64), to consumer `consumer_id`, read straight from the
    batch's columns: (the frames, one bytes object, and the entries as (id, messages) pairs). Unless
    `batched`, each message is an entry of its own, id (0, its offset, -1). If `batched`, each run of
    messages at consecutive offsets with one publish time is a batch entry (num_messages_in_batch, then an
    item [u32 size][SingleMessageMetadata][value] a message), at most `max_entry_messages` and
    `max_entry_bytes` of values (a larger message alone): its id is its first message's offset, and message
    i of it has batch index i. Every entry has the `redelivery_count`, its `producer_name` and
    `replicated_from` (None: none), sequence ids first_sequence_id + (offset - base_offset) (the offsets
    themselves without `has_sequence_ids`), the ids' `partition` (-1: none), and `metadata_suffix`
    (serialized fields, the schema version) after its metadata. ValueError for rows outside the batch."""
