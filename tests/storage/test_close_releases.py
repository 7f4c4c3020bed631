"""Closing a log releases every map and descriptor it holds on its data directory at once, not when the Log
object is garbage-collected (issue 26: each topic's .fence stayed mapped)."""

import gc
import os
from pathlib import Path

import pytest

import seglog
from seglog._core._format import Prefaulter
from seglog._core._mapping import Mapping


def mapped_files(under: Path) -> set[str]:
    """The files under `under` this process maps (/proc/self/maps: the path is the sixth field)."""
    prefix = str(under.resolve())
    with open("/proc/self/maps") as maps:
        paths = {fields[5] for fields in (line.split(maxsplit=5) for line in maps) if len(fields) == 6}
    return {path.strip() for path in paths if path.strip().startswith(prefix)}


def open_files(under: Path) -> set[str]:
    """The files under `under` this process has a descriptor on (/proc/self/fd)."""
    prefix = str(under.resolve())
    targets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            targets.add(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the descriptor listdir itself used
            continue
    return {target for target in targets if target.startswith(prefix)}


def assert_released_by_close(data: Path) -> None:
    """Nothing of the data directory is mapped or open once the log's close returned: the writers' logs too,
    which their prefault thread unmaps (a writer's close stops the thread once it has unmapped them)."""
    assert open_files(data) == set()
    assert mapped_files(data) == set()


@pytest.fixture
def no_cycle_collector():
    """Nothing is left to the cycle collector: what the close must release is still there when it runs."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_close_releases_every_map_and_descriptor_while_the_log_and_its_handles_are_kept(tmp_path,
                                                                                        no_cycle_collector):
    data = tmp_path / "data"
    log = seglog.open(data, background=False)
    topics = [log.create_topic(name, partitions=2, segment_size="1 MiB") for name in ("a", "b", "acme/ns/c")]
    readers, producers, consumers = [], [], []
    for topic in topics:
        producer = topic.producer()
        for i in range(2000):
            producer.send(b"x" * 600, key=str(i))
        producer.flush()
        producers.append(producer)  # left open: its send path tests the fence's map
        readers.append(topic.reader("earliest", partition=1))  # left open: the log closes it
        assert readers[-1].read_batch() is not None
        closed = topic.subscribe("closed", initial_position="earliest")
        closed.ack(closed.receive(timeout=5))
        closed.close()
        kept = topic.subscribe("open", initial_position="earliest")
        kept.ack(kept.receive(timeout=5))  # left open, holding the messages receive() took after this one
        consumers += [closed, kept]
    log.run_maintenance()
    ends = [topic.end_offset(p) for topic in topics for p in (0, 1)]
    mapped = mapped_files(data)
    assert {Path(path).name for path in mapped} >= {".fence", "00000000000000000000.log"}  # it sees maps

    log.close()

    assert_released_by_close(data)
    for topic, reader in zip(topics, readers):  # the handles kept are refused as closed, not as deleted
        with pytest.raises(seglog.errors.ClosedError):
            reader.read_batch()
        with pytest.raises(seglog.errors.ClosedError):
            topic.reader("earliest")
    for producer in producers:  # closed with the log: nothing written after it, closing again changes nothing
        with pytest.raises(seglog.errors.ClosedError):
            producer.send(b"late")
        with pytest.raises(seglog.errors.ClosedError):
            producer.send_batch([b"late"])
        producer.close()
    for consumer in consumers:
        with pytest.raises(seglog.errors.ClosedError):
            consumer.receive(timeout=0)
        with pytest.raises(seglog.errors.ClosedError):
            consumer.ack(0)
        consumer.close()
    assert mapped_files(data) == set()
    assert open_files(data) == set()
    with seglog.open(data, background=False) as log:  # nothing was written after the close
        assert [log.topic(topic.name).end_offset(p) for topic in topics for p in (0, 1)] == ends


def test_close_releases_the_fence_of_a_deleted_topic_its_old_handles_hold(tmp_path, no_cycle_collector):
    data = tmp_path / "data"
    log = seglog.open(data, background=False)
    old = log.create_topic("t").producer()
    old.send(b"before")
    log.delete_topic("t", force=True)  # the old producer is fenced, and keeps the deleted topic's fence
    with pytest.raises(seglog.errors.TopicNotFoundError):
        old.send(b"deleted")
    new = log.create_topic("t").producer()
    new.send(b"after")
    new.flush()
    assert [Path(path).name for path in mapped_files(data)].count(".fence (deleted)") == 1

    log.close()

    assert_released_by_close(data)


def test_a_stopped_prefault_thread_has_unmapped_what_it_was_handed(tmp_path):
    """(a writer's close stops its thread: the close returns with the writer's log unmapped, not a few
    milliseconds later)"""
    path = tmp_path / "segment.log"
    path.write_bytes(bytes(1 << 20))
    prefaulter = Prefaulter()
    fd = os.open(path, os.O_RDWR)
    try:
        mapping = Mapping(fd, 1 << 20, True)
    finally:
        os.close(fd)
    prefaulter.target(mapping)
    prefaulter.unmap_later(mapping)
    prefaulter.close()
    assert mapped_files(tmp_path) == set()
    with pytest.raises(RuntimeError, match="stopped"):
        prefaulter.target(bytearray(4096))
    prefaulter.close()  # (again: nothing)
