"""A subscription's files: a refused subscribe or an unsubscribe leaves none behind, names fit the file
system, a lock file removed by its holder is never held by two processes at once, and the cursor file's
versions (a version-1 cursor written by an older seglog reads and resumes)."""

import json
import shutil
import struct
from pathlib import Path

import pytest

import seglog
from seglog._core._format import crc32c
from seglog.errors import CorruptLogError, InvalidArgumentError, InvalidNameError
from seglog.names import MAX_SUBSCRIPTION_NAME_LENGTH
from seglog.storage import lock
from seglog.storage.lock import ExclusiveFileLock
from seglog.subscriptions import cursor_file


def subscription_files(log, topic) -> list[str]:
    directory = Path(log.path).joinpath("subscriptions", *topic.name.split("/"))
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.mark.parametrize("option", [{"ack_timeout": "abc"}, {"negative_ack_redelivery_delay": -1},
                                    {"subscription_type": "fifo"}, {"initial_position": "middle"}])
def test_a_refused_subscribe_leaves_no_subscription_cursor_or_lock(log, option):
    topic = log.create_topic("refused")
    with pytest.raises(InvalidArgumentError):
        topic.subscribe("s", **option)
    assert topic.subscriptions() == []
    assert subscription_files(log, topic) == []
    with topic.subscribe("s", subscription_type="shared") as consumer:  # the name is free
        assert consumer.subscription.type == "shared"


def test_a_refused_second_consumer_keeps_the_existing_subscription(log):
    topic = log.create_topic("kept")
    with topic.subscribe("s") as first:
        first.ack  # noqa: B018 - the subscription exists and is consumed
        with pytest.raises(InvalidArgumentError):
            topic.subscribe("s", ack_timeout="abc")
        assert topic.subscriptions() == ["s"]
    assert topic.subscriptions() == ["s"]


def test_unsubscribe_leaves_no_files(log):
    topic = log.create_topic("gone")
    topic.subscribe("s").unsubscribe()
    assert subscription_files(log, topic) == []


def test_subscription_names_fit_the_file_system(log):
    topic = log.create_topic("names")
    longest = "s" * MAX_SUBSCRIPTION_NAME_LENGTH
    with topic.subscribe(longest) as consumer:
        topic.producer().close()
        consumer.seek("earliest")
    assert topic.subscriptions() == [longest]
    for length in (MAX_SUBSCRIPTION_NAME_LENGTH + 1, 250, 255):
        with pytest.raises(InvalidNameError, match=f"more than {MAX_SUBSCRIPTION_NAME_LENGTH}"):
            topic.subscribe("s" * length)
    assert topic.subscriptions() == [longest]


def test_a_lock_file_removed_by_its_holder_is_locked_afresh(tmp_path, monkeypatch):
    """The race remove_and_release guards against: B opened the file, A removed it and let go, B's flock
    succeeds on the removed file. B must find that out and lock the file now at the path."""
    path = tmp_path / "s.lock"
    holder = ExclusiveFileLock(path)
    removed_inode = path.stat().st_ino
    original = lock._lock_exclusive
    calls = []

    def lock_after_the_holder_removed_it(fd):
        if not calls:  # B's first attempt: A removes the file and releases between B's open and flock
            holder.remove_and_release()
            path.write_bytes(b"")  # and a third process has made a new one since
        calls.append(fd)
        return original(fd)

    monkeypatch.setattr(lock, "_lock_exclusive", lock_after_the_holder_removed_it)
    second = ExclusiveFileLock(path)
    assert len(calls) == 2, "the lock on the removed file was not given up"
    assert path.stat().st_ino != removed_inode
    with pytest.raises(seglog.errors.PartitionLockedError):
        monkeypatch.setattr(lock, "_lock_exclusive", original)
        ExclusiveFileLock(path)
    second.release()


# --- the cursor file's versions (docs/FORMAT.md, "Subscription cursor") ---------------------------------------------

CURSOR_V1 = Path(__file__).resolve().parent.parent / "data" / "cursor_v1"


def _as_expected(record) -> dict:
    """A cursor record as tests/data/cursor_v1/expected.json has it."""
    return {"subscription_type": record.subscription_type, "created_ms": record.created_ms,
            "partitions": [{"expired": c.expired, "evicted": c.evicted, "floor": c.acks.floor,
                            "acked": c.acks.ranges().tolist()} for c in record.partitions]}


def test_a_version_1_cursor_reads_exactly_and_is_still_written_byte_for_byte():
    """The committed cursor was written by the last version-1 writer; nothing replicated, today's writer writes
    version 1 too, so an older seglog still reads it."""
    data = (CURSOR_V1 / "s.cursor").read_bytes()
    record = cursor_file.decode(data, CURSOR_V1 / "s.cursor")
    assert _as_expected(record) == json.loads((CURSOR_V1 / "expected.json").read_text())
    assert [c.replicated for c in record.partitions] == [False, False]
    assert cursor_file.encode(record) == data


def test_a_replicated_partition_is_written_as_version_2_and_reads_back():
    record = cursor_file.decode((CURSOR_V1 / "s.cursor").read_bytes(), CURSOR_V1 / "s.cursor")
    record.partitions[1].replicated = True
    data = cursor_file.encode(record)
    assert struct.unpack_from("<I", data, 8) == (2,)
    again = cursor_file.decode(data, Path("s.cursor"))
    assert [c.replicated for c in again.partitions] == [False, True]
    assert _as_expected(again) == _as_expected(record)


def test_a_flag_this_version_does_not_know_is_refused_naming_the_file_and_the_byte():
    record = cursor_file.decode((CURSOR_V1 / "s.cursor").read_bytes(), CURSOR_V1 / "s.cursor")
    record.partitions[0].replicated = True
    body = bytearray(cursor_file.encode(record)[:-4])
    flags_at = 28 + 16  # the header, then partition 0's expired and evicted
    assert struct.unpack_from("<I", body, flags_at) == (1,)
    struct.pack_into("<I", body, flags_at, 1 | 4)
    damaged = bytes(body) + struct.pack("<I", crc32c(bytes(body)))
    with pytest.raises(CorruptLogError, match=rf"s.cursor.*\b{flags_at}\b.*unknown flags 0x5 \(this version knows "
                                              r"0x1\)"):
        cursor_file.decode(damaged, Path("s.cursor"))


def test_a_version_1_cursor_in_a_data_directory_resumes_and_is_version_2_once_replicated(tmp_path):
    topic_name = "fixture/v1/orders"
    with seglog.open(tmp_path, background=False) as log:
        topic = log.create_topic(topic_name, partitions=2)
        with topic.producer() as producer:
            for partition in (0, 1):
                producer.send_batch([b"m"] * 10, partition=partition)
    cursor = tmp_path.joinpath("subscriptions", *topic_name.split("/"), "s.cursor")
    cursor.parent.mkdir(parents=True)
    shutil.copyfile(CURSOR_V1 / "s.cursor", cursor)
    with seglog.open(tmp_path, background=False) as log:
        stats = log.topic(topic_name).stats()["subscriptions"]["s"]
        assert (stats["msgBacklog"], stats["msgExpired"], stats["isReplicated"]) == (2 + 6, 8, False)
        with log.topic(topic_name).subscribe("s") as consumer:
            assert sorted((m.partition, m.offset) for m in (consumer.receive(timeout=5) for _ in range(8))) == \
                [(0, 6), (0, 8), (1, 4), (1, 5), (1, 6), (1, 7), (1, 8), (1, 9)]
        log.admin.topics.set_replicated_subscription_status(topic_name, "s", True, partition=0)
    assert struct.unpack_from("<I", cursor.read_bytes(), 8) == (2,)
    with seglog.open(tmp_path, background=False) as log:
        assert list(log.admin.topics.get_replicated_subscription_status(topic_name, "s").values()) == [True, False]
