"""Kafka's rule for compacted topics: every message has a key. Kafka's broker refuses a record without one
on a topic whose cleanup.policy contains compact ("Compacted topic cannot accept message without key"), since
compaction keeps the latest message per key and a keyless one has none to be kept under. An empty key (b"")
is a key, as in Kafka.

The rule is checked once per send call, against the topic's settings as they are now: `KeysRequired.refresh`
reads them again whenever they may have changed (the quota guard re-arms the topic's producers then, for a
change made in this process at once, for one made in another at the housekeeper's next look)."""

from __future__ import annotations

from typing import Any

import numpy as np

from seglog.catalog.topics import Catalog
from seglog.errors import InvalidArgumentError, TopicNotFoundError
from seglog.names import TopicName


class KeysRequired:
    """Whether the messages of topic `name` must have keys: while its cleanup_policy compacts.
    `required` is one attribute read, so a topic that does not compact costs its sends nothing more."""

    def __init__(self, catalog: Catalog, name: TopicName) -> None:
        self._catalog = catalog
        self.name = name
        self.cleanup_policy = "delete"
        self.required = False
        self.refresh()

    def refresh(self) -> None:
        """Read the topic's cleanup policy again (a topic deleted meanwhile keeps the last one: its users fail
        on their fence)."""
        try:
            self.cleanup_policy = self._catalog.topic(self.name).config.cleanup_policy
        except TopicNotFoundError:
            return
        self.required = self.cleanup_policy != "delete"

    def check_key(self, key: bytes | None) -> None:
        """Refuse one message without a key (send()), while keys are required."""
        if self.required and key is None:
            raise self.refusal("key", None)

    def checked_keys(self, keys: Any) -> Any:
        """The keys of one send_batch call, if every message has one (an iterator is made a list first, so
        that the caller can still read it); else InvalidArgumentError naming the first message without one.
        While keys are not required, `keys` as they are."""
        if not self.required:
            return keys
        if keys is not None and not isinstance(keys, (list, tuple, np.ndarray)) and not hasattr(keys, "null_count"):
            keys = list(keys)  # (any iterable is accepted as keys; reading it here would leave the writer none)
        missing = first_without_key(keys)
        if missing is not None:
            raise self.refusal("keys", None if keys is None else f"None at index {missing}")
        return keys

    def refusal(self, argument: str, value: object) -> InvalidArgumentError:
        """The error for a message without a key, naming `argument` ('key' or 'keys') as given."""
        return InvalidArgumentError(
            argument, value, "a key (bytes or str; b'' is a key) for every message",
            detail=f"topic {self.name} has cleanup_policy '{self.cleanup_policy}', which keeps the latest message "
                   "per key: a message without a key is refused, as Kafka refuses it (\"Compacted topic cannot "
                   "accept message without key\")")


def first_without_key(keys: Any) -> int | None:
    """The index of the first message without a key (0 when no keys are given at all), or None. A pyarrow
    array counts its nulls when it is made; a numpy array of fixed-width records has none; a list or a tuple
    is scanned in C (`None in keys`)."""
    if keys is None:
        return 0
    null_count = getattr(keys, "null_count", None)
    if null_count is not None:
        return keys.to_pylist().index(None) if null_count else None
    if isinstance(keys, np.ndarray):
        if keys.dtype != object:
            return None
        keys = keys.tolist()
    return keys.index(None) if None in keys else None
