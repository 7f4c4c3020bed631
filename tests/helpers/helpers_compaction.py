"""Shared by the compaction crash and concurrency tests (tests/lifecycle/test_compaction_crash.py).

Every message describes itself: message_for(offset) gives the key and value of the message at that offset
(some keyless, some tombstones, the rest keyed values over KEYS keys), so the parent checks any message read
back without being told what a killed child wrote. The reference for compacted reads is computed from a
plain read of the log, with dicts, independently of the compaction kernel."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

KEYS = 40
KEYLESS, TOMBSTONE = 0, 1  # message kinds; the other eight of ten are keyed values
# Each run of WINDOW offsets uses 4 of the keys, so a batch of at most 300 messages holds at most 28 keys: a
# compaction with an offset map of MAP_KEYS_SMALL keys can then always cut a range at a batch boundary.
WINDOW = 50
MAP_KEYS_SMALL = 30


def message_for(offset: int) -> tuple[bytes | None, bytes | None]:
    """(key, value) of the message at `offset`: a tenth keyless, a tenth tombstones (null values)."""
    mixed = offset * 2654435761
    kind = (mixed >> 7) % 10
    value = b"v%d" % offset
    if kind == KEYLESS:
        return None, value
    key = b"k%d" % ((offset // WINDOW * 3 + (mixed >> 11) % 4) % KEYS)
    return (key, None) if kind == TOMBSTONE else (key, value)


def messages_for(first: int, count: int) -> tuple[list[bytes | None], list[bytes | None]]:
    """(keys, values) of `count` messages from offset `first`."""
    pairs = [message_for(offset) for offset in range(first, first + count)]
    return [key for key, _ in pairs], [value for _, value in pairs]


def read_rows(reader: Any, max_messages: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of everything `reader` reads from its position to the end, by read_batch."""
    rows: list[tuple[int, bytes | None, bytes | None]] = []
    while (batch := reader.read_batch(max_messages)) is not None and batch.num_rows:
        rows += zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                    batch.column("value").to_pylist())
    return rows


def wrong_messages(rows: Iterable[tuple[int, bytes | None, bytes | None]]) -> list[int]:
    """The offsets among `rows` whose key or value is not the one written there."""
    return [offset for offset, key, value in rows if (key, value) != message_for(offset)]


def latest_per_key(rows: Iterable[tuple[int, bytes | None, bytes | None]], below: int) -> list[tuple]:
    """The compacted view's reference: of `rows` (a plain read) below offset `below`, each key's latest
    message unless it is a tombstone, in offset order; keyless messages are left out."""
    latest: dict[bytes, tuple] = {}
    for row in rows:
        if row[0] < below and row[1] is not None:
            latest[row[1]] = row
    return sorted(row for row in latest.values() if row[2] is not None)


# A reader of a compacted view that checks what it reads while compactions replace the view: a few rows a
# call, so that a read spans swaps. The final offset F is where it stops (nothing more at that moment): every
# key's latest message below F with a value must be among what it read (a read never skips one), offsets
# strictly grow, and every message is the one written at its offset.
def compacted_read_problems(topic: Any, rows_per_call: int) -> list[str]:
    reader = topic.reader(read_compacted=True)
    try:
        read = read_rows(reader, rows_per_call)
        final = reader.offset
    finally:
        reader.close()
    problems = []
    offsets = [row[0] for row in read]
    if any(b <= a for a, b in zip(offsets, offsets[1:])):
        problems.append(f"offsets do not grow: {offsets[:50]}")
    wrong = wrong_messages(read)
    if wrong:
        problems.append(f"messages not as written at offsets {wrong[:10]}")
    plain = topic.reader()
    try:
        log = read_rows(plain)
    finally:
        plain.close()
    seen = set(offsets)
    skipped = [row[0] for row in latest_per_key(log, final) if row[0] not in seen]
    if skipped:
        problems.append(f"keys' latest messages below {final} skipped, at offsets {skipped[:10]}")
    return problems
