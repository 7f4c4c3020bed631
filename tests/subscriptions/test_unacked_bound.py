"""A consumer's most unacknowledged messages (ConsumerState.max_unacked, Pulsar's maxUnackedMessagesPerConsumer):
at the bound dispatch gives it nothing until it acknowledges, counting again by the log's clock; and what it
acknowledged out of order is dropped from what dispatch keeps of it, so that memory stays bounded even where
the subscription's mark-delete position cannot move (another consumer's message held unacknowledged)."""

import numpy as np
import pytest

import seglog
from seglog.broker import Broker
from seglog.subscriptions.delivery import ConsumerState
from seglog.subscriptions.dispatch import UNACKED_RECOUNT_MS


def remote(name: str, max_unacked: int) -> ConsumerState:
    return ConsumerState(name, None, lambda partition: None, lambda: None, max_unacked=max_unacked)


def offsets(pieces) -> list[int]:
    return [int(o) for piece in pieces for o in piece.offsets]


@pytest.fixture
def broker(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as log, log.create_topic("t").producer() as producer:
        for i in range(20):
            producer.send_batch([b"m%d" % i])  # a stored batch a message
    opened = Broker.open(tmp_path / "data", clock=clock, background=False)
    yield opened
    opened.close()


def test_a_consumer_at_its_bound_is_given_nothing_until_its_acknowledgements_are_counted(broker, clock):
    subscription = broker.subscriptions.open(broker.topic("t"), "s", "shared", "earliest")
    consumer = remote("c", 4)
    subscription.attach(consumer, "shared")
    assert offsets(subscription.next_delivery(consumer, 10)) == [0, 1, 2, 3]
    assert consumer.pending_messages == 4 and subscription.next_delivery(consumer, 10) == []
    assert consumer.blocked_on_unacked
    subscription.ack_many(0, np.array([1, 2]))  # out of order: 0 is not
    assert subscription.next_delivery(consumer, 10) == []  # counted again only a while later
    clock.advance(UNACKED_RECOUNT_MS)
    assert offsets(subscription.next_delivery(consumer, 10)) == [4, 5]
    assert [int(o) for p in consumer.pending for o in p.offsets] == [0, 3, 4, 5]
    subscription.ack_many(0, np.array([0, 3, 4, 5]))  # in order: the head goes as the mark-delete passes it
    assert offsets(subscription.next_delivery(consumer, 10)) == [6, 7, 8, 9]
    assert not consumer.blocked_on_unacked
    subscription.detach(consumer)


def test_what_a_consumer_acknowledged_behind_another_consumer_is_not_kept(broker):
    """(b holds message 0 unacknowledged, so the mark-delete position stays at 0: what a acknowledged after it
    used to stay pending on a for ever)"""
    subscription = broker.subscriptions.open(broker.topic("t"), "s", "shared", "earliest")
    a, b = remote("a", 3), remote("b", 3)
    subscription.attach(a, "shared")
    subscription.attach(b, "shared")
    assert offsets(subscription.next_delivery(b, 1)) == [0]
    received = []
    while given := subscription.next_delivery(a, 3):
        received += offsets(given)
        subscription.ack_many(0, np.array(offsets(given)))
        assert a.pending_messages <= 3 and len(a.pending) <= 3
    assert received == list(range(1, 20)) and not a.blocked_on_unacked
    subscription.detach(a)
    subscription.detach(b)
