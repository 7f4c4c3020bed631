"""Error messages of the in-process API name a value in words, never as Python prints it: no list in brackets,
no tuple in parentheses, no dict in braces (errors.shown_value), one class of fix per test."""

from __future__ import annotations

import re

import pytest

from seglog._core._format import crc32c
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.errors import ConsumerBusyError, CorruptLogError, InvalidArgumentError
from seglog.subscriptions.cursor_file import decode
from seglog.subscriptions.delivery import ConsumerState

PYTHON_REPR = re.compile(r"[\[\]{}]|\(\d+,\)|\('")  # brackets, braces, a tuple as Python prints it


def refusal(call) -> str:
    with pytest.raises(InvalidArgumentError) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message and not PYTHON_REPR.search(message), message
    return message


@pytest.mark.parametrize(("value", "shown"), [
    ([0, 9], "a list of 0, 9"), ((1,), "a tuple of 1"), ({"size": "10G", "time": 0}, "size: '10G', time: 0"),
    ({3, 1}, "a set of 1, 3"), ([], "an empty list"), ({}, "an empty dict"),
    (list(range(8)), "a list of 0, 1, 2, 3, 4, ... (8 in all)"), ("Shared", "'Shared'"), (None, "None")])
def test_values_are_shown_in_words(value, shown):
    from seglog.errors import shown_value  # (here: the tests below fail one by one on code without it)
    assert shown_value(value) == shown


@pytest.mark.parametrize(("call", "fragment"), [
    (lambda topic, log: topic.producer(partitions=[0, 9]), "invalid partitions a list of 0, 9: 9 is not one"),
    (lambda topic, log: topic.reader(start={"timestamp": "soon"}),
     "invalid start timestamp: 'soon'; accepted: 'earliest', 'latest', an offset"),
    (lambda topic, log: topic.subscribe("s").receive_batch(max_messages=(1,)), "invalid max_messages a tuple of 1;"),
    (lambda topic, log: topic.producer().send(b"v", properties={"k": 1}), "invalid properties k: 1;"),
    (lambda topic, log: log.admin.namespaces.set_retention("public/default", size="10G", time=0),
     "invalid retention time 0: a limit of 0 with the other limit set (size 10G) is refused, as in Pulsar;"),
    (lambda topic, log: log.admin.tenants.create("acme", allowed_clusters=["standalone", 1]),
     "invalid allowed_clusters a list of 'standalone', 1;"),
])
def test_values_of_a_call_are_named_in_words(log, call, fragment):
    topic = log.create_topic("t", partitions=2)
    assert fragment in refusal(lambda: call(topic, log))


def test_overlapping_sticky_hash_ranges_are_named_without_brackets(tmp_path):
    broker = Broker.open(tmp_path, clock=ManualClock(), background=False)
    try:
        ref = broker.create_topic("t", 1, {})
        subscription = broker.subscriptions.open(ref, "s", "key_shared", "earliest")
        first, second = (ConsumerState(name, None, lambda partition: None, lambda: None, hash_ranges=ranges)
                         for name, ranges in (("first", ((0, 1000),)), ("second", ((1000, 2000),))))
        subscription.attach(first, "key_shared")
        with pytest.raises(ConsumerBusyError) as refused:
            subscription.attach(second, "key_shared")
        assert str(refused.value).endswith(
            "hash range 1000 to 2000 of consumer 'second' overlaps range 0 to 1000 of consumer 'first'")
        broker.subscriptions.release(subscription)
    finally:
        broker.close()


def test_a_cursor_file_of_another_format_names_its_header_fields(tmp_path):
    body = bytes(64)
    with pytest.raises(CorruptLogError) as refused:
        decode(body + crc32c(body).to_bytes(4, "little"), tmp_path / "s.cursor")
    message = str(refused.value)
    assert "unknown magic, version or type: magic 0000000000000000, version 0, type 0" in message, message
    assert not PYTHON_REPR.search(message)
