from collections.abc import Iterable, Sequence
from typing import Any

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

class FlowCommand:
    """A FLOW read natively (consumer_commands): its CommandFlow's fields, by protobuf's names."""
    consumer_id: int
    message_permits: int
    def __init__(self, consumer_id: int, message_permits: int) -> None: ...

class AckedId:
    """A MessageIdData of an ACK read natively, its fields by protobuf's names (partition and batch_index -1
    when absent, as protobuf reads them)."""
    ledger_id: int
    entry_id: int
    partition: int
    batch_index: int
    ack_set: tuple[int, ...]
    def __init__(self, ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1,
                 ack_set: tuple[int, ...] = ()) -> None: ...

class AckCommand:
    """An ACK read natively (consumer_commands): its CommandAck's fields, by protobuf's names, and
    `request_id` None when it has none."""
    consumer_id: int
    ack_type: int
    message_id: list[AckedId]
    request_id: int | None
    def __init__(self, consumer_id: int, ack_type: int, message_id: list[AckedId],
                 request_id: int | None = None) -> None: ...

def consumer_commands(buffer: bytes | bytearray | memoryview,
                      position: int) -> tuple[list[FlowCommand | AckCommand], int]:
    """The FLOW and ACK frames that follow one another from `position` in `buffer`, each whole and plain (an
    ACK with only consumer id, ack type, message ids without a chunk's, and request id), as FlowCommand and
    AckCommand objects in order, and the position after the last: ([], position) if the frame there is
    anything else (another command, cut short, malformed), which is then frames.py's to decode. The same
    values protobuf's parser gives for these fields."""

class DeliveryEncoder:
    """The MESSAGE frames of one consumer (`consumer_id`, its ids carrying `partition`, -1: none), built from
    the pieces dispatch gives it straight from their stored batches' columns, all of a read's pieces in one
    call. A message of a stored batch of one goes as an entry of its own, id (0, its offset, -1); the
    messages of a bigger batch as batch entries: each run at consecutive offsets with one publish time and
    one redelivery count (at most `max_entry_messages`, and `max_entry_bytes` of values but for a larger
    message alone) is one entry, its id its first message's offset, message i of it at batch index i. The
    batch attributes `fields` name the producer, the first sequence id (without it the offsets are the
    sequence ids), the cluster replicated from and the schema version (hex); a batch with any attribute of
    `whole_entry` is the caller's to send."""
    def __init__(self, consumer_id: int, partition: int, max_entry_messages: int, max_entry_bytes: int,
                 fields: tuple[str, str, str, str], whole_entry: Iterable[str]) -> None: ...
    def frames(self, pieces: Sequence[Any], start: int,
               entries: list[tuple[int, int]]) -> tuple[bytes, int]:
        """The frames of pieces[start:] (subscriptions.delivery.Piece: `data`, `position`, `base`, `offsets` and
        `redelivery_counts` are read) up to the first whose batch has a `whole_entry` attribute, as one
        bytes object, and that piece's index (len(pieces) if none has). The batch entries sent are appended
        to `entries` as (id, messages) pairs. ValueError for offsets not ascending within their batch, or a
        malformed attribute."""
