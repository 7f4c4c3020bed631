# cython: freethreading_compatible=False
"""The record-batch format (docs/FORMAT.md): checksums, key hashing, header parsing, scanning a segment,
and the columnar encoder that every write path (send_batch, the send() accumulator) shares.

Nothing here knows about files or policies: callers hand in buffers (memory maps) and positions."""

from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_Check
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t, INT64_MIN
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

import numpy as np
cimport numpy as cnp

cdef extern from "native.h" nogil:  # (declared here rather than in _format.pxd: no other module calls them)
    void seglog_prefaulter_target_file(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start, int fd)
    void seglog_prefaulter_reach(seglog_prefaulter *p, size_t position, size_t end)

cnp.import_array()

HEADER_BYTES = HEADER_SIZE
VERSION = FORMAT_VERSION_2  # the newest format version, read and written (version 1 is read too)
MAGIC_BYTES = b"SGLB"
HAS_KEYS = FLAG_HAS_KEYS
KEY_NULLS = FLAG_KEY_NULLS
HAS_PROPERTIES = FLAG_HAS_PROPERTIES
EVENT_TIME_COLUMN = FLAG_EVENT_TIME_COLUMN
EVENT_TIME_IS_TIMESTAMP = FLAG_EVENT_TIME_IS_TIMESTAMP
VALUE_NULLS = FLAG_VALUE_NULLS
ORDERING_KEYS = FLAG_ORDERING_KEYS
ORDERING_KEY_NULLS = FLAG_ORDERING_KEY_NULLS
LOG_APPEND_TIME = FLAG_LOG_APPEND_TIME
BATCH_ATTRIBUTES = FLAG_BATCH_ATTRIBUTES
OFFSETS = FLAG_OFFSETS
VERSION_2_FLAGS = VERSION_2_FLAGS_MASK  # the flags only a version-2 batch may have
VERSION_3_FLAGS = VERSION_3_FLAGS_MASK  # the flags only a version-3 (compacted) batch may have
NO_EVENT_TIME = INT64_MIN

# Scan outcomes (scan_batches, verify_batch): why a scan stopped where it did.
cpdef enum ScanStatus:
    SCAN_END = 0            # reached the end given, or zeroed (never written) space: a clean end
    SCAN_TORN = 1           # a header or body runs past the end of the data: a torn write
    SCAN_BAD_MAGIC = 2
    SCAN_BAD_VERSION = 3
    SCAN_BAD_LENGTH = 4
    SCAN_BAD_CRC = 5
    SCAN_BAD_OFFSET = 6     # base offset does not follow the previous batch, or offsets do not grow
    SCAN_INDEX_FULL = 7     # more batches than the index arrays given can hold
    SCAN_BAD_FLAGS = 8      # a flag unknown to the batch's format version, or flags that contradict
    SCAN_BAD_LAYOUT = 9     # sound CRC, but the column sections do not fit the batch

SCAN_REASONS = {
    SCAN_END: "end of data",
    SCAN_TORN: "batch runs past the end of the file (torn write)",
    SCAN_BAD_MAGIC: "bad magic (not a seglog record batch)",
    SCAN_BAD_VERSION: "unsupported format version",
    SCAN_BAD_LENGTH: "invalid header length fields",
    SCAN_BAD_CRC: "CRC32C mismatch (corrupt batch)",
    SCAN_BAD_OFFSET: "base offset does not follow the previous batch, or its offsets do not grow",
    SCAN_BAD_FLAGS: "flags not valid for the batch's format version",
    SCAN_BAD_LAYOUT: "column sections do not fit the batch (a damaged offsets section)",
    SCAN_INDEX_FULL: "index capacity reached",
}


# Below this size crc32c keeps the GIL: the CRC takes a few µs at most, and releasing the GIL costs the caller
# far more whenever another thread waits for it (that thread takes it, and the caller waits its turn to get it
# back). A server's event loop checks every frame it reads; its thread pool is busy writing meanwhile.
cdef Py_ssize_t CRC_NOGIL_BYTES = 1 << 16


def crc32c(data, uint32_t crc=0) -> int:
    """CRC32C of a bytes-like object, continuing from `crc` (hardware instruction where available)."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef const uint8_t *start = &view[0] if view.shape[0] else NULL
    if view.shape[0] < CRC_NOGIL_BYTES:
        return seglog_crc32c(crc, start, view.shape[0])
    with nogil:
        crc = seglog_crc32c(crc, start, view.shape[0])
    return crc


def crc32c_software(data, uint32_t crc=0) -> int:
    """The portable table-driven CRC32C, exposed so tests can check it against the hardware path."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    with nogil:
        crc = seglog_crc32c_software(crc, &view[0] if view.shape[0] else NULL, view.shape[0])
    return crc


# The CRC32C implementations this CPU can run, by name, slowest first (see native.h).
cdef dict CRC_TIERS = {seglog_crc32c_tier_name(t).decode(): t for t in range(seglog_crc32c_tier_count())
                       if seglog_crc32c_tier_available(t)}


def crc32c_tiers() -> list:
    """The CRC32C implementations this CPU can run, slowest first ("software", then e.g. "sse42", "pclmul",
    "avx512"); `crc32c` uses the last. For tests and benchmarks."""
    return list(CRC_TIERS)


def crc32c_selected_tier() -> str:
    """The CRC32C implementation that `crc32c` and the read and write paths use on this CPU."""
    return seglog_crc32c_tier_name(seglog_crc32c_selected_tier()).decode()


def crc32c_tier(str name, data, uint32_t crc=0) -> int:
    """`crc32c` computed by the named implementation; ValueError if this CPU cannot run it."""
    cdef int tier = CRC_TIERS.get(name, -1)
    if tier < 0:
        raise ValueError(f"no CRC32C tier {name!r} on this CPU (have {crc32c_tiers()})")
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    with nogil:
        crc = seglog_crc32c_tier(tier, crc, &view[0] if view.shape[0] else NULL, view.shape[0])
    return crc


def murmur2(data) -> int:
    """Kafka's murmur2 hash of a key (a signed 32-bit int, as Kafka's Utils.murmur2 returns)."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    return seglog_murmur2(&view[0] if view.shape[0] else NULL, view.shape[0])


cpdef int partition_for_key(key, int partitions) except -1:
    """Kafka's default partitioner: toPositive(murmur2(key)) % partitions."""
    cdef const uint8_t[::1] view
    if PyBytes_Check(key):
        return (seglog_murmur2(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % partitions
    if isinstance(key, str):
        key = (<str>key).encode()
        return (seglog_murmur2(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % partitions
    view = memoryview(key).cast("B")
    return (seglog_murmur2(&view[0] if view.shape[0] else NULL, view.shape[0]) & 0x7FFFFFFF) % partitions


cdef class Prefaulter:
    """Keeps the pages ahead of a writer faulted in, from a C thread (see native.h). `target` a writable
    mapping when a segment becomes active (BatchSource.append_to then advances it after each write);
    `prepare` the next segment's mapping, made ahead of the roll (`target` it when it becomes the active
    one); `unmap_later` either when it is done with. Its fields are declared in _format.pxd."""

    def __cinit__(self, size_t ahead=32 << 20, size_t step=4 << 20):
        self.native = seglog_prefaulter_new(ahead, step)
        if self.native == NULL:
            raise MemoryError("could not start the prefault thread")

    def target(self, mapping, size_t start=0, int fd=-1) -> None:
        """Follow `mapping` from `start`. `fd`: its file (not kept: duplicated), whose blocks past `start`
        hold zeros or bytes no one reads, so that its pages are made by writing zeros (see native.h); -1
        for none, or to keep the file of the same mapping followed further."""
        self._check_running()
        cdef uint8_t[::1] view = mapping
        with nogil:
            seglog_prefaulter_target_file(self.native, &view[0], view.shape[0], start, fd)
        self.mapping = view  # the old map is unmapped only after this
        if self.spare is not None and &self.spare[0] == &view[0]:
            self.spare = None  # the spare became the active mapping

    def reach(self, size_t position, size_t end) -> None:
        """The writer is about to write [position, end) of the target: the pages the thread has not made yet
        are made now, and it goes on past `end`. Before every write into the target."""
        self._check_running()
        with nogil:
            seglog_prefaulter_reach(self.native, position, end)

    def prepare(self, mapping) -> None:
        self._check_running()
        cdef uint8_t[::1] view = mapping
        with nogil:
            seglog_prefaulter_spare(self.native, &view[0], view.shape[0])
        self.spare = view

    def unmap_later(self, mapping) -> None:
        """Have the thread unmap `mapping` (a _mapping.Mapping, closed from now on): unmapping a segment's
        faulted-in pages takes milliseconds that a roll or a close need not wait for. The thread stops faulting
        it in first, without this call waiting for a step in it to end, but for one writing zeros to its
        file (the caller may trim the file next, and a write past the trim would extend it). BufferError,
        while another buffer points into it: then the thread has left it, and nothing is unmapped."""
        self._check_running()
        cdef uint8_t[::1] view = mapping
        cdef uint8_t *base = &view[0]
        view = None
        if self.mapping is not None and &self.mapping[0] == base:
            self.mapping = None  # this object's own views of it
        if self.spare is not None and &self.spare[0] == base:
            self.spare = None
        try:
            address, length = mapping.detach()
        except BufferError:
            with nogil:
                seglog_prefaulter_release(self.native, base)
            raise
        seglog_prefaulter_unmap(self.native, <void *><uintptr_t>address, length)

    def close(self) -> None:
        """Stop the thread once it has unmapped every map handed to it (its writer closes: nothing of the
        writer's files stays mapped after its close returns). Nothing may be handed to it after."""
        if self.native != NULL:
            with nogil:
                seglog_prefaulter_free(self.native)
            self.native = NULL
        self.mapping = None
        self.spare = None

    def _check_running(self) -> None:
        if self.native == NULL:
            raise RuntimeError("the prefault thread was stopped (Prefaulter.close)")

    def __dealloc__(self):
        if self.native != NULL:
            with nogil:
                seglog_prefaulter_free(self.native)


def read_header(buffer, Py_ssize_t position) -> tuple:
    """The header fields of the batch at `position`, in file order (magic .. origin_base_offset).
    The caller has checked that HEADER_SIZE bytes are there."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchHeader h
    if position < 0 or position + HEADER_SIZE > view.shape[0]:
        raise IndexError(f"no batch header at position {position} (buffer holds {view.shape[0]} bytes)")
    memcpy(&h, &view[position], HEADER_SIZE)
    return (h.magic, h.version, h.header_size, h.crc, h.flags, h.base_offset, h.first_timestamp,
            h.max_timestamp, h.record_count, h.body_length, h.origin_cluster, h.origin_base_offset)


cdef inline bint known_version(uint16_t version) noexcept nogil:
    return version == FORMAT_VERSION_1 or version == FORMAT_VERSION_2 or version == FORMAT_VERSION_3


cdef inline bint flags_valid(uint16_t version, uint32_t flags) noexcept nogil:
    """Every flag set is one the batch's format version defines, and ORDERING_KEY_NULLS comes with
    ORDERING_KEYS (docs/FORMAT.md, Flags)."""
    cdef uint32_t known = KNOWN_FLAGS_V1 if version == FORMAT_VERSION_1 else (
        KNOWN_FLAGS_V2 if version == FORMAT_VERSION_2 else KNOWN_FLAGS_V3)
    if flags & ~known:
        return False
    return not (flags & FLAG_ORDERING_KEY_NULLS) or (flags & FLAG_ORDERING_KEYS) != 0


cdef int check_header(const BatchHeader *h, Py_ssize_t position, Py_ssize_t end) noexcept nogil:
    if h.magic != MAGIC:
        return SCAN_BAD_MAGIC
    if not known_version(h.version):
        return SCAN_BAD_VERSION
    if h.header_size != HEADER_SIZE or h.record_count <= 0 or (h.body_length & 7) != 0 \
            or h.body_length < 8 * <uint64_t>h.record_count:
        return SCAN_BAD_LENGTH
    if not flags_valid(h.version, h.flags):
        return SCAN_BAD_FLAGS
    if position + HEADER_SIZE + <Py_ssize_t>h.body_length > end:
        return SCAN_TORN
    return SCAN_END


cdef inline int crc_status(const uint8_t *batch, const BatchHeader *h) noexcept nogil:
    if seglog_crc32c(0, batch + CRC_START, HEADER_SIZE - CRC_START + h.body_length) == h.crc:
        return SCAN_END
    return SCAN_BAD_CRC


cdef inline int body_status(const uint8_t *batch, const BatchHeader *h, bint verify_crc) noexcept nogil:
    """The rest of a batch whose header passed check_header: its CRC32C (with `verify_crc`), then whether
    its column sections fit it (O(1): a few offsets read, no record walked), and for a batch with an
    offsets column, that its offsets grow (with `verify_crc`: a walk of the column, as cheap as the CRC)."""
    cdef BatchLayout layout
    if verify_crc and crc_status(batch, h) != SCAN_END:
        return SCAN_BAD_CRC
    if compute_layout(batch, HEADER_SIZE + h.body_length, &layout) != 0:
        return SCAN_BAD_LAYOUT
    if verify_crc and layout.offsets >= 0 and not offsets_grow(batch + layout.offsets, layout.count):
        return SCAN_BAD_OFFSET
    return SCAN_END


cdef inline bint offsets_grow(const uint8_t *column, Py_ssize_t n) noexcept nogil:
    cdef int64_t previous, offset
    cdef Py_ssize_t i
    memcpy(&previous, column, 8)
    for i in range(1, n):
        memcpy(&offset, column + 8 * i, 8)
        if offset <= previous:
            return False
        previous = offset
    return True


cdef inline int64_t first_offset_of(const uint8_t *batch, const BatchHeader *h) noexcept nogil:
    """The offset of the batch's first record: its base offset, or for a batch with an offsets column (whose
    header passed check_header) that column's first."""
    cdef int64_t first
    if not h.flags & FLAG_OFFSETS:
        return h.base_offset
    memcpy(&first, batch + HEADER_SIZE, 8)
    return first


cdef inline int64_t next_offset_of(const uint8_t *batch, const BatchHeader *h) noexcept nogil:
    """The offset after the batch's last record: its base offset plus its record count, or for a batch
    with an offsets column (whose layout was computed sound) one past that column's last offset."""
    cdef int64_t last
    if not h.flags & FLAG_OFFSETS:
        return h.base_offset + h.record_count
    memcpy(&last, batch + HEADER_SIZE + 8 * (h.record_count - 1), 8)
    return last + 1


def verify_batch(buffer, Py_ssize_t position, Py_ssize_t end) -> int:
    """Check the header, CRC32C and column layout of the batch at `position`; a SCAN_* code, SCAN_END when
    sound."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchHeader h
    cdef int status
    if end > view.shape[0]:
        end = view.shape[0]
    if position + HEADER_SIZE > end:
        return SCAN_TORN
    memcpy(&h, &view[position], HEADER_SIZE)
    status = check_header(&h, position, end)
    if status != SCAN_END:
        return status
    with nogil:
        status = body_status(&view[position], &h, True)
    return status


def header_agrees(buffer, Py_ssize_t start, Py_ssize_t end, int64_t base_offset, int64_t count) -> bool:
    """Whether the batch header at `start` describes what an index entry says is there: `count` records from
    `base_offset`, ending at `end`. One 64-byte read (check_entry does the same for readers)."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchHeader h
    if start < 0 or start + HEADER_SIZE > end or end > view.shape[0]:
        return False
    memcpy(&h, &view[start], HEADER_SIZE)
    return names_entry(&h, start, end, base_offset, count)


cdef inline bint names_entry(const BatchHeader *h, Py_ssize_t start, Py_ssize_t end, int64_t base_offset,
                             int64_t count) noexcept nogil:
    return (h.magic == MAGIC and h.header_size == HEADER_SIZE and h.base_offset == base_offset
            and h.record_count == count and HEADER_SIZE + <Py_ssize_t>h.body_length == end - start)


# check_entry's outcomes besides the SCAN_* code of a batch that fails its header or CRC check (the enum
# is in _format.pxd).
ENTRY_SOUND = C_ENTRY_SOUND
ENTRY_PAST_DATA = C_ENTRY_PAST_DATA    # the index places the batch past the end of the data
ENTRY_DIFFERS = C_ENTRY_DIFFERS        # the batch there is sound, but not the one the entry names (a damaged index)


def check_entry(buffer, Py_ssize_t start, Py_ssize_t end, int64_t base_offset, int64_t count,
                bint verify_crc) -> int:
    """Whether the batch an index entry names, `count` records from `base_offset` at [start, end), is there:
    its header agrees with the entry (one 64-byte read) and is valid, its column sections fit it, and with
    `verify_crc` its CRC32C matches. Returns
    ENTRY_SOUND, ENTRY_PAST_DATA (`buffer` None or too short), ENTRY_DIFFERS, or the SCAN_* code of the
    damage found where the entry points. Readers run this on every entry they use (docs/FORMAT.md, Recovery)."""
    cdef Py_buffer view
    if buffer is None:
        return C_ENTRY_PAST_DATA
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        return entry_status(<const uint8_t *>view.buf, view.len, start, end, base_offset, count, verify_crc)
    finally:
        PyBuffer_Release(&view)


cdef int entry_status(const uint8_t *data, Py_ssize_t size, Py_ssize_t start, Py_ssize_t end,
                      int64_t base_offset, int64_t count, bint verify_crc) noexcept nogil:
    """check_entry over `size` bytes at `data`."""
    cdef BatchHeader h
    cdef int status
    if start < 0 or start + HEADER_SIZE > end or end > size:
        return C_ENTRY_PAST_DATA if end > size else C_ENTRY_DIFFERS
    memcpy(&h, data + start, HEADER_SIZE)
    if not names_entry(&h, start, end, base_offset, count):
        status = check_header(&h, start, size)
        if status == SCAN_END:
            status = body_status(data + start, &h, True)
        return C_ENTRY_DIFFERS if status == SCAN_END else status
    status = check_header(&h, start, size)  # the version and flags: names_entry checked the rest
    if status == SCAN_END:
        status = body_status(data + start, &h, verify_crc)
    return status


def scan_batches(buffer, Py_ssize_t start, Py_ssize_t end, int64_t expected_offset, bint verify_crc,
                 int64_t[::1] next_offsets, int64_t[::1] end_positions, int64_t[::1] max_timestamps,
                 int64_t running_max_timestamp=INT64_MIN, bint gaps=False, int64_t[::1] base_offsets=None):
    """Walk the batches of a segment from `start` to `end`, as recovery, index rebuild and `seglog check` do.

    Fills one index entry per sound batch (the offset after it, the position after it, and the running
    maximum timestamp) and stops at the first batch that is not sound (its header, CRC32C with `verify_crc`,
    or column layout), or at zeroed space (never written). With `gaps` (a compacted file, whose batches
    hold offsets with gaps) a batch's first record may come past the offset after the previous batch, never
    before it, and `base_offsets`, when given, receives each batch's base offset.
    Returns (entries, stop_position, status, running_max_timestamp); status is a SCAN_* code."""
    cdef const uint8_t[::1] view = buffer
    cdef Py_ssize_t position = start, capacity = next_offsets.shape[0], entries = 0
    cdef BatchHeader h
    cdef int status = SCAN_END
    cdef uint32_t zero_magic = 0
    if end > view.shape[0]:
        end = view.shape[0]
    if end_positions.shape[0] < capacity or max_timestamps.shape[0] < capacity or \
            (base_offsets is not None and base_offsets.shape[0] < capacity):
        raise ValueError("index arrays must have equal capacity")
    with nogil:
        while True:
            if position + 4 > end:
                status = SCAN_END if position == end else SCAN_TORN
                break
            memcpy(&zero_magic, &view[position], 4)
            if zero_magic == 0:
                status = SCAN_END
                break
            if position + HEADER_SIZE > end:
                status = SCAN_TORN
                break
            memcpy(&h, &view[position], HEADER_SIZE)
            status = check_header(&h, position, end)
            if status != SCAN_END:
                break
            if expected_offset >= 0 and (first_offset_of(&view[position], &h) < expected_offset if gaps
                                         else h.base_offset != expected_offset):
                status = SCAN_BAD_OFFSET
                break
            status = body_status(&view[position], &h, verify_crc)
            if status != SCAN_END:
                break
            if entries == capacity:
                status = SCAN_INDEX_FULL
                break
            if base_offsets is not None:
                base_offsets[entries] = h.base_offset
            expected_offset = next_offset_of(&view[position], &h)
            position += HEADER_SIZE + h.body_length
            if h.max_timestamp > running_max_timestamp:
                running_max_timestamp = h.max_timestamp
            next_offsets[entries] = expected_offset
            end_positions[entries] = position
            max_timestamps[entries] = running_max_timestamp
            entries += 1
    return entries, position, status, running_max_timestamp


# ---------------------------------------------------------------------------------------------------------
# Encoding: layout sizes, record ranges that fit a space, and the copy itself (all without the GIL).

cdef inline Py_ssize_t data_start(const RawColumn *c, Py_ssize_t i) noexcept nogil:
    if c.width:
        return i * c.width
    if c.prefix32 != NULL:
        return c.prefix32[i]
    return c.prefix64[i]


cdef inline Py_ssize_t binary_section_size(const RawColumn *c, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    return align8(4 * (stop - start + 1)) + align8(data_start(c, stop) - data_start(c, start))


cdef inline Py_ssize_t entry_index(const BatchColumns *b, Py_ssize_t i) noexcept nogil:
    return b.property_entries[i]


cdef Py_ssize_t encoded_batch_size(const BatchColumns *b, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    cdef Py_ssize_t n = stop - start, size = HEADER_SIZE + 8 * n
    if b.flags & FLAG_EVENT_TIME_COLUMN:
        size += 8 * n
    if b.flags & FLAG_HAS_KEYS:
        if b.flags & FLAG_KEY_NULLS:
            size += align8((n + 7) // 8)
        size += binary_section_size(&b.keys, start, stop)
    if b.flags & FLAG_VALUE_NULLS:
        size += align8((n + 7) // 8)
    size += binary_section_size(&b.values, start, stop)
    if b.flags & FLAG_HAS_PROPERTIES:
        size += align8(4 * (n + 1))
        size += binary_section_size(&b.property_keys, entry_index(b, start), entry_index(b, stop))
        size += binary_section_size(&b.property_values, entry_index(b, start), entry_index(b, stop))
    if b.flags & FLAG_ORDERING_KEYS:
        if b.flags & FLAG_ORDERING_KEY_NULLS:
            size += align8((n + 7) // 8)
        size += binary_section_size(&b.ordering_keys, start, stop)
    if b.flags & FLAG_BATCH_ATTRIBUTES:  # the whole map, in every batch of the records
        size += 8 + binary_section_size(&b.attribute_keys, 0, b.attribute_keys.count)
        size += binary_section_size(&b.attribute_values, 0, b.attribute_values.count)
    return size


cdef Py_ssize_t fit_records(const BatchColumns *b, Py_ssize_t start, Py_ssize_t space) noexcept nogil:
    """The largest stop such that records [start, stop) encode into `space` bytes (start if none fits)."""
    cdef Py_ssize_t low = start, high = b.count, middle
    if encoded_batch_size(b, start, high) <= space:
        return high
    while low < high:  # invariant: [start, low) fits, [start, high + 1) does not
        middle = (low + high + 1) // 2
        if encoded_batch_size(b, start, middle) <= space:
            low = middle
        else:
            high = middle - 1
    return low


cdef inline uint8_t *pad_to8(uint8_t *base, uint8_t *p) noexcept nogil:
    cdef Py_ssize_t used = p - base, padded = align8(used)
    memset(p, 0, padded - used)
    return base + padded


cdef uint8_t *write_binary(uint8_t *base, uint8_t *p, const RawColumn *c, Py_ssize_t start,
                           Py_ssize_t stop) noexcept nogil:
    cdef Py_ssize_t i, n = stop - start, first = data_start(c, start), length
    cdef int32_t *offsets = <int32_t *>p
    for i in range(n + 1):
        offsets[i] = <int32_t>(data_start(c, start + i) - first)
    p = pad_to8(base, p + 4 * (n + 1))
    if c.items != NULL:
        for i in range(start, stop):
            length = c.prefix64[i + 1] - c.prefix64[i]
            memcpy(p, item_data(c, i), length)
            p += length
    else:
        length = data_start(c, stop) - first
        memcpy(p, c.data + first, length)
        p += length
    return pad_to8(base, p)


cdef uint8_t *write_validity(uint8_t *base, uint8_t *p, const uint8_t *validity, Py_ssize_t start,
                             Py_ssize_t stop) noexcept nogil:
    cdef Py_ssize_t i, n = stop - start, j
    memset(p, 0, (n + 7) // 8)
    for i in range(n):
        j = start + i
        if validity[j >> 3] & (1 << (j & 7)):
            p[i >> 3] |= <uint8_t>(1 << (i & 7))
    return pad_to8(base, p + (n + 7) // 8)


cdef Py_ssize_t encode_batch(uint8_t *dest, const BatchColumns *b, Py_ssize_t start, Py_ssize_t stop,
                             int64_t base_offset, uint64_t origin_cluster,
                             int64_t origin_base_offset) noexcept nogil:
    """Write records [start, stop) as one batch at `dest`; returns its length. The caller made room."""
    cdef Py_ssize_t i, n = stop - start, first_entry, e
    cdef int32_t attribute_count[2]
    cdef BatchHeader h
    cdef uint8_t *p = dest + HEADER_SIZE
    cdef int64_t *stamps = <int64_t *>p
    cdef int64_t first_ts, max_ts
    cdef int32_t *entries
    if b.timestamps == NULL:
        first_ts = max_ts = b.constant_timestamp
        for i in range(n):
            stamps[i] = first_ts
    else:
        first_ts = max_ts = b.timestamps[start]
        for i in range(start + 1, stop):
            if b.timestamps[i] > max_ts:
                max_ts = b.timestamps[i]
        memcpy(p, b.timestamps + start, 8 * n)
    p += 8 * n
    if b.flags & FLAG_EVENT_TIME_COLUMN:
        memcpy(p, b.event_times + start, 8 * n)
        p += 8 * n
    if b.flags & FLAG_HAS_KEYS:
        if b.flags & FLAG_KEY_NULLS:
            p = write_validity(dest, p, b.keys.validity, start, stop)
        p = write_binary(dest, p, &b.keys, start, stop)
    if b.flags & FLAG_VALUE_NULLS:
        p = write_validity(dest, p, b.values.validity, start, stop)
    p = write_binary(dest, p, &b.values, start, stop)
    if b.flags & FLAG_HAS_PROPERTIES:
        entries = <int32_t *>p
        first_entry = b.property_entries[start]
        for i in range(n + 1):
            entries[i] = <int32_t>(b.property_entries[start + i] - first_entry)
        p = pad_to8(dest, p + 4 * (n + 1))
        e = b.property_entries[stop]
        p = write_binary(dest, p, &b.property_keys, first_entry, e)
        p = write_binary(dest, p, &b.property_values, first_entry, e)
    if b.flags & FLAG_ORDERING_KEYS:
        if b.flags & FLAG_ORDERING_KEY_NULLS:
            p = write_validity(dest, p, b.ordering_keys.validity, start, stop)
        p = write_binary(dest, p, &b.ordering_keys, start, stop)
    if b.flags & FLAG_BATCH_ATTRIBUTES:
        attribute_count[0], attribute_count[1] = <int32_t>b.attribute_keys.count, 0
        memcpy(p, attribute_count, 8)
        p += 8
        p = write_binary(dest, p, &b.attribute_keys, 0, b.attribute_keys.count)
        p = write_binary(dest, p, &b.attribute_values, 0, b.attribute_values.count)
    h.magic = MAGIC
    # The lowest version that has every section written, so a batch using nothing of version 2 stays
    # readable by version-1 readers (docs/FORMAT.md, Versions).
    h.version = FORMAT_VERSION_2 if b.flags & VERSION_2_FLAGS_MASK else FORMAT_VERSION_1
    h.header_size = HEADER_SIZE
    h.flags = b.flags
    h.base_offset = base_offset
    h.first_timestamp = first_ts
    h.max_timestamp = max_ts
    h.record_count = <int32_t>n
    h.body_length = <uint32_t>(p - dest - HEADER_SIZE)
    h.origin_cluster = origin_cluster
    h.origin_base_offset = origin_base_offset
    h.crc = 0
    memcpy(dest, &h, HEADER_SIZE)
    h.crc = seglog_crc32c(0, dest + CRC_START, (p - dest) - CRC_START)
    memcpy(dest + 8, &h.crc, 4)
    return p - dest


# ---------------------------------------------------------------------------------------------------------
# Encoding a selection: some records of stored batches as one compacted batch (format version 3), which keeps
# each record's offset in its offsets column. Every section is gathered from the stored ones, so nothing of
# a record is lost (event times, ordering keys, properties, the batch attributes) and no record is decoded.
# The stored batches of one compacted batch have the same flags and the same attributes (Selection).

cdef inline Py_ssize_t row_items(const Selection *s, Py_ssize_t entries_at, Py_ssize_t k,
                                 Py_ssize_t *first) noexcept nogil:
    """The items row k of `s` owns in a section: its own (first = the row), or with `entries_at` (properties)
    its entry range."""
    cdef Py_ssize_t row = s.rows[k]
    if entries_at < 0:
        first[0] = row
        return 1
    first[0] = read_i32(s.batch + entries_at + 4 * row)
    return read_i32(s.batch + entries_at + 4 * row + 4) - first[0]


cdef Py_ssize_t gathered_size(const Selection *sources, Py_ssize_t count, Py_ssize_t section,
                              bint entries) noexcept nogil:
    """The bytes gather_binary writes for one binary section (`section`: which, see section_of) of every
    selected row."""
    cdef Py_ssize_t j, k, e, first, n, items = 0, data = 0, offsets_at, data_at
    cdef const Selection *s
    for j in range(count):
        s = &sources[j]
        offsets_at = section_of(&s.layout, section, &data_at)
        for k in range(s.n):
            n = row_items(s, s.layout.property_entries if entries else -1, k, &first)
            items += n
            for e in range(first, first + n):
                data += read_i32(s.batch + offsets_at + 4 * e + 4) - read_i32(s.batch + offsets_at + 4 * e)
    return align8(4 * (items + 1)) + align8(data)


cdef inline Py_ssize_t section_of(const BatchLayout *L, Py_ssize_t section, Py_ssize_t *data_at) noexcept nogil:
    """Where binary section `section` (0 keys, 1 values, 2 property keys, 3 property values, 4 ordering keys)
    has its offsets (returned) and its data (`data_at`)."""
    cdef Py_ssize_t offsets_at
    if section == 0:
        offsets_at, data_at[0] = L.key_offsets, L.key_data
    elif section == 1:
        offsets_at, data_at[0] = L.value_offsets, L.value_data
    elif section == 2:
        offsets_at, data_at[0] = L.property_key_offsets, L.property_key_data
    elif section == 3:
        offsets_at, data_at[0] = L.property_value_offsets, L.property_value_data
    else:
        offsets_at, data_at[0] = L.ordering_key_offsets, L.ordering_key_data
    return offsets_at


cdef uint8_t *gather_binary(uint8_t *dest, uint8_t *p, const Selection *sources, Py_ssize_t count,
                            Py_ssize_t section, bint entries, Py_ssize_t items) noexcept nogil:
    """An offsets + data section of the selected rows' items (with `entries`, each row's property entries),
    `items` of them in all."""
    cdef Py_ssize_t j, k, e, first, n, written = 0, offsets_at, data_at
    cdef int32_t *offsets = <int32_t *>p
    cdef int32_t start, stop, total = 0
    cdef uint8_t *out = <uint8_t *>pad_to8(dest, p + 4 * (items + 1))
    cdef const Selection *s
    offsets[0] = 0
    for j in range(count):
        s = &sources[j]
        offsets_at = section_of(&s.layout, section, &data_at)
        for k in range(s.n):
            n = row_items(s, s.layout.property_entries if entries else -1, k, &first)
            for e in range(first, first + n):
                start, stop = read_i32(s.batch + offsets_at + 4 * e), read_i32(s.batch + offsets_at + 4 * e + 4)
                memcpy(out + total, s.batch + data_at + start, stop - start)
                total += stop - start
                written += 1
                offsets[written] = total
    return pad_to8(dest, out + total)


cdef uint8_t *gather_validity(uint8_t *dest, uint8_t *p, const Selection *sources, Py_ssize_t count,
                              Py_ssize_t which, Py_ssize_t n) noexcept nogil:
    """A validity bitmap of the selected rows (`which`: 0 keys, 1 values, 2 ordering keys), `n` rows in all."""
    cdef Py_ssize_t j, k, row, at = 0, validity_at
    cdef const Selection *s
    memset(p, 0, (n + 7) // 8)
    for j in range(count):
        s = &sources[j]
        validity_at = s.layout.key_validity if which == 0 else (
            s.layout.value_validity if which == 1 else s.layout.ordering_key_validity)
        for k in range(s.n):
            row = s.rows[k]
            if s.batch[validity_at + (row >> 3)] & (1 << (row & 7)):
                p[at >> 3] |= <uint8_t>(1 << (at & 7))
            at += 1
    return pad_to8(dest, p + (n + 7) // 8)


cdef inline Py_ssize_t property_items(const Selection *sources, Py_ssize_t count) noexcept nogil:
    cdef Py_ssize_t j, k, first, items = 0
    for j in range(count):
        for k in range(sources[j].n):
            items += row_items(&sources[j], sources[j].layout.property_entries, k, &first)
    return items


cdef Py_ssize_t selection_size(const Selection *sources, Py_ssize_t count) noexcept nogil:
    """The length encode_selection gives the selected rows: at most their stored batches' lengths plus 8
    bytes a record (the offsets column); every other section shrinks or stays, the attributes are counted once."""
    cdef const BatchLayout *L = &sources[0].layout
    cdef Py_ssize_t j, n = 0, size, bitmap
    for j in range(count):
        n += sources[j].n
    bitmap = align8((n + 7) // 8)
    size = HEADER_SIZE + 16 * n
    if L.event_times >= 0:
        size += 8 * n
    if L.key_offsets >= 0:
        size += gathered_size(sources, count, 0, False) + (bitmap if L.key_validity >= 0 else 0)
    size += gathered_size(sources, count, 1, False) + (bitmap if L.value_validity >= 0 else 0)
    if L.property_entries >= 0:
        size += align8(4 * (n + 1)) + gathered_size(sources, count, 2, True) + gathered_size(sources, count, 3, True)
    if L.ordering_key_offsets >= 0:
        size += gathered_size(sources, count, 4, False) + (bitmap if L.ordering_key_validity >= 0 else 0)
    if L.attributes >= 0:
        size += L.end - L.attributes
    return size


cdef Py_ssize_t encode_selection(uint8_t *dest, const Selection *sources, Py_ssize_t count) noexcept nogil:
    """Write the selected rows (each source's ascending record indexes, at least one in all; the sources in
    offset order, with the same flags and attributes) as one compacted batch at `dest` (selection_size bytes,
    made room for by the caller); returns its length. Its base offset, origin and attributes are the first
    source's."""
    cdef const Selection *s
    cdef const BatchLayout *L = &sources[0].layout
    cdef BatchHeader h
    cdef uint8_t *p = dest + HEADER_SIZE
    cdef Py_ssize_t j, k, n = 0, at = 0, first
    cdef int64_t offset, stamp, max_ts = INT64_MIN, base
    cdef int32_t *entries
    cdef int32_t total = 0
    for j in range(count):
        n += sources[j].n
    for j in range(count):  # offsets, then timestamps, then event times: one pass each
        s = &sources[j]
        memcpy(&base, s.batch + 16, 8)  # the header's base_offset
        for k in range(s.n):
            offset = read_i64(s.batch + s.layout.offsets + 8 * s.rows[k]) if s.layout.offsets >= 0 else base + s.rows[k]
            memcpy(p + 8 * at, &offset, 8)
            stamp = read_i64(s.batch + s.layout.timestamps + 8 * s.rows[k])
            max_ts = stamp if stamp > max_ts else max_ts
            memcpy(p + 8 * n + 8 * at, &stamp, 8)
            if L.event_times >= 0:
                memcpy(p + 16 * n + 8 * at, s.batch + s.layout.event_times + 8 * s.rows[k], 8)
            at += 1
    p += (24 if L.event_times >= 0 else 16) * n
    if L.key_offsets >= 0:
        if L.key_validity >= 0:
            p = gather_validity(dest, p, sources, count, 0, n)
        p = gather_binary(dest, p, sources, count, 0, False, n)
    if L.value_validity >= 0:
        p = gather_validity(dest, p, sources, count, 1, n)
    p = gather_binary(dest, p, sources, count, 1, False, n)
    if L.property_entries >= 0:
        entries = <int32_t *>p
        entries[0] = 0
        at = 0
        for j in range(count):
            for k in range(sources[j].n):
                total += <int32_t>row_items(&sources[j], sources[j].layout.property_entries, k, &first)
                at += 1
                entries[at] = total
        p = pad_to8(dest, p + 4 * (n + 1))
        p = gather_binary(dest, p, sources, count, 2, True, total)
        p = gather_binary(dest, p, sources, count, 3, True, total)
    if L.ordering_key_offsets >= 0:
        if L.ordering_key_validity >= 0:
            p = gather_validity(dest, p, sources, count, 2, n)
        p = gather_binary(dest, p, sources, count, 4, False, n)
    if L.attributes >= 0:  # the last sections, position-independent (8-aligned, offsets from 0): copied whole
        memcpy(p, sources[0].batch + L.attributes, L.end - L.attributes)
        p += L.end - L.attributes
    memcpy(&h, sources[0].batch, HEADER_SIZE)  # (its base offset too: the stored batch's, which the records'
    h.version = FORMAT_VERSION_3               # places in it count from)
    h.flags = h.flags | FLAG_OFFSETS
    h.first_timestamp = read_i64(dest + HEADER_SIZE + 8 * n)
    h.max_timestamp = max_ts
    h.record_count = <int32_t>n
    h.body_length = <uint32_t>(p - dest - HEADER_SIZE)
    h.crc = 0
    memcpy(dest, &h, HEADER_SIZE)
    h.crc = seglog_crc32c(0, dest + CRC_START, (p - dest) - CRC_START)
    memcpy(dest + 8, &h.crc, 4)
    return p - dest


def selected_records(buffer, Py_ssize_t position, const int64_t[::1] rows) -> bytes:
    """Records `rows` (ascending record indexes) of the sound batch at `position` as one compacted batch
    (format version 3: each record keeps its offset in an offsets column; docs/FORMAT.md)."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout layout
    cdef const uint8_t *batch = located_batch(view, position, &layout)
    cdef Py_ssize_t n = rows.shape[0], k, size
    if n == 0:
        raise ValueError("no records selected: a batch holds at least one")
    for k in range(n):
        if not 0 <= rows[k] < layout.count or (k and rows[k] <= rows[k - 1]):
            raise ValueError(f"rows must be ascending record indexes of the batch's {layout.count}")
    cdef Selection selection
    selection.batch, selection.layout, selection.rows, selection.n = batch, layout, &rows[0], n
    size = selection_size(&selection, 1)
    out = bytearray(size)
    cdef uint8_t[::1] dest = out
    with nogil:
        size = encode_selection(&dest[0], &selection, 1)
    return bytes(out[:size])


# ---------------------------------------------------------------------------------------------------------
# Decoding: where each column sits. Every section stays inside the batch, or the batch is reported corrupt.

cdef inline Py_ssize_t binary_section(const uint8_t *batch, Py_ssize_t p, Py_ssize_t n, Py_ssize_t length,
                                      Py_ssize_t *offsets_at, Py_ssize_t *data_at) noexcept nogil:
    """Locate an offsets + data section at p; returns the position after it, or -1 if it overruns."""
    cdef int32_t data_length
    if p + 4 * (n + 1) > length:
        return -1
    offsets_at[0] = p
    data_length = read_i32(batch + p + 4 * n)
    if read_i32(batch + p) != 0 or data_length < 0:
        return -1
    p += align8(4 * (n + 1))
    data_at[0] = p
    p += align8(data_length)
    return p if p <= length else -1


cdef const uint8_t *located_batch(const uint8_t[::1] view, Py_ssize_t position, BatchLayout *L) except NULL:
    """The batch at `position` of `view` (a segment, a compacted view), its layout computed into `L`;
    ValueError if no batch whose sections fit its length is there."""
    cdef BatchHeader h
    if position < 0 or position + HEADER_SIZE > view.shape[0]:
        raise ValueError(f"no batch header at position {position}")
    memcpy(&h, &view[position], HEADER_SIZE)
    if position + HEADER_SIZE + <Py_ssize_t>h.body_length > view.shape[0] or \
            compute_layout(&view[position], HEADER_SIZE + h.body_length, L) != 0:
        raise ValueError(f"batch at position {position}: column sections do not fit its length")
    return &view[position]


cdef int compute_layout(const uint8_t *batch, Py_ssize_t length, BatchLayout *out) noexcept nogil:
    """Fill `out` for the batch at `batch` (header included, `length` bytes). 0 on success, -1 if the
    sections do not fit the batch, or its version and flags are not valid (a batch written by seglog never
    fails this; a damaged one whose CRC was not checked may)."""
    cdef BatchHeader h
    cdef Py_ssize_t n, p = HEADER_SIZE
    memcpy(&h, batch, HEADER_SIZE)
    n = h.record_count
    out.count = n
    out.flags = h.flags
    out.offsets = out.event_times = out.key_validity = out.key_offsets = out.key_data = out.value_validity = -1
    out.property_entries = out.property_key_offsets = out.property_key_data = -1
    out.property_value_offsets = out.property_value_data = -1
    out.ordering_key_validity = out.ordering_key_offsets = out.ordering_key_data = -1
    out.attributes = out.attribute_key_offsets = out.attribute_key_data = -1
    out.attribute_value_offsets = out.attribute_value_data = -1
    out.property_entry_count = out.attribute_count = 0
    if n <= 0 or not known_version(h.version) or not flags_valid(h.version, h.flags):
        return -1
    if h.flags & FLAG_OFFSETS:
        if p + 8 * n > length or read_i64(batch + p) < h.base_offset:
            return -1
        out.offsets = p
        p += 8 * n
    out.timestamps = p
    p += 8 * n
    if h.flags & FLAG_EVENT_TIME_COLUMN:
        out.event_times = p
        p += 8 * n
    if h.flags & FLAG_HAS_KEYS:
        if h.flags & FLAG_KEY_NULLS:
            out.key_validity = p
            p += align8((n + 7) // 8)
        p = binary_section(batch, p, n, length, &out.key_offsets, &out.key_data)
        if p < 0:
            return -1
    if h.flags & FLAG_VALUE_NULLS:
        out.value_validity = p
        p += align8((n + 7) // 8)
    p = binary_section(batch, p, n, length, &out.value_offsets, &out.value_data)
    if p < 0:
        return -1
    if h.flags & FLAG_HAS_PROPERTIES:
        if p + 4 * (n + 1) > length:
            return -1
        out.property_entries = p
        out.property_entry_count = read_i32(batch + p + 4 * n)
        if out.property_entry_count < 0:
            return -1
        p += align8(4 * (n + 1))
        p = binary_section(batch, p, out.property_entry_count, length, &out.property_key_offsets,
                           &out.property_key_data)
        if p < 0:
            return -1
        p = binary_section(batch, p, out.property_entry_count, length, &out.property_value_offsets,
                           &out.property_value_data)
        if p < 0:
            return -1
    if h.flags & FLAG_ORDERING_KEYS:
        if h.flags & FLAG_ORDERING_KEY_NULLS:
            out.ordering_key_validity = p
            p += align8((n + 7) // 8)
        p = binary_section(batch, p, n, length, &out.ordering_key_offsets, &out.ordering_key_data)
        if p < 0:
            return -1
    if h.flags & FLAG_BATCH_ATTRIBUTES:
        if p + 8 > length:
            return -1
        out.attributes = p
        out.attribute_count = read_i32(batch + p)
        if out.attribute_count < 0:
            return -1
        p += 8
        p = binary_section(batch, p, out.attribute_count, length, &out.attribute_key_offsets,
                           &out.attribute_key_data)
        if p < 0:
            return -1
        p = binary_section(batch, p, out.attribute_count, length, &out.attribute_value_offsets,
                           &out.attribute_value_data)
        if p < 0:
            return -1
    out.end = p
    return 0 if p == length else -1


def value_span_size(buffer, Py_ssize_t position, Py_ssize_t first, Py_ssize_t stop) -> int:
    """The bytes of the values of records [first, stop) of the batch at `position` of `buffer` (a null value
    has none): what stats count as the messages' size."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout L
    cdef const uint8_t *batch = located_batch(view, position, &L)
    if not 0 <= first <= stop <= L.count:
        raise ValueError(f"records [{first}, {stop}) outside the batch's {L.count}")
    return values_span(batch, &L, first, stop)


def values_size(buffer, Py_ssize_t position, const int64_t[::1] rows) -> int:
    """value_span_size of records `rows` (indexes in the batch, ascending), one look at the batch's layout
    whatever their number."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout L
    cdef const uint8_t *batch = located_batch(view, position, &L)
    cdef Py_ssize_t i, n = rows.shape[0], total = 0
    if n == 0:
        return 0
    if rows[0] < 0 or rows[n - 1] >= L.count:
        raise ValueError(f"records {rows[0]} to {rows[n - 1]} outside the batch's {L.count}")
    if rows[n - 1] - rows[0] + 1 == n:
        return values_span(batch, &L, rows[0], rows[n - 1] + 1)
    for i in range(n):
        total += value_size(batch, &L, rows[i])
    return total


def batch_layout(buffer, Py_ssize_t position) -> dict:
    """The column positions of the batch at `position`, relative to `position` (-1: section absent).
    Raises ValueError if the sections do not fit the batch's length."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout layout
    located_batch(view, position, &layout)
    return layout
