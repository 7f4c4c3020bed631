"""Redelivery counts (Pulsar's redelivery count of a message) are kept for unacknowledged messages and
forgotten for acknowledged ones; forgetting walks every count, so it happens once the counts have doubled
since it last happened, not at every redelivery past the bound: a shared consumer leaving with many
unacknowledged messages hands them back in time linear in their number."""

from __future__ import annotations

import numpy as np

from seglog import ManualClock
from seglog._core._acks import AckSet
from seglog.subscriptions import redelivery
from seglog.subscriptions.redelivery import Redeliveries


class CountingAcks:
    """An AckSet that counts the is_acked calls pruning makes."""

    def __init__(self) -> None:
        self.acks = AckSet(0)
        self.is_acked_calls = 0

    def is_acked(self, offset: int) -> bool:
        self.is_acked_calls += 1
        return self.acks.is_acked(offset)

    def unacked_mask(self, start: int, stop: int) -> np.ndarray:
        return self.acks.unacked_mask(start, stop)


class OnePartitionCursor:
    def __init__(self, acks: CountingAcks) -> None:
        self._acks = acks

    def acks(self, partition: int) -> CountingAcks:
        return self._acks


def test_counts_are_pruned_once_they_double_and_kept_for_unacknowledged_messages(tmp_path, monkeypatch):
    monkeypatch.setattr(redelivery, "_COUNTS_PRUNED_ABOVE", 100)
    acks = CountingAcks()
    redeliveries = Redeliveries(OnePartitionCursor(acks), 1, ManualClock(), tmp_path)
    for offset in range(10_000):  # a consumer leaving: one add per piece it held, none acknowledged
        redeliveries.add(0, np.array([offset], dtype=np.int64))
    # pruning at every add past 100 walked ~50 M counts; at each doubling, under 2 x 10,000
    assert acks.is_acked_calls < 2 * 10_000
    assert [redeliveries.count(0, o) for o in (0, 5_000, 9_999)] == [1, 1, 1]
    acks.acks.ack_range(0, 9_000)
    for offset in range(10_000, 20_001):
        redeliveries.add(0, np.array([offset], dtype=np.int64))
    assert redeliveries.count(0, 100) == 0  # acknowledged: forgotten
    assert redeliveries.count(0, 9_500) == redeliveries.count(0, 20_000) == 1


def test_dispatch_hands_redelivered_messages_their_counts(tmp_path):
    """A piece of redeliveries carries each message's count (a remote consumer's entry has one count, and
    its messages of different counts go in different entries); a piece of new messages carries none."""
    from seglog.broker import Broker
    from seglog.subscriptions.delivery import ConsumerState

    broker = Broker.open(tmp_path / "data", clock=ManualClock(), background=False)
    try:
        ref = broker.create_topic("public/default/counted", 1, {})
        writer = broker.store.acquire_writer(ref.name, 0, ref.config)
        writer.append(writer.source(values=[b"m%d" % i for i in range(6)], timestamps=[0] * 6))
        broker.store.release_writer(ref.name, 0, broker.store.fence(ref.name))
        subscription = broker.subscriptions.open(broker.topic("public/default/counted"), "s", "shared", "earliest")
        state = ConsumerState("c", None, lambda partition: None, lambda: None)
        subscription.attach(state, "shared")
        (piece,) = subscription.next_delivery(state, 100)
        assert piece.redelivery_counts is None
        subscription.redeliver(state, {0: np.array([1, 2, 4])})
        (again,) = subscription.next_delivery(state, 100)
        subscription.redeliver(state, {0: np.array([2])})
        (third,) = subscription.next_delivery(state, 100)
        assert again.offsets.tolist() == [1, 2, 4] and again.redelivery_counts.tolist() == [1, 1, 1]
        assert third.offsets.tolist() == [2] and third.redelivery_counts.tolist() == [2]
        assert again.with_offsets(np.array([4])).redelivery_counts.tolist() == [1]
        broker.subscriptions.release(subscription)
    finally:
        broker.close()
