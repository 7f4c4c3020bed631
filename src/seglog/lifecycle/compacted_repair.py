"""`seglog repair`'s part for compacted views (docs/LIFECYCLE.md, Compaction): a view that
storage.check.check_compacted_view finds damaged is removed, its state first and then its data files, and
the files unfinished compactions left beside sound views are removed too. A view of Pulsar's model is derived
from the log, as an index is: the next compaction makes it again. A view that stands for the log (Kafka's
model, whose compacted segments are gone) keeps its sound batches instead (storage.compacted.salvage_view).
Each partition's view is repaired under its compaction lock, taken for every partition before anything
changes, so no compaction runs there meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from seglog.lifecycle.compaction import LOCK_NAME, CompactionRunningError
from seglog.storage.check import Problem, check_compacted_view, partition_directories
from seglog.storage.compacted import (
    STATE_NAME,
    STATE_STAGING,
    compacted_directory,
    read_state,
    remove_unnamed,
    salvage_view,
)
from seglog.storage.lock import ExclusiveFileLock
from seglog.storage.partition_view import PartitionView
from seglog.storage.segment import symbolic_links, sync_directory


@dataclass
class ViewRepairReport:
    removed_views: list[Problem] = field(default_factory=list)  # the damage of each view removed
    salvaged_views: list[Problem] = field(default_factory=list)  # the damage of each view cut to its sound part
    removed_leftovers: list[Path] = field(default_factory=list)  # files unfinished compactions left


@contextmanager
def compaction_locks(data_directory: Path) -> Iterator[list[Path]]:
    """Hold the compaction lock of every partition that has a compacted view (yielding their directories);
    CompactionRunningError, with every lock taken so far released, when a compaction runs in one of them.
    Partitions reached through a symbolic link are left out (repair refuses them)."""
    locks: list[ExclusiveFileLock] = []
    directories = [d for d in partition_directories(data_directory)
                   if compacted_directory(d).is_dir() and not symbolic_links(d)]
    try:
        for directory in directories:
            locks.append(ExclusiveFileLock(compacted_directory(directory) / LOCK_NAME, busy=CompactionRunningError))
        yield directories
    finally:
        for lock in locks:
            lock.release()


def repair_compacted_views(partition_directories: list[Path]) -> ViewRepairReport:
    """Remove each damaged view of the partitions given (their compaction locks held, their logs
    repaired), and every file unfinished compactions left beside the sound ones."""
    repaired = ViewRepairReport()
    for directory in partition_directories:
        checked = check_compacted_view(directory)
        view = PartitionView(directory)
        try:
            end = view.end_offset()
        finally:
            view.close()
        horizon = checked.horizon_problem(end)
        damage = [*checked.problems, *([horizon] if horizon is not None else [])]
        if damage and checked.state is not None and checked.state.log_compacted:
            salvage_view(directory, checked.state, end)
            repaired.salvaged_views += damage
        elif damage:
            remove_compacted_view(directory)
            repaired.removed_views += damage
        else:
            repaired.removed_leftovers += [Path(note.path) for note in checked.notes]
            remove_unnamed(compacted_directory(directory), read_state(directory))
            (compacted_directory(directory) / STATE_STAGING).unlink(missing_ok=True)
    return repaired


def remove_compacted_view(partition_directory: Path) -> None:
    """Remove the partition's compacted view: its state first (durably: from then on readers read the
    log and a crash leaves only files the next compaction removes), then every data file."""
    directory = compacted_directory(partition_directory)
    (directory / STATE_NAME).unlink(missing_ok=True)
    sync_directory(directory)
    remove_unnamed(directory, None)
    (directory / STATE_STAGING).unlink(missing_ok=True)
    sync_directory(directory)
