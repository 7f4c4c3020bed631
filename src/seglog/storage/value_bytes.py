"""The bytes of stored messages' values, read from their batch's value offsets (docs/FORMAT.md): what seglog's
stats count as a message's size (msgThroughputIn/Out, bytesInCounter/bytesOutCounter), the payload as
pulsar-client counts it. One look at the batch's layout whatever the number of messages."""

from __future__ import annotations

import struct

import numpy as np

from seglog._core._format import batch_layout
from seglog._core._mapping import Mapping

_INT32 = struct.Struct("<i")


def value_bytes(data: Mapping, position: int, first: int, stop: int) -> int:
    """The value bytes of messages [first, stop) (indexes in the batch) of the batch at `position`; a null
    value has none."""
    offsets = position + batch_layout(data, position)["value_offsets"]
    return _INT32.unpack_from(data, offsets + 4 * stop)[0] - _INT32.unpack_from(data, offsets + 4 * first)[0]


def values_bytes(data: Mapping, position: int, indexes: np.ndarray) -> int:
    """The value bytes of the messages at `indexes` (ascending, in the batch) of the batch at `position`."""
    first, last = int(indexes[0]), int(indexes[-1])
    if last - first + 1 == len(indexes):
        return value_bytes(data, position, first, last + 1)
    start = position + batch_layout(data, position)["value_offsets"]
    offsets = np.frombuffer(data, dtype=np.int32, count=last + 2, offset=start)  # type: ignore[call-overload]
    return int((offsets[indexes + 1] - offsets[indexes]).sum())
