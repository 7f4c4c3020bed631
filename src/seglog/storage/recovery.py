"""Recovery of a partition's files after its last writer stopped (Kafka's LogLoader): the newest segment is
cut back to its commit point (segment.Commit), indexes that do not fit their logs are rebuilt, damage in
sealed segments is reported. Used by a writer as it opens, by `seglog.open` for partitions nobody writes
and by `seglog repair`."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from seglog._core._mapping import Mapping
from seglog.storage.segment import (
    CLEAN_MARKER,
    Commit,
    SegmentPaths,
    close_map,
    committed,
    copy_prefix,
    index_file_matches_log,
    last_batch_matches,
    list_segments,
    make_empty_segment,
    map_file,
    newest_timestamp,
    read_index_files,
    sync_directory,
    truncate_file,
    write_index_files,
)
from seglog.units import readable_size

logger = logging.getLogger(__name__)

UNUSED_SPACE_BLOCK = 1 << 20  # bytes of zeros taken as the start of space allocated ahead of a writer
RECOVERED_SUFFIX = ".recovered"  # <base>.log.recovered: a log's committed batches, before _seal_lost renames them


@dataclass
class RecoveryReport:
    """What recovering a partition found and repaired."""
    clean: bool = False  # the last writer closed the partition cleanly
    truncated_bytes: int = 0  # cut after the commit point: written bytes, then unused_bytes
    unused_bytes: int = 0  # of them, space allocated ahead of the writer and never written (zeros)
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
    for name in os.listdir(directory):  # nor a copy a crash left before _seal_lost renamed it into place
        if name.endswith(RECOVERED_SUFFIX):
            (directory / name).unlink(missing_ok=True)
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
    """Cut the newest segment back to its commit point and make its index say exactly that.

    What is cut past the published batches (an unfinished append, the reserve allocated ahead of the
    writer) no reader ever touched: the file is truncated. Published batches the log lost (damage, a power
    loss) may be mapped by readers in other processes, and cutting pages from under a map makes its next
    touch a SIGBUS: that file is left whole to them, and the kept batches go to a new one (_seal_lost)."""
    offsets, times = read_index_files(paths)
    data = map_file(paths.log, writable=False)
    try:
        commit = committed(data, base, offsets, times, clean=clean)
        written_end = _written_end(data, commit.end_position)
    finally:
        close_map(data)
    size = paths.log.stat().st_size
    cut = commit.end_position
    lost_messages = _lost_messages(commit, offsets, base)
    if commit.damaged:
        reason = (f"{commit.scan.reason} at byte {commit.scan.stop_position}; the index names "
                  f"{commit.published} batches, the log holds {commit.scan.count} soundly")
        report.lost.append((str(paths.log), commit.scan.stop_position, reason))
        logger.error("%s: acknowledged batches lost: %s", paths.log, reason)
    if size > cut:
        if commit.published_end > cut:
            _seal_lost(paths, commit)
        else:
            truncate_file(paths.log, cut)
        written, unused = max(0, min(written_end, size) - cut), size - max(written_end, cut)
        report.truncated_bytes += size - cut
        report.unused_bytes += unused
        level = logging.INFO if not written and not commit.damaged else logging.WARNING
        logger.log(level, "%s: cut %d bytes (%s) after the last committed batch at byte %d: %s; messages lost: %s",
                   paths.log, size - cut, readable_size(size - cut), cut, _what_was_cut(commit, written, unused),
                   _lost_wording(commit, lost_messages))
    if not commit.agrees:
        write_index_files(paths, base, commit.entries(), commit.count + 1)
        report.rebuilt_indexes += 1
    if commit.count and commit.published_end > cut:
        make_empty_segment(paths.log.parent, int(commit.scan.next_offsets[commit.count - 1]))


def _written_end(data: Mapping | None, start: int) -> int:
    """Where the bytes a writer wrote after `start` end: the byte after the last non-zero one before the first
    all-zero block of UNUSED_SPACE_BLOCK bytes, which is space allocated ahead of the writer that it never
    reached (fallocate reads as zeros). Read only to say what a cut removed: an unfinished batch holding a
    whole block of zeros would be counted as unused from there on, which changes no byte kept."""
    end = start
    if data is None:
        return end
    with memoryview(data) as view:
        for position in range(start, len(view), UNUSED_SPACE_BLOCK):
            nonzero = np.flatnonzero(np.frombuffer(view[position:position + UNUSED_SPACE_BLOCK].tobytes(), np.uint8))
            if not nonzero.size:
                break
            end = position + int(nonzero[-1]) + 1
    return end


def _lost_messages(commit: Commit, offsets: np.ndarray | None, base: int) -> tuple[int, int] | None:
    """The offsets [first, end) of the published messages the log no longer holds, None when the index does
    not say (it is missing, or names no more batches than the log holds)."""
    if offsets is None or commit.published is None or commit.published <= commit.count:
        return None
    kept_end = int(commit.scan.next_offsets[commit.count - 1]) if commit.count else base
    return kept_end, int(offsets[commit.published - 1, 0])


def _what_was_cut(commit: Commit, written: int, unused: int) -> str:
    parts = []
    if written:
        parts.append(f"{written} bytes of batches lost to damage ({commit.scan.reason})" if commit.damaged else
                     f"{written} bytes of an unfinished append (never acknowledged)")
    if unused:
        parts.append(f"{unused} bytes of space allocated ahead of the writer and never written (zeros)")
    return " and ".join(parts)


def _lost_wording(commit: Commit, lost: tuple[int, int] | None) -> str:
    if not commit.damaged:
        return "none"
    if lost is None:
        return "unknown (the index does not say how many were acknowledged)"
    first, end = lost
    return f"{end - first} (offsets {first} to {end - 1})"


def _seal_lost(paths: SegmentPaths, commit: Commit) -> None:
    """Replace a log that lost published batches by a copy of its committed batches, renamed over it: the
    old file stays whole under every map of it. Its last write becomes the newest timestamp it holds, as
    after any recovery (mark_recovered).

    The next segment then starts at the commit point (make_empty_segment, by the caller after the index is
    rewritten), so that new batches go to a file no reader has mapped: a reader that mapped this one before
    the recovery reads its committed batches there, and finds the next segment as it finds any other. A
    segment that kept no batch cannot end there (the next would have its name): its next writer writes
    into the copy, an empty file."""
    staging = paths.log.with_name(paths.log.name + RECOVERED_SUFFIX)
    copy_prefix(paths.log, staging, commit.end_position)
    if commit.count:
        newest = int(commit.scan.max_timestamps[commit.count - 1])
        os.utime(staging, ns=(newest * 1_000_000,) * 2, follow_symlinks=False)
    os.replace(staging, paths.log)
    sync_directory(paths.log.parent)


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
