"""The bytes of stored messages' values, read from their batch's value offsets (docs/FORMAT.md): what seglog's
stats count as a message's size (msgThroughputIn/Out, bytesInCounter/bytesOutCounter), the payload as
pulsar-client counts it. One look at the batch's layout whatever the number of messages."""

from __future__ import annotations

import numpy as np

from seglog._core._format import value_span_size, values_size
from seglog._core._mapping import Mapping


def value_bytes(data: Mapping, position: int, first: int, stop: int) -> int:
    """The value bytes of messages [first, stop) (indexes in the batch) of the batch at `position`; a null
    value has none."""
    return int(value_span_size(data, position, first, stop))


def values_bytes(data: Mapping, position: int, indexes: np.ndarray) -> int:
    """The value bytes of the messages at `indexes` (ascending, in the batch) of the batch at `position`."""
    return int(values_size(data, position, np.ascontiguousarray(indexes, dtype=np.int64)))
