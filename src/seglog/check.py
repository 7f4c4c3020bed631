"""Verifying and repairing a data directory (`seglog check`, `seglog repair`).

check: read every batch of every segment, checking header, offsets and CRC32C, and every index against its
log; nothing is changed. repair: the recovery a writer runs when it opens a partition, applied to every
partition and forced (clean shutdown markers are not trusted): torn tails cut, indexes rebuilt. Damage
inside a sealed segment cannot be repaired without losing what follows it; repair reports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from seglog.errors import SymbolicLinkError
from seglog.lock import writer_locks
from seglog.segment import (
    CLEAN_MARKER,
    LOCK_FILE,
    SegmentPaths,
    close_map,
    index_file_matches_log,
    list_segments,
    map_file,
    refuse_symbolic_links,
    scan_log,
    symbolic_links,
)
from seglog.writer import recover_partition


@dataclass(frozen=True)
class Problem:
    path: str
    position: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: byte {self.position}: {self.reason}"


@dataclass
class CheckReport:
    partitions: int = 0
    segments: int = 0
    bytes_checked: int = 0
    batches: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def partition_directories(data_directory: Path) -> Iterator[Path]:
    """Every partition directory under `<data>/topics/<tenant>/<namespace>/<topic>/`."""
    root = Path(data_directory) / "topics"
    yield from sorted(p for p in root.glob("*/*/*/*") if p.is_dir() and p.name.isdigit())


def check_partition(directory: Path, report: CheckReport, progress: Callable[[int], None] | None = None) -> None:
    bases = list_segments(directory)
    report.partitions += 1
    if reported_symbolic_links(directory, report):
        return
    expected = bases[0] if bases else 0
    for i, base in enumerate(bases):
        paths = SegmentPaths.of(directory, base)
        report.segments += 1
        if base != expected:
            report.problems.append(Problem(str(paths.log), 0, f"segment starts at offset {base}, "
                                                              f"expected {expected} (offsets missing)"))
        data = map_file(paths.log, writable=False)
        try:
            scan = scan_log(data, base, verify_crc=True)
            size = len(data) if data is not None else 0
        finally:
            close_map(data)
        last = i == len(bases) - 1
        report.batches += scan.count
        report.bytes_checked += scan.stop_position
        if progress:
            progress(size)
        # A sealed segment's index is final, and so is the last one's after a clean close; a live or
        # crashed writer's active segment may have entries its index does not show yet.
        index_final = not last or (directory / CLEAN_MARKER).exists()
        if not scan.clean or (not last and scan.stop_position != size):
            report.problems.append(Problem(str(paths.log), scan.stop_position, scan.reason))
        elif index_final and not index_file_matches_log(paths, base, None if last else bases[i + 1]):
            report.problems.append(Problem(str(paths.index), 0, "index does not match its log "
                                                                 "(rebuilt by `seglog repair` or the next writer)"))
        expected = int(scan.next_offsets[-1]) if scan.count else base


def reported_symbolic_links(directory: Path, report: CheckReport) -> bool:
    """Report the symbolic links a partition is reached through or holds (seglog opens none of its files
    then); whether there were any."""
    links = symbolic_links(directory)
    report.problems += [Problem(str(link), 0, SymbolicLinkError.REASON) for link in links]
    return bool(links)


def check_log(data_directory: Path, progress: Callable[[int], None] | None = None) -> CheckReport:
    """Verify every partition of a data directory; nothing is changed."""
    report = CheckReport()
    for directory in partition_directories(data_directory):
        check_partition(directory, report, progress)
    return report


def repair_log(data_directory: Path) -> tuple[int, int, list[Problem]]:
    """Run forced recovery on every partition: returns (bytes cut, indexes rebuilt, damage left).

    Every partition's writer lock is taken before anything changes, so a partition locked by a running
    writer stops the repair before it has touched any partition; so does one with a symbolic link
    (SymbolicLinkError)."""
    directories = list(partition_directories(data_directory))
    for directory in directories:  # before any lock file is made: one through a link would be outside
        refuse_symbolic_links(directory)
    cut = rebuilt = 0
    damaged: list[Problem] = []
    with writer_locks(d / LOCK_FILE for d in directories):
        for directory in directories:
            report = recover_partition(directory, trust_clean=False)
            cut += report.truncated_bytes
            rebuilt += report.rebuilt_indexes
            damaged += [Problem(*d) for d in report.damaged]
    return cut, rebuilt, damaged


def total_log_bytes(data_directory: Path) -> int:
    """The size of every segment log under a data directory (for progress bars)."""
    return sum(p.stat().st_size for d in partition_directories(data_directory) for p in d.glob("*.log"))
