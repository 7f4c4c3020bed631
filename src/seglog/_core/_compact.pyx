# cython: freethreading_compatible=False
"""Compaction's kernel: each key's latest offset over stored batches, and each message's verdict.

Compaction keeps the latest message of every key (Kafka's cleanup.policy=compact, Pulsar's topic
compaction). As Kafka's log cleaner does, it takes two passes over the range being compacted:

1. `OffsetMap.add_segment`: every keyed message's key bytes, read from the mapped key columns, are hashed
   into a fixed-capacity offset map, key hash -> latest offset (offsets only grow within a partition, so
   the last write of a key wins). `OffsetMap.latest_offsets` then lists the map's offsets, sorted: the
   messages to keep, one per key.
2. `classify_segment`: a walk over the same batches that gives each message its verdict by merging its
   offset with that sorted list (no hashing, no lookup in the map): SUPERSEDED, LATEST, LATEST_TOMBSTONE
   (its key's latest message has a null value) or KEYLESS. What to do with tombstones and keyless messages
   is the caller's: Kafka keeps a tombstone for delete_retention and drops keyless messages, Pulsar's
   compactor drops both from its compacted view.

No Python object is made per message: the passes read the batches' key offsets, key data and validity
bitmaps in place (docs/FORMAT.md, "Body"), one call per segment.

The hash: MurmurHash3's x64 128-bit variant of the key bytes (the null key has none, b"" is a key and hashes
as zero bytes do). Two keys merge only if all 128 bits agree: among a million keys the chance that any two
do is about 1.5e-27 (n^2 / 2^129), among a billion 1.5e-21, far below the chance that a damaged batch passes
its CRC32C (2^-32). A 64-bit hash would give 2.7e-8 at a million keys and 2.7e-2 at a billion: too likely
over the life of many partitions. Comparing the full key bytes on every hash match instead would cost a
random read of the earlier message's batch per message (most messages of a compacted topic repeat a key),
or a pointer and a length per slot. Kafka's cleaner makes the same choice with a 16-byte MD5. The hash is
not keyed: someone who can write two keys with the same hash can already write a tombstone for either.

The map: open addressing with linear probing over `capacity = ceil(max_keys / MAX_LOAD)` slots of 24 bytes
(the hash's 16, the offset's 8: Kafka's cleaner uses the same 24 bytes a key), so at most MAX_LOAD of them
are ever used: 30 bytes a key of the bound, 28.6 MiB for a million. A slot is chosen by the hash's low
word scaled to the capacity (a multiply, no power of two needed, so the memory follows the bound). The
caller sizes the map with a bound on the range's distinct keys (its message count is one); a key beyond
the bound is refused (MAP_FULL), never dropped. The slots are an anonymous mapping of their own, unmapped
when the map is released: pages are zero until touched and go back to the system at once. Lookups ahead
of use: the hashes of the next PREFETCH_DEPTH keys are computed and their slots fetched into the cache
before the key is placed, as a million keys' slots do not fit the CPU's caches."""

from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.exc cimport PyErr_SetFromErrno
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy
from posix.mman cimport MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE, madvise, mmap, munmap

from seglog._core._format cimport (BatchLayout, C_ENTRY_SOUND, Selection, compute_layout, encode_selection,
                                   entry_status, read_i32, selection_size)
from seglog._core._index cimport IndexView

import numpy as np


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    static inline uint64_t seglog_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

    static inline uint64_t seglog_fmix64(uint64_t k) {
        k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
        return k;
    }

    /* MurmurHash3_x64_128 (Austin Appleby, public domain), as mmh3.hash128(data, seed, x64arch=True):
       out[0] is the low 64 bits of that 128-bit value, out[1] the high ones. */
    static inline void seglog_murmur3_128(const uint8_t *data, size_t length, uint64_t seed, uint64_t out[2]) {
        const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
        uint64_t h1 = seed, h2 = seed, k1, k2;
        size_t i, blocks = length / 16;
        const uint8_t *tail = data + blocks * 16;
        for (i = 0; i < blocks; i++) {
            memcpy(&k1, data + 16 * i, 8);
            memcpy(&k2, data + 16 * i + 8, 8);
            k1 *= c1; k1 = seglog_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
            h1 = seglog_rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
            k2 *= c2; k2 = seglog_rotl64(k2, 33); k2 *= c1; h2 ^= k2;
            h2 = seglog_rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
        }
        k1 = k2 = 0;
        switch (length & 15) {
        case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
        case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
        case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
        case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
        case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
        case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
        case 9:  k2 ^= (uint64_t)tail[8];
                 k2 *= c2; k2 = seglog_rotl64(k2, 33); k2 *= c1; h2 ^= k2; /* fall through */
        case 8:  k1 ^= (uint64_t)tail[7] << 56;  /* fall through */
        case 7:  k1 ^= (uint64_t)tail[6] << 48;  /* fall through */
        case 6:  k1 ^= (uint64_t)tail[5] << 40;  /* fall through */
        case 5:  k1 ^= (uint64_t)tail[4] << 32;  /* fall through */
        case 4:  k1 ^= (uint64_t)tail[3] << 24;  /* fall through */
        case 3:  k1 ^= (uint64_t)tail[2] << 16;  /* fall through */
        case 2:  k1 ^= (uint64_t)tail[1] << 8;   /* fall through */
        case 1:  k1 ^= (uint64_t)tail[0];
                 k1 *= c1; k1 = seglog_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        }
        h1 ^= (uint64_t)length; h2 ^= (uint64_t)length;
        h1 += h2; h2 += h1;
        h1 = seglog_fmix64(h1); h2 = seglog_fmix64(h2);
        h1 += h2; h2 += h1;
        out[0] = h1;
        out[1] = h2;
    }

    /* The slot of a hash: its low word scaled to [0, capacity) (Lemire's multiply-shift range reduction). */
    static inline uint64_t seglog_scaled(uint64_t hash, uint64_t capacity) {
    #if defined(__SIZEOF_INT128__)
        return (uint64_t)(((unsigned __int128)hash * capacity) >> 64);
    #else
        return hash % capacity;
    #endif
    }

    #include <sys/mman.h>
    #ifndef MADV_HUGEPAGE
    #define MADV_HUGEPAGE 0  /* MADV_NORMAL where the system has no transparent huge pages */
    #endif

    #if defined(__GNUC__) || defined(__clang__)
    #define seglog_prefetch_write(address) __builtin_prefetch((address), 1, 3)
    #else
    #define seglog_prefetch_write(address) ((void)(address))
    #endif
    """
    void murmur3_128 "seglog_murmur3_128" (const uint8_t *data, size_t length, uint64_t seed,
                                           uint64_t *out) noexcept nogil
    uint64_t scaled "seglog_scaled" (uint64_t hash, uint64_t capacity) noexcept nogil
    void prefetch_write "seglog_prefetch_write" (const void *address) noexcept nogil
    int MADV_HUGEPAGE


# A message's verdict (classify_segment): what compaction makes of it.
cpdef enum Verdict:
    SUPERSEDED = 0          # a later message in the range has its key
    LATEST = 1              # its key's latest message in the range, with a value
    LATEST_TOMBSTONE = 2    # its key's latest message in the range, with a null value (a tombstone)
    KEYLESS = 3             # no key (a null key; b"" is a key)

# OffsetMap.add_segment's outcome besides the entry of a damaged batch (>= 0).
cdef enum:
    MAX_MERGED = 1024          # stored batches whose kept records one compacted batch takes, at most
    MERGE_RECORDS = 65536      # records of one compacted batch at most (unless one stored batch keeps more)
    MERGE_BYTES = 4 << 20      # and about this many bytes of stored batches, so it fits the writer's buffer
    C_MAP_DONE = -1
    C_MAP_FULL = -2
    C_HASH_SEED = 0     # mmh3's default: the tests check the hash against mmh3
    PREFETCH_DEPTH = 32  # keys hashed and their slots fetched ahead of placing them (a power of two)

MAP_DONE = C_MAP_DONE
MAP_FULL = C_MAP_FULL
HASH_SEED = C_HASH_SEED

SLOT_BYTES = 24
MAX_LOAD = 0.8          # of the slots in use at most: linear probing slows sharply as a table fills up


cdef struct Slot:
    uint64_t hash_low
    uint64_t hash_high
    int64_t stored      # offset + 1; 0 marks an empty slot (the mapping's pages start zero)


cdef struct Pending:
    uint64_t hash[2]
    uint64_t slot
    int64_t offset


cdef inline bint present(const uint8_t *batch, Py_ssize_t validity_at, Py_ssize_t i) noexcept nogil:
    """Whether item i of a column is present (not null): always, without a validity bitmap (-1)."""
    return validity_at < 0 or (batch[validity_at + (i >> 3)] & (1 << (i & 7))) != 0


def key_hash(key) -> int:
    """The 128-bit hash the offset map keeps of a key's bytes (low word + high word << 64), for tests."""
    cdef const uint8_t[::1] view = memoryview(key).cast("B")
    cdef uint64_t out[2]
    murmur3_128(&view[0] if view.shape[0] else NULL, view.shape[0], C_HASH_SEED, out)
    return out[0] | (<object>out[1] << 64)


def capacity_for(Py_ssize_t max_keys) -> int:
    """The slots a map bounded to `max_keys` keys has: at most MAX_LOAD of them are ever used."""
    if max_keys < 1:
        raise ValueError(f"max_keys must be at least 1, not {max_keys}")
    return (max_keys * 5 + 3) // 4  # ceil(max_keys / MAX_LOAD)


cdef class OffsetMap:
    """Key hash -> latest offset for at most `max_keys` keys, in SLOT_BYTES * capacity_for(max_keys) bytes
    of anonymous memory (the module docstring has the design). Filled one segment at a time by
    `add_segment`; `latest_offsets` lists it; `release` gives the memory back (also done when collected)."""
    cdef Slot *slots
    cdef uint64_t capacity
    cdef readonly Py_ssize_t max_keys
    cdef readonly Py_ssize_t keys           # distinct keys placed
    cdef readonly int64_t messages          # messages walked, with a key or not
    cdef readonly int64_t keyless           # of them, messages without a key
    cdef readonly int64_t tombstones        # of them, messages with a key and a null value
    cdef readonly int64_t full_at           # the offset of the key that found the map full (-1: never)

    def __cinit__(self, Py_ssize_t max_keys):
        cdef void *address
        self.capacity = capacity_for(max_keys)
        self.max_keys = max_keys
        self.full_at = -1
        address = mmap(NULL, self.capacity * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0)
        if address == MAP_FAILED:
            PyErr_SetFromErrno(MemoryError)
        # Huge pages where the system gives them on request: a million keys' slots span 7,000 small pages,
        # and a random lookup among them misses the TLB far more often than among 15 huge ones.
        madvise(address, self.capacity * sizeof(Slot), MADV_HUGEPAGE)
        self.slots = <Slot *>address

    @property
    def nbytes(self) -> int:
        """The bytes of the map's slots (anonymous memory, touched as keys land in them; 0 once released)."""
        return 0 if self.slots == NULL else self.capacity * sizeof(Slot)

    def release(self) -> None:
        """Give the slots' memory back now; the map is empty and unusable after."""
        if self.slots != NULL:
            munmap(self.slots, self.capacity * sizeof(Slot))
            self.slots = NULL

    def __dealloc__(self):
        if self.slots != NULL:
            munmap(self.slots, self.capacity * sizeof(Slot))

    cdef inline bint place(self, const Pending *p) noexcept nogil:
        """Record p's offset as its key's latest; False when the key is new and the map holds max_keys."""
        cdef uint64_t i = p.slot
        cdef Slot *s
        while True:
            s = &self.slots[i]
            if s.stored == 0:
                if self.keys == self.max_keys:
                    return False
                s.hash_low = p.hash[0]
                s.hash_high = p.hash[1]
                s.stored = p.offset + 1
                self.keys += 1
                return True
            if s.hash_low == p.hash[0] and s.hash_high == p.hash[1]:
                s.stored = p.offset + 1
                return True
            i += 1
            if i == self.capacity:
                i = 0

    cdef inline void hash_ahead(self, Pending *p, const uint8_t *batch, const BatchLayout *L, Py_ssize_t i,
                                int64_t offset) noexcept nogil:
        cdef int32_t first = read_i32(batch + L.key_offsets + 4 * i), stop = read_i32(batch + L.key_offsets + 4 * i + 4)
        murmur3_128(batch + L.key_data + first, stop - first, C_HASH_SEED, p.hash)
        p.slot = scaled(p.hash[0], self.capacity)
        p.offset = offset
        prefetch_write(&self.slots[p.slot])
        prefetch_write(<const uint8_t *>&self.slots[p.slot] + sizeof(Slot) - 1)  # a slot may span two lines

    cdef int add_batch(self, const uint8_t *batch, const BatchLayout *L, int64_t base, Py_ssize_t low,
                       Py_ssize_t high) noexcept nogil:
        """Records [low, high) of one batch into the map; 0, or -1 when the map is full (full_at set)."""
        cdef Pending ring[PREFETCH_DEPTH]
        cdef Py_ssize_t i, ahead, keyed = 0, placed = 0
        # The indexes of the keyed records, in order, go through the ring: each is hashed PREFETCH_DEPTH
        # records before it is placed, so that its slot is in the cache by then.
        cdef Py_ssize_t next_keyed = low
        self.messages += high - low
        if L.key_offsets < 0:
            self.keyless += high - low
            return 0
        while True:
            while keyed - placed < PREFETCH_DEPTH and next_keyed < high:
                i = next_keyed
                next_keyed += 1
                if not present(batch, L.key_validity, i):
                    self.keyless += 1
                    continue
                if not present(batch, L.value_validity, i):
                    self.tombstones += 1
                self.hash_ahead(&ring[keyed & (PREFETCH_DEPTH - 1)], batch, L, i, base + i)
                keyed += 1
            if placed == keyed:
                return 0
            if not self.place(&ring[placed & (PREFETCH_DEPTH - 1)]):
                self.full_at = ring[placed & (PREFETCH_DEPTH - 1)].offset
                return -1
            placed += 1

    def add_segment(self, data, IndexView index, Py_ssize_t first_entry, Py_ssize_t stop_entry, int64_t start,
                    int64_t end, bint verify_crc) -> int:
        """Pass 1 over one segment: the messages of [start, end) in its indexed batches [first_entry,
        stop_entry) (`data`: its log's map, `index`: its index) into the map. Each batch is checked against
        its index entry, and its CRC32C with `verify_crc`.

        Returns MAP_DONE; MAP_FULL when a new key found the map holding max_keys (`full_at` says where;
        the map is then partly filled and useless); or the entry of the first batch that failed its
        checks (the caller reports the damage)."""
        cdef Py_buffer buffer
        cdef Py_ssize_t entry
        cdef int status = C_MAP_DONE
        cdef const int64_t *entries
        if self.slots == NULL:
            raise ValueError("the offset map was released")
        entries = index_entries(index, first_entry, stop_entry)
        if first_entry == stop_entry:
            return C_MAP_DONE
        PyObject_GetBuffer(data, &buffer, PyBUF_SIMPLE)
        try:
            with nogil:
                for entry in range(first_entry, stop_entry):
                    status = self.add_entry(<const uint8_t *>buffer.buf, buffer.len, index.base_offset, entries,
                                            entry, start, end, verify_crc)
                    if status != C_MAP_DONE:
                        break
        finally:
            PyBuffer_Release(&buffer)
        return status

    cdef int add_entry(self, const uint8_t *data, Py_ssize_t size, int64_t base_offset, const int64_t *entries,
                       Py_ssize_t entry, int64_t start, int64_t end, bint verify_crc) noexcept nogil:
        cdef BatchLayout L
        cdef int64_t base = entries[2 * entry - 2] if entry else base_offset
        cdef int64_t next_offset = entries[2 * entry]
        cdef Py_ssize_t position = entries[2 * entry - 1] if entry else 0
        if not sound(data, size, position, entries[2 * entry + 1], base, next_offset, verify_crc, &L):
            return <int>entry
        if self.add_batch(data + position, &L, base, max(start, base) - base, min(end, next_offset) - base) != 0:
            return C_MAP_FULL
        return C_MAP_DONE

    cdef inline bint holds(self, const uint64_t *hash) noexcept nogil:
        """Whether a key of this hash is in the map."""
        cdef uint64_t i = scaled(hash[0], self.capacity)
        cdef Slot *slot
        while True:
            slot = &self.slots[i]
            if slot.stored == 0:
                return False
            if slot.hash_low == hash[0] and slot.hash_high == hash[1]:
                return True
            i += 1
            if i == self.capacity:
                i = 0

    def probe_stored(self, data, const int64_t[::1] positions, uint8_t[::1] verdicts) -> int:
        """The Verdict of every record of the whole stored batches at `positions` of `data` (the previous
        compacted view, all older than the map's range) into `verdicts`, in order: SUPERSEDED when the map
        holds its key (a later message has it), else LATEST or LATEST_TOMBSTONE; KEYLESS without a key.
        Returns -1, or the index in `positions` of a batch whose sections do not fit it."""
        cdef Py_buffer buffer
        cdef Py_ssize_t k, i, written = 0
        cdef int32_t first, stop
        cdef uint64_t hash[2]
        cdef const uint8_t *batch
        cdef BatchLayout L
        cdef Py_ssize_t result = -1
        if self.slots == NULL:
            raise ValueError("the offset map was released")
        PyObject_GetBuffer(data, &buffer, PyBUF_SIMPLE)
        try:
            with nogil:
                for k in range(positions.shape[0]):
                    if not laid_out(<const uint8_t *>buffer.buf, buffer.len, positions[k], &L) or \
                            written + L.count > verdicts.shape[0]:
                        result = k
                        break
                    batch = <const uint8_t *>buffer.buf + positions[k]
                    for i in range(L.count):
                        if L.key_offsets < 0 or not present(batch, L.key_validity, i):
                            verdicts[written] = KEYLESS
                        else:
                            first, stop = read_i32(batch + L.key_offsets + 4 * i), read_i32(batch + L.key_offsets + 4 * i + 4)
                            murmur3_128(batch + L.key_data + first, stop - first, C_HASH_SEED, hash)
                            if self.holds(hash):
                                verdicts[written] = SUPERSEDED
                            elif present(batch, L.value_validity, i):
                                verdicts[written] = LATEST
                            else:
                                verdicts[written] = LATEST_TOMBSTONE
                        written += 1
        finally:
            PyBuffer_Release(&buffer)
        return result

    def latest_offsets(self):
        """The offset of each key's latest message, ascending: an int64 numpy array of `keys` offsets. Lists
        them into the head of the slots' own memory and gives the rest back first, so that the map and its
        listing are never held at once (the peak is the map's size); the map is released by it."""
        if self.slots == NULL:
            raise ValueError("the offset map was released")
        cdef int64_t *packed = <int64_t *>self.slots
        cdef uint64_t i
        cdef Py_ssize_t n = 0, page = 4096
        cdef Py_ssize_t total = self.capacity * sizeof(Slot)
        cdef Py_ssize_t kept_bytes
        with nogil:
            for i in range(self.capacity):
                if self.slots[i].stored != 0:
                    # (slot i lies at byte 24 i, item n at byte 8 n <= 8 i: never ahead of the slots still read)
                    packed[n] = self.slots[i].stored - 1
                    n += 1
        kept_bytes = (8 * n + page - 1) // page * page
        if kept_bytes < total:
            munmap(<uint8_t *>self.slots + kept_bytes, total - kept_bytes)
        out = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] offsets = out
        if n:
            memcpy(&offsets[0], packed, 8 * n)
        if kept_bytes:
            munmap(self.slots, kept_bytes)
        self.slots = NULL
        out.sort()
        return out


cdef inline bint sound(const uint8_t *data, Py_ssize_t size, Py_ssize_t position, Py_ssize_t end_position,
                       int64_t base, int64_t next_offset, bint verify_crc, BatchLayout *L) noexcept nogil:
    """Whether the batch an index entry names is there and sound (header, layout, CRC32C with
    `verify_crc`), its layout computed into L."""
    if entry_status(data, size, position, end_position, base, next_offset - base, verify_crc) != C_ENTRY_SOUND:
        return False
    return compute_layout(data + position, end_position - position, L) == 0


cdef inline bint laid_out(const uint8_t *data, Py_ssize_t size, int64_t position, BatchLayout *L) noexcept nogil:
    """Whether a whole batch whose sections fit it lies at `position`, its layout computed into L."""
    cdef uint32_t body_length
    if position < 0 or position + 64 > size:
        return False
    memcpy(&body_length, data + position + 44, 4)
    if position + 64 + <Py_ssize_t>body_length > size:
        return False
    return compute_layout(data + position, 64 + body_length, L) == 0


cdef const int64_t *index_entries(IndexView index, Py_ssize_t first_entry, Py_ssize_t stop_entry) except NULL:
    """The index's entries as (next_offset, end_position) pairs, after checking that [first_entry,
    stop_entry) are published ones."""
    if not 0 <= first_entry <= stop_entry <= index.count:
        raise ValueError(f"entries [{first_entry}, {stop_entry}) are not within the index's {index.count}")
    cdef const int64_t[:, ::1] offsets = index.offsets
    return &offsets[0, 0]


def classify_segment(data, IndexView index, Py_ssize_t first_entry, Py_ssize_t stop_entry, int64_t start,
                     int64_t end, const int64_t[::1] latest, Py_ssize_t latest_from, uint8_t[::1] verdicts) -> int:
    """Pass 2 over one segment: the Verdict of each message of [start, end) in its indexed batches
    [first_entry, stop_entry) into `verdicts`, whose item 0 is the first of those messages. `latest`:
    OffsetMap.latest_offsets() of the whole range; `latest_from`: the first of them this segment may hold
    (0 for the range's first segment, then what the previous call returned).

    Returns the position in `latest` after this segment's offsets, or -1 - entry for the first batch that
    failed its checks (its header against the index entry; its CRC32C was checked by pass 1)."""
    cdef Py_buffer buffer
    cdef Py_ssize_t entry, k = latest_from, n_latest = latest.shape[0], i, low, high, written = 0
    cdef int64_t base, offset, next_offset
    cdef Py_ssize_t position
    cdef const uint8_t *batch
    cdef BatchLayout L
    cdef Py_ssize_t result = 0
    cdef const int64_t *entries = index_entries(index, first_entry, stop_entry)
    if first_entry == stop_entry:
        return k
    base = entries[2 * first_entry - 2] if first_entry else index.base_offset
    if verdicts.shape[0] != min(end, entries[2 * stop_entry - 2]) - max(start, base):
        raise ValueError(f"verdicts holds {verdicts.shape[0]} items, not one per message of the range")
    PyObject_GetBuffer(data, &buffer, PyBUF_SIMPLE)
    try:
        with nogil:
            for entry in range(first_entry, stop_entry):
                base = entries[2 * entry - 2] if entry else index.base_offset
                position = entries[2 * entry - 1] if entry else 0
                next_offset = entries[2 * entry]
                if not sound(<const uint8_t *>buffer.buf, buffer.len, position, entries[2 * entry + 1], base,
                             next_offset, False, &L):
                    result = -1 - entry
                    break
                batch = <const uint8_t *>buffer.buf + position
                low = max(start, base) - base
                high = min(end, next_offset) - base
                for i in range(low, high):
                    offset = base + i
                    while k < n_latest and latest[k] < offset:
                        k += 1  # (a caller's `latest` of another range: its offsets here are passed over)
                    if L.key_offsets < 0 or not present(batch, L.key_validity, i):
                        verdicts[written] = KEYLESS
                    elif k < n_latest and latest[k] == offset:
                        k += 1
                        verdicts[written] = LATEST if present(batch, L.value_validity, i) else LATEST_TOMBSTONE
                    else:
                        verdicts[written] = SUPERSEDED
                    written += 1
    finally:
        PyBuffer_Release(&buffer)
    return result if result < 0 else k


cdef inline bint mergeable(const uint8_t *a, const BatchLayout *La, const uint8_t *b, const BatchLayout *Lb) noexcept nogil:
    """Whether the kept records of stored batches a and b may share a compacted batch: the same flags, the
    same attributes, and both written here (a replicated batch keeps its origin's base offset of its own)."""
    cdef uint64_t origin_a, origin_b
    memcpy(&origin_a, a + 48, 8)
    memcpy(&origin_b, b + 48, 8)
    if La.flags != Lb.flags or origin_a != 0 or origin_b != 0:
        return False
    if La.attributes < 0:
        return True
    return La.end - La.attributes == Lb.end - Lb.attributes and \
        memcmp(a + La.attributes, b + Lb.attributes, La.end - La.attributes) == 0


def copy_kept(data, const int64_t[::1] positions, const uint8_t[::1] keep, uint8_t[::1] out):
    """Write the kept records of the whole stored batches at `positions` of `data` into `out` as compacted
    batches (format version 3, docs/FORMAT.md): `keep` has one item a record, in order (non-zero: kept).
    The kept records of consecutive stored batches of the same flags and attributes share a compacted batch
    of at most MERGE_RECORDS records and about MERGE_BYTES (a compacted read costs per batch, and a stored
    batch may keep a few records only). Stops before the first compacted batch that would not fit `out`.
    Returns (batches done, records done, bytes written); (0, 0, 0) when `out` cannot hold the first
    compacted batch (the caller gives it at least the first stored batch's length plus 8 bytes a record)."""
    cdef Py_buffer buffer
    cdef Py_ssize_t k, i, kept, size, n_batches = positions.shape[0]
    cdef Py_ssize_t done_batches = 0, done_records = 0, written = 0  # flushed so far
    cdef Py_ssize_t span_batches = 0, span_records = 0  # read since, into the group not yet written
    cdef Py_ssize_t group_count = 0, group_rows = 0, group_bytes = 0, rows_capacity = 0
    cdef Selection group[MAX_MERGED]
    cdef Py_ssize_t row_starts[MAX_MERGED]
    cdef int64_t *rows = NULL
    cdef int64_t *grown
    cdef const uint8_t *batch
    cdef BatchLayout L
    cdef int problem = 0  # 1: a damaged batch at positions[done_batches + span_batches], 2: keep too short, 3: memory
    cdef bint stopped = False
    PyObject_GetBuffer(data, &buffer, PyBUF_SIMPLE)
    try:
        with nogil:
            for k in range(n_batches + 1):
                if k < n_batches:
                    if not laid_out(<const uint8_t *>buffer.buf, buffer.len, positions[k], &L):
                        problem = 1
                        break
                    if done_records + span_records + L.count > keep.shape[0]:
                        problem = 2
                        break
                    batch = <const uint8_t *>buffer.buf + positions[k]
                if group_count and (k == n_batches or group_count == MAX_MERGED
                                    or group_rows + L.count > MERGE_RECORDS or group_bytes + L.end > MERGE_BYTES
                                    or not mergeable(group[0].batch, &group[0].layout, batch, &L)):
                    for i in range(group_count):
                        group[i].rows = rows + row_starts[i]
                    size = selection_size(group, group_count)
                    if written + size > out.shape[0]:
                        stopped = True
                        break
                    written += encode_selection(&out[0] + written, group, group_count)
                    done_batches += span_batches
                    done_records += span_records
                    span_batches = span_records = group_count = group_rows = group_bytes = 0
                if k == n_batches:
                    break
                if group_rows + L.count > rows_capacity:
                    rows_capacity = max(2 * rows_capacity, group_rows + L.count)
                    grown = <int64_t *>realloc(rows, 8 * rows_capacity)
                    if grown == NULL:
                        problem = 3
                        break
                    rows = grown
                kept = 0
                for i in range(L.count):
                    if keep[done_records + span_records + i]:
                        rows[group_rows + kept] = i
                        kept += 1
                span_batches += 1
                span_records += L.count
                if kept:
                    group[group_count].batch = batch
                    group[group_count].layout = L
                    group[group_count].n = kept
                    row_starts[group_count] = group_rows
                    group_count += 1
                    group_rows += kept
                    group_bytes += L.end
                elif group_count == 0:  # (nothing kept and nothing pending: done with it)
                    done_batches += span_batches
                    done_records += span_records
                    span_batches = span_records = 0
    finally:
        free(rows)
        PyBuffer_Release(&buffer)
    if problem == 1:
        raise ValueError(f"the batch at position {positions[done_batches + span_batches]}: its sections do not "
                         "fit it")
    if problem == 2:
        raise ValueError(f"keep holds {keep.shape[0]} items, fewer than the batches' records")
    if problem == 3:
        raise MemoryError()
    return done_batches, done_records, written
