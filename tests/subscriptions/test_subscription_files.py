"""A subscription's files: a refused subscribe or an unsubscribe leaves none behind, names fit the file
system, and a lock file removed by its holder is never held by two processes at once."""

from pathlib import Path

import pytest

import seglog
from seglog.errors import InvalidArgumentError, InvalidNameError
from seglog.names import MAX_SUBSCRIPTION_NAME_LENGTH
from seglog.storage import lock
from seglog.storage.lock import WriterLock


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
    holder = WriterLock(path)
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
    second = WriterLock(path)
    assert len(calls) == 2, "the lock on the removed file was not given up"
    assert path.stat().st_ino != removed_inode
    with pytest.raises(seglog.errors.PartitionLockedError):
        monkeypatch.setattr(lock, "_lock_exclusive", original)
        WriterLock(path)
    second.release()
