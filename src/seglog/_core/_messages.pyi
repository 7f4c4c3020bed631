from collections.abc import Iterator, Mapping
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from seglog._core._buffer import BufferLike

class MessageId:
    """Where a message is stored: its partition and offset. Ordered, hashable, comparable to a tuple.

    Immutable: shared freely by threads, and pickled (a copy) to another process."""

    def __init__(self, partition: int, offset: int) -> None: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    def __iter__(self) -> Iterator[int]: ...
    def __hash__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __lt__(self, other: MessageId | tuple[int, ...], /) -> bool: ...
    def __le__(self, other: MessageId | tuple[int, ...], /) -> bool: ...
    def __gt__(self, other: MessageId | tuple[int, ...], /) -> bool: ...
    def __ge__(self, other: MessageId | tuple[int, ...], /) -> bool: ...

class Message:
    """One message read from a partition: its own copy of the key and value, not a view of the segment.

    Its attributes are read-only (and `properties`, a dict, is the message's own: read it, do not change
    it), so a message may be shared by threads; it is pickled (a copy) to another process."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None:
        """The value, or None for a null value (sent as None: no value, unlike b"")."""
    @property
    def timestamp(self) -> int:
        """The topic's timestamp (the producer's CreateTime, or LogAppendTime), in ms since the epoch."""
    @property
    def event_time(self) -> int | None:
        """The timestamp the producer gave, or None when it gave none."""
    @property
    def properties(self) -> dict[str, str]:
        """The message's properties (a new empty dict when it has none)."""
    @property
    def ordering_key(self) -> bytes | None: ...
    @property
    def batch_attributes(self) -> Mapping[str, str]:
        """The attributes of the message's batch, read-only, shared by the messages of a batch read together
        (empty when the batch has none)."""
    @property
    def message_id(self) -> MessageId: ...
    def __eq__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

def batch_attributes(buffer: BufferLike, position: int) -> Mapping[str, str]:
    """The attributes of the sound batch at `position` (read-only; empty when it has none)."""

def batch_attribute(buffer: BufferLike, position: int, name: bytes) -> str | None:
    """The value of the attribute `name` (UTF-8) of the sound batch at `position`, or None if it has none."""

def messages_from_batch(buffer: BufferLike, position: int, partition: int, start: int, stop: int) -> list[Message]:
    """Messages [start, stop) (record indexes within the batch) of the sound batch at `position`."""

def batch_offsets(buffer: BufferLike, position: int) -> npt.NDArray[np.int64]:
    """The offsets of the records of the batch at `position` (a compacted batch's own column)."""
