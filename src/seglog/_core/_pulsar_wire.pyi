from collections.abc import Iterable

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
