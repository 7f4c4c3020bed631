"""Page-fault cost of appending into a freshly created, memory-mapped segment.

seglog appends by memcpy'ing records into a pre-sized, MAP_SHARED segment file.
Copying into pages that are already mapped runs at memory bandwidth, but the
first write to each 4 KiB page of a *new* file takes a page fault: the kernel
allocates and zeroes a page-cache folio, calls the filesystem's page_mkwrite
(ext4 reserves or converts blocks) and installs the PTE.  That makes the first
pass over a segment several times slower than the memcpy itself.

This module measures the ways to prepare a new segment and where each one puts
that cost.  Scenario: one 256 MiB segment in pytest's tmp_path, a 256 MiB
random payload copied in 1 MiB chunks with numpy slice assignment over
``np.frombuffer(mmap)``, as an append would.

Groups
------
append: full-speed writer, timed = what the writer waits for
  baseline_premapped   pages written once before: the physical upper limit
  recycled_cached      reopened segment whose pages are still in page cache
  sparse               ftruncate + mmap
  fallocate            posix_fallocate + mmap
  map_populate         fallocate; mmap(MAP_POPULATE) timed together with copy
  madv_populate_write  fallocate + mmap; madvise(MADV_POPULATE_WRITE) + copy
  background_prefault  a thread keeps AHEAD bytes in front of the writer
                       faulted in (mechanisms: PREFAULTERS); only the writer's
                       copy loop is timed, no head start
paced: writer offering 2 GB/s (a log is rarely memcpy-bound); reports the
  time the writer spends copying, with a prefault thread that got a head start
setup: one-off per-segment costs that the append group keeps out of its timing
gil: does the call let other Python threads run while it works?  Decides
  whether a prefault thread can overlap the copy at all; plus the cost of
  releasing the GIL per chunk next to a CPU-bound Python thread (convoy).

Every group reports ``extra_info['GB/s']`` (256 MiB / median round time, with
1 GB = 1e9 bytes; for paced: / median writer busy time).  Append variants also
check that the segment really holds the payload afterwards, because the
touch-based prefaulters write into the file.

Run from the repo root (about a minute):
    python -m pytest bench/experiments/bench_page_faults.py --benchmark-only -p no:cacheprovider
With --benchmark-disable every body runs once, untimed, as a smoke test
(still checks the payload; ~8 s, since the sizes stay at 256 MiB).

Caveat for VMs: when the guest touches a physical page the host has not
backed (never used, or handed back by virtio-balloon free page reporting or
DAMON reclaim), the host faults too, and first-touch drops to ~0.5 GB/s.
Warm-up rounds absorb most of it, but it is the main source of noise here.
"""

import ctypes
import itertools
import mmap
import os
import sys
import threading
import time

import numpy as np
import pytest

MiB = 1 << 20
SEGMENT_SIZE = 256 * MiB
CHUNK = 1 * MiB
PAGE = mmap.PAGESIZE

# Not exported by Python's mmap module; Linux >= 5.14.  It faults pages in
# writable (allocate + page_mkwrite) without changing their contents, unlike
# MAP_POPULATE, which on a MAP_SHARED mapping only read-faults (the kernel
# avoids dirtying shared pages), so every page still takes a write fault later.
MADV_POPULATE_WRITE = 23

# Background prefault granularity.  4 MiB = 1024 pages: numpy only releases
# the GIL for the strided touch when the loop has > 500 elements, so smaller
# steps would make the numpy prefaulter hold the GIL (see the gil group).
PREFAULT_STEP = 4 * MiB
PREFAULT_POLL_S = 50e-6  # sleep when far enough ahead; releases the GIL

# Rounds are expensive (up to ~1 s each) and the machine is noisy: take the
# median of several, after warm-ups that absorb first-touch-of-guest-RAM costs.
ROUNDS = 7
WARMUP_ROUNDS = 2
GIL_ROUNDS = 5  # the gil group wants a verdict, not a precise time

GROUP_APPEND = "append 256 MiB into new segment"
GROUP_SETUP = "segment setup (one-off)"
GROUP_PACED = "append at a paced 2 GB/s (writer busy time)"
GROUP_GIL = "GIL released during call"


def _probe_populate_write():
    """MADV_POPULATE_WRITE needs Linux >= 5.14; EINVAL on older kernels."""
    probe = mmap.mmap(-1, PAGE)
    try:
        probe.madvise(MADV_POPULATE_WRITE)
        return True
    except OSError:
        return False
    finally:
        probe.close()


HAVE_POPULATE_WRITE = _probe_populate_write()
needs_populate_write = pytest.mark.skipif(
    not HAVE_POPULATE_WRITE, reason="MADV_POPULATE_WRITE needs Linux >= 5.14"
)

# madvise via ctypes stands in for the C extension seglog would ship: ctypes
# drops the GIL around foreign calls, Python's mmap.madvise() does not.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.restype = ctypes.c_int


def _madvise_nogil(addr, length, advice):
    if _libc.madvise(addr, length, advice) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


# --------------------------------------------------------------------------
# Segment lifecycle
# --------------------------------------------------------------------------


class Segment:
    """A segment file, its mapping and (optionally) its prefault thread."""

    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self.mm = None
        self.view = None
        self.prefaulter = None
        self.closed = False

    def truncate(self):
        os.ftruncate(self.fd, SEGMENT_SIZE)

    def fallocate(self):
        os.posix_fallocate(self.fd, 0, SEGMENT_SIZE)

    def map(self, flags=mmap.MAP_SHARED):
        self.mm = mmap.mmap(self.fd, SEGMENT_SIZE, flags=flags)
        self.view = np.frombuffer(self.mm, dtype=np.uint8)

    def unmap(self):
        # The numpy view holds a buffer export; mmap.close() refuses while it lives.
        self.view = None
        if self.mm is not None:
            self.mm.close()
            self.mm = None

    def close(self):
        if self.closed:
            return
        self.closed = True
        if self.prefaulter is not None:
            self.prefaulter.stop()
            self.prefaulter = None
        self.unmap()
        os.close(self.fd)
        # Unlinking drops the dirty pages, so rounds don't pile up writeback
        # that would then compete with later rounds.
        os.unlink(self.path)


@pytest.fixture(scope="module")
def payload():
    return np.random.default_rng(0x5E6106).integers(0, 256, SEGMENT_SIZE, dtype=np.uint8)


@pytest.fixture
def new_segment(tmp_path):
    """Factory for fresh segment files; closes whatever is still open at the end."""
    names = itertools.count()
    live = []

    def make():
        seg = Segment(tmp_path / f"{next(names):06d}.seg")
        live.append(seg)
        return seg

    yield make
    for seg in live:
        seg.close()


def copy_chunks(dst, src, before_chunk=None):
    """The append: 1 MiB slice assignments, as the writer would issue them."""
    for off in range(0, SEGMENT_SIZE, CHUNK):
        end = off + CHUNK
        if before_chunk is not None:
            before_chunk(off, end)
        dst[off:end] = src[off:end]


def record_throughput(benchmark, nbytes=SEGMENT_SIZE):
    if benchmark.disabled:  # --benchmark-disable (CI): one untimed run, no stats
        return
    stats = benchmark.stats.stats
    benchmark.extra_info["GB/s"] = round(nbytes / stats.median / 1e9, 3)
    benchmark.extra_info["GB/s best"] = round(nbytes / stats.min / 1e9, 3)


def run_append(benchmark, new_segment, payload, prepare, append, group=GROUP_APPEND):
    """pedantic() with a fresh segment per round; verifies and deletes it after."""
    corrupt_rounds = 0
    segments = []

    def setup():
        seg = new_segment()
        segments.append(seg)
        prepare(seg)
        return (seg,), {}

    def teardown(seg):
        nonlocal corrupt_rounds
        if not np.array_equal(seg.view, payload):
            corrupt_rounds += 1
        seg.close()

    benchmark.group = group
    benchmark.pedantic(
        append, setup=setup, teardown=teardown, rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    if benchmark.disabled:  # pedantic() ran the body once and skipped teardown
        teardown(segments[-1])
    if group == GROUP_APPEND:  # the paced group derives GB/s from busy time instead
        record_throughput(benchmark)
    benchmark.extra_info["corrupt rounds"] = corrupt_rounds
    assert corrupt_rounds == 0, "segment content differs from payload after append"


# --------------------------------------------------------------------------
# append group: variants 1-5
# --------------------------------------------------------------------------


def test_baseline_premapped(benchmark, new_segment, payload):
    def prepare(seg):
        seg.fallocate()
        seg.map()
        seg.view.fill(0xA5)  # every page now allocated, dirty and mapped writable

    run_append(benchmark, new_segment, payload, prepare,
               lambda seg: copy_chunks(seg.view, payload))


def test_recycled_cached(benchmark, new_segment, payload):
    # Segment recycling (cf. RocksDB recycle_log_file_num): reuse a retired,
    # flushed segment whose pages are still in page cache.  Writes still take
    # a fault per page in the new mapping, but nothing is allocated or zeroed.
    # Only helps while the old pages are still cached.
    def prepare(seg):
        seg.fallocate()
        seg.map()
        seg.view.fill(0xA5)
        seg.mm.flush()
        seg.unmap()
        seg.map()

    run_append(benchmark, new_segment, payload, prepare,
               lambda seg: copy_chunks(seg.view, payload))


def test_sparse(benchmark, new_segment, payload):
    def prepare(seg):
        seg.truncate()
        seg.map()

    run_append(benchmark, new_segment, payload, prepare,
               lambda seg: copy_chunks(seg.view, payload))


def test_fallocate(benchmark, new_segment, payload):
    def prepare(seg):
        seg.fallocate()
        seg.map()

    run_append(benchmark, new_segment, payload, prepare,
               lambda seg: copy_chunks(seg.view, payload))


def test_map_populate(benchmark, new_segment, payload):
    # MAP_POPULATE moves faulting into mmap(), so mmap() is timed as well.
    def append(seg):
        seg.map(flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        copy_chunks(seg.view, payload)

    run_append(benchmark, new_segment, payload, Segment.fallocate, append)


@needs_populate_write
def test_madv_populate_write(benchmark, new_segment, payload):
    def prepare(seg):
        seg.fallocate()
        seg.map()

    def append(seg):
        seg.mm.madvise(MADV_POPULATE_WRITE, 0, SEGMENT_SIZE)
        copy_chunks(seg.view, payload)

    run_append(benchmark, new_segment, payload, prepare, append)


# --------------------------------------------------------------------------
# append group: variant 6, background prefault thread
# --------------------------------------------------------------------------


def _touch_mmap_madvise(seg):
    # Python's mmap.madvise() keeps the GIL for the whole syscall, so the
    # writer stalls whenever it needs the GIL back after a chunk copy.
    mm = seg.mm
    return lambda start, end: mm.madvise(MADV_POPULATE_WRITE, start, end - start)


def _touch_ctypes_madvise(seg):
    # GIL released: what a C extension calling madvise() would achieve.
    base = seg.view.ctypes.data
    return lambda start, end: _madvise_nogil(base + start, end - start, MADV_POPULATE_WRITE)


def _touch_numpy_strided(seg):
    # One byte per page through numpy; GIL released for > 500 pages per call.
    view = seg.view

    def touch(start, end):
        view[start:end:PAGE] = 0

    return touch


def _touch_python_bytes(seg):
    # One byte per page from Python: each fault is taken with the GIL held.
    mm = seg.mm

    def touch(start, end):
        for off in range(start, end, PAGE):
            mm[off] = 0

    return touch


# name -> (factory of touch(start, end), destructive?).  Destructive touchers
# write bytes into the file, so they must never run concurrently with the
# writer on the same range (see Prefaulter); MADV_POPULATE_WRITE never changes
# contents and needs no coordination.
PREFAULTERS = {
    "mmap_madvise": (_touch_mmap_madvise, False),
    "ctypes_madvise": (_touch_ctypes_madvise, False),
    "numpy_touch": (_touch_numpy_strided, True),
    "python_touch": (_touch_python_bytes, True),
}


class Prefaulter(threading.Thread):
    """Keeps [writer position, writer position + ahead) faulted in.

    The writer calls ``before_chunk`` with the chunk it is about to copy,
    publishing its end as ``claimed``; the thread never starts below
    ``claimed`` and, if the writer overtakes it, skips forward rather than
    faulting pages the writer is already paying for.

    A destructive touch racing the writer would overwrite fresh data with
    zeros (an unguarded first version of this benchmark corrupted every
    round), so for those the thread also publishes the range it is touching
    and the writer waits for it.  This is Dekker-style: each side stores its
    own claim, then reads the other's; the GIL makes those steps sequentially
    consistent, so at least one side always sees the conflict.
    """

    def __init__(self, touch, ahead, destructive):
        super().__init__(daemon=True)
        self.touch = touch
        self.ahead = ahead
        self.destructive = destructive
        self.claimed = 0  # end of the chunk the writer is copying
        self.done = 0  # everything below this is faulted in (or written)
        self.touching = None  # (start, end) of a destructive touch in progress
        self.overtaken = 0  # how often the writer got ahead of the prefaulter
        self._stopped = False

    def run(self):
        while self.done < SEGMENT_SIZE and not self._stopped:
            claimed = self.claimed
            done = self.done
            if done < claimed:
                self.overtaken += 1
                done = claimed
            if done >= min(SEGMENT_SIZE, claimed + self.ahead):
                time.sleep(PREFAULT_POLL_S)
                continue
            end = min(done + PREFAULT_STEP, SEGMENT_SIZE)
            if self.destructive:
                self.touching = (done, end)
                if self.claimed > done:  # the writer got here first: back off
                    self.touching = None
                    continue
            self.touch(done, end)
            self.touching = None
            self.done = end

    def wait_ahead(self):
        """Block until the first window is faulted in (a head start)."""
        while self.done < min(self.ahead, SEGMENT_SIZE):
            time.sleep(PREFAULT_POLL_S)

    def before_chunk(self, start, end):
        self.claimed = end
        while self.destructive:
            touching = self.touching
            if touching is None or end <= touching[0] or start >= touching[1]:
                break
            time.sleep(0)  # yield the GIL until the touch of our range is done

    def stop(self):
        self._stopped = True
        self.join()
        self.touch = None  # the touch closure may hold a view that pins the mapping


@needs_populate_write
@pytest.mark.parametrize("ahead_mib", [8, 32])
@pytest.mark.parametrize("mechanism", list(PREFAULTERS))
def test_background_prefault(benchmark, new_segment, payload, mechanism, ahead_mib):
    make_touch, destructive = PREFAULTERS[mechanism]
    overtaken = []

    def prepare(seg):
        seg.fallocate()
        seg.map()

    def append(seg):
        # Started inside the timing and from offset 0: no head start, so the
        # first chunks race the prefaulter.  Timing ends at the last chunk
        # copied; the thread is joined in teardown (Segment.close).
        seg.prefaulter = prefaulter = Prefaulter(make_touch(seg), ahead_mib * MiB, destructive)
        prefaulter.start()
        copy_chunks(seg.view, payload, before_chunk=prefaulter.before_chunk)
        overtaken.append(prefaulter.overtaken)

    run_append(benchmark, new_segment, payload, prepare, append)
    benchmark.extra_info["writer overtook prefaulter"] = int(np.median(overtaken))


# --------------------------------------------------------------------------
# paced group: a writer slower than the prefaulter, as a real log would be
# --------------------------------------------------------------------------


def paced_copy(dst, src, bytes_per_s, before_chunk=None):
    """copy_chunks() at a fixed offered rate; returns each chunk's copy time.

    The writer sleeps (GIL released) between chunks, like a log whose
    producers are slower than memcpy.  What matters then is not wall time but
    how long each append blocks the writer.
    """
    clock = time.perf_counter
    interval = CHUNK / bytes_per_s
    durations = []
    start = clock()
    for i, off in enumerate(range(0, SEGMENT_SIZE, CHUNK)):
        delay = start + i * interval - clock()
        if delay > 0:
            time.sleep(delay)
        end = off + CHUNK
        if before_chunk is not None:
            before_chunk(off, end)
        t0 = clock()
        dst[off:end] = src[off:end]
        durations.append(clock() - t0)
    return durations


PACED_RATE = 2e9  # bytes/s offered: well under the ~6-7 GB/s populate rate
PACED_AHEAD = 32 * MiB


@pytest.mark.parametrize("variant", ["premapped", "fallocate", "mmap_madvise", "ctypes_madvise"])
def test_paced_writer(benchmark, new_segment, payload, variant):
    """Writer offering 2 GB/s; reports the time the writer spends copying.

    Models the steady state of the recommended design: the next segment is
    created and its prefault thread started before the writer rolls over to
    it, so the prefaulter gets a head start of one window (in setup, untimed).

    Wall time is ~fixed by the pacing (256 MiB / 2 GB/s = 134 ms); the
    numbers to read are extra_info 'GB/s' (here: 256 MiB / sum of chunk copy
    times, i.e. while copying) and the chunk latency percentiles.
    """
    if variant.endswith("madvise") and not HAVE_POPULATE_WRITE:
        pytest.skip("MADV_POPULATE_WRITE needs Linux >= 5.14")
    busy, p99, worst = [], [], []

    def prepare(seg):
        seg.fallocate()
        seg.map()
        if variant == "premapped":
            seg.view.fill(0xA5)
        elif variant.endswith("madvise"):
            make_touch, destructive = PREFAULTERS[variant]
            seg.prefaulter = Prefaulter(make_touch(seg), PACED_AHEAD, destructive)
            seg.prefaulter.start()
            seg.prefaulter.wait_ahead()

    def append(seg):
        before_chunk = seg.prefaulter.before_chunk if seg.prefaulter else None
        durations = paced_copy(seg.view, payload, PACED_RATE, before_chunk)
        busy.append(sum(durations))
        p99.append(np.percentile(durations, 99))
        worst.append(max(durations))

    run_append(benchmark, new_segment, payload, prepare, append, group=GROUP_PACED)
    benchmark.extra_info["GB/s"] = round(SEGMENT_SIZE / float(np.median(busy)) / 1e9, 3)
    benchmark.extra_info["chunk p99 (us)"] = round(float(np.median(p99)) * 1e6, 1)
    benchmark.extra_info["chunk max (us)"] = round(float(np.median(worst)) * 1e6, 1)


# --------------------------------------------------------------------------
# setup group: variant 7, one-off costs moved out of the copy
# --------------------------------------------------------------------------


def run_setup(benchmark, new_segment, prepare, step):
    def setup():
        seg = new_segment()
        prepare(seg)
        return (seg,), {}

    benchmark.group = GROUP_SETUP
    benchmark.pedantic(
        step, setup=setup, teardown=Segment.close, rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    record_throughput(benchmark)


def test_setup_ftruncate(benchmark, new_segment):
    run_setup(benchmark, new_segment, lambda seg: None, Segment.truncate)


def test_setup_posix_fallocate(benchmark, new_segment):
    run_setup(benchmark, new_segment, lambda seg: None, Segment.fallocate)


def test_setup_map_populate(benchmark, new_segment):
    run_setup(benchmark, new_segment, Segment.fallocate,
              lambda seg: seg.map(flags=mmap.MAP_SHARED | mmap.MAP_POPULATE))


@needs_populate_write
def test_setup_madv_populate_write(benchmark, new_segment):
    def prepare(seg):
        seg.fallocate()
        seg.map()

    run_setup(benchmark, new_segment, prepare,
              lambda seg: seg.mm.madvise(MADV_POPULATE_WRITE, 0, SEGMENT_SIZE))


# --------------------------------------------------------------------------
# gil group: can another Python thread run while the call works?
# --------------------------------------------------------------------------


class Ticker(threading.Thread):
    """A Python thread that wants to wake up every millisecond.

    Returning from sleep needs the GIL, so how late it wakes while a call
    runs shows how long that call keeps other Python threads out: ~0.1 ms if
    the call releases the GIL, ~sys.getswitchinterval() (5 ms) at every
    wake-up for a Python-level loop that holds the GIL per step and is
    time-sliced between steps, one wake-up delayed by the whole call for a C
    call that never releases it.  Unlike a busy spinner it needs almost no
    CPU and does not slow the op down; other processes keeping the second
    core busy can still delay some wake-ups by a few ms, hence typical (median)
    delays and the best of several rounds.
    """

    PERIOD_S = 1e-3

    def __init__(self):
        super().__init__(daemon=True)
        self.wakeups = []  # (due, woke) perf_counter() pairs
        self.due = time.perf_counter()
        self._stopped = False

    def run(self):
        clock = time.perf_counter
        while not self._stopped:
            self.due = clock() + self.PERIOD_S
            time.sleep(self.PERIOD_S)
            self.wakeups.append((self.due, clock()))

    def delays(self, t0, t1):
        """Wake-up delays, clipped to the part that fell inside [t0, t1]."""
        # A wake-up still pending at t1 (GIL held until the very end) counts too.
        pairs = self.wakeups + [(self.due, t1)]
        return [min(woke, t1) - max(due, t0) for due, woke in pairs if min(woke, t1) > max(due, t0)]

    def stop(self):
        self._stopped = True
        self.join()


class Spinner(threading.Thread):
    """A CPU-bound pure-Python thread: it holds the GIL whenever it can."""

    def __init__(self):
        super().__init__(daemon=True)
        self.count = 0
        self._stopped = False

    def run(self):
        while not self._stopped:
            self.count += 1

    def stop(self):
        self._stopped = True
        self.join()


def _gil_copy_chunks(seg, payload):
    copy_chunks(seg.view, payload)


def _gil_mmap_madvise(seg, payload):
    seg.mm.madvise(MADV_POPULATE_WRITE, 0, SEGMENT_SIZE)


def _gil_ctypes_madvise(seg, payload):
    _madvise_nogil(seg.view.ctypes.data, SEGMENT_SIZE, MADV_POPULATE_WRITE)


def _gil_map_populate(seg, payload):
    seg.unmap()
    seg.map(flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)


def _gil_numpy_touch(step):
    def op(seg, payload):
        for off in range(0, SEGMENT_SIZE, step):
            seg.view[off:off + step:PAGE] = 0
    return op


def _gil_python_touch(seg, payload):
    mm = seg.mm
    for off in range(0, SEGMENT_SIZE, PAGE):
        mm[off] = 0


GIL_OPS = {
    "numpy_copy_1MiB_chunks": _gil_copy_chunks,
    "mmap_madvise": _gil_mmap_madvise,
    "ctypes_madvise": _gil_ctypes_madvise,
    "mmap_MAP_POPULATE": _gil_map_populate,
    "numpy_touch_4MiB_steps": _gil_numpy_touch(4 * MiB),  # 1024 pages per call
    "numpy_touch_1MiB_steps": _gil_numpy_touch(1 * MiB),  # 256: below numpy's 500
    "python_touch": _gil_python_touch,
}


@pytest.mark.parametrize("op", list(GIL_OPS))
def test_gil(benchmark, new_segment, payload, op):
    """Each op runs on fresh pages of a fallocated segment, so it really faults."""
    if op.endswith("madvise") and not HAVE_POPULATE_WRITE:
        pytest.skip("MADV_POPULATE_WRITE needs Linux >= 5.14")
    switch_interval = sys.getswitchinterval()
    longest, typical, held_share = [], [], []

    def setup():
        seg = new_segment()
        seg.fallocate()
        seg.map()
        return (seg,), {}

    def measured(seg):
        ticker.wakeups.clear()
        t0 = time.perf_counter()
        GIL_OPS[op](seg, payload)
        t1 = time.perf_counter()
        delays = ticker.delays(t0, t1) or [0.0]
        longest.append(max(delays))
        typical.append(float(np.median(delays)))
        held_share.append(max(delays) / (t1 - t0))

    ticker = Ticker()
    ticker.start()
    try:
        benchmark.group = GROUP_GIL
        benchmark.pedantic(measured, setup=setup, teardown=Segment.close, rounds=GIL_ROUNDS)
    finally:
        ticker.stop()
    record_throughput(benchmark)
    benchmark.extra_info["longest wake-up delay (ms)"] = round(float(np.median(longest)) * 1e3, 2)
    benchmark.extra_info["typical wake-up delay (ms)"] = round(min(typical) * 1e3, 2)
    # A held GIL delays the ticker in every round; a busy second core (other
    # processes on this shared VM) only in some.  So judge by the best round.
    if min(held_share) > 0.5:
        verdict = "held for the whole call"
    elif min(typical) < switch_interval / 2:
        verdict = "released"
    else:
        verdict = "held per call, time-sliced between calls"
    benchmark.extra_info["GIL"] = verdict


def test_gil_convoy_busy_thread(benchmark, new_segment, payload):
    """The premapped append loop while another Python thread is CPU-bound.

    Each chunk copy releases the GIL; the busy thread takes it and the writer
    only gets it back when the busy thread is forced to yield, after up to one
    switch interval.  Compare with baseline_premapped: this is the price of
    releasing the GIL for short copies when the application has busy threads,
    and why a prefault thread must block (sleep / syscall), never spin.
    Needs an idle second core: if the threads share one, the OS time-slices
    them and the convoy does not form.
    """
    def setup():
        seg = new_segment()
        seg.fallocate()
        seg.map()
        seg.view.fill(0xA5)
        return (seg,), {}

    spinner = Spinner()
    spinner.start()
    try:
        benchmark.group = GROUP_GIL
        benchmark.pedantic(lambda seg: copy_chunks(seg.view, payload), setup=setup,
                           teardown=Segment.close, rounds=GIL_ROUNDS)
    finally:
        spinner.stop()
    record_throughput(benchmark)
    benchmark.extra_info["switch interval (ms)"] = sys.getswitchinterval() * 1e3
