"""Live rates and counters in-process (seglog.rates, admin/traffic_stats.py): what in-process producers write
and consumers are given is counted as a server's producers and consumers are, in `stats()`, Pulsar's
TopicStats and /metrics; counters are exact, rates of a steady producer within 10% of the true rate (the
log's manual clock drives the time)."""

from __future__ import annotations

import pytest

import seglog
from seglog.admin.metrics import prometheus_text
from seglog.clock import ManualClock
from seglog.rates import WINDOW_S, RateMeter

START_MS = 1_700_000_000_000
LABELS = 'cluster="standalone",namespace="public/default",topic="persistent://public/default/t"'
SUB_LABELS = 'cluster="standalone",namespace="public/default",subscription="s",topic="persistent://public/default/t"'


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def log(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock, background=False) as opened:
        yield opened


def metric(log, line_start: str) -> float:
    (line,) = [line for line in prometheus_text(log._broker).splitlines() if line.startswith(line_start + " ")]
    return float(line.rsplit(" ", 1)[1])


def test_a_meter_rates_the_last_minute_and_counts_everything():
    clock = ManualClock(START_MS)
    meter = RateMeter(clock)
    assert meter.rates() == (0.0, 0.0)
    for _ in range(3 * WINDOW_S):  # 200 messages of 10 bytes a second, for three windows
        meter.add(200, 2000)
        clock.advance(1000)
    assert meter.rates() == pytest.approx((200, 2000), rel=0.01)
    assert (meter.messages, meter.bytes) == (200 * 3 * WINDOW_S, 2000 * 3 * WINDOW_S)
    clock.advance(WINDOW_S * 1000)  # a minute of nothing: no rate, the same totals
    assert meter.rates() == (0.0, 0.0) and meter.messages == 200 * 3 * WINDOW_S


def test_a_young_meter_rates_the_time_since_it_started():
    clock = ManualClock(START_MS)
    meter = RateMeter(clock)
    for _ in range(5):
        clock.advance(1000)
        meter.add(100, 100)
    assert meter.rates()[0] == pytest.approx(100)


def test_in_process_producers_and_consumers_are_counted_exactly(log):
    topic = log.create_topic("t", partitions=2)
    consumer = topic.subscribe("s", consumer_name="reader", initial_position="earliest")
    with topic.producer() as producer:
        producer.send_batch([b"v" * 100] * 300 + [None, b""])  # a null and an empty value have no bytes
        for i in range(200):
            producer.send(b"w" * (i % 7))
    sent_bytes = 300 * 100 + sum(i % 7 for i in range(200))
    stats = topic.stats()
    assert (stats["msgInCounter"], stats["bytesInCounter"]) == (502, sent_bytes)
    received = [consumer.receive(timeout=5) for _ in range(502)]
    assert sum(len(m.value or b"") for m in received) == sent_bytes
    stats = topic.stats()
    sub = stats["subscriptions"]["s"]
    (consumer_stats,) = sub["consumers"]
    for figures in (stats, sub, consumer_stats):
        assert (figures["msgOutCounter"], figures["bytesOutCounter"]) == (502, sent_bytes)
    assert consumer_stats["consumerName"] == "reader" and consumer_stats["unackedMessages"] == 502
    pulsar = log.admin.topics.partitioned_stats("t", per_partition=True)
    assert (pulsar["msgInCounter"], pulsar["bytesInCounter"], pulsar["msgOutCounter"]) == (502, sent_bytes, 502)
    assert sum(p["msgInCounter"] for p in pulsar["partitions"].values()) == 502
    assert sum(p["subscriptions"]["s"]["bytesOutCounter"] for p in pulsar["partitions"].values()) == sent_bytes
    assert metric(log, f"pulsar_in_messages_total{{{LABELS}}}") == 502
    assert metric(log, f"pulsar_in_bytes_total{{{LABELS}}}") == sent_bytes
    assert metric(log, f"pulsar_out_messages_total{{{SUB_LABELS}}}") == 502
    assert metric(log, f"pulsar_out_bytes_total{{{SUB_LABELS}}}") == sent_bytes
    assert metric(log, f"pulsar_consumers_count{{{LABELS}}}") == 1


def test_a_steady_producer_and_consumer_are_rated_within_ten_percent(log, clock):
    topic = log.create_topic("t", partitions=3)
    consumer = topic.subscribe("s", initial_position="earliest")
    producer = topic.producer()
    # 1,000 messages of 50 bytes a second, in batches of 250 every quarter second, for two minutes
    for _ in range(2 * WINDOW_S * 4):
        producer.send_batch([b"m" * 50] * 250)
        while consumer.receive_batch(max_messages=10_000) is not None:
            pass
        clock.advance(250)
    stats = topic.stats()
    assert stats["msgRateIn"] == pytest.approx(1000, rel=0.1)
    assert stats["msgThroughputIn"] == pytest.approx(50_000, rel=0.1)
    assert stats["averageMsgSize"] == pytest.approx(50)
    sub = stats["subscriptions"]["s"]
    for figures in (stats, sub, sub["consumers"][0]):
        assert figures["msgRateOut"] == pytest.approx(1000, rel=0.1)
        assert figures["msgThroughputOut"] == pytest.approx(50_000, rel=0.1)
    assert metric(log, f"pulsar_rate_in{{{LABELS}}}") == pytest.approx(1000, rel=0.1)
    assert metric(log, f"pulsar_throughput_out{{{LABELS}}}") == pytest.approx(50_000, rel=0.1)
    assert metric(log, f"pulsar_subscription_msg_rate_out{{{SUB_LABELS}}}") == pytest.approx(1000, rel=0.1)
    producer.close()


def test_negative_acks_and_ack_timeouts_are_redelivery_asked_for(log, clock):
    topic = log.create_topic("t")
    timing_out = topic.subscribe("s", subscription_type="shared", ack_timeout="1s")
    nacking = topic.subscribe("s", subscription_type="shared", negative_ack_redelivery_delay="1s")
    with topic.producer() as producer:
        producer.send_batch([b"x"] * 20)
    timing_out.receive(timeout=1)  # (prefetches all 20, none acknowledged)
    clock.advance(2000)
    nacking.negative_ack(nacking.receive(timeout=1))  # (dispatch runs: the 20 are past their ack timeout)
    sub = topic.stats()["subscriptions"]["s"]
    by_name = {c["consumerName"]: c for c in sub["consumers"]}
    span_s = 2  # the meters are two seconds old
    assert by_name[timing_out.name]["msgRateRedeliver"] == pytest.approx(20 / span_s)
    assert by_name[nacking.name]["msgRateRedeliver"] == pytest.approx(1 / span_s)
    assert sub["msgRateRedeliver"] == pytest.approx(21 / span_s)
    assert metric(log, f"pulsar_subscription_msg_rate_redeliver{{{SUB_LABELS}}}") == pytest.approx(21 / span_s)


def test_a_deleted_subscription_stays_counted_and_a_deleted_topic_starts_again(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([b"abc"] * 10)
    consumer = topic.subscribe("gone", initial_position="earliest")
    [consumer.receive(timeout=1) for _ in range(10)]
    consumer.unsubscribe()
    stats = topic.stats()
    assert "gone" not in stats["subscriptions"]
    assert (stats["msgOutCounter"], stats["bytesOutCounter"]) == (10, 30)
    log.delete_topic("t", force=True)
    stats = log.create_topic("t").stats()
    assert (stats["msgInCounter"], stats["msgOutCounter"]) == (0, 0)
