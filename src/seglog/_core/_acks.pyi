from typing import Any, ClassVar, SupportsIndex, TypeAlias, final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from typing_extensions import Buffer

from seglog._core._buffer import BufferLike

WINDOW_LIMIT: int
OFFSETS_ACCEPTED: str

# A 1-D integer array: numpy, or any buffer of integers (int64 ones are used without a copy).
_IntegerArray: TypeAlias = npt.NDArray[np.integer[Any]] | Buffer

class AckSetBusyError(RuntimeError):
    """A call met a loop of another thread that runs over the set without the GIL; nothing was changed."""

@final
class AckSet:
    """Which offsets of one partition a subscription has acknowledged. Not thread-safe: serialise calls."""

    def __init__(self, floor: SupportsIndex = 0) -> None: ...
    @property
    def floor(self) -> int:
        """Every offset < floor is acknowledged, floor itself is not."""
    @property
    def high(self) -> int:
        """1 + the largest acknowledged offset (== floor when nothing above the floor is acknowledged)."""
    @property
    def individual_count(self) -> int:
        """How many offsets >= floor are acknowledged."""
    def ack(self, offset: SupportsIndex) -> bool:
        """Acknowledge one offset; True if it was not acknowledged before."""
    def ack_many(self, offsets: _IntegerArray | pa.IntegerArray[Any]) -> int:
        """Acknowledge the offsets of a 1-D integer array (pyarrow: without nulls); returns how many were new."""
    def ack_range(self, start: SupportsIndex, stop: SupportsIndex) -> int:
        """Acknowledge every offset in [start, stop); returns how many were not acknowledged before."""
    def ack_cumulative(self, offset: SupportsIndex) -> int:
        """Acknowledge every offset <= offset; returns how many were not acknowledged before."""
    def is_acked(self, offset: SupportsIndex) -> bool: ...
    def acked_count(self, start: SupportsIndex, stop: SupportsIndex) -> int:
        """How many offsets in [start, stop) are acknowledged, those below the floor included."""
    def next_unacked(self, start: SupportsIndex) -> int:
        """The smallest offset >= start that is not acknowledged."""
    def unacked_in(self, start: SupportsIndex, stop: SupportsIndex) -> npt.NDArray[np.int64]:
        """The offsets in [start, stop) not acknowledged, ascending."""
    def unacked_mask(self, start: SupportsIndex, stop: SupportsIndex) -> npt.NDArray[np.bool_]:
        """One bool per offset in [start, stop), True where it is NOT acknowledged."""
    def ranges(self) -> npt.NDArray[np.int64]:
        """The runs of individually acknowledged offsets above the floor: an (n, 2) array of [start, stop)."""
    def weighted_acked(self, bounds: _IntegerArray, weights: _IntegerArray | npt.NDArray[np.floating[Any]]) -> float:
        """sum_i weights[i] * (individually acknowledged offsets >= floor in [bounds[i], bounds[i + 1]))."""
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: BufferLike) -> AckSet:
        """The AckSet that to_bytes() wrote; InvalidArgumentError (a ValueError) on anything else."""
    def copy(self) -> AckSet: ...
    def __eq__(self, other: object, /) -> bool:
        """Same floor and the same acknowledged offsets."""
    __hash__: ClassVar[None]  # type: ignore[assignment]
