"""Closing a log releases every map and descriptor it holds on its data directory at once, not when the Log
object is garbage-collected (issue 26: each topic's .fence stayed mapped)."""

import gc
import os
from pathlib import Path

import pytest

import seglog


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


def test_close_releases_every_map_and_descriptor_while_the_log_and_its_handles_are_kept(tmp_path):
    data = tmp_path / "data"
    log = seglog.open(data, background=False)
    topics = [log.create_topic(name, partitions=2, segment_size="1 MiB") for name in ("a", "b", "acme/ns/c")]
    readers = []
    for topic in topics:
        with topic.producer() as producer:
            for i in range(2000):
                producer.send(b"x" * 600, key=str(i))
        readers.append(topic.reader("earliest", partition=1))  # left open: the log closes it
        assert readers[-1].read_batch() is not None
        consumer = topic.subscribe("s", initial_position="earliest")
        consumer.ack(consumer.receive(timeout=5))
        consumer.close()
    # A closed Consumer sits in a reference cycle holding its topic's fence byte (consumer.py), which only the
    # cycle collector frees: collected here, before the close, so that what the close must release is left.
    del consumer
    gc.collect()
    log.run_maintenance()
    mapped = mapped_files(data)
    assert {Path(path).name for path in mapped} >= {".fence", "00000000000000000000.log"}  # it sees maps

    log.close()

    assert mapped_files(data) == set()
    assert open_files(data) == set()
    for topic, reader in zip(topics, readers):  # the handles kept are refused as closed, not as deleted
        with pytest.raises(seglog.errors.ClosedError):
            reader.read_batch()
        with pytest.raises(seglog.errors.ClosedError):
            topic.reader("earliest")
