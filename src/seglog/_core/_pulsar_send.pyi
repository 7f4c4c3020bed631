from seglog._core._writer import BatchSource

class SendEntry:
    """A SEND's MessageMetadata as far as storing its entry needs it, read natively."""
    producer_name: str
    replicated_from: str | None
    replicate_to: list[str]
    @property
    def sequence_id(self) -> int: ...
    @property
    def compression(self) -> int: ...
    @property
    def uncompressed_size(self) -> int: ...
    @property
    def schema_version(self) -> bytes: ...
    @property
    def deliver_at_time(self) -> int | None: ...

class UnpackedEntry:
    """An entry's messages in the stored columns."""
    count: int
    def source(self, attributes: dict[str, str], now: int, log_append_time: bool) -> BatchSource:
        """The BatchSource that stores these messages with the batch `attributes` (`now`: the writer's clock,
        the timestamp on a topic that stamps log-append time)."""
    def key_list(self) -> list[bytes | None]:
        """Each message's key, None for a message without one."""

class SendFrame:
    """A SEND frame cut natively: its CommandSend's fields, its CRC32C verdict, its metadata and payload."""
    producer_id: int
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    checksum_ok: bool
    metadata: bytes
    payload: bytes
    def __init__(self, producer_id: int, sequence_id: int, highest_sequence_id: int, num_messages: int,
                 checksum_ok: bool, metadata: bytes, payload: bytes) -> None:
        """The same of a SEND that frames.py decoded (one with fields this module leaves to it)."""

def read_entry(metadata: bytes) -> SendEntry | None:
    """The entry a serialized MessageMetadata describes, or None if it is one for the reference path
    (encrypted, a chunk, a marker, transactional, a base64 key, a required field missing, anything malformed)."""

def unpack(entry: SendEntry, payload: bytes | bytearray | memoryview, max_messages: int) -> UnpackedEntry | None:
    """The messages of `entry` with `payload` (uncompressed) in the stored columns, or None for the reference
    path (a batch that does not parse, or holds more than `max_messages` messages)."""

def cut_sends(buffer: bytes | bytearray | memoryview, position: int,
              max_frame_size: int) -> tuple[list[SendFrame], int]:
    """The ordinary SEND frames that follow one another from `position` in `buffer`, and the position after
    the last: ([], position) if the frame there is anything else, cut short or malformed."""

def send_receipt(producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int,
                 entry_id: int) -> bytes:
    """A SEND_RECEIPT frame, the bytes frames.encode_command makes of the same fields."""
