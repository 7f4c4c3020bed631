"""The dispatchers driven through ConsumerState objects alone, as a remote consumer on a connection would
drive them: no in-process Consumer, the broker's services only (subscriptions/dispatch.py)."""

import numpy as np
import pytest

import seglog
from seglog.broker import Broker
from seglog.subscriptions.delivery import ConsumerState
from seglog.subscriptions.dispatch import (
    MultipleConsumersDispatcher,
    SingleActiveConsumerDispatcher,
    StickyKeyDispatcher,
)


class Remote:
    """A consumer that is not a Consumer: its state, and what it was told."""

    def __init__(self, name, ack_timeout_ms=None, partitions=None):
        self.forgotten = []
        self.disconnected = False
        self.state = ConsumerState(name, ack_timeout_ms, self.forgotten.append, self.disconnect,
                                   partitions=None if partitions is None else frozenset(partitions))

    def disconnect(self):
        self.disconnected = True


@pytest.fixture
def broker(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as log:
        topic = log.create_topic("t", partitions=2)
        with topic.producer() as producer:
            for partition in (0, 1):
                producer.send_batch([b"m%d" % i for i in range(10)], keys=[b"k%d" % i for i in range(10)],
                                    partition=partition)
        with log.create_topic("one").producer() as producer:
            producer.send_batch([b"m%d" % i for i in range(10)])
        with log.create_topic("sizes").producer() as producer:
            producer.send_batch([b"a", b"bb", None, b"dddd", b"eeeee"])
        with log.create_topic("runs").producer() as producer:
            for i in range(3):
                producer.send_batch([b"r%d" % i] * 5)  # three stored batches
    opened = Broker.open(tmp_path / "data", clock=clock, background=False)
    yield opened
    opened.close()


def offsets(pieces):
    return [(piece.partition, int(o)) for piece in pieces for o in piece.offsets]


def test_shared_dispatch_to_consumer_states_redelivers_what_one_that_left_did_not_acknowledge(broker):
    registry, ref = broker.subscriptions, broker.topic("t")
    subscription = registry.open(ref, "s", "shared", "earliest")
    a, b = Remote("a"), Remote("b")
    subscription.attach(a.state, "shared")
    subscription.attach(b.state, "shared")
    assert isinstance(subscription.dispatcher, MultipleConsumersDispatcher)
    given_a = subscription.next_delivery(a.state, 3)
    given_b = subscription.next_delivery(b.state, 3)
    assert offsets(given_a) == [(0, 0), (0, 1), (0, 2)]  # the partitions taken in turn
    assert offsets(given_b) == [(1, 0), (1, 1), (1, 2)]
    subscription.ack_many(0, given_a[0].offsets)
    subscription.detach(b.state)
    assert b.forgotten == [None] and not b.state.pending
    assert offsets(subscription.next_delivery(a.state, None)) == [(0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8),
                                                                   (0, 9)]
    assert offsets(subscription.next_delivery(a.state, None)) == [(1, 0), (1, 1), (1, 2)]  # b's, redelivered
    assert offsets(subscription.next_delivery(a.state, None)) == [(1, i) for i in range(3, 10)]
    assert subscription.next_delivery(a.state, None) == []
    subscription.detach(a.state)
    registry.release(subscription)


def test_a_new_type_gets_its_dispatcher_with_the_read_positions_and_redeliveries(broker):
    registry, ref = broker.subscriptions, broker.topic("t")
    subscription = registry.open(ref, "s", "shared", "earliest")
    shared = Remote("shared")
    subscription.attach(shared.state, "shared")
    assert offsets(subscription.next_delivery(shared.state, 2)) == [(0, 0), (0, 1)]
    subscription.detach(shared.state)  # both go to redelivery
    exclusive = Remote("exclusive")
    subscription.attach(exclusive.state, "exclusive")  # no consumers: the type may change, as in Pulsar
    assert subscription.type == "exclusive" and isinstance(subscription.dispatcher, SingleActiveConsumerDispatcher)
    # the read positions, the redeliveries and the turn of the partitions carry over
    assert offsets(subscription.next_delivery(exclusive.state, None)) == [(1, i) for i in range(10)]
    assert offsets(subscription.next_delivery(exclusive.state, None)) == [(0, 0), (0, 1)]
    assert offsets(subscription.next_delivery(exclusive.state, None)) == [(0, i) for i in range(2, 10)]
    with pytest.raises(seglog.errors.ConsumerBusyError, match="is exclusive and has consumers"):
        subscription.attach(Remote("other").state, "key_shared")
    subscription.ack_many(0, np.arange(10, dtype=np.int64))
    subscription.detach(exclusive.state)  # the active consumer changed: dispatch starts again at the cursor
    keyed = Remote("keyed")
    subscription.attach(keyed.state, "key_shared")
    assert isinstance(subscription.dispatcher, StickyKeyDispatcher)
    assert offsets(subscription.next_delivery(keyed.state, None)) == [(1, i) for i in range(10)]
    assert subscription.next_delivery(keyed.state, None) == []
    registry.release(subscription)


def test_failover_gives_each_partition_to_one_consumer_state_by_name(broker):
    subscription = broker.subscriptions.open(broker.topic("t"), "s", "failover", "earliest")
    b, a = Remote("b"), Remote("a")
    subscription.attach(b.state, "failover")
    assert subscription.partitions_for(b.state) == [0, 1]
    subscription.attach(a.state, "failover")
    assert b.forgotten == [None, None]  # each change of the active consumers drops what b took
    assert subscription.partitions_for(a.state) == [0] and subscription.partitions_for(b.state) == [1]
    assert {p for p, _ in offsets(subscription.next_delivery(b.state, None))} == {1}
    broker.subscriptions.release(subscription)


def test_negative_acks_and_ack_timeouts_of_a_consumer_state_are_due_by_the_log_clock(broker, clock):
    subscription = broker.subscriptions.open(broker.topic("one"), "s", "exclusive", "earliest")
    remote = Remote("r", ack_timeout_ms=30_000)
    subscription.attach(remote.state, "exclusive")
    pieces = subscription.next_delivery(remote.state, 4)
    assert offsets(pieces) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    subscription.negative_ack(0, np.array([0, 1], dtype=np.int64), 5_000)
    subscription.ack_many(0, np.array([1], dtype=np.int64))  # acknowledged after its nack: not redelivered
    clock.advance(seconds=4)
    assert offsets(subscription.next_delivery(remote.state, 1)) == [(0, 4)]  # nothing due yet
    clock.advance(seconds=1)
    assert offsets(subscription.next_delivery(remote.state, None)) == [(0, 0)]
    clock.advance(seconds=30)  # 2, 3 and 4 were never acknowledged: their ack timeout passed
    assert offsets(subscription.next_delivery(remote.state, None)) == [(0, 0), (0, 2), (0, 3), (0, 4)]
    broker.subscriptions.release(subscription)


def test_consumers_of_one_partition_each_get_only_theirs(broker):
    """Pulsar's clients subscribe to each partition of a partitioned topic on its own: exclusive then means one
    consumer per partition, and failover picks among the consumers of each partition."""
    from seglog.errors import ConsumerBusyError

    registry, ref = broker.subscriptions, broker.topic("t")
    subscription = registry.open(ref, "s", "exclusive", "earliest")
    zero, one = Remote("c", partitions={0}), Remote("c", partitions={1})
    subscription.attach(zero.state, "exclusive")
    subscription.attach(one.state, "exclusive")  # another partition: not busy
    with pytest.raises(ConsumerBusyError):
        subscription.attach(Remote("other", partitions={1}).state, "exclusive")
    with pytest.raises(ConsumerBusyError):
        subscription.attach(Remote("everything").state, "exclusive")
    assert {p for p, _ in offsets(subscription.next_delivery(zero.state, None))} == {0}
    assert {p for p, _ in offsets(subscription.next_delivery(one.state, None))} == {1}
    assert subscription.next_delivery(zero.state, None) == []
    subscription.detach(one.state)  # rewinds partition 1 only: zero keeps what it was given
    assert zero.forgotten == [] and len(zero.state.pending) == 1
    again = Remote("again", partitions={1})
    subscription.attach(again.state, "exclusive")
    assert offsets(subscription.next_delivery(again.state, None)) == [(1, i) for i in range(10)]
    subscription.detach(again.state)
    subscription.detach(zero.state)
    registry.release(subscription)


def test_failover_by_partition_picks_among_the_consumers_of_each_partition(broker):
    registry, ref = broker.subscriptions, broker.topic("t")
    subscription = registry.open(ref, "s", "failover", "earliest")
    a0, a1 = Remote("a", partitions={0}), Remote("a", partitions={1})
    b0, b1 = Remote("b", partitions={0}), Remote("b", partitions={1})
    for remote in (a0, a1, b0, b1):
        subscription.attach(remote.state, "failover")
    # partition p: the (p mod 2)-th of its consumers by name
    assert [subscription.partitions_for(r.state) for r in (a0, a1, b0, b1)] == [[0], [], [], [1]]
    subscription.detach(a0.state)
    assert subscription.partitions_for(b0.state) == [0]
    for remote in (a1, b0, b1):
        subscription.detach(remote.state)
    registry.release(subscription)


def test_key_shared_routes_each_partition_among_its_own_consumers(broker):
    registry, ref = broker.subscriptions, broker.topic("t")
    subscription = registry.open(ref, "s", "key_shared", "earliest")
    x0, y0, y1 = Remote("x", partitions={0}), Remote("y", partitions={0}), Remote("y", partitions={1})
    for remote in (x0, y0, y1):
        subscription.attach(remote.state, "key_shared")
    got = {}
    for remote in (x0, y0, y1):
        for _ in range(10):
            got.setdefault(remote.state.name + str(sorted(remote.state.partitions)), []).extend(
                offsets(subscription.next_delivery(remote.state, None)))
    # partition 1 has one consumer: all of it; partition 0 is split between its two by key
    assert sorted(got["y[1]"]) == [(1, i) for i in range(10)]
    assert sorted(got["x[0]"] + got["y[0]"]) == [(0, i) for i in range(10)]
    assert got["x[0]"] and got["y[0]"]


def test_messages_a_consumer_asked_to_redeliver_are_no_longer_its_own(broker):
    """REDELIVER naming messages hands them back: if the consumer then leaves, they are not sent to
    redelivery a second time (another consumer may hold them already)."""
    registry, ref = broker.subscriptions, broker.topic("one")
    subscription = registry.open(ref, "s", "shared", "earliest")
    a, b = Remote("a"), Remote("b")
    subscription.attach(a.state, "shared")
    subscription.attach(b.state, "shared")
    assert offsets(subscription.next_delivery(a.state, 3)) == [(0, 0), (0, 1), (0, 2)]
    subscription.redeliver(a.state, {0: np.array([1], dtype=np.int64)})
    assert offsets(subscription.next_delivery(b.state, 1)) == [(0, 1)]  # redelivered, to b
    subscription.detach(a.state)  # a still holds 0 and 2, not 1
    assert offsets(subscription.next_delivery(b.state, None)) == [(0, 0), (0, 2)]
    assert subscription.redelivery_count(0, 1) == 1
    subscription.detach(b.state)
    registry.release(subscription)


def test_next_deliveries_gives_what_next_delivery_gives_called_until_the_most_or_nothing(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as log:
        with log.create_topic("unbatched", partitions=2).producer() as producer:
            for i in range(12):  # a stored batch a message, as a server stores unbatched SENDs
                producer.send_batch([b"m%d" % i], partition=i % 2)
    broker = Broker.open(tmp_path / "data", clock=clock, background=False)
    try:
        subscriptions = {name: broker.subscriptions.open(broker.topic("unbatched"), name, "exclusive", "earliest")
                         for name in ("one-at-a-time", "gathered")}
        consumers = {name: Remote(name) for name in subscriptions}
        for name, subscription in subscriptions.items():
            subscription.attach(consumers[name].state, "exclusive")
            subscription.ack_many(0, np.array([1], dtype=np.int64))  # (acknowledged: never given)
        expected = []
        while len(expected) < 7 and (pieces := subscriptions["one-at-a-time"].next_delivery(
                consumers["one-at-a-time"].state, 7 - len(expected))):
            expected += offsets(pieces)
        gathered = consumers["gathered"].state
        given = subscriptions["gathered"].next_deliveries(gathered, 7)
        assert offsets(given) == expected and len(given) == 7  # (a piece a stored batch, as before)
        assert [(p.partition, int(o)) for p in gathered.pending for o in p.offsets] == expected
        rest = offsets(subscriptions["gathered"].next_deliveries(gathered, 100))
        assert sorted(expected + rest) == [(partition, offset) for partition in (0, 1) for offset in range(6)
                                           if (partition, offset) != (0, 1)]
        assert subscriptions["gathered"].next_deliveries(gathered, 100) == []
    finally:
        broker.close()


def test_a_delivery_of_at_most_n_messages_gathers_stored_batches_in_turn_a_piece_each(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as log:
        with log.create_topic("mixed").producer() as producer:
            for values in ([b"a"], [b"b"], [b"c", b"d", b"e"], [b"f"]):  # stored batches of 1, 1, 3 and 1
                producer.send_batch(values)
    broker = Broker.open(tmp_path / "data", clock=clock, background=False)
    try:
        subscription = broker.subscriptions.open(broker.topic("mixed"), "s", "exclusive", "earliest")
        consumer = Remote("c")
        subscription.attach(consumer.state, "exclusive")
        subscription.ack_many(0, np.array([1], dtype=np.int64))  # (acknowledged: passed over)
        first = subscription.next_delivery(consumer.state, 3)
        assert [piece.offsets.tolist() for piece in first] == [[0], [2, 3]]  # (the third batch taken in part)
        assert [piece.offsets.tolist() for piece in subscription.next_delivery(consumer.state, 10)] == [[4], [5]]
        assert subscription.next_delivery(consumer.state, 10) == []
        # without a most, a delivery is the next stored batch's, as before
        other = broker.subscriptions.open(broker.topic("mixed"), "other", "exclusive", "earliest")
        another = Remote("d")
        other.attach(another.state, "exclusive")
        assert [piece.offsets.tolist() for piece in other.next_delivery(another.state, None)] == [[0]]
        assert [piece.offsets.tolist() for piece in other.next_delivery(another.state, None)] == [[1]]
    finally:
        broker.close()


def test_a_piece_counts_the_value_bytes_of_its_messages_alone(broker):
    subscription = broker.subscriptions.open(broker.topic("sizes"), "s", "exclusive", "earliest")
    consumer = Remote("c")
    subscription.attach(consumer.state, "exclusive")
    (piece,) = subscription.next_delivery(consumer.state, None)
    assert piece.value_bytes == 12  # (a null value has no bytes)
    assert piece.with_offsets(np.array([1, 2, 3])).value_bytes == 6  # a run
    assert piece.with_offsets(np.array([0, 3, 4])).value_bytes == 10  # with gaps
    broker.subscriptions.release(subscription)


def test_a_read_of_several_stored_batches_is_pending_as_one_and_expires_without_what_was_acknowledged(broker, clock):
    subscription = broker.subscriptions.open(broker.topic("runs"), "s", "exclusive", "earliest")
    consumer = Remote("c", ack_timeout_ms=1000)
    subscription.attach(consumer.state, "exclusive")
    assert len(subscription.next_delivery(consumer.state, 15)) == 3  # (a piece a stored batch)
    (pending,) = consumer.state.pending
    assert (pending.offsets.tolist(), consumer.state.pending_messages) == (list(range(15)), 15)
    subscription.ack_many(0, np.array([0, 1, 2, 3, 4, 10]))
    clock.advance(1000)
    redelivered = subscription.next_delivery(consumer.state, 15)
    assert offsets(redelivered) == [(0, o) for o in [5, 6, 7, 8, 9, 11, 12, 13, 14]]
    broker.subscriptions.release(subscription)


def test_a_read_of_whole_batches_keeps_to_its_messages_bytes_and_acks(broker):
    """A read takes stored batches located together (Reader.locate_run) a piece each, cut by the read's
    messages and bytes, and leaves out what was acknowledged ahead of it."""
    def read(name, max_messages, max_read_bytes=None, acked=()):
        subscription = broker.subscriptions.open(broker.topic("runs"), name, "exclusive", "earliest")
        consumer = Remote(name)
        if max_read_bytes is not None:
            consumer.state.max_read_bytes = max_read_bytes
        subscription.attach(consumer.state, "exclusive")
        if acked:
            subscription.ack_many(0, np.array(acked))
        pieces = subscription.next_delivery(consumer.state, max_messages)
        taken = [[int(o) for o in piece.offsets] for piece in pieces], subscription.read_position(0)
        broker.subscriptions.release(subscription)
        return taken

    assert read("all", 15) == ([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]], 15)
    assert read("cut", 12) == ([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]], 12)
    assert read("bytes", 15, max_read_bytes=1) == ([[0, 1, 2, 3, 4]], 5)
    assert read("acked", 15, acked=[6, 12]) == ([[0, 1, 2, 3, 4], [5, 7, 8, 9], [10, 11, 13, 14]], 15)


def test_entry_permits_give_as_many_whole_batches_as_permits_and_go_below_zero(tmp_path, clock):
    """Pulsar's default flow control (ConsumerState.entry_permits): a read takes as many stored batches as the
    consumer has permits, each whole, however many messages they hold; its permits go below zero by the
    excess, and it is given nothing more until its FLOWs make up for it. One-message batches still go by
    the read's messages (one entry a message)."""
    with seglog.open(tmp_path / "data", clock=clock) as log:
        with log.create_topic("batches").producer() as producer:
            for i in range(5):
                producer.send_batch([b"b%d" % i] * 10)  # five stored batches of 10
        with log.create_topic("single").producer() as producer:
            for i in range(8):
                producer.send_batch([b"s%d" % i])  # eight stored batches of 1
    broker = Broker.open(tmp_path / "data", clock=clock, background=False)
    try:
        def consumer_of(topic, precise=False):
            subscription = broker.subscriptions.open(broker.topic(topic), "s", "exclusive", "earliest")
            consumer = Remote("c")
            consumer.state.entry_permits = not precise
            subscription.attach(consumer.state, "exclusive")
            return subscription, consumer.state

        subscription, state = consumer_of("batches")
        state.permits = 2
        assert [len(piece.offsets) for piece in subscription.next_delivery(state, 1000)] == [10, 10]
        assert state.permits == -18
        state.permits += 18  # a FLOW of what arrived, as the client grants them: still no permit left
        assert subscription.next_delivery(state, 1000) == []
        state.permits += 1
        assert offsets(subscription.next_delivery(state, 1000)) == [(0, o) for o in range(20, 30)]
        broker.subscriptions.release(subscription)

        subscription, state = consumer_of("single")
        state.permits = 5
        assert offsets(subscription.next_delivery(state, 3)) == [(0, 0), (0, 1), (0, 2)]  # the read's messages
        assert offsets(subscription.next_delivery(state, 3)) == [(0, 3), (0, 4)]  # then the permits
        assert state.permits == 0
        broker.subscriptions.release(subscription)

        subscription, state = consumer_of("batches", precise=True)  # precise: cut to the permits
        state.permits = 15
        assert [len(piece.offsets) for piece in subscription.next_delivery(state, 1000)] == [10, 5]
        assert state.permits == 0
        broker.subscriptions.release(subscription)
    finally:
        broker.close()
