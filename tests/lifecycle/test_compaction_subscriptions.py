"""Subscriptions of a topic compacted by Kafka's model (docs/LIFECYCLE.md, Compaction), where the compacted
view stands for the log below its first segment.

Redelivery: a message given to a consumer and not acknowledged is delivered again (negative ack, ack timeout,
a shared consumer leaving), also once compaction deleted its segment: a message that is its key's latest is
still the subscription's, and is redelivered from the view; one that compaction removed is not, and is
acknowledged, as dispatch acknowledges what it passes over in the view.

Backlog: msgBacklog counts what the subscription has yet to be given, the view's messages included."""

import pytest
from helpers_compaction import drain

KEYS_FIRST, KEYS_THEN = (b"k0", b"k1", b"k2"), (b"k3", b"k4", b"k5")


def produce(topic):
    """30 messages over KEYS_FIRST, then 30 over KEYS_THEN, a batch each: the first keys' final states are at
    offsets 27 to 29, in segments that compaction deletes."""
    with topic.producer(linger_ms=0) as producer:
        for offset in range(60):
            keys = KEYS_FIRST if offset < 30 else KEYS_THEN
            producer.send(b"v%d" % offset, key=keys[offset % 3], partition=0)
            producer.flush()


@pytest.mark.parametrize("how", ["negative ack", "ack timeout", "shared consumer left"])
def test_a_keys_final_state_not_acknowledged_is_redelivered_from_the_view_once_its_segment_is_compacted(
        log, clock, how):
    topic = log.create_topic("t", segment_size="1 KiB", cleanup_policy="compact", min_cleanable_dirty_ratio=0.1)
    subscription_type = "shared" if how == "shared consumer left" else "exclusive"
    settings = {"ack_timeout": 1} if how == "ack timeout" else {"negative_ack_redelivery_delay": 0}
    first = topic.subscribe("s", initial_position="earliest", subscription_type=subscription_type, **settings)
    produce(topic)
    got = drain(first, ack=False)
    assert [m.offset for m in got] == list(range(60))
    finals = [m for m in got if m.offset in (27, 28, 29)]
    unacknowledged = [got[5], *finals]  # (offset 5: not its key's latest, compacted away)
    for message in got:
        if message not in unacknowledged:
            first.ack(message)
    if how == "negative ack":
        for message in unacknowledged:
            first.negative_ack(message)
    consumer = first
    if how == "shared consumer left":
        consumer = topic.subscribe("s", subscription_type="shared")
        first.close()
    log.run_maintenance()  # compacts, and deletes the segments of offsets 0 to 53
    assert topic.earliest_offset() > 29
    clock.advance(seconds=2)  # (past the ack timeout)
    again = drain(consumer, ack=True)
    assert [(m.offset, m.key, m.value) for m in again] == [(m.offset, m.key, m.value) for m in finals]
    stats = topic.stats()["subscriptions"]["s"]
    assert (stats["msgBacklog"], stats["msgEvicted"]) == (0, 0)
    assert topic.internal_stats()["partitions"]["0"]["cursors"]["s"]["markDeletePosition"] == 59


def test_a_subscriptions_backlog_counts_the_view_messages_it_is_still_given(log, clock):
    topic = log.create_topic("t", segment_size="1 KiB", cleanup_policy="compact", min_cleanable_dirty_ratio=0.1)
    topic.subscribe("s", initial_position="earliest").close()
    produce(topic)
    log.run_maintenance()  # the view stands for offsets 0 to 53: each of the six keys' latest, 27-29 and 51-53
    backlog = topic.stats()["subscriptions"]["s"]["msgBacklog"]
    with topic.subscribe("s") as consumer:
        given = drain(consumer, ack=True)
    assert [m.offset for m in given] == [27, 28, 29, 51, 52, 53, 54, 55, 56, 57, 58, 59]
    assert backlog == len(given)
