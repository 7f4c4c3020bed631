"""AckSet, a subscription cursor's acknowledgement state, against a pure-Python model: a floor and a set."""

import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from seglog._core._acks import WINDOW_LIMIT, AckSet
from seglog.errors import InvalidArgumentError


class ReferenceAcks:
    """The meaning of an AckSet, spelled out: every offset below `floor` plus the offsets in `acked`."""

    def __init__(self, floor=0):
        self.floor = floor
        self.acked = set()

    def _settle(self):
        self.acked = {o for o in self.acked if o >= self.floor}
        while self.floor in self.acked:
            self.acked.remove(self.floor)
            self.floor += 1

    def is_acked(self, offset):
        return offset < self.floor or offset in self.acked

    def ack_each(self, offsets):
        newly = {o for o in offsets if not self.is_acked(o)}
        self.acked |= newly
        self._settle()
        return len(newly)

    def ack_cumulative(self, offset):
        newly = sum(1 for o in range(self.floor, offset + 1) if o not in self.acked)
        self.floor = max(self.floor, offset + 1)
        self._settle()
        return newly

    @property
    def high(self):
        return max(self.acked) + 1 if self.acked else self.floor

    def next_unacked(self, start):
        o = start
        while self.is_acked(o):
            o += 1
        return o

    def ranges(self):
        runs = []
        for o in sorted(self.acked):
            if runs and runs[-1][1] == o:
                runs[-1][1] = o + 1
            else:
                runs.append([o, o + 1])
        return runs

    def weighted_acked(self, bounds, weights):
        batches = zip(bounds[:-1], bounds[1:], weights, strict=True)
        return sum(w * sum(1 for o in self.acked if a <= o < b) for a, b, w in batches)


# Offsets relative to the floor, crowded around 64-bit word boundaries (and a few below the floor).
WORD_EDGES = [b + e for b in (0, 64, 128, 192, 448, 512, 1024) for e in (-1, 0, 1)]
deltas = st.one_of(st.integers(0, 200), st.sampled_from(WORD_EDGES), st.integers(-70, -1), st.integers(0, 3000))
FLOORS = [0, 1, 62, 63, 64, 65, 127, 1000, 2**40 + 7]


def as_offsets(values, kind):
    """The same offsets in each form ack_many accepts."""
    array = np.array(values, dtype=np.int64)
    if kind == "int64":
        return array
    if kind == "uint64":
        return array.astype(np.uint64)
    if kind == "strided":
        return np.repeat(array, 2)[::2]
    if kind == "memoryview":
        return memoryview(array)
    return pa.array(array)


class AckSetMachine(RuleBasedStateMachine):
    """Random acks of every kind; after each step every query must agree with the model."""

    @initialize(floor=st.sampled_from(FLOORS))
    def start(self, floor):
        self.acks = AckSet(floor)
        self.model = ReferenceAcks(floor)

    def offset(self, delta):
        return max(0, self.model.floor + delta)

    @rule(delta=deltas)
    def ack(self, delta):
        o = self.offset(delta)
        assert self.acks.ack(o) == bool(self.model.ack_each([o]))

    @rule(ds=st.lists(deltas, max_size=40), kind=st.sampled_from(["int64", "uint64", "strided", "memoryview",
                                                                   "pyarrow"]))
    def ack_many(self, ds, kind):
        offsets = [self.offset(d) for d in ds]
        assert self.acks.ack_many(as_offsets(offsets, kind)) == self.model.ack_each(offsets)

    @rule(delta=deltas, length=st.one_of(st.integers(0, 200), st.sampled_from([63, 64, 65, 128, 1000])))
    def ack_range(self, delta, length):
        start = self.offset(delta)
        assert self.acks.ack_range(start, start + length) == self.model.ack_each(range(start, start + length))

    @rule(delta=deltas)
    def ack_cumulative(self, delta):
        o = self.offset(delta)
        assert self.acks.ack_cumulative(o) == self.model.ack_cumulative(o)

    @rule(delta=deltas, length=st.integers(0, 300))
    def span_queries(self, delta, length):
        start = self.offset(delta)
        stop = start + length
        expected = [o for o in range(start, stop) if not self.model.is_acked(o)]
        assert self.acks.is_acked(start) == self.model.is_acked(start)
        assert self.acks.acked_count(start, stop) == length - len(expected)
        assert self.acks.next_unacked(start) == self.model.next_unacked(start)
        unacked = self.acks.unacked_in(start, stop)
        assert unacked.dtype == np.int64 and unacked.tolist() == expected
        mask = self.acks.unacked_mask(start, stop)
        assert mask.dtype == np.bool_ and np.flatnonzero(mask).tolist() == [o - start for o in expected]

    @rule(cuts=st.lists(deltas, min_size=1, max_size=12, unique=True), data=st.data())
    def weighted(self, cuts, data):
        bounds = sorted({self.offset(d) for d in cuts} | {self.offset(d) + 1 for d in cuts})
        weights = data.draw(st.lists(st.floats(0, 1e6), min_size=len(bounds) - 1, max_size=len(bounds) - 1))
        got = self.acks.weighted_acked(np.array(bounds, np.int64), np.array(weights, np.float64))
        assert got == pytest.approx(self.model.weighted_acked(bounds, weights), rel=1e-12, abs=1e-9)

    @invariant()
    def state_matches(self):
        acks, model = self.acks, self.model
        assert (acks.floor, acks.high, acks.individual_count) == (model.floor, model.high, len(model.acked))
        assert acks.ranges().tolist() == model.ranges()
        assert not acks.is_acked(acks.floor) and acks.is_acked(max(0, acks.floor - 1)) == (acks.floor > 0)
        low = max(0, model.floor - 70)
        mask = acks.unacked_mask(low, model.high + 70)
        assert mask.tolist() == [not model.is_acked(o) for o in range(low, model.high + 70)]

    @invariant()
    def round_trips(self):
        restored = AckSet.from_bytes(self.acks.to_bytes())
        assert restored == self.acks and restored.to_bytes() == self.acks.to_bytes()
        assert self.acks.copy() == self.acks


TestAckSetAgainstModel = AckSetMachine.TestCase
TestAckSetAgainstModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_equality_is_about_the_acked_set_not_the_window():
    grown = AckSet(0)
    grown.ack(100_000)  # a large window
    grown.ack_cumulative(99_998)  # floor 99_999, window still starting near 0
    fresh = AckSet(99_999)
    fresh.ack(100_000)
    assert grown == fresh and grown.to_bytes() == fresh.to_bytes()
    assert repr(fresh) == "AckSet(floor=99999, high=100001, individual_count=1)"
    fresh.ack(100_002)
    assert grown != fresh
    assert AckSet(3) != AckSet(4) and AckSet(3) != "AckSet(3)"
    with pytest.raises(TypeError):
        hash(fresh)


def test_copy_is_independent():
    acks = AckSet(10)
    acks.ack_many(np.array([12, 14, 200]))
    other = acks.copy()
    other.ack_many(np.array([11, 10]))
    assert acks.floor == 10 and other.floor == 13 and acks != other


def test_acking_the_floor_advances_over_contiguous_acks():
    acks = AckSet(0)
    assert acks.ack_many(np.arange(1, 130)) == 129
    assert (acks.floor, acks.high, acks.individual_count) == (0, 130, 129)
    assert acks.ack(0)
    assert (acks.floor, acks.high, acks.individual_count) == (130, 130, 0)
    assert not acks.ack(5) and acks.ack_range(0, 130) == 0


def test_large_gap_above_the_floor():
    acks = AckSet(5)
    far = 5 + 10_000_000
    assert acks.ack(far) and not acks.ack(far)
    assert acks.is_acked(far) and not acks.is_acked(far - 1) and not acks.is_acked(far + 1)
    assert (acks.floor, acks.high, acks.individual_count) == (5, far + 1, 1)
    assert acks.next_unacked(5) == 5 and acks.next_unacked(far) == far + 1
    assert acks.acked_count(0, 2**40) == 6
    assert acks.ranges().tolist() == [[far, far + 1]]
    assert AckSet.from_bytes(acks.to_bytes()) == acks
    assert acks.ack_range(6, far) == far - 6
    assert acks.ack(5) and (acks.floor, acks.high, acks.individual_count) == (far + 1, far + 1, 0)


def test_window_moves_forward_with_the_floor():
    """A cursor acking out of order over a long partition: the window slides, it does not keep growing."""
    acks, rng = AckSet(0), np.random.default_rng(1)
    for start in range(0, 2_000_000, 10_000):
        batch = start + rng.permutation(10_000)
        acks.ack_many(batch[:5_000])
        acks.ack_many(batch[5_000:])
        assert acks.floor == start + 10_000 and acks.individual_count == 0
    acks.ack_many(np.array([2_000_005, 2_000_700]))
    assert acks.ranges().tolist() == [[2_000_005, 2_000_006], [2_000_700, 2_000_701]]


def test_weighted_acked_matches_brute_force_on_random_batches():
    rng = np.random.default_rng(7)
    for _ in range(40):
        floor = int(rng.integers(0, 5_000))
        acks = AckSet(floor)
        offsets = floor + rng.choice(20_000, size=int(rng.integers(0, 8_000)), replace=False)
        acks.ack_many(offsets)
        individual = np.zeros(floor + 30_000, bool)
        individual[offsets] = True
        individual[:acks.floor] = False
        bounds = np.unique(rng.integers(0, floor + 30_000, size=int(rng.integers(2, 300))))
        if len(bounds) < 2:
            continue
        weights = rng.random(len(bounds) - 1) * 1000
        expected = sum(individual[a:b].sum() * w for a, b, w in zip(bounds[:-1], bounds[1:], weights, strict=True))
        assert acks.weighted_acked(bounds, weights) == pytest.approx(expected, rel=1e-9)
        assert acks.weighted_acked(bounds.astype(np.int32), np.ones(len(bounds) - 1, np.int64)) == \
            individual[bounds[0]:bounds[-1]].sum()
    assert AckSet(0).weighted_acked(np.array([0], np.int64), np.array([], np.float64)) == 0.0


def test_accepts_pyarrow_integer_arrays_without_copy_and_numpy_integer_scalars():
    acks = AckSet()
    assert acks.ack_many(pa.array([3, 1, 2], pa.int64()).slice(1)) == 2  # an offset into the buffer
    assert acks.ack_many(pa.array([7, 8], pa.uint16())) == 2
    assert acks.ack(np.int32(0)) and acks.floor == 3
    assert acks.ack_many(np.array([], np.int64)) == 0 and acks.ack_many(pa.array([], pa.int64())) == 0


# ---------------------------------------------------------------------------------------------------------
# Bad input: ValueError (InvalidArgumentError) naming the argument and what is accepted; nothing changes.

@pytest.fixture
def acks():
    acks = AckSet(100)
    acks.ack_many(np.array([102, 170, 300]))
    return acks


def unchanged(acks, call, *args, match):
    before = acks.to_bytes()
    with pytest.raises(ValueError, match=match) as raised:
        call(*args)
    assert acks.to_bytes() == before
    assert isinstance(raised.value, InvalidArgumentError) and "accepted:" in str(raised.value)
    return raised.value


@pytest.mark.parametrize("offsets, problem", [
    (np.array([101, 103, -5]), "offsets.*-5"),
    (pa.array([101, None, 103], pa.int64()), "offsets.*1 nulls"),
    (np.array([101.0, 103.0]), "offsets.*float64"),
    (pa.array([101.0, 103.0]), "offsets.*pyarrow double"),
    (pa.array(["101"]), "offsets.*pyarrow string"),
    (np.array([[101, 103], [104, 105]]), "offsets.*int64 array of shape \\(2, 2\\)"),
    (np.array([True, False]), "offsets.*bool"),
    ([101, 103], "offsets.*list"),
    (np.array([2**63], np.uint64), "offsets.*9223372036854775808"),
    (np.array([2**63 - 1]), "offsets.*9223372036854775807"),
    (np.array([103, 100 + WINDOW_LIMIT + 1]), "offsets.*window limit"),
])
def test_ack_many_refuses_bad_offsets(acks, offsets, problem):
    error = unchanged(acks, acks.ack_many, offsets, match=problem)
    assert error.argument == "offsets"


@pytest.mark.parametrize("method, args, problem", [
    ("ack", (-1,), "offset -1.*from 0 to"),
    ("ack", (2**63 - 1,), "offset"),
    ("ack", (2**64,), "offset"),
    ("ack", (100 + WINDOW_LIMIT + 1,), "offset.*window limit"),
    ("ack_range", (-3, 5), "start -3"),
    ("ack_range", (105, 104), "stop 104.*>= start"),
    ("ack_range", (200, 100 + WINDOW_LIMIT + 2), "stop.*window limit"),
    ("ack_cumulative", (-1,), "offset -1"),
    ("is_acked", (-1,), "offset -1"),
    ("acked_count", (10, 5), "stop 5"),
    ("next_unacked", (-2,), "start -2"),
    ("unacked_in", (-2, 5), "start -2"),
    ("unacked_mask", (7, 6), "stop 6"),
])
def test_scalar_arguments_are_checked(acks, method, args, problem):
    unchanged(acks, getattr(acks, method), *args, match=problem)


def test_constructor_checks_floor():
    with pytest.raises(ValueError, match="floor -1"):
        AckSet(-1)
    with pytest.raises(TypeError):
        AckSet(1.5)


@pytest.mark.parametrize("bounds, weights, problem", [
    (np.array([0, 200, 400]), np.array([1.0]), "bounds.*3 bounds for 1 weights"),
    (np.array([0.0, 400.0]), np.array([1.0]), "bounds.*float64"),
    (np.array([0, 400]), np.array(["a"]), "weights.*<U1"),
    (np.array([0, 400]), [1.0], "weights.*list"),
    (np.array([0, 250, 150, 400]), np.ones(3), "bounds.*strictly increasing"),
])
def test_weighted_acked_checks_its_arrays(acks, bounds, weights, problem):
    unchanged(acks, acks.weighted_acked, bounds, weights, match=problem)


def header(floor, high, magic=b"SGAK", version=1, reserved=b"\0\0\0"):
    return magic + bytes([version]) + reserved + floor.to_bytes(8, "little", signed=True) + \
        high.to_bytes(8, "little", signed=True)


def words(*values):
    return b"".join(v.to_bytes(8, "little") for v in values)


def test_to_bytes_layout():
    acks = AckSet(70)
    acks.ack_many(np.array([72, 130]))
    assert acks.to_bytes() == header(70, 131) + words(1 << 8, 1 << 2)
    assert AckSet(5).to_bytes() == header(5, 5)


@pytest.mark.parametrize("data, problem", [
    (b"", "truncated"),
    (header(70, 131)[:20], "truncated"),
    (header(70, 131, magic=b"SGLB") + words(1 << 8, 1 << 2), "magic"),
    (header(70, 131, version=2) + words(1 << 8, 1 << 2), "version 2"),
    (header(70, 131, reserved=b"\0\1\0") + words(1 << 8, 1 << 2), "reserved"),
    (header(70, 131) + words(1 << 8), "truncated"),
    (header(70, 131) + words(1 << 8, 1 << 2, 0), "trailing"),
    (header(70, 70) + words(0), "trailing"),
    (header(70, 131) + words(1 << 8 | 1 << 5, 1 << 2), "below floor"),
    (header(70, 131) + words(1 << 6 | 1 << 8, 1 << 2), "floor's bit"),
    (header(70, 131) + words(1 << 8, 1 << 2 | 1 << 3), "at or above high"),
    (header(70, 131) + words(1 << 8, 1 << 1), "not 1 \\+ the largest"),
    (header(70, 60), "floor 70 and high 60"),
    (header(-1, 5), "floor"),
    (header(0, WINDOW_LIMIT + 2), "window limit"),
    ("SGAK", "str"),
])
def test_from_bytes_refuses_malformed_input(data, problem):
    with pytest.raises(ValueError, match=problem) as raised:
        AckSet.from_bytes(data)
    assert raised.value.argument == "data" and "accepted: bytes from AckSet.to_bytes()" in str(raised.value)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(FLOORS), st.lists(st.integers(0, 700), max_size=50), st.data())
def test_from_bytes_refuses_any_single_bit_flip_that_breaks_the_state(floor, deltas, data):
    """A flipped bit either still describes a valid state (an offset acked or not) or is refused."""
    acks = AckSet(floor)
    acks.ack_many(np.array([floor + d for d in deltas], np.int64))
    raw = bytearray(acks.to_bytes())
    bit = data.draw(st.integers(0, 8 * len(raw) - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    try:
        restored = AckSet.from_bytes(bytes(raw))
    except InvalidArgumentError:
        return
    assert restored != acks and restored.to_bytes() == bytes(raw)  # another state, in its one encoding


def test_conflicting_use_from_another_thread_raises_instead_of_racing():
    """ack_many releases the GIL: meanwhile another thread's calls raise RuntimeError, and nothing breaks."""
    acks = AckSet(0)
    acks.ack(4_000_001)
    offsets = np.random.default_rng(3).permutation(4_000_000)[:2_000_000] + 1
    stop, errors = threading.Event(), []

    def writer():
        while not stop.is_set():
            acks.ack_many(offsets)

    thread = threading.Thread(target=writer)
    thread.start()
    deadline = time.monotonic() + 20
    try:
        while not errors and time.monotonic() < deadline:
            try:
                acks.ack(4_000_001)
                acks.is_acked(7)
            except RuntimeError as error:
                errors.append(error)
    finally:
        stop.set()
        thread.join()
    assert errors and "another thread" in str(errors[0])
    assert acks.individual_count == 2_000_001
