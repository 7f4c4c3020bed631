"""The acknowledgement state of one subscription cursor on one partition: Pulsar's mark-delete position
plus its individually deleted messages, as a floor and a bitmap.

Every offset below `floor` is acknowledged and `floor` itself never is, so the floor is where redelivery
starts (Pulsar's mark-delete position is floor - 1). Offsets acknowledged out of order, above the floor,
are bits in a window of uint64 words that starts at a word-aligned `base` <= floor. Acknowledging far
ahead grows the window by doubling; advancing the floor leaves dead words in front of it, which are
dropped in bulk when the window next has to move (or for free when nothing above the floor is acked), so
each word is copied a bounded number of times. Bits below the floor are always zero: counting the
individual acks of a range is a popcount of its words, never a walk over offsets.

Not thread-safe: a cursor's caller serialises its calls. The methods that release the GIL around their
loops mark the set busy, and a conflicting call from another thread meanwhile raises AckSetBusyError (a
RuntimeError), changing nothing, rather than read or free memory the loop is using. Every other method
holds the GIL from start to end, so it is atomic with respect to the other threads."""

cimport cython
from cpython.buffer cimport PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int64_t, uint8_t, uint64_t, INT64_MAX
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy, memmove, memset

import sys

import numpy as np

from seglog.errors import InvalidArgumentError

cdef extern from *:
    """
    #include <stdint.h>
    static inline int seglog_popcount64(uint64_t x) { return __builtin_popcountll(x); }
    static inline int seglog_ctz64(uint64_t x) { return __builtin_ctzll(x); }  /* x != 0 */
    /* The serialised words are little-endian whatever the host. */
    static inline uint64_t seglog_le64(uint64_t x) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return __builtin_bswap64(x);
    #else
        return x;
    #endif
    }
    """
    int popcount64 "seglog_popcount64"(uint64_t x) noexcept nogil
    int ctz64 "seglog_ctz64"(uint64_t x) noexcept nogil
    uint64_t le64 "seglog_le64"(uint64_t x) noexcept nogil


# How far beyond the floor an ack may reach: the window then holds up to 2**33 bits (1 GiB). A cursor is
# only ever acked below the partition's end, so anything further is a bug in the caller, not a big backlog.
WINDOW_LIMIT = 2**33

cdef enum:
    MIN_WORDS = 8          # the smallest window: 512 offsets in 64 bytes
    HEADER_BYTES = 24      # to_bytes: magic (4), version (1), reserved (3), floor (8), high (8)
    STATE_VERSION = 1

cdef const char *MAGIC = b"SGAK"
cdef uint64_t ALL = ~(<uint64_t>0)
cdef int64_t LIMIT = WINDOW_LIMIT
cdef int64_t LARGEST = INT64_MAX - 1  # so that the floor after it, offset + 1, is an int64

class AckSetBusyError(RuntimeError):
    """A call met a loop of another thread that runs over the set without the GIL; nothing was changed."""


OFFSETS_ACCEPTED = ("a 1-D array of integer offsets >= 0: a numpy integer array, a buffer of int64 or a pyarrow "
                    "integer array without nulls")


@cython.final
cdef class AckSet:
    """Which offsets of one partition a subscription has acknowledged (see the module docstring).

    floor: every offset < floor is acknowledged, floor itself is not.
    high: 1 + the largest acknowledged offset (== floor when nothing above the floor is acknowledged).
    individual_count: how many offsets >= floor are acknowledged."""
    cdef readonly int64_t floor
    cdef readonly int64_t high
    cdef readonly int64_t individual_count
    cdef int64_t base              # offset of bit 0 of words[0]; a multiple of 64, <= floor
    cdef uint64_t *words
    cdef Py_ssize_t capacity       # words allocated; those outside [floor, high) are zero
    cdef Py_ssize_t readers        # read loops running without the GIL
    cdef bint writing              # a write loop running without the GIL

    def __cinit__(self):
        self.words = <uint64_t *>calloc(MIN_WORDS, sizeof(uint64_t))
        if self.words == NULL:
            raise MemoryError()
        self.capacity = MIN_WORDS

    def __init__(self, floor=0):
        cdef int64_t f = _offset(floor, "floor", INT64_MAX)
        self.floor = self.high = f
        self.base = f & ~(<int64_t>63)

    def __dealloc__(self):
        free(self.words)

    # ---- bit helpers: offsets must lie in the window, ranges inside [base, base + 64 * capacity) ----

    cdef inline bint _bit(self, int64_t offset) noexcept nogil:
        cdef uint64_t d = <uint64_t>(offset - self.base)
        return (self.words[d >> 6] >> (d & 63)) & 1

    cdef int64_t _count(self, int64_t lo, int64_t hi) noexcept nogil:
        """Set bits in [lo, hi)."""
        cdef uint64_t a, b, mask
        cdef Py_ssize_t i, last
        cdef int64_t total = 0
        if lo >= hi:
            return 0
        a = <uint64_t>(lo - self.base)
        b = <uint64_t>(hi - 1 - self.base)
        i, last = a >> 6, b >> 6
        mask = ALL << (a & 63)
        if i == last:
            return popcount64(self.words[i] & mask & (ALL >> (63 - (b & 63))))
        total = popcount64(self.words[i] & mask)
        for i in range(i + 1, last):
            total += popcount64(self.words[i])
        return total + popcount64(self.words[last] & (ALL >> (63 - (b & 63))))

    cdef int64_t _fill(self, int64_t lo, int64_t hi, bint value) noexcept nogil:
        """Set (value true) or clear the bits of [lo, hi); returns how many changed."""
        cdef uint64_t a, b, mask, word
        cdef Py_ssize_t i, last
        cdef int64_t changed = 0
        if lo >= hi:
            return 0
        a = <uint64_t>(lo - self.base)
        b = <uint64_t>(hi - 1 - self.base)
        i, last = a >> 6, b >> 6
        mask = ALL << (a & 63)
        while True:
            if i == last:
                mask &= ALL >> (63 - (b & 63))
            word = self.words[i]
            if value:
                changed += popcount64(~word & mask)
                self.words[i] = word | mask
            else:
                changed += popcount64(word & mask)
                self.words[i] = word & ~mask
            if i == last:
                return changed
            i += 1
            mask = ALL

    cdef int64_t _next_clear(self, int64_t start) noexcept nogil:
        """The first offset >= start (>= floor) whose bit is clear; at most max(start, high)."""
        cdef uint64_t d, x
        cdef Py_ssize_t i, last
        if start >= self.high:
            return start
        d = <uint64_t>(start - self.base)
        last = <uint64_t>(self.high - 1 - self.base) >> 6
        i = d >> 6
        x = ~self.words[i] >> (d & 63)
        if x:
            return start + ctz64(x)
        for i in range(i + 1, last + 1):
            x = ~self.words[i]
            if x:
                return self.base + 64 * i + ctz64(x)
        return self.high

    cdef int64_t _next_set(self, int64_t start) noexcept nogil:
        """The first offset >= start (>= floor) whose bit is set, or high if none."""
        cdef uint64_t d, x
        cdef Py_ssize_t i, last
        if start >= self.high:
            return self.high
        d = <uint64_t>(start - self.base)
        last = <uint64_t>(self.high - 1 - self.base) >> 6
        i = d >> 6
        x = self.words[i] >> (d & 63)
        if x:
            return start + ctz64(x)
        for i in range(i + 1, last + 1):
            x = self.words[i]
            if x:
                return self.base + 64 * i + ctz64(x)
        return self.high

    # ---- state changes ----

    cdef int _writable(self) except -1:
        if self.readers or self.writing:
            raise AckSetBusyError("AckSet changed while another thread is using it; serialise calls on one "
                               "AckSet with a lock")
        return 0

    cdef int _readable(self) except -1:
        if self.writing:
            raise AckSetBusyError("AckSet read while another thread is changing it; serialise calls on one "
                               "AckSet with a lock")
        return 0

    cdef int _reach(self, int64_t last, str argument, object given) except -1:
        """Make the window hold `last` (>= floor), moving or growing it; the acked set does not change.
        Beyond the window limit, raises a ValueError about `argument`, whose value was `given`.

        Live words (from the floor's to the high's) move to the front when that leaves a third of the
        window free, otherwise into a window at least twice as large: either way the next move is at least
        half as many words of progress away as this one copies, so each ack pays O(1) amortised."""
        cdef Py_ssize_t first, used, needed, capacity
        cdef uint64_t *words
        if last - self.floor > LIMIT:
            raise InvalidArgumentError(argument, given, f"offsets at most {WINDOW_LIMIT:_} beyond the floor "
                                       f"{self.floor} (the window limit; a cursor is never acked beyond its "
                                       "partition's end)")
        if <uint64_t>(last - self.base) >> 6 < <uint64_t>self.capacity:
            return 0
        first = (self.floor - self.base) >> 6
        used = ((self.high - 1 - self.base) >> 6) + 1 - first if self.high > self.floor else 0
        needed = ((last - self.base) >> 6) + 1 - first
        if needed + needed // 2 <= self.capacity:
            memmove(self.words, self.words + first, used * sizeof(uint64_t))
            memset(self.words + used, 0, first * sizeof(uint64_t))  # the words the move left behind
        else:
            capacity = max(2 * self.capacity, needed + needed // 2)
            words = <uint64_t *>calloc(capacity, sizeof(uint64_t))
            if words == NULL:
                raise MemoryError(f"AckSet window of {capacity * 8:_} bytes")
            memcpy(words, self.words + first, used * sizeof(uint64_t))
            free(self.words)
            self.words, self.capacity = words, capacity
        self.base += 64 * first
        return 0

    cdef int64_t _advance(self, int64_t new_floor) noexcept nogil:
        """Acknowledge everything below new_floor (>= floor), then move the floor past the acked offsets
        contiguous with it. Returns how many of [floor, new_floor) were individually acked before."""
        cdef int64_t dropped = self._fill(self.floor, min(new_floor, self.high), False)
        cdef int64_t end
        self.individual_count -= dropped
        self.floor = new_floor
        if new_floor < self.high and self._bit(new_floor):
            end = self._next_clear(new_floor)
            self.individual_count -= self._fill(new_floor, end, False)
            self.floor = end
        if self.floor >= self.high:  # nothing acked above the floor: the window restarts there, all zero
            self.high = self.floor
            self.base = self.floor & ~(<int64_t>63)
        return dropped

    cpdef bint ack(self, offset) except -1:
        """Acknowledge one offset; True if it was not acknowledged before. Acking the floor moves it past
        every acknowledged offset contiguous with it."""
        cdef int64_t o = _offset(offset, "offset", LARGEST)
        cdef uint64_t d
        self._writable()
        if o < self.floor:
            return False
        if o == self.floor:
            self._advance(o + 1)
            return True
        self._reach(o, "offset", offset)
        d = <uint64_t>(o - self.base)
        if (self.words[d >> 6] >> (d & 63)) & 1:
            return False
        self.words[d >> 6] |= (<uint64_t>1) << (d & 63)
        self.individual_count += 1
        if o >= self.high:
            self.high = o + 1
        return True

    def ack_many(self, offsets) -> int:
        """Acknowledge the offsets of a 1-D integer array, in any order, duplicates allowed; returns how
        many were not acknowledged before. Takes numpy integer arrays, buffers of int64 and pyarrow integer
        arrays without nulls (int64 ones without a copy). The whole array is checked before anything
        changes, so a bad offset leaves the set as it was. The GIL is released while the array is read:
        it must not change during the call (if it does, the set stays memory-safe but may be wrong)."""
        cdef const int64_t[::1] values = _offsets_array(offsets)
        cdef const int64_t *p = &values[0] if values.shape[0] else NULL
        cdef Py_ssize_t i, n = values.shape[0]
        cdef int64_t lo = INT64_MAX, hi = -1, floor, newly = 0
        cdef uint64_t d, span, shift
        cdef uint64_t *words
        if n == 0:
            return 0
        with nogil:
            for i in range(n):
                lo = min(lo, p[i])
                hi = max(hi, p[i])
        self._writable()
        if lo < 0:
            raise InvalidArgumentError("offsets", f"an array holding {lo}", OFFSETS_ACCEPTED)
        if hi > LARGEST:
            raise InvalidArgumentError("offsets", f"an array holding {hi}", f"offsets up to {LARGEST}")
        floor = self.floor
        if hi < floor:
            return 0
        self._reach(hi, "offsets", f"an array holding {hi}")
        # One unsigned comparison keeps [floor, hi] and drops offsets below the floor; it also keeps the
        # writes inside the window should another thread change the array meanwhile.
        span, shift, words = <uint64_t>(hi - floor), <uint64_t>(floor - self.base), self.words
        self.writing = True
        with nogil:
            for i in range(n):
                d = <uint64_t>p[i] - <uint64_t>floor
                if d <= span:
                    d += shift
                    newly += ((words[d >> 6] >> (d & 63)) & 1) ^ 1
                    words[d >> 6] |= (<uint64_t>1) << (d & 63)
        self.writing = False
        self.individual_count += newly
        self.high = max(self.high, hi + 1)
        if self._bit(floor):  # the floor's own bit is never left set
            self._advance(floor + 1)
        return newly

    def ack_range(self, start, stop) -> int:
        """Acknowledge every offset in [start, stop); returns how many were not acknowledged before."""
        cdef int64_t a = _offset(start, "start", LARGEST)
        cdef int64_t b = _offset(stop, "stop", INT64_MAX)
        cdef int64_t newly
        self._writable()
        if b < a:
            raise InvalidArgumentError("stop", b, f"an offset >= start ({a})")
        if b <= self.floor or a == b:
            return 0
        if a <= self.floor:
            newly = b - self.floor
            return newly - self._advance(b)
        self._reach(b - 1, "stop", stop)
        newly = self._fill(a, b, True)
        self.individual_count += newly
        self.high = max(self.high, b)
        return newly

    def ack_cumulative(self, offset) -> int:
        """Acknowledge every offset <= offset (Pulsar's cumulative ack); returns how many were not
        acknowledged before. Costs O(1) plus a popcount of the bitmap words it drops."""
        cdef int64_t o = _offset(offset, "offset", LARGEST)
        cdef int64_t newly
        self._writable()
        if o < self.floor:
            return 0
        newly = o + 1 - self.floor
        return newly - self._advance(o + 1)

    # ---- queries ----

    cpdef bint is_acked(self, offset) except -1:
        cdef int64_t o = _offset(offset, "offset", INT64_MAX)
        self._readable()
        if o < self.floor:
            return True
        return o < self.high and self._bit(o)

    def acked_count(self, start, stop) -> int:
        """How many offsets in [start, stop) are acknowledged, those below the floor included."""
        cdef int64_t a, b, total
        a, b = _span(start, stop)
        self._readable()
        total = max(0, min(b, self.floor) - a)  # below the floor: all acknowledged
        a, b = max(a, self.floor), min(b, self.high)
        if a >= b:
            return total
        self.readers += 1
        with nogil:
            total += self._count(a, b)
        self.readers -= 1
        return total

    def next_unacked(self, start) -> int:
        """The smallest offset >= start that is not acknowledged: where redelivery from `start` begins."""
        cdef int64_t a = _offset(start, "start", INT64_MAX)
        self._readable()
        return self._next_clear(max(a, self.floor))

    def unacked_in(self, start, stop):
        """The offsets in [start, stop) not acknowledged, ascending, as a numpy int64 array."""
        cdef int64_t a, b, lo, mid, o
        cdef Py_ssize_t k = 0
        cdef int64_t[::1] out
        a, b = _span(start, stop)
        self._readable()
        lo = max(a, self.floor)
        mid = max(lo, min(b, self.high))  # [lo, mid) is in the window, [mid, b) is all unacknowledged
        result = np.empty(max(0, b - lo) - self._count(lo, mid), dtype=np.int64)
        out = result
        self.readers += 1
        with nogil:
            o = self._next_clear(lo) if lo < mid else mid
            while o < mid:
                out[k] = o
                k += 1
                o = self._next_clear(o + 1)
            for o in range(mid, b):
                out[k] = o
                k += 1
        self.readers -= 1
        return result

    def unacked_mask(self, start, stop):
        """A numpy bool array of length stop - start, True where the offset is NOT acknowledged: the filter
        that drops acknowledged messages from a batch being redelivered."""
        cdef int64_t a, b, lo, mid, o
        cdef uint64_t d
        cdef uint8_t[::1] out
        a, b = _span(start, stop)
        self._readable()
        result = np.ones(b - a, dtype=np.bool_)
        out = result.view(np.uint8)
        lo = min(b, max(a, self.floor))
        mid = max(lo, min(b, self.high))
        self.readers += 1
        with nogil:
            if lo > a:
                memset(&out[0], 0, lo - a)
            for o in range(lo, mid):
                d = <uint64_t>(o - self.base)
                out[o - a] = ((self.words[d >> 6] >> (d & 63)) & 1) ^ 1
        self.readers -= 1
        return result

    def ranges(self):
        """The runs of individually acknowledged offsets above the floor, ascending, as an (n, 2) numpy
        int64 array of [start, stop) pairs."""
        cdef int64_t o, end
        cdef Py_ssize_t n = 0, k = 0
        cdef int64_t[:, ::1] out
        self._readable()
        self.readers += 1
        with nogil:
            o = self._next_set(self.floor)
            while o < self.high:
                n += 1
                o = self._next_set(self._next_clear(o))
        self.readers -= 1
        result = np.empty((n, 2), dtype=np.int64)
        out = result
        self.readers += 1
        with nogil:
            o = self._next_set(self.floor)
            while o < self.high:
                end = self._next_clear(o)
                out[k, 0], out[k, 1] = o, end
                k += 1
                o = self._next_set(end)
        self.readers -= 1
        return result

    def weighted_acked(self, bounds, weights) -> float:
        """sum_i weights[i] * (individually acknowledged offsets in [bounds[i], bounds[i + 1])), counting
        only offsets >= floor: e.g. the acknowledged bytes of a backlog, with bounds the offsets where
        batches start (the last one the end) and weights each batch's bytes per message.

        Finds the batch holding the floor by bisection, then visits only the batches overlapping
        [floor, high) and popcounts their words: O(log n + batches overlapping + words), never per
        offset. `bounds` must increase strictly; that is checked on the batches visited."""
        cdef const int64_t[::1] b = _int64_array(bounds, "bounds", "a 1-D integer array of n + 1 strictly "
                                                 "increasing offsets (batch starts, then the end)")
        cdef const double[::1] w = _float64_array(weights)
        cdef Py_ssize_t n = w.shape[0], low, top, middle, i
        cdef int64_t lo, hi, start, stop
        cdef double total = 0
        cdef bint unordered = False
        if b.shape[0] != n + 1:
            raise InvalidArgumentError("bounds", f"{b.shape[0]} bounds for {n} weights",
                                       "one more bound than weights (n batches: n + 1 bounds)")
        self._readable()
        if n == 0:
            return 0.0
        lo, hi = max(self.floor, b[0]), min(self.high, b[n])
        if lo >= hi:
            return 0.0
        self.readers += 1
        with nogil:
            low, top = 0, n  # the last batch whose start <= lo
            while top - low > 1:
                middle = (low + top) >> 1
                if b[middle] <= lo:
                    low = middle
                else:
                    top = middle
            i = low
            while i < n and b[i] < hi:
                if b[i + 1] <= b[i]:
                    unordered = True
                    break
                start, stop = max(b[i], lo), min(b[i + 1], hi)
                if start < stop:
                    total += w[i] * self._count(start, stop)
                i += 1
        self.readers -= 1
        if unordered:
            raise InvalidArgumentError("bounds", f"bounds[{i}] = {b[i]}, bounds[{i + 1}] = {b[i + 1]}",
                                       "strictly increasing offsets")
        return total

    # ---- state as bytes, copies, comparison ----

    def to_bytes(self) -> bytes:
        """The state in a compact little-endian form (no checksum: the caller adds one):
        b"SGAK", version byte 1, 3 zero bytes, floor (int64), high (int64), then the bitmap words covering
        [floor rounded down to a multiple of 64, high), none when high == floor."""
        cdef Py_ssize_t first = (self.floor - self.base) >> 6, n = self._live_words(), i
        cdef uint64_t word
        self._readable()
        data = PyBytes_FromStringAndSize(NULL, HEADER_BYTES + 8 * n)
        cdef char *out = PyBytes_AS_STRING(data)
        memset(out, 0, HEADER_BYTES)
        memcpy(out, MAGIC, 4)
        out[4] = STATE_VERSION
        word = le64(<uint64_t>self.floor)
        memcpy(out + 8, &word, 8)
        word = le64(<uint64_t>self.high)
        memcpy(out + 16, &word, 8)
        for i in range(n):
            word = le64(self.words[first + i])
            memcpy(out + HEADER_BYTES + 8 * i, &word, 8)
        return data

    @staticmethod
    def from_bytes(data) -> AckSet:
        """The AckSet that to_bytes() wrote. Checks everything: magic, version, length, and that the bits
        agree with floor and high; raises ValueError (InvalidArgumentError) on anything else."""
        cdef const uint8_t[::1] view
        cdef uint64_t floor, high, word, first, last
        cdef Py_ssize_t n, i
        cdef AckSet acks
        if not PyObject_CheckBuffer(data):
            raise InvalidArgumentError("data", type(data).__name__, "bytes from AckSet.to_bytes()")
        view = memoryview(data).cast("B")
        size = view.shape[0]
        if size < HEADER_BYTES:
            _malformed(size, f"truncated: {size} bytes, shorter than the {HEADER_BYTES}-byte header")
        if memcmp(&view[0], MAGIC, 4) != 0:
            _malformed(size, f"magic {bytes(view[:4])!r}, expected b'SGAK'")
        if view[4] != STATE_VERSION:
            _malformed(size, f"version {view[4]}, this seglog reads version {STATE_VERSION}")
        if view[5] or view[6] or view[7]:
            _malformed(size, "reserved bytes 5..7 are not zero")
        memcpy(&word, &view[8], 8)
        floor = le64(word)
        memcpy(&word, &view[16], 8)
        high = le64(word)
        if floor > <uint64_t>INT64_MAX or high > <uint64_t>INT64_MAX or high < floor:
            _malformed(size, f"floor {floor} and high {high}: need floor <= high <= 2**63 - 1")
        if high - floor > <uint64_t>LIMIT + 1:
            _malformed(size, f"high {high} is more than the window limit {WINDOW_LIMIT:_} beyond floor {floor}")
        n = 0 if high == floor else ((high - 1) >> 6) - (floor >> 6) + 1
        if size != HEADER_BYTES + 8 * n:
            _malformed(size, f"{'truncated' if size < HEADER_BYTES + 8 * n else 'trailing bytes'}: floor "
                       f"{floor} and high {high} need {n} bitmap words, {HEADER_BYTES + 8 * n} bytes in all")
        acks = AckSet(floor)
        if n == 0:
            return acks
        acks._reach(high - 1, "data", f"{size} bytes")
        for i in range(n):
            memcpy(&word, &view[HEADER_BYTES + 8 * i], 8)
            acks.words[i] = le64(word)
        first, last = acks.words[0], acks.words[n - 1]
        if first & ~(ALL << (floor & 63)):
            _malformed(size, f"bits set below floor {floor}")
        if (first >> (floor & 63)) & 1:
            _malformed(size, f"the floor's bit ({floor}) is set; the floor is never acknowledged")
        if last & ~(ALL >> (63 - ((high - 1) & 63))):
            _malformed(size, f"bits set at or above high {high}")
        if not (last >> ((high - 1) & 63)) & 1:
            _malformed(size, f"high {high} is not 1 + the largest acknowledged offset")
        acks.high = high
        acks.individual_count = acks._count(floor, high)
        return acks

    cdef Py_ssize_t _live_words(self) noexcept:
        """Words from the floor's to the high's (the part of the window that can hold bits)."""
        if self.high == self.floor:
            return 0
        return ((self.high - 1 - self.base) >> 6) - ((self.floor - self.base) >> 6) + 1

    def copy(self) -> AckSet:
        cdef AckSet other = AckSet(self.floor)
        cdef Py_ssize_t n = self._live_words()
        self._readable()
        if n:
            other._reach(self.high - 1, "offset", self.high - 1)
            memcpy(other.words, self.words + ((self.floor - self.base) >> 6), n * sizeof(uint64_t))
        other.high, other.individual_count = self.high, self.individual_count
        return other

    def __eq__(self, other):
        """Same floor and the same acknowledged offsets (how the windows are laid out does not matter)."""
        cdef AckSet o
        if not isinstance(other, AckSet):
            return NotImplemented
        o = other
        if (self.floor, self.high, self.individual_count) != (o.floor, o.high, o.individual_count):
            return False
        return memcmp(self.words + ((self.floor - self.base) >> 6), o.words + ((o.floor - o.base) >> 6),
                      self._live_words() * sizeof(uint64_t)) == 0

    __hash__ = None  # mutable

    def __repr__(self):
        return f"AckSet(floor={self.floor}, high={self.high}, individual_count={self.individual_count})"


cdef int64_t _offset(object value, str argument, int64_t largest) except -1:
    """An int (or any object with __index__, e.g. a numpy integer) in [0, largest], or a ValueError naming
    the argument."""
    cdef int overflow = 0
    cdef long long v
    if type(value) is not int:
        value = PyNumber_Index(value)
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or v < 0 or v > largest:
        raise InvalidArgumentError(argument, value, f"an offset from 0 to {largest}")
    return v


cdef tuple _span(object start, object stop):
    cdef int64_t a = _offset(start, "start", INT64_MAX), b = _offset(stop, "stop", INT64_MAX)
    if b < a:
        raise InvalidArgumentError("stop", b, f"an offset >= start ({a})")
    return a, b


cdef object _offsets_array(object offsets):
    """ack_many's argument as a contiguous int64 numpy array (the same memory when it already is one)."""
    pyarrow = sys.modules.get("pyarrow")  # a pyarrow array implies pyarrow is imported: no import cost here
    if pyarrow is not None and isinstance(offsets, pyarrow.Array):
        if not pyarrow.types.is_integer(offsets.type):
            raise InvalidArgumentError("offsets", f"a pyarrow {offsets.type} array", OFFSETS_ACCEPTED)
        if offsets.null_count:
            raise InvalidArgumentError("offsets", f"a pyarrow {offsets.type} array with {offsets.null_count} "
                                       "nulls", OFFSETS_ACCEPTED)
        offsets = offsets.to_numpy(zero_copy_only=True)
    return _int64_array(offsets, "offsets", OFFSETS_ACCEPTED)


cdef object _int64_array(object values, str argument, str accepted):
    """A 1-D integer array (numpy or any buffer) as contiguous int64, refusing values beyond int64."""
    cdef object array
    if isinstance(values, np.ndarray):
        array = values
    elif PyObject_CheckBuffer(values):
        array = np.asarray(values)
    else:
        raise InvalidArgumentError(argument, f"a {type(values).__name__}", accepted)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise InvalidArgumentError(argument, f"a {array.dtype} array of shape {array.shape}", accepted)
    if array.dtype.kind == "u" and array.dtype.itemsize == 8 and array.size and array.max() > INT64_MAX:
        raise InvalidArgumentError(argument, f"an array holding {array.max()}", accepted)
    return np.ascontiguousarray(array, dtype=np.int64)


cdef object _float64_array(object weights):
    """weighted_acked's weights as contiguous float64 (integer arrays are converted)."""
    accepted = "a 1-D float64 (or integer) array, one weight per batch"
    if not (isinstance(weights, np.ndarray) or PyObject_CheckBuffer(weights)):
        raise InvalidArgumentError("weights", f"a {type(weights).__name__}", accepted)
    array = np.asarray(weights)
    if array.ndim != 1 or array.dtype.kind not in "iuf":
        raise InvalidArgumentError("weights", f"a {array.dtype} array of shape {array.shape}", accepted)
    return np.ascontiguousarray(array, dtype=np.float64)


cdef int _malformed(Py_ssize_t size, str reason) except -1:
    raise InvalidArgumentError("data", f"{size} bytes", "bytes from AckSet.to_bytes()", reason)
