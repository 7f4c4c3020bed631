"""A partition's compacted view on disk: each key's latest message below a horizon, as compacted batches
(format version 3: each record keeps its offset, docs/FORMAT.md) in one data file beside the partition's
segments, and the state that names that file (docs/LIFECYCLE.md, Compaction).

    <partition>/compacted/state.json                 the current generation, its horizon, recent runs
    <partition>/compacted/<generation>.compacted     its batches, offsets ascending, all below the horizon

A compaction writes the next generation's file whole, fsyncs it, then replaces state.json atomically: that
rename is the commit. Files state.json does not name (an older generation, a run a crash cut short) are
removed by the next compaction. A reader maps the file state.json names; once mapped, the file may be
removed under it (its pages stay until the last batch over them is gone), so a swap never breaks a read."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import numpy.typing as npt

from seglog._core._compact import copy_kept
from seglog._core._format import HEADER_BYTES, SCAN_REASONS, ScanStatus, read_header, scan_batches
from seglog._core._mapping import Mapping
from seglog.errors import CorruptLogError
from seglog.storage.segment import map_file, sync_directory

COMPACTED_DIRECTORY = "compacted"
STATE_NAME = "state.json"
STATE_STAGING = STATE_NAME + ".tmp"  # the next state, written whole before it is renamed over STATE_NAME
DATA_SUFFIX = ".compacted"
STATE_VERSION = 1
# Recent compactions kept in the state for Kafka's tombstone rule (CompactedState.cleaned_before): when
# more accumulate, the oldest are merged into the next, which only keeps tombstones longer.
MAX_RUNS = 256
# What the writer buffers before a write(): the compactor's memory stays this, whatever it writes.
WRITE_BUFFER_BYTES = 8 << 20
# Batches listed per scan call when a data file is opened (the listing's arrays grow a chunk at a time).
_SCAN_CHUNK = 65536
_RECORD_COUNT, _BODY_LENGTH = 8, 9  # of read_header's fields (docs/FORMAT.md, the batch header)
_RECORD_COUNT_AT = 40  # the record_count field's place in the header
_MAX_TIMESTAMP_AT = 32  # the max_timestamp field's
# Times a reader tries again when a compaction replaced the file between reading the state and mapping it.
_OPEN_ATTEMPTS = 20


@dataclass(frozen=True)
class CompactedState:
    """What state.json holds. `generation` counts the compactions and names the data file (0: none yet);
    offsets below `horizon` are compacted: the file holds each key's latest message among them (`records`
    messages, `size` bytes). `runs`: (horizon, finished at, ms) of recent compactions, oldest first, which
with `oldest_tombstone` tell when Kafka's tombstones are due to go (cleaned_before). The
    last compaction's figures are Pulsar's `compaction` section of internal stats."""
    generation: int = 0
    horizon: int = 0
    records: int = 0
    size: int = 0
    runs: tuple[tuple[int, int], ...] = ()
    oldest_tombstone: int = -1     # the offset of the oldest tombstone the view keeps (-1: none)
    # Kafka's model: the log's segments below the horizon are deleted once compacted, and the view stands
    # for the log there (every reader reads it where the log no longer has messages, tombstones included)
    log_compacted: bool = False
    last_removed: int = 0          # messages the last compaction left out of the view
    last_duration_ms: int = 0
    last_finished_ms: int = 0

    @property
    def file_name(self) -> str | None:
        return None if self.generation == 0 else f"{self.generation:020d}{DATA_SUFFIX}"

    def cleaned_before(self, time_ms: int) -> int:
        """The highest horizon of a compaction finished at or before `time_ms` (0: none): every offset
        below it was in the compacted view by then (Kafka's delete horizon for tombstones)."""
        return max((horizon for horizon, finished in self.runs if finished <= time_ms), default=0)

    def after_run(self, *, horizon: int, records: int, size: int, removed: int, duration_ms: int,
                  finished_ms: int, oldest_tombstone: int, log_compacted: bool) -> CompactedState:
        runs = (*self.runs, (horizon, finished_ms))
        if len(runs) > MAX_RUNS:  # merge the oldest into the next: its offsets then count as cleaned later
            runs = runs[1:]
        return replace(self, generation=self.generation + 1, horizon=horizon, records=records, size=size,
                       runs=runs, oldest_tombstone=oldest_tombstone,
                       log_compacted=self.log_compacted or log_compacted, last_removed=removed,
                       last_duration_ms=duration_ms, last_finished_ms=finished_ms)

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "generation": self.generation, "horizon": self.horizon,
                "records": self.records, "size": self.size, "runs": [list(run) for run in self.runs],
                "oldest_tombstone": self.oldest_tombstone, "log_compacted": self.log_compacted,
                "last_removed": self.last_removed, "last_duration_ms": self.last_duration_ms,
                "last_finished_ms": self.last_finished_ms}

    @classmethod
    def from_json(cls, data: Any, path: Path) -> CompactedState:
        try:
            if data["version"] != STATE_VERSION:
                raise ValueError(f"version {data['version']!r}, not {STATE_VERSION}")
            state = cls(int(data["generation"]), int(data["horizon"]), int(data["records"]), int(data["size"]),
                        tuple((int(h), int(t)) for h, t in data["runs"]), int(data["oldest_tombstone"]),
                        bool(data["log_compacted"]),
                        int(data["last_removed"]),
                        int(data["last_duration_ms"]), int(data["last_finished_ms"]))
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptLogError(str(path), 0, f"not a compacted view's state ({error})") from None
        if min(state.generation, state.horizon, state.records, state.size) < 0:
            raise CorruptLogError(str(path), 0, "not a compacted view's state (a negative count)")
        return state


def compacted_directory(partition_directory: Path) -> Path:
    return partition_directory / COMPACTED_DIRECTORY


def read_state(partition_directory: Path) -> CompactedState | None:
    """The partition's compacted state, or None when it was never compacted."""
    path = compacted_directory(partition_directory) / STATE_NAME
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        raise CorruptLogError(str(path), 0, "not a compacted view's state (not JSON)") from None
    return CompactedState.from_json(data, path)


def commit_state(partition_directory: Path, state: CompactedState) -> None:
    """Make `state` the partition's compacted state, durably (the new data file was fsynced before), then
    remove every data file it does not name."""
    directory = compacted_directory(partition_directory)
    path = directory / STATE_NAME
    staging = directory / STATE_STAGING
    with open(staging, "w", encoding="utf-8") as file:
        json.dump(state.to_json(), file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(staging, path)
    sync_directory(directory)
    remove_unnamed(directory, state)


def remove_unnamed(directory: Path, state: CompactedState | None) -> None:
    """Remove the data files `state` does not name: older generations and runs a crash cut short."""
    keep = None if state is None else state.file_name
    for name in os.listdir(directory):
        if name.endswith(DATA_SUFFIX) and name != keep:
            (directory / name).unlink(missing_ok=True)


@dataclass(frozen=True)
class ViewScan:
    """The sound batches at the start of a view's data file (their base offsets, next offsets, positions and
    message counts), and where and why the scan stopped: `damage` None when it reached the file's end."""
    bases: npt.NDArray[np.int64]
    nexts: npt.NDArray[np.int64]
    positions: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    stop: int
    damage: str | None

    @property
    def records(self) -> int:
        return int(self.counts.sum())


def scan_view(data: Mapping) -> ViewScan:
    """Every batch of a view's data file checked (header, CRC32C, layout, offsets growing across batches),
    from the start to the end or the first that is not sound."""
    size = len(data)
    bases, nexts, ends = [], [], []
    position, expected, damage = 0, 0, None
    while position < size:
        chunk = [np.empty(_SCAN_CHUNK, dtype=np.int64) for _ in range(4)]
        count, stop, status, _ = scan_batches(data, position, size, expected, True, chunk[0], chunk[1], chunk[2],
                                              gaps=True, base_offsets=chunk[3])
        bases.append(chunk[3][:count])
        nexts.append(chunk[0][:count])
        ends.append(chunk[1][:count])
        if count:
            expected = int(chunk[0][count - 1])
        position = stop
        if status not in (ScanStatus.SCAN_END, ScanStatus.SCAN_INDEX_FULL) or \
                (status == ScanStatus.SCAN_END and stop != size):
            damage = SCAN_REASONS.get(status, "a batch is damaged")
            break
    ends_all = np.concatenate(ends) if ends else np.empty(0, np.int64)
    positions = np.concatenate(([0], ends_all[:-1])).astype(np.int64) if len(ends_all) else np.empty(0, np.int64)
    return ViewScan(np.concatenate(bases) if bases else np.empty(0, np.int64),
                    np.concatenate(nexts) if nexts else np.empty(0, np.int64), positions,
                    _record_counts(data, positions), position, damage)


def _record_counts(data: Mapping, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The record_count header field of the batches at `positions`, read at once (docs/FORMAT.md, Header)."""
    return _header_field(data, positions, _RECORD_COUNT_AT, "<i4")


def newest_timestamps(data: Mapping, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The max_timestamp header field of the batches at `positions` (log or view), read at once."""
    return _header_field(data, positions, _MAX_TIMESTAMP_AT, "<i8")


def _header_field(data: Mapping, positions: npt.NDArray[np.int64], at: int, kind: str) -> npt.NDArray[np.int64]:
    width = np.dtype(kind).itemsize
    field = positions[:, None] + at + np.arange(width)
    return np.frombuffer(memoryview(data), dtype=np.uint8)[field].copy().view(kind)[:, 0].astype(np.int64)


class CompactedFile:
    """One generation's data file, mapped read-only, its batches listed when opened: every batch's header,
    CRC32C and layout checked, its offsets growing and all below the horizon, the messages and bytes its
    state records (CorruptLogError otherwise). Immutable once written: shared by the partition's readers."""

    def __init__(self, path: Path, state: CompactedState) -> None:
        self.path = path
        self.records = state.records
        data = map_file(path, writable=False)
        if data is None:
            raise CorruptLogError(str(path), 0, f"empty, though the view's state says it holds {self.records} messages")
        self.data: Mapping = data
        scan = scan_view(data)
        if scan.damage is not None:
            raise CorruptLogError(str(path), scan.stop, scan.damage)
        self.bases, self.nexts, self.positions, self.counts = scan.bases, scan.nexts, scan.positions, scan.counts
        # the view's messages before each batch, and in all (so a range's count is two look-ups)
        self.counted_before = np.concatenate(([0], np.cumsum(scan.counts))).astype(np.int64)
        if len(self.nexts) and int(self.nexts[-1]) > state.horizon:
            raise CorruptLogError(str(path), int(self.positions[-1]),
                                  f"offset {int(self.nexts[-1]) - 1} is not below the horizon, {state.horizon}")
        if scan.records != state.records or len(data) != state.size:
            raise CorruptLogError(str(path), 0, f"holds {scan.records} messages in {len(data)} bytes, its state says "
                                                f"{state.records} messages in {state.size} bytes")

    @property
    def batches(self) -> int:
        return len(self.positions)

    def holds_older_than(self, time_ms: int) -> bool:
        """Whether a batch of the view has its newest message before `time_ms`."""
        return bool((newest_timestamps(self.data, self.positions) < time_ms).any())

    def find(self, offset: int) -> int:
        """The index of the first batch holding an offset at or after `offset` (`batches` if none)."""
        return int(np.searchsorted(self.nexts, offset, side="right"))


@dataclass
class CompactedView:
    """A partition's compacted view as its readers see it: the current state and its file, opened again
    when state.json changes. One per partition per open log (storage.store), thread-safe."""
    partition_directory: Path
    _identity: tuple[int, int, int, int] | None = None
    _current: tuple[CompactedState, CompactedFile | None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # state.json's path as a str: asked for before every batch a reader takes from the view
    _state_path: str = field(init=False)

    def __post_init__(self) -> None:
        self._state_path = str(compacted_directory(self.partition_directory) / STATE_NAME)

    def current(self) -> tuple[CompactedState, CompactedFile | None] | None:
        """(state, its file; None when the view is empty) as state.json says now; None when the partition
        was never compacted."""
        path = self._state_path
        with self._lock:
            for _ in range(_OPEN_ATTEMPTS):
                identity = _identity(path)
                if identity == self._identity:
                    return self._current
                state = read_state(self.partition_directory)
                if state is None:
                    self._identity, self._current = None, None
                    return None
                try:
                    name = state.file_name
                    file = CompactedFile(compacted_directory(self.partition_directory) / name, state) \
                        if name is not None and state.records else None
                except FileNotFoundError:  # replaced since the state was read: read it again
                    continue
                self._identity, self._current = identity, (state, file)
                return self._current
        raise OSError(f"{path}: the compacted view kept changing while being opened")

    def horizon(self) -> int:
        current = self.current()
        return 0 if current is None else current[0].horizon

    def reach(self, read_compacted: bool, earliest: Callable[[], int]) -> ViewReach | None:
        """Where the view is read (docs/LIFECYCLE.md, Compaction): below its horizon by a compacted read, its
        tombstones left out; below the log's `earliest()` offset by every read where the view stands for
        the log (Kafka's model), tombstones read. None where it is not read at all."""
        current = self.current()
        if current is None:
            return None
        state, file = current
        if read_compacted:
            return ViewReach(state, file, state.horizon, state.oldest_tombstone >= 0)
        if state.log_compacted:
            return ViewReach(state, file, min(state.horizon, earliest()), False)
        return None


class ViewReach(NamedTuple):
    """What a read takes of a compacted view: its state and file (None when empty), the offset where reading
    it stops, and whether its null values are left out (tombstones kept for Kafka's delete_retention, which
    a compacted read does not show)."""
    state: CompactedState
    file: CompactedFile | None
    limit: int
    drop_null_values: bool


def _identity(path: str) -> tuple[int, int, int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_ctime_ns, status.st_size


class CompactedWriter:
    """Writes the next generation's data file: compacted batches through a bounded buffer (the
    compactor's memory is the buffer, whatever it writes), fsynced by `finish`. Nothing is visible to
    readers until commit_state names the file."""

    def __init__(self, partition_directory: Path, generation: int) -> None:
        directory = compacted_directory(partition_directory)
        directory.mkdir(exist_ok=True)
        self.path = directory / f"{generation:020d}{DATA_SUFFIX}"
        self.path.unlink(missing_ok=True)  # a run of the same generation a crash cut short
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._buffer = bytearray(WRITE_BUFFER_BYTES)
        self._used = 0
        self.size = 0
        self.records = 0

    def append(self, data: Mapping, positions: npt.NDArray[np.int64], keep: npt.NDArray[np.uint8]) -> None:
        """The kept records (`keep`: one item a record, non-zero to keep) of the whole stored batches at
        `positions` of `data`, as compacted batches."""
        self.records += int(np.count_nonzero(keep))
        while len(positions):
            out = memoryview(self._buffer)[self._used:]
            batches, records, written = copy_kept(data, positions, keep, out)
            self._used += written
            if batches == 0:  # the next batch does not fit what is left of the buffer
                if self._used:
                    self._flush()
                    continue
                need = _selected_bound(data, int(positions[0]))
                self._buffer = bytearray(max(need, WRITE_BUFFER_BYTES))
                continue
            positions, keep = positions[batches:], keep[records:]

    def _flush(self) -> None:
        view = memoryview(self._buffer)[:self._used]
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.size += self._used
        self._used = 0
        if len(self._buffer) > WRITE_BUFFER_BYTES:  # after an oversized batch
            self._buffer = bytearray(WRITE_BUFFER_BYTES)

    def finish(self) -> None:
        """Write what is buffered and make the file durable."""
        self._flush()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1

    def abort(self) -> None:
        """Give the file up (a failed run): closed and removed."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)


def _selected_bound(data: Mapping, position: int) -> int:
    """The most a compacted batch of records of the stored batch at `position` can take: its length plus
    8 bytes a record (the offsets column); every other section only shrinks."""
    header = read_header(data, position)
    return HEADER_BYTES + header[_BODY_LENGTH] + 8 * header[_RECORD_COUNT]


def salvage_view(partition_directory: Path, state: CompactedState, end_offset: int) -> CompactedState:
    """Keep what can be read of a damaged view that stands for the log (Kafka's model: the log no longer has
    its messages, so removing it would lose every key's latest message below its horizon): its sound batches
    up to the first damaged one, and below the log's `end_offset` (a log that lost its tail after the view
    was made would reuse the offsets past it), as the next generation. Returns the state committed."""
    horizon = min(state.horizon, end_offset)
    name = state.file_name
    data = None if name is None else _map_if_present(compacted_directory(partition_directory) / name)
    writer = CompactedWriter(partition_directory, state.generation + 1)
    try:
        if data is not None:
            scan = scan_view(data)
            whole = scan.nexts <= horizon
            writer.append(data, scan.positions[whole], np.ones(int(scan.counts[whole].sum()), dtype=np.uint8))
        writer.finish()
    except BaseException:
        writer.abort()
        raise
    salvaged = replace(state, generation=state.generation + 1, horizon=horizon, records=writer.records,
                       size=writer.size, oldest_tombstone=-1 if writer.records == 0 else state.oldest_tombstone)
    commit_state(partition_directory, salvaged)
    return salvaged


def _map_if_present(path: Path) -> Mapping | None:
    try:
        return map_file(path, writable=False)
    except FileNotFoundError:
        return None
