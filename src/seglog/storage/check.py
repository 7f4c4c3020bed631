"""Verifying and repairing a data directory (`seglog check`, `seglog repair`).

check: read every batch of every segment, checking header, offsets and CRC32C, and every index against its
log, and each partition's compacted view (check_compacted_view); nothing is changed (`seglog check` checks
broker.conf too). repair: the recovery a writer runs when it
opens a partition, applied to every partition and forced (clean shutdown markers are not trusted): newest
segments cut back to their commit point, every index that disagrees with its log rebuilt. Damage inside a
sealed segment cannot be repaired without losing what follows it; repair reports it. recover_log: the
recovery `seglog.open` runs. topic_leftovers: what a crash in the middle of creating or deleting a topic
left, which the next `seglog.open` (or `seglog repair`) finishes or removes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Iterator

from seglog.errors import CorruptLogError, InvalidNameError, PartitionLockedError, SymbolicLinkError
from seglog.names import TopicName
from seglog.storage.compacted import (
    DATA_SUFFIX,
    STATE_NAME,
    STATE_STAGING,
    CompactedFile,
    CompactedState,
    compacted_directory,
    read_state,
)
from seglog.storage.fence import FENCE_FILE, fence_deleted
from seglog.storage.lock import ExclusiveFileLock, writer_locks
from seglog.storage.recovery import RecoveryReport, mark_recovered, recover_partition
from seglog.storage.segment import (
    CLEAN_MARKER,
    LOCK_FILE,
    Commit,
    SegmentPaths,
    close_map,
    committed,
    list_segments,
    map_file,
    read_index_files,
    refuse_symbolic_links,
    symbolic_links,
)


@dataclass(frozen=True)
class Problem:
    path: str
    position: int
    reason: str
    # what `position` counts: a byte of a segment or index, a line of broker.conf; "" for a whole directory
    unit: str = "byte"

    def __str__(self) -> str:
        where = f" {self.unit} {self.position}:" if self.unit else ""
        return f"{self.path}:{where} {self.reason}"


@dataclass
class CheckReport:
    partitions: int = 0
    segments: int = 0
    bytes_checked: int = 0
    batches: int = 0
    problems: list[Problem] = field(default_factory=list)
    # Not damage: bytes after a partition's commit point (an unfinished append), which recovery cuts.
    notes: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def topic_directory(data_directory: Path, name: TopicName) -> Path:
    """Where a topic's files are: `<data>/topics/<tenant>/<namespace>/<topic>/`."""
    return Path(data_directory).joinpath("topics", *name.path_parts())


def unowned_topics(data_directory: Path, listed: Collection[str]) -> list[TopicName]:
    """The topics that have a directory under `<data>/topics/` but are not in `listed` (the metadata's topic
    names): what a creation that never committed, or a deletion cut short after its commit, left."""
    root = Path(data_directory) / "topics"
    unowned = []
    for directory in sorted(root.glob("*/*/*")):
        parts = directory.relative_to(root).parts
        try:
            name = TopicName.parse("/".join(parts))
        except InvalidNameError:  # not a directory seglog made: left alone
            continue
        if directory.is_dir() and name.path_parts() == parts and str(name) not in listed:
            unowned.append(name)
    return unowned


UNOWNED = ("a topic directory that no topic owns, left by a crash while the topic was created or deleted "
           "(removed by the next `seglog.open` or `seglog repair`)")


def topic_leftovers(data_directory: Path, listed: Collection[str]) -> list[Problem]:
    """What a crash in the middle of creating or deleting a topic left: directories no topic in `listed` (the
    metadata's topic names) owns, and listed topics whose fence says deleted (a deletion to finish)."""
    problems = [Problem(str(topic_directory(data_directory, name)), 0, UNOWNED, unit="")
                for name in unowned_topics(data_directory, listed)]
    for name in listed:
        directory = topic_directory(data_directory, TopicName.parse(name))
        if fence_deleted(directory):
            problems.append(Problem(str(directory / FENCE_FILE), 0, f"topic {name} was being deleted when a crash "
                                    "stopped it (finished by the next `seglog.open` or `seglog repair`)", unit=""))
    return problems


def partition_directories(data_directory: Path) -> Iterator[Path]:
    """Every partition directory under `<data>/topics/<tenant>/<namespace>/<topic>/`."""
    root = Path(data_directory) / "topics"
    yield from sorted(p for p in root.glob("*/*/*/*") if p.is_dir() and p.name.isdigit())


def check_partition(directory: Path, report: CheckReport, progress: Callable[[int], None] | None = None) -> None:
    """Scan every segment with CRC checks; sealed ones must be sound to their end and indexed exactly, the
    newest must hold every committed batch (the commit rule, segment.Commit) and be indexed exactly."""
    bases = list_segments(directory)
    clean = (directory / CLEAN_MARKER).exists()
    report.partitions += 1
    if reported_symbolic_links(directory, report):
        return
    # Read before the segments: a horizon is never past the end a compaction saw, and the end only grows.
    view = check_compacted_view(directory)
    report.problems += view.problems
    report.notes += view.notes
    expected = bases[0] if bases else 0
    for i, base in enumerate(bases):
        paths = SegmentPaths.of(directory, base)
        newest = i == len(bases) - 1
        report.segments += 1
        if base != expected:
            report.problems.append(Problem(str(paths.log), 0, f"segment starts at offset {base}, "
                                                              f"expected {expected} (offsets missing)"))
        offsets, times = read_index_files(paths)
        data = map_file(paths.log, writable=False)
        try:
            commit = committed(data, base, offsets, times, clean=clean or not newest)
        finally:
            close_map(data)
        report.bytes_checked += commit.scan.stop_position
        report.batches += commit.count
        if progress:
            progress(commit.log_size)
        if newest:
            _check_newest(paths, commit, report)
        else:
            _check_sealed(paths, commit, report)
        expected = int(commit.scan.next_offsets[commit.count - 1]) if commit.count else base
    horizon = view.horizon_problem(expected)
    if horizon is not None:
        report.problems.append(horizon)


def _check_sealed(paths: SegmentPaths, commit: Commit, report: CheckReport) -> None:
    scan = commit.scan
    if not scan.clean or scan.stop_position != commit.log_size:
        report.problems.append(Problem(str(paths.log), scan.stop_position, scan.reason))
    elif not commit.agrees:
        report.problems.append(Problem(str(paths.index), 0, INDEX_DIFFERS))


def _check_newest(paths: SegmentPaths, commit: Commit, report: CheckReport) -> None:
    scan = commit.scan
    if commit.damaged:
        reason = scan.reason if commit.clean else \
            f"{scan.reason}: the index names {commit.published} batches, the log holds {commit.count} of them " \
            "soundly (recovery cuts the rest)"
        report.problems.append(Problem(str(paths.log), scan.stop_position, reason))
    elif not commit.agrees:
        report.problems.append(Problem(str(paths.index), 0, INDEX_DIFFERS))
    elif scan.stop_position > commit.end_position or not scan.clean:
        what = "sound batches" if scan.clean else scan.reason
        report.notes.append(Problem(str(paths.log), commit.end_position,
                                    f"an unfinished append after the last committed batch ({what}; never "
                                    "acknowledged, cut by the next writer or `seglog repair`)"))


INDEX_DIFFERS = "index does not match its log (rebuilt by `seglog repair` or the next writer)"


# A damaged view is derived data, as an index is: `seglog repair` removes it and the next compaction makes it
# again from the log (docs/LIFECYCLE.md, Compaction).
VIEW_REMOVED_BY_REPAIR = "removed by `seglog repair`; the next compaction makes the view again from the log"
# Times the view is read again when a compaction replaced it while it was being checked.
_VIEW_ATTEMPTS = 20


@dataclass
class CompactedViewCheck:
    """What check_compacted_view found in a partition's compacted view: its state (None: never compacted,
    or not readable), its damage, and what is not damage (the leftovers of an unfinished compaction)."""
    state: CompactedState | None = None
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    directory: Path | None = None

    def horizon_problem(self, log_end: int) -> Problem | None:
        """The view's horizon past the log's end offset `log_end` (measured after the state was read): the
        log lost messages the view was made from, and a compacted read would hide the offsets written
        again."""
        if self.state is None or self.state.horizon <= log_end or self.directory is None:
            return None
        return Problem(str(compacted_directory(self.directory) / STATE_NAME), 0,
                       f"the compacted view's horizon, {self.state.horizon}, is past the log's end offset, {log_end} "
                       f"(the log lost messages the view was made from; {VIEW_REMOVED_BY_REPAIR})")


def check_compacted_view(partition_directory: Path) -> CompactedViewCheck:
    """Check a partition's compacted view (storage.compacted), changing nothing: its state.json parses, the
    data file it names is there, every batch of it is sound (header, CRC32C, offsets ascending below the
    horizon), and its batches hold the state's `records` messages in its `size` bytes. Data files the
    state does not name are notes, not damage: what an unfinished compaction left, which the next one
    removes. A compaction that replaces the view meanwhile makes the check read it again."""
    directory = compacted_directory(partition_directory)
    if not directory.is_dir():
        return CompactedViewCheck()
    for _ in range(_VIEW_ATTEMPTS):
        checked = CompactedViewCheck(directory=partition_directory)
        try:
            checked.state = read_state(partition_directory)
        except CorruptLogError as error:
            checked.problems.append(Problem(error.path, error.position, f"{error.reason} ({VIEW_REMOVED_BY_REPAIR})"))
            return checked
        named = None if checked.state is None else checked.state.file_name
        if named is not None and checked.state is not None:
            try:
                problem = _data_file_problem(partition_directory, named, checked.state)
            except FileNotFoundError:  # a compaction replaced the view since its state was read
                continue
            if problem is not None:
                checked.problems.append(problem)
        checked.notes += _leftovers(directory, named)
        return checked
    raise OSError(f"{directory / STATE_NAME}: the compacted view kept changing while being checked")


def _data_file_problem(partition_directory: Path, name: str, state: CompactedState) -> Problem | None:
    """What is wrong with the view's data file `name` against its `state`. FileNotFoundError when the file
    is gone because a compaction replaced the view meanwhile."""
    path = compacted_directory(partition_directory) / name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if read_state(partition_directory) != state:
            raise
        return Problem(str(path), 0, f"missing: the compacted view's state names it ({VIEW_REMOVED_BY_REPAIR})")
    if size == 0 and state.records == 0:
        return None
    try:
        file = CompactedFile(path, state)
    except CorruptLogError as error:
        return Problem(error.path, error.position, f"{error.reason} ({VIEW_REMOVED_BY_REPAIR})")
    close_map(file.data)
    return None


def _leftovers(directory: Path, named: str | None) -> list[Problem]:
    """The files of the view's directory that its state does not name: an older generation, or a
    compaction a crash cut short (before its commit, or while it was replacing the state)."""
    notes = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(DATA_SUFFIX) and name != named:
            notes.append(Problem(str(directory / name), 0, "a compacted view's data file its state does not name, "
                                 "left by a compaction that did not finish (removed by the next compaction or "
                                 "`seglog repair`)", unit=""))
        elif name == STATE_STAGING:
            notes.append(Problem(str(directory / name), 0, "a compacted view's state a compaction did not finish "
                                 "writing (replaced by the next compaction, removed by `seglog repair`)", unit=""))
    return notes


def reported_symbolic_links(directory: Path, report: CheckReport) -> bool:
    """Report the symbolic links a partition is reached through or holds (seglog opens none of its files
    then); whether there were any."""
    links = symbolic_links(directory)
    report.problems += [Problem(str(link), 0, SymbolicLinkError.REASON) for link in links]
    return bool(links)


def check_log(data_directory: Path, progress: Callable[[int], None] | None = None) -> CheckReport:
    """Verify every partition of the data directory; nothing is changed."""
    report = CheckReport()
    for directory in partition_directories(data_directory):
        check_partition(directory, report, progress)
    return report


@dataclass
class RepairReport:
    cut_bytes: int = 0
    unused_bytes: int = 0  # of cut_bytes, space allocated ahead of a writer and never written (zeros)
    rebuilt_indexes: int = 0
    damaged: list[Problem] = field(default_factory=list)  # damage left in sealed segments: reads stop there
    lost: list[Problem] = field(default_factory=list)     # acknowledged batches gone before the repair, now cut


def repair_log(data_directory: Path) -> RepairReport:
    """Run forced recovery on every partition and mark each cleanly closed.

    Every partition's writer lock is taken before anything changes, so a partition locked by a running
    writer stops the repair before it has touched any partition; so does one with a symbolic link
    (SymbolicLinkError)."""
    directories = list(partition_directories(data_directory))
    for directory in directories:  # before any lock file is made: one through a link would be outside
        refuse_symbolic_links(directory)
    repaired = RepairReport()
    with writer_locks(d / LOCK_FILE for d in directories):
        for directory in directories:
            report = recover_partition(directory, trust_clean=False)
            mark_recovered(directory)
            repaired.cut_bytes += report.truncated_bytes
            repaired.unused_bytes += report.unused_bytes
            repaired.rebuilt_indexes += report.rebuilt_indexes
            repaired.damaged += [Problem(*d) for d in report.damaged]
            repaired.lost += [Problem(*d) for d in report.lost]
    return repaired


def recover_log(data_directory: Path) -> dict[Path, RecoveryReport]:
    """Recover every partition that stopped without a clean close and has no writer now, and mark it
    cleanly closed, as Kafka recovers its logs when it loads them: `seglog.open` does this, so every
    process then reads what the next writer will keep. A partition whose writer lock another process
    holds is that process's to recover; one reached through a symbolic link is left alone (its users get
    SymbolicLinkError, `seglog check` reports it)."""
    reports = {}
    for directory in partition_directories(data_directory):
        if (directory / CLEAN_MARKER).exists() or symbolic_links(directory):
            continue
        try:
            lock = ExclusiveFileLock(directory / LOCK_FILE)
        except PartitionLockedError:
            continue
        try:
            if not (directory / CLEAN_MARKER).exists():  # a writer may have closed it meanwhile
                reports[directory] = recover_partition(directory)
                mark_recovered(directory)
        finally:
            lock.release()
    return reports


def total_log_bytes(data_directory: Path) -> int:
    """The size of every segment log under a data directory (for progress bars)."""
    return sum(p.stat().st_size for d in partition_directories(data_directory) for p in d.glob("*.log"))
