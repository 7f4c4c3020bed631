"""Backlog quotas on the send path: each policy at its limit, by size and by message age."""

import threading
import time

import pytest

from seglog.errors import ProducerBlockedQuotaExceededError, ProducerSendTimeoutError


def drain(consumer):
    """Receive and acknowledge everything the consumer gets now."""
    while (batch := consumer.receive_batch()) is not None:
        consumer.ack(batch)


def quota(log, policy, **limits):
    log.admin.namespaces.set_backlog_quota("public/default", policy=policy, **limits)


def test_producer_exception_refuses_a_send_that_would_reach_the_limit(log):
    quota(log, "producer_exception", limit="10 KiB")
    topic = log.create_topic("q")
    consumer = topic.subscribe("s", initial_position="earliest")
    with topic.producer() as producer:
        producer.send_batch([b"x" * 1000] * 9)  # 9,176 bytes: below, accepted
        with pytest.raises(ProducerBlockedQuotaExceededError, match="destination_storage"):
            producer.send_batch([b"x" * 1000] * 2)  # would take it over
        with pytest.raises(ProducerBlockedQuotaExceededError):
            producer.send(b"y" * 1000)  # would take it to 10,256 bytes
        producer.send(b"z")  # still fits below
        drain(consumer)
        producer.send(b"after acks")  # room again
    assert topic.end_offset() == 11


def test_producer_request_hold_waits_for_acks_or_times_out(log):
    quota(log, "producer_request_hold", limit="4 KiB")
    topic = log.create_topic("q")
    consumer = topic.subscribe("s", initial_position="earliest")
    with topic.producer(send_timeout=0.1) as producer:
        producer.send_batch([b"x" * 1000] * 3)
        started = time.monotonic()
        with pytest.raises(ProducerSendTimeoutError, match="send timeout of 0.1 s"):
            producer.send(b"held" * 250)  # 3,128 bytes and 1,072 more would reach 4 KiB
        assert time.monotonic() - started >= 0.1
    with topic.producer(send_timeout=10) as producer:
        threading.Timer(0.1, lambda: drain(consumer)).start()
        producer.send(b"released" * 125)  # as large as the held one: waits for the drain
    assert topic.end_offset() == 4


def test_message_age_quota_by_the_log_clock(log, clock):
    quota(log, "producer_exception", limit_time=60, type="message_age")
    topic = log.create_topic("q")
    topic.subscribe("s", initial_position="earliest")
    with topic.producer() as producer:
        producer.send(b"old")
        producer.flush()
        clock.advance(seconds=59)
        producer.send(b"ok")
        clock.advance(seconds=1)
        with pytest.raises(ProducerBlockedQuotaExceededError, match="message_age"):
            producer.send(b"refused")


def test_consumer_backlog_eviction_at_send_never_fails(log):
    quota(log, "consumer_backlog_eviction", limit="10 KiB")
    topic = log.create_topic("q")
    topic.subscribe("s", initial_position="earliest")
    with topic.producer() as producer:
        for _ in range(10):
            producer.send_batch([b"x" * 1000] * 5)
    stats = topic.stats()["subscriptions"]["s"]
    assert stats["msgEvicted"] > 0 and stats["backlogSize"] < 16 * 1024
