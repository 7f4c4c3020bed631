"""Kafka's rule on a compacted topic (issue 29): every message needs a key. On a topic whose cleanup_policy
contains compact, send() and send_batch() refuse a message without one with InvalidArgumentError naming `key` or
`keys` and saying why, before anything is written; b'' is a key; a topic that does not compact takes keyless
messages as before, and a producer follows a change of the policy made while it is open."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import seglog
from seglog.errors import InvalidArgumentError, ProducerBlockedQuotaExceededError

WHY = "which keeps the latest message per key: a message without a key is refused, as Kafka refuses it"


def stored(log: seglog.Log, name: str) -> int:
    return sum(p["endOffset"] for p in log.admin.topics.describe(name)["partitionOffsets"])


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_keyless_messages_are_refused_and_nothing_is_written(tmp_path: Path, policy: str) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        topic = log.create_topic("table", partitions=2, cleanup_policy=policy)
        with topic.producer() as producer:
            with pytest.raises(InvalidArgumentError, match=WHY) as refused:
                producer.send(b"value")
            assert (refused.value.argument, refused.value.value) == ("key", None)
            assert f"topic public/default/table has cleanup_policy '{policy}'" in str(refused.value)
            for keys, shown in ((None, None), ([b"k", None, b"m"], "None at index 1"),
                                (pa.array([b"k", b"l", None]), "None at index 2"),
                                (np.array([b"k", None, b"m"], dtype=object), "None at index 1"),
                                (iter([None, b"k", b"l"]), "None at index 0")):
                with pytest.raises(InvalidArgumentError, match=WHY) as refused:
                    producer.send_batch([b"a", b"b", b"c"], keys=keys)
                assert (refused.value.argument, refused.value.value) == ("keys", shown)
            with pytest.raises(InvalidArgumentError) as refused:
                producer.send(b"later", deliver_after="1m")  # a delayed send is checked as a send
            assert refused.value.argument == "key"
            producer.flush()
            assert stored(log, "table") == 0

            producer.send(b"empty key", key=b"")  # b'' is a key, as in Kafka
            producer.send(b"text key", key="k")
            producer.send_batch([b"a", b"b"], keys=iter([b"x", b"y"]))  # an iterator is read once, and written
            producer.send_batch([b"a", b"b"], keys=pa.array([b"x", b"y"]), partition=1)
            producer.send_batch([b"a", b"b"], keys=np.array([b"xx", b"yy"]))  # fixed-width records: never null
            producer.send(b"tombstone's key", key=b"x")
            producer.send(None, key=b"y")  # a tombstone has a key and no value
        keys = sorted(m.key for p in range(2) for m in topic.reader("earliest", partition=p))
        assert keys == [b"", b"k", b"x", b"x", b"x", b"xx", b"y", b"y", b"y", b"yy"]


def test_a_delete_topic_takes_keyless_messages(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        topic = log.create_topic("events")
        with topic.producer() as producer:
            producer.send(b"no key")
            producer.send_batch([b"a", b"b"])
            producer.send_batch([b"a", b"b"], keys=[b"k", None])
        assert stored(log, "events") == 5


def test_an_open_producer_follows_a_change_of_the_policy(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        topic = log.create_topic("t")
        with topic.producer() as producer:
            producer.send(b"before")
            log.admin.topics.set_config("t", cleanup_policy="compact")
            with pytest.raises(InvalidArgumentError, match=WHY):
                producer.send(b"while compacted")
            with pytest.raises(InvalidArgumentError, match=WHY):
                producer.send_batch([b"while compacted"])
            producer.send(b"keyed", key=b"k")
            log.admin.topics.set_config("t", cleanup_policy="delete")
            producer.send(b"after")
            producer.send_batch([b"after"])
        assert [m.value for m in topic.reader("earliest")] == [b"before", b"keyed", b"after", b"after"]


def test_backlog_quotas_still_hold_on_a_compacted_topic(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        topic = log.create_topic("t", cleanup_policy="compact")
        topic.subscribe("slow", initial_position="earliest").close()
        log.admin.topics.set_backlog_quota("t", limit="4K", policy="producer_exception")
        with topic.producer(batch_size=1) as producer:
            with pytest.raises(ProducerBlockedQuotaExceededError):
                for i in range(100):
                    producer.send(b"x" * 200, key=b"k%d" % i)
            with pytest.raises(InvalidArgumentError, match=WHY):  # the key is checked first, the quota after
                producer.send(b"x")
            with pytest.raises(ProducerBlockedQuotaExceededError):
                producer.send_batch([b"x" * 200], keys=[b"k"])
