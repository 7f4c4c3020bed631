"""Recovery of a partition's files after its last writer stopped (Kafka's LogLoader): the newest segment is
cut back to its commit point (segment.Commit), indexes that do not fit their logs are rebuilt, damage in
sealed segments is reported. Used by a writer as it opens, by `seglog.open` for partitions nobody writes
and by `seglog repair`."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage.segment import (
    CLEAN_MARKER,
    SegmentPaths,
    close_map,
    committed,
    index_file_matches_log,
    last_batch_matches,
    list_segments,
    map_file,
    newest_timestamp,
    read_index_files,
    truncate_file,
    write_index_files,
    zero_range,
)

logger = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    """What recovering a partition found and repaired."""
    clean: bool = False  # the last writer closed the partition cleanly
    truncated_bytes: int = 0
    rebuilt_indexes: int = 0
    damaged: list[tuple[str, int, str]] = field(default_factory=list)  # (file, position, reason) in sealed segments
    lost: list[tuple[str, int, str]] = field(default_factory=list)  # acknowledged batches the newest segment lost


def recover_partition(directory: Path, *, trust_clean: bool = True) -> RecoveryReport:
    """Make a partition's files consistent (the caller holds its writer lock), as a writer does when it
    opens, `seglog.open` does for a partition nobody writes, and `seglog repair` does on demand.

    Logs are read only where something may be wrong: the newest segment after an unclean stop is cut back
    to its commit point (segment.Commit), and a segment whose index does not fit its log is indexed again
    from the log (a cheap look at the index files, no scan, tells). With `trust_clean=False` (repair)
    every log is scanned with CRC checks and every index that disagrees with its log is rebuilt. Damage
    inside a sealed segment is reported, never cut: reads stop there with its position."""
    clean = (directory / CLEAN_MARKER).exists()
    report = RecoveryReport(clean=clean and trust_clean)
    SegmentPaths.spare(directory).remove()  # a spare segment a crash left is no part of the partition
    bases = list_segments(directory)
    for i, base in enumerate(bases):
        paths = SegmentPaths.of(directory, base)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        if trust_clean and next_base is not None and index_file_matches_log(paths, base, next_base):
            continue
        if next_base is None:
            if trust_clean and clean and last_batch_matches(paths, base):
                continue
            _recover_newest(paths, base, clean, report)
        else:
            _reindex_sealed(paths, base, report)
    return report


def _recover_newest(paths: SegmentPaths, base: int, clean: bool, report: RecoveryReport) -> None:
    """Cut the newest segment back to its commit point and make its index say exactly that."""
    offsets, times = read_index_files(paths)
    data = map_file(paths.log, writable=False)
    try:
        commit = committed(data, base, offsets, times, clean=clean)
    finally:
        close_map(data)
    size = paths.log.stat().st_size
    cut = commit.end_position
    if commit.damaged:
        reason = (f"{commit.scan.reason} at byte {commit.scan.stop_position}; the index names "
                  f"{commit.published} batches, the log holds {commit.scan.count} soundly")
        report.lost.append((str(paths.log), commit.scan.stop_position, reason))
        logger.error("%s: acknowledged batches lost: %s", paths.log, reason)
    if size > cut:
        # Damaged batches that the index published may be mapped by readers in other processes: zero
        # them rather than cut the file from under them. Everything after is no reader's business.
        kept = max(cut, min(commit.published_end, size))
        zero_range(paths.log, cut, kept)
        truncate_file(paths.log, kept)
        report.truncated_bytes += size - cut
        logger.warning("%s: cut %d bytes after the last committed batch at byte %d (%s)", paths.log,
                    size - cut, cut, commit.scan.reason if commit.damaged else "an unfinished append")
    if not commit.agrees:
        write_index_files(paths, base, commit.entries(), commit.count + 1)
        report.rebuilt_indexes += 1


def _reindex_sealed(paths: SegmentPaths, base: int, report: RecoveryReport) -> None:
    """Scan a sealed segment with CRC checks: report damage, and index it again if its index disagrees."""
    offsets, times = read_index_files(paths)
    data = map_file(paths.log, writable=False)
    try:
        commit = committed(data, base, offsets, times, clean=True)  # sealed: the log decides
    finally:
        close_map(data)
    scan = commit.scan
    if not scan.clean or scan.stop_position != commit.log_size:
        report.damaged.append((str(paths.log), scan.stop_position, scan.reason))
        logger.error("%s: damaged at byte %d (%s)", paths.log, scan.stop_position, scan.reason)
    if not commit.agrees:
        write_index_files(paths, base, scan, scan.count + 1)
        report.rebuilt_indexes += 1


def mark_recovered(directory: Path) -> None:
    """Record a recovered partition as cleanly closed, so the next open reads nothing. Its newest
    segment's last write becomes the newest timestamp it holds, as a writer reopening it after a crash
    would assume (Kafka's time retention does the same)."""
    bases = list_segments(directory)
    newest = newest_timestamp(SegmentPaths.of(directory, bases[-1])) if bases else None
    if newest is not None:
        os.utime(SegmentPaths.of(directory, bases[-1]).log, ns=(newest * 1_000_000,) * 2, follow_symlinks=False)
    (directory / CLEAN_MARKER).touch()
