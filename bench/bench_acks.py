"""Acknowledging messages and sizing a backlog with a cursor's AckSet, against a Python set of offsets.

The offsets are 1M scattered ones: a random half of range(2M), in random order, so the bitmap ends up
with 1M individual acks above a floor of 0 (nothing contiguous from the floor, the worst case for a cursor).

Group "acks":
  baseline  set.update(offsets.tolist())    a Python set of offsets, filled from the numpy array in one call
            set.add loop                    `add(o)` for each offset of a Python list
  seglog    AckSet.ack_many(numpy array)    one call for the whole array            >= 20M acks/s
            AckSet.ack loop                 `ack(o)` for each offset of the same list  >= 1.5M acks/s
            backlog figures                 acked_count over the window plus weighted_acked over 2,000 batches
                                            of 1,000 messages, with the 1M individual acks: < 1 ms per call
            ack_cumulative across the window   drops all 31k bitmap words at once (reported)
            Consumer.ack(offset) loop, fresh   `ack(o)` for each offset of the same list, by a consumer of a
                                            new subscription on a topic of the 2M messages (issue 31's probe:
                                            an int through the consumer's checks into its cursor's AckSet)
                                                                                     >= 1M acks/s
The baselines, the AckSet loop and the consumer's loop also time their first round on their own (Bench.run's
first_round): the consumer's is judged on it too, a fresh subscription's first acks as a user meets them.
"""

from __future__ import annotations

import numpy as np
import pytest

import seglog
from seglog._core._acks import AckSet

GROUP = "acks"
BATCH_MESSAGES = 1_000


@pytest.fixture(scope="module")
def scattered(scale):
    """n offsets: a random subset of half of range(2n), in random order, as a numpy array and a list."""
    n = scale(1_000_000, 20_000)
    offsets = np.random.default_rng(11).permutation(2 * n)[:n].astype(np.int64)
    return offsets, offsets.tolist()


@pytest.fixture(scope="module")
def topic(scratch, scattered):
    """A topic holding the 2n messages the scattered offsets are drawn from (one byte each)."""
    n = 2 * len(scattered[0])
    with seglog.open(scratch / "log") as log:
        stored = log.create_topic("acks")
        with stored.producer() as producer:
            for start in range(0, n, 65_536):
                producer.send_batch([b"x"] * min(65_536, n - start))
        yield stored


@pytest.fixture(scope="module")
def acked(scattered):
    """An AckSet holding the scattered acks, made once for the read-only benchmarks."""
    acks = AckSet()
    acks.ack_many(scattered[0])
    return acks


def test_set_update(bench, scattered):
    offsets, _ = scattered
    bench.baseline(GROUP, "set.update(offsets.tolist())", messages=len(offsets), unit="ack")
    bench.run(lambda s: s.update(offsets.tolist()), setup=lambda: (set(),))


def test_set_add_loop(bench, scattered):
    _, offsets = scattered

    def loop(s):
        add = s.add
        for o in offsets:
            add(o)

    bench.baseline(GROUP, "set.add loop", messages=len(offsets), unit="ack")
    bench.run(loop, setup=lambda: (set(),), first_round=True)


def test_ack_many(bench, scattered):
    offsets, _ = scattered
    bench.seglog(GROUP, "AckSet.ack_many(numpy array)", messages=len(offsets), unit="ack", min_rate=20e6)
    assert bench.run(lambda acks: acks.ack_many(offsets), setup=lambda: (AckSet(),)) == len(offsets)


def test_ack_loop(bench, scattered):
    _, offsets = scattered

    def loop(acks):
        ack = acks.ack
        for o in offsets:
            ack(o)
        return acks.individual_count + acks.floor

    bench.seglog(GROUP, "AckSet.ack loop", messages=len(offsets), unit="ack", min_rate=1.5e6)
    assert bench.run(loop, setup=lambda: (AckSet(),), first_round=True) == len(offsets)


def test_consumer_ack_loop(bench, scattered, topic):
    _, offsets = scattered
    names = iter(range(1_000_000))

    def subscribe():
        return (topic.subscribe(f"fresh-{next(names)}", initial_position="earliest"),)

    def loop(consumer):
        ack = consumer.ack
        for o in offsets:
            ack(o)

    def unsubscribe(consumer):
        acks = consumer.subscription.cursor.acks(0)
        assert acks.individual_count + acks.floor == len(offsets)
        consumer.unsubscribe()

    bench.seglog(GROUP, "Consumer.ack(offset) loop, fresh subscription", messages=len(offsets), unit="ack",
                 min_rate=1e6)
    bench.run(loop, setup=subscribe, teardown=unsubscribe, first_round=True)


def test_backlog_figures(bench, acked):
    bounds = np.arange(0, acked.high + BATCH_MESSAGES, BATCH_MESSAGES, dtype=np.int64)
    weights = np.random.default_rng(12).uniform(50, 500, len(bounds) - 1)  # bytes per message of each batch

    def figures():
        return acked.acked_count(acked.floor, acked.high), acked.weighted_acked(bounds, weights)

    bench.seglog(GROUP, f"backlog: acked_count + weighted_acked, {len(weights):,} batches", messages=1,
                 unit="call", min_rate=1_000)
    count, weighted = bench.run(figures, rounds=50)
    assert count == acked.individual_count and weighted > 0


def test_ack_cumulative(bench, scattered):
    offsets, _ = scattered

    def filled():
        acks = AckSet()
        acks.ack_many(offsets)
        return (acks,)

    bench.seglog(GROUP, "ack_cumulative across the window", messages=1, unit="call")
    bench.note(f"drops {(2 * len(offsets)) // 64:,} bitmap words holding {len(offsets):,} individual acks")
    assert bench.run(lambda acks: acks.ack_cumulative(2 * len(offsets) - 1), setup=filled) == len(offsets)
