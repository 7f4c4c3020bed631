"""key_shared routing: the consumer that gets a key's messages, by consistent hashing as in Pulsar.

A key hashes (murmur2, as the producer's partitioner) to a slot of KEY_HASH_SLOTS; each consumer holds
REPLICA_POINTS points on that ring, hashed from its name, and a slot belongs to the consumer of the first
point at or after it. A consumer that joins takes keys only from the others, and one that leaves gives
only its own keys away, so most keys stay where they were (an even split of the slots would move most of
them on every change).

Moving a key must not reorder its messages. Those given out before the move are all redelivered first
when their consumer leaves; when a consumer joins, it is held back (Pulsar's "recently joined consumers"):
it gets no message at or after the read position of the moment it joined until everything before that
position is acknowledged."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from seglog._core._writer import key_partitions
from seglog.storage.batch import binary_column

KEY_HASH_SLOTS = 65536
REPLICA_POINTS = 100  # Pulsar's keySharedConsistentHashingReplicaPoints


def key_slots(keys: pa.Array) -> np.ndarray:
    """The ring slot of each key (int64)."""
    return key_partitions(binary_column(keys, "keys", allow_null=True, count=len(keys)),
                          KEY_HASH_SLOTS).astype(np.int64)


class HashRing:
    """The consumers' points on the ring of key slots."""

    def __init__(self, consumer_names: Sequence[str]) -> None:
        labels = pa.array([f"{name}{i}".encode() for name in consumer_names for i in range(REPLICA_POINTS)],
                          pa.binary())
        points = key_slots(labels)
        owners = np.repeat(np.arange(len(consumer_names), dtype=np.int64), REPLICA_POINTS)
        order = np.lexsort((owners, points))  # a point two consumers share goes to the first of them
        self._points, self._owners = points[order], owners[order]

    def owners(self, slots: np.ndarray) -> np.ndarray:
        """The index (in the names given) of the consumer owning each slot."""
        return self._owners[np.searchsorted(self._points, slots, side="left") % len(self._points)]
