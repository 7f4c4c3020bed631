"""Damaged files: torn tails, flipped bytes, lost or mangled indexes. Damage is cut where it may be (the
unacknowledged tail of the active segment), reported with file and byte position where it may not (inside
a sealed segment, or bit rot after a clean close), and never skipped silently or returned as data."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog
from helpers_storage import (
    HEADER_BYTES,
    SEND_KIND,
    StoredBatch,
    check_batch,
    flip_byte,
    iterate_check,
    key_for,
    partition_dir,
    read_all,
    segment_logs,
    spawn_call,
    value_for,
    values_for,
    walk_batches,
)
from seglog.errors import CorruptLogError, SymbolicLinkError
from seglog.storage.check import check_log, repair_log
from seglog.storage.recovery import recover_partition

TOPIC = "acme/ops/events"
CLEAN_MARKER = ".clean-shutdown"
PER_BATCH = 40          # 40 x 100-byte values: a batch of about 4.6 KiB
SEGMENT_SIZE = "16 KiB"  # three batches per segment
BATCHES = 20            # about seven segments, the last one active
TOTAL = PER_BATCH * BATCHES + 10
HYPOTHESIS = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow])


def write_log(data: Path) -> None:
    """BATCHES send_batch calls and, in the middle, ten messages sent one by one; closed cleanly."""
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, segment_size=SEGMENT_SIZE)
        with topic.producer() as producer:
            offset = 0
            for i in range(BATCHES):
                assert producer.send_batch(values_for(offset, PER_BATCH)) == (0, offset)
                offset += PER_BATCH
                if i == BATCHES // 2:
                    for o in range(offset, offset + 10):
                        producer.send(value_for(o, SEND_KIND), key=key_for(o))
                    producer.flush()
                    offset += 10
    assert offset == TOTAL


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("template") / "data"
    write_log(data)
    logs = segment_logs(partition_dir(data, TOPIC))
    assert len(logs) >= 5, "the template must have several sealed segments"
    return data


@pytest.fixture
def data(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(template, copy)
    return copy


@contextmanager
def copy_of(template: Path) -> Iterator[Path]:
    """A private copy of the template (for hypothesis examples, which cannot use function fixtures)."""
    with tempfile.TemporaryDirectory() as directory:
        copy = Path(directory) / "data"
        shutil.copytree(template, copy)
        yield copy


def logs_of(data: Path) -> list[Path]:
    return segment_logs(partition_dir(data, TOPIC))


def batch_containing(path: Path, position: int) -> StoredBatch:
    return next(b for b in walk_batches(path) if b.position <= position < b.end)


def value_data_position(batch: StoredBatch) -> int:
    """Where the value bytes of a batch written by send_batch (no keys, no timestamps given) start."""
    offsets_bytes = (4 * (batch.count + 1) + 7) & ~7
    return batch.position + HEADER_BYTES + 8 * batch.count + offsets_bytes


def read_until_error(topic: seglog.Topic, **reader_options) -> tuple[int, CorruptLogError | None]:
    """Read from the start with read_batch, checking every message, until the end or a CorruptLogError;
    returns (offset reached, the error)."""
    reader = topic.reader("earliest", **reader_options)
    offset = 0
    try:
        while (batch := reader.read_batch()) is not None:
            offset += check_batch(batch, offset)
    except CorruptLogError as error:
        assert reader.offset == offset, "a failed read moved the reader"
        with pytest.raises(CorruptLogError) as again:
            reader.read_batch()
        assert (again.value.path, again.value.position) == (error.path, error.position), "not reported again"
        return offset, error
    finally:
        reader.close()
    return offset, None


def assert_names(error: CorruptLogError, path: Path, position: int) -> None:
    assert (Path(error.path), error.position) == (path, position), \
        f"error names {error.path} at byte {error.position}, expected {path} at byte {position}"
    assert str(path) in str(error) and f"byte {position}" in str(error), str(error)


def reopen_writer_and_append(data: Path, expected_end: int) -> int:
    """Open a producer (the writer's recovery), check the end offset and that appends continue there."""
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        with topic.producer() as producer:
            # The first write opens the partition's writer, whose recovery decides where it continues.
            assert producer.send_batch(values_for(expected_end, 25)) == (0, expected_end)
            assert producer.send(value_for(expected_end + 25, SEND_KIND), key=key_for(expected_end + 25)) == \
                (0, expected_end + 25)
        end = expected_end + 26
        assert topic.end_offset() == end
        assert read_all(topic) == end
        iterate_check(topic, max(0, expected_end - 100), end)
    return end


def assert_healthy(data: Path) -> None:
    report = check_log(data)
    assert report.ok, [str(p) for p in report.problems]
    for path in logs_of(data):  # every segment holds nothing but sound batches, back to back
        batches = walk_batches(path)
        assert (batches[-1].end if batches else 0) == path.stat().st_size, f"{path} has bytes after its batches"


# --- (a) torn tails of the active segment ---------------------------------------------------------------

def tear(path: Path, kind: str) -> int:
    """Tear the end of an active segment's log as a crash in the middle of a write would; returns the end
    offset the partition must have after recovery."""
    batches = walk_batches(path)
    last = batches[-1]
    content = path.read_bytes()
    if kind == "garbage":
        with open(path, "ab") as f:
            f.write(bytes(range(1, 256)) * 4)
        return last.next_offset
    if kind == "partial_batch":  # the first half of a batch, as a copy that was cut short
        with open(path, "ab") as f:
            f.write(content[last.position:last.position + last.length // 2])
        return last.next_offset
    if kind == "cut_in_body":
        os.truncate(path, last.position + HEADER_BYTES + (last.length - HEADER_BYTES) // 2)
        return last.base_offset
    if kind == "cut_in_header":
        os.truncate(path, last.position + HEADER_BYTES // 2)
        return last.base_offset
    raise ValueError(kind)


@pytest.mark.parametrize("crashed", [False, True], ids=["after-clean-close", "after-crash"])
@pytest.mark.parametrize("kind", ["garbage", "partial_batch", "cut_in_body", "cut_in_header"])
def test_torn_tail_of_active_segment_is_cut_and_appends_continue(data: Path, kind: str, crashed: bool) -> None:
    active = logs_of(data)[-1]
    before = walk_batches(active)
    expected_end = tear(active, kind)
    if crashed:
        (partition_dir(data, TOPIC) / CLEAN_MARKER).unlink()

    # A reader that changes nothing (background=False), then one whose open recovers the partition.
    for background in (False, True):
        with seglog.open(data, background=background) as log:
            topic = log.topic(TOPIC)
            reached, error = read_until_error(topic)
            assert reached == expected_end, f"{reached} messages readable before the tear at {expected_end}"
            if kind.startswith("cut") and not crashed:
                # After a clean close an acknowledged batch is no longer in the file: readers must say so,
                # naming it, rather than present a shorter partition as if nothing was lost.
                assert error is not None, "a batch cut short was skipped silently"
                assert_names(error, active, before[-1].position)
            else:
                # After a crash every process applies the commit rule: the index's batches as far as the
                # log holds them soundly. Bytes after the last acknowledged batch are no data either way.
                assert error is None, f"read past the commit point: {error}"
                assert topic.end_offset() == expected_end

    end = reopen_writer_and_append(data, expected_end)
    assert end == expected_end + 26
    assert_healthy(data)
    sound = [b for b in before if b.next_offset <= expected_end]
    assert walk_batches(active)[:len(sound)] == sound, "batches before the tear were changed"


def test_torn_only_batch_of_active_segment_leaves_it_empty_and_appends_continue(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, segment_size=SEGMENT_SIZE)
        with topic.producer() as producer:
            for i in range(7):  # three batches per segment: the seventh is alone in the active segment
                producer.send_batch(values_for(PER_BATCH * i, PER_BATCH))
    active = logs_of(data)[-1]
    [only] = walk_batches(active)
    os.truncate(active, only.position + only.length // 3)
    (partition_dir(data, TOPIC) / CLEAN_MARKER).unlink()
    assert reopen_writer_and_append(data, only.base_offset) == only.base_offset + 26
    assert_healthy(data)


@HYPOTHESIS
@given(cut=st.integers(min_value=1), crashed=st.booleans())
def test_log_cut_anywhere_in_its_last_batch_loses_only_that_batch(template: Path, cut: int, crashed: bool) -> None:
    with copy_of(template) as data:
        active = logs_of(data)[-1]
        last = walk_batches(active)[-1]
        os.truncate(active, last.position + cut % last.length)
        if crashed:
            (partition_dir(data, TOPIC) / CLEAN_MARKER).unlink()
        reopen_writer_and_append(data, last.base_offset)
        assert_healthy(data)


@HYPOTHESIS
@given(tail=st.binary(min_size=1, max_size=400), crashed=st.booleans())
def test_any_bytes_after_the_last_batch_are_cut(template: Path, tail: bytes, crashed: bool) -> None:
    with copy_of(template) as data:
        with open(logs_of(data)[-1], "ab") as f:
            f.write(tail)
        if crashed:
            (partition_dir(data, TOPIC) / CLEAN_MARKER).unlink()
        reopen_writer_and_append(data, TOTAL)
        assert_healthy(data)


# --- (b) a flipped byte inside a sealed segment, (d) bit rot in the active segment -----------------------

def assert_damage_reported(data: Path, path: Path, damaged: StoredBatch) -> None:
    """Reading stops at the damaged batch with an error naming it, every message before it is readable,
    a reader starting inside it fails too, and check_log reports it."""
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        reached, error = read_until_error(topic)
        assert reached == damaged.base_offset, \
            f"read up to offset {reached}; the damaged batch starts at {damaged.base_offset}"
        assert error is not None, "the damaged batch was returned as data"
        assert_names(error, path, damaged.position)

        reader = topic.reader(damaged.base_offset + damaged.count // 2)
        with pytest.raises(CorruptLogError) as raised:
            list(reader)  # iteration: Message objects
        assert_names(raised.value, path, damaged.position)
        reader.close()

    problems = check_log(data).problems
    assert any((Path(p.path), p.position) == (path, damaged.position) for p in problems), \
        f"check_log did not report {path} at byte {damaged.position}: {[str(p) for p in problems]}"


def test_flipped_byte_in_sealed_segment_is_reported_never_skipped(data: Path) -> None:
    sealed = logs_of(data)[2]
    damaged = walk_batches(sealed)[1]
    position = value_data_position(damaged) + 50 * 100 // 2 + 7  # inside the value of a middle message
    assert damaged.position < position < damaged.end
    flip_byte(sealed, position, 0x20)

    assert_damage_reported(data, sealed, damaged)

    # The same reader stops at the damage again and again (already covered by read_until_error); the
    # messages of the damaged batch are never returned with verification on, whatever the start offset.
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        reader = topic.reader(damaged.base_offset)
        for _ in range(3):
            with pytest.raises(CorruptLogError):
                reader.read_batch()
            assert reader.offset == damaged.base_offset
        reader.close()


@pytest.mark.parametrize("where", ["reader", "log"])
def test_flipped_value_byte_is_returned_as_is_without_crc_verification(data: Path, where: str) -> None:
    sealed = logs_of(data)[2]
    damaged = walk_batches(sealed)[1]
    message = damaged.count // 2
    position = value_data_position(damaged) + 100 * message + 40
    flip_byte(sealed, position, 0x01)

    options = {"verify_crc": False} if where == "log" else {}
    with seglog.open(data, **options) as log:
        topic = log.topic(TOPIC)
        reader = topic.reader("earliest", **({"verify_crc": False} if where == "reader" else {}))
        values = []
        while (batch := reader.read_batch()) is not None:
            values.extend(batch.column("value").to_pylist())
        reader.close()
    assert len(values) == TOTAL
    flipped = damaged.base_offset + message
    wrong = [o for o, v in enumerate(values) if v != value_for(o, v[12:13])]
    assert wrong == [flipped]
    expected = bytearray(value_for(flipped))
    expected[40] ^= 0x01
    assert values[flipped] == bytes(expected)


@HYPOTHESIS
@given(choice=st.integers(min_value=0), mask=st.integers(min_value=1, max_value=255), active=st.booleans())
def test_any_flipped_byte_is_reported_at_its_batch(template: Path, choice: int, mask: int, active: bool) -> None:
    """(b) and (d): a byte flipped anywhere in a sealed segment, or in the active segment after a clean
    close (bit rot), header bytes included."""
    with copy_of(template) as data:
        path = logs_of(data)[-1 if active else 1]
        position = choice % path.stat().st_size
        damaged = batch_containing(path, position)
        flip_byte(path, position, mask)
        assert_damage_reported(data, path, damaged)


def test_bit_rot_in_active_segment_after_clean_close_is_reported_by_read(data: Path) -> None:
    active = logs_of(data)[-1]
    batches = walk_batches(active)
    assert len(batches) >= 2
    damaged = batches[-1]
    flip_byte(active, value_data_position(damaged) + 333, 0x80)
    assert_damage_reported(data, active, damaged)


def test_repair_reports_damage_in_sealed_segment_and_keeps_what_follows(data: Path) -> None:
    sealed = logs_of(data)[2]
    damaged = walk_batches(sealed)[1]
    flip_byte(sealed, value_data_position(damaged) + 10, 0x04)
    files = {p: p.read_bytes() for p in logs_of(data)}

    repaired = repair_log(data)
    cut, reported = repaired.cut_bytes, repaired.damaged

    assert cut == 0, "repair cut bytes from a log with no torn tail"
    assert [(Path(p.path), p.position) for p in reported] == [(sealed, damaged.position)], \
        f"repair must report the damage it cannot repair: {[str(p) for p in reported]}"
    assert {p: p.read_bytes() for p in logs_of(data)} == files, "repair changed the segments"
    assert_damage_reported(data, sealed, damaged)


# --- (c) lost or mangled indexes ------------------------------------------------------------------------

def damage_index(data: Path, segment: Path, kind: str) -> None:
    index, timeindex = segment.with_suffix(".index"), segment.with_suffix(".timeindex")
    if kind == "missing_index":
        index.unlink()
    elif kind == "missing_timeindex":
        timeindex.unlink()
    elif kind == "missing_both":
        index.unlink()
        timeindex.unlink()
    elif kind == "zeroed":
        for path in (index, timeindex):
            path.write_bytes(bytes(path.stat().st_size))
    elif kind == "garbage":  # the right size, nonsense inside: large, negative and out-of-order entries
        for salt, path in enumerate((index, timeindex)):
            size = path.stat().st_size
            path.write_bytes(bytes((i * 151 + 89 + salt) % 256 for i in range(size)))
    elif kind == "short":  # not even one whole entry
        for path in (index, timeindex):
            path.write_bytes(b"\x07" * 9)
    else:
        raise ValueError(kind)


def read_everything(data: str) -> int:
    """In a child process (damage a reader mishandles may crash it): read the whole partition, by batches
    and by iteration, checking every message; returns the end offset."""
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        end = read_all(topic)
        iterate_check(topic, 0, end)
        return end


INDEX_DAMAGE = ["missing_index", "missing_timeindex", "missing_both", "zeroed", "garbage", "short"]


@pytest.mark.parametrize("kind", INDEX_DAMAGE)
@pytest.mark.parametrize("which", ["sealed", "active"])
def test_damaged_index_is_rebuilt_in_memory_by_readers_and_on_disk_by_the_writer(data: Path, which: str,
                                                                                 kind: str) -> None:
    segment = logs_of(data)[1 if which == "sealed" else -1]
    originals = {p: p.read_bytes() for p in (segment.with_suffix(".index"), segment.with_suffix(".timeindex"))}
    damage_index(data, segment, kind)

    problems = check_log(data).problems
    assert any(Path(p.path) in originals for p in problems), \
        f"check_log did not report the damaged index of {segment.name}: {[str(p) for p in problems]}"

    assert spawn_call(read_everything, str(data)) == TOTAL

    with seglog.open(data) as log:  # the writer's reopen rebuilds the files
        topic = log.topic(TOPIC)
        topic.producer(partitions=[0]).close()
    for path, content in originals.items():
        assert path.exists(), f"{path.name} was not rebuilt"
        assert path.read_bytes() == content, f"{path.name} rebuilt with different entries"
    assert read_everything(str(data)) == TOTAL
    assert_healthy(data)
    reopen_writer_and_append(data, TOTAL)


# --- (e) check and repair --------------------------------------------------------------------------------

def test_check_log_reports_nothing_on_a_healthy_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_log(data)
    with seglog.open(data) as log:  # a second topic with two partitions and keys
        topic = log.create_topic("other", partitions=2, segment_size="4 KiB")
        with topic.producer() as producer:
            producer.send_batch([b"v%d" % i for i in range(200)], keys=[b"k%d" % (i % 7) for i in range(200)])
    report = check_log(data)
    assert report.ok and report.problems == []
    logs = [p for d in (partition_dir(data, TOPIC), partition_dir(data, "other", 0), partition_dir(data, "other", 1))
            for p in segment_logs(d)]
    assert report.partitions == 3
    assert report.segments == len(logs)
    assert report.batches == sum(len(walk_batches(p)) for p in logs)
    assert report.bytes_checked == sum(p.stat().st_size for p in logs)

    files = {p: p.read_bytes() for p in logs}
    repaired = repair_log(data)
    cut, damaged = repaired.cut_bytes, repaired.damaged
    assert (cut, damaged) == (0, [])
    assert {p: p.read_bytes() for p in logs} == files


@pytest.mark.parametrize("kind", ["garbage", "partial_batch", "cut_in_body"])
def test_repair_cuts_a_torn_tail(data: Path, kind: str) -> None:
    active = logs_of(data)[-1]
    before = walk_batches(active)
    expected_end = tear(active, kind)
    sound = [b for b in before if b.next_offset <= expected_end]
    sound_end = sound[-1].end if sound else 0
    torn = active.stat()

    repaired = repair_log(data)

    assert repaired.damaged == []
    assert repaired.cut_bytes == torn.st_size - sound_end
    # The log holds its sound batches and nothing after them, however it was torn.
    assert active.stat().st_size == sound_end
    assert walk_batches(active) == sound
    # After a clean close the log is authoritative: whatever follows its sound batches is damage, reported.
    assert [(Path(p.path), p.position) for p in repaired.lost] == [(active, sound_end)]
    if kind == "cut_in_body":
        # The index had published the batch cut short, which a reader in another process may map: recovery
        # wrote the sound batches to a new file renamed over the log, leaving the old one whole to its maps
        # (cutting the file under one would be a SIGBUS), and new batches go to the next segment, which
        # starts at the commit point, empty: no reader mapped it.
        assert active.stat().st_ino != torn.st_ino
        assert [p.name for p in logs_of(data)[-2:]] == [active.name, f"{expected_end:020d}.log"]
        assert logs_of(data)[-1].stat().st_size == 0
    else:  # only bytes the index never published were cut: the file was truncated, no reader touched them
        assert active.stat().st_ino == torn.st_ino
        assert logs_of(data)[-1] == active
    assert check_log(data).ok
    assert spawn_call(read_everything, str(data)) == expected_end  # every sound message, nothing past the cut
    reopen_writer_and_append(data, expected_end)
    assert_healthy(data)


# --- (f) symbolic links ---------------------------------------------------------------------------------

LINKED = {  # what is moved out of the data directory and replaced by a symbolic link to it
    "active log": lambda data: logs_of(data)[-1],
    "sealed log": lambda data: logs_of(data)[0],
    "index": lambda data: logs_of(data)[-1].with_suffix(".index"),
    "timeindex": lambda data: logs_of(data)[-1].with_suffix(".timeindex"),
    "lock file": lambda data: partition_dir(data, TOPIC) / ".lock",
    "partition directory": lambda data: partition_dir(data, TOPIC),
    "topic directory": lambda data: partition_dir(data, TOPIC).parent,
}
SEGMENT_FILES = {"active log", "sealed log", "index", "timeindex"}


def link_outside(path: Path, outside: Path) -> None:
    """Move `path` to `outside` and leave a symbolic link to it in its place. Bytes after the batches of
    a moved log make recovery want to cut it."""
    outside.parent.mkdir()
    shutil.move(path, outside)
    path.symlink_to(outside, target_is_directory=outside.is_dir())
    if outside.suffix == ".log":
        with open(outside, "ab") as file:
            file.write(b"\x01" * 100)


def contents(path: Path) -> dict[str, bytes]:
    """Every file at or under `path`, with its bytes."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): p.read_bytes() for p in files}


@pytest.mark.parametrize("what", sorted(LINKED))
def test_symbolic_links_are_refused_and_what_they_point_to_is_untouched(data: Path, tmp_path: Path,
                                                                         what: str) -> None:
    link = LINKED[what](data)
    outside = tmp_path / "outside" / link.name
    link_outside(link, outside)
    before = contents(outside)

    attempts = {"writer": lambda topic: topic.producer(partitions=[0]), "reader": read_all}
    with seglog.open(data) as log:
        for name, attempt in attempts.items():
            with pytest.raises(SymbolicLinkError) as refused:
                attempt(log.topic(TOPIC))
            assert refused.value.path == str(link), name
            assert f"{link} is a symbolic link, which seglog does not follow" in str(refused.value)
    with pytest.raises(SymbolicLinkError, match="is a symbolic link"):
        repair_log(data)
    if what in SEGMENT_FILES:  # the recovery itself opens no segment file through a link
        with pytest.raises(SymbolicLinkError, match="is a symbolic link"):
            recover_partition(partition_dir(data, TOPIC), trust_clean=False)
    report = check_log(data)
    assert [(problem.path, problem.reason) for problem in report.problems] == [(str(link), SymbolicLinkError.REASON)]

    assert contents(outside) == before
    assert link.is_symlink()
