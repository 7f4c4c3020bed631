"""Spreading one keyed send_batch call over partitions: Kafka's murmur2 rule, computed in C for all keys
at once, then one batch per partition with the messages in their original order."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from seglog._core._writer import Column, key_partitions
from seglog.storage.batch import binary_column


def partitions_for_keys(keys: Any, partitions: int) -> np.ndarray:
    """The partition of each key by Kafka's rule, toPositive(murmur2(key)) % partitions, as a producer
    spreads keyed messages (a null key at index i goes to i % partitions)."""
    return key_partitions(binary_column(keys, "keys", allow_null=True, count=len(keys)), partitions)


def split_by_key(partitions: int, key_column: Column, values: Any, keys: Any, timestamps: Any, properties: Any
                 ) -> Iterator[tuple[int, tuple[Any, Any, Any, Any]]]:
    """(partition, (values, keys, timestamps, properties)) for each partition that gets messages;
    `key_column` is `keys` as the call's checked BatchSource holds them."""
    targets = key_partitions(key_column, partitions)
    for partition in np.unique(targets):
        chosen = np.flatnonzero(targets == partition)
        yield int(partition), (_take(values, chosen), _take(keys, chosen), _take(timestamps, chosen),
                               _take(properties, chosen))


def _take(data: Any, chosen: np.ndarray) -> Any:
    if data is None:
        return None
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        return data.take(pa.array(chosen))
    if isinstance(data, np.ndarray):
        return data[chosen]
    return [data[i] for i in chosen]
