"""Durable subscription cursors: one file per subscription, replaced atomically, checked by CRC32C.

    <data>/subscriptions/<tenant>/<namespace>/<topic>/<name>.cursor
    <data>/subscriptions/<tenant>/<namespace>/<topic>/<name>.lock    held by the process consuming it

File layout (little-endian, docs/FORMAT.md "Subscription cursor"): magic b"SLCURSR1", u32 format version,
u32 subscription type, i64 creation time (ms), u32 partition count; per partition: i64 expired, i64 evicted,
u32 flags (version 2 only), u32 length, the AckSet's own bytes (its floor, i.e. the mark-delete position + 1,
and a bitmap of the individual acks above it); then u32 CRC32C of everything before it. Both versions are read;
a cursor is written in the lowest version that holds it, version 1 unless a partition has a flag, as record
batches are (so an older seglog still reads the cursors of subscriptions that use nothing new). A new version
is written beside the file and renamed over it, so a crash leaves the old state or the new one, never a
mixture: a subscription resumes at its last persisted state.

The flags hold what Pulsar keeps in a cursor's properties: FLAG_REPLICATED, the partition's subscription is
replicated (PIP-33, Pulsar's `pulsar.replicated.subscription`), so it is saved with the acknowledgements it
is about, under the same CRC and by the same owner."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from seglog._core._acks import AckSet
from seglog._core._format import crc32c
from seglog.errors import CorruptLogError
from seglog.storage.segment import sync_directory

MAGIC = b"SLCURSR1"
SUBSCRIPTION_TYPES = ("exclusive", "failover", "shared", "key_shared")
CURSOR_SUFFIX = ".cursor"
LOCK_SUFFIX = ".lock"
FLAG_REPLICATED = 1
_FLAGS = FLAG_REPLICATED  # every flag this version knows: another bit is a newer version's, or damage
_HEADER = struct.Struct("<8sIIqI")
_PARTITION = {1: struct.Struct("<qqI"), 2: struct.Struct("<qqII")}  # by format version
_CRC = struct.Struct("<I")


@dataclass
class PartitionCursor:
    """A subscription's position on one partition: what it acknowledged, and the messages it skipped."""
    acks: AckSet
    expired: int = 0  # acknowledged by the message TTL
    evicted: int = 0  # skipped by backlog-quota eviction or because their segment was deleted
    replicated: bool = False  # its position is replicated to the other clusters (PIP-33)


@dataclass
class CursorRecord:
    subscription_type: str
    created_ms: int
    partitions: list[PartitionCursor] = field(default_factory=list)


def encode(record: CursorRecord) -> bytes:
    version = 2 if any(cursor.replicated for cursor in record.partitions) else 1
    parts = [_HEADER.pack(MAGIC, version, SUBSCRIPTION_TYPES.index(record.subscription_type), record.created_ms,
                          len(record.partitions))]
    for cursor in record.partitions:
        acks = cursor.acks.to_bytes()
        counts = (cursor.expired, cursor.evicted)
        flags = (FLAG_REPLICATED if cursor.replicated else 0,) if version == 2 else ()
        parts += [_PARTITION[version].pack(*counts, *flags, len(acks)), acks]
    body = b"".join(parts)
    return body + _CRC.pack(crc32c(body))


def decode(data: bytes, path: Path) -> CursorRecord:
    """The record in `data`; CorruptLogError naming `path` and the byte where it is not sound."""
    def corrupt(position: int, reason: str) -> CorruptLogError:
        return CorruptLogError(str(path), position, f"subscription cursor: {reason}")

    if len(data) < _HEADER.size + _CRC.size:
        raise corrupt(0, f"{len(data)} bytes, shorter than a header")
    body, (crc,) = data[:-_CRC.size], _CRC.unpack_from(data, len(data) - _CRC.size)
    if crc32c(body) != crc:
        raise corrupt(len(body), "CRC32C mismatch")
    magic, version, type_code, created_ms, count = _HEADER.unpack_from(body, 0)
    if magic != MAGIC or version not in _PARTITION or type_code >= len(SUBSCRIPTION_TYPES):
        raise corrupt(0, f"unknown magic, version or type: magic {magic.hex()}, version {version}, type {type_code}")
    record = CursorRecord(SUBSCRIPTION_TYPES[type_code], created_ms)
    entry = _PARTITION[version]
    position = _HEADER.size
    for _ in range(count):
        if position + entry.size > len(body):
            raise corrupt(position, "truncated partition entry")
        if version == 1:
            (expired, evicted, length), flags = entry.unpack_from(body, position), 0
        else:
            expired, evicted, flags, length = entry.unpack_from(body, position)
            if flags & ~_FLAGS:
                raise corrupt(position + 16, f"unknown flags {flags:#x} (this version knows {_FLAGS:#x})")
        position += entry.size
        try:
            acks = AckSet.from_bytes(body[position:position + length])
        except ValueError as error:
            raise corrupt(position, str(error)) from None
        record.partitions.append(PartitionCursor(acks, expired, evicted, bool(flags & FLAG_REPLICATED)))
        position += length
    if position != len(body):
        raise corrupt(position, "bytes left after the last partition")
    return record


def load(path: Path) -> CursorRecord:
    return decode(path.read_bytes(), path)


def save(path: Path, record: CursorRecord, *, fsync: bool) -> None:
    """Replace the file atomically; with `fsync`, durable against power loss too (file and directory)."""
    staging = path.with_name(path.name + ".tmp")
    with open(staging, "wb") as file:
        file.write(encode(record))
        if fsync:
            file.flush()
            os.fsync(file.fileno())
    os.replace(staging, path)
    if fsync:
        sync_directory(path.parent)


def subscription_names(directory: str | Path) -> list[str]:
    """The subscriptions of a topic whose subscription directory is `directory`, sorted."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n[:-len(CURSOR_SUFFIX)] for n in names if n.endswith(CURSOR_SUFFIX))
