# Declarations shared by seglog's Cython kernels: the C layer and the record-batch header (docs/FORMAT.md).
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from "native.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const void *data, size_t length)
    uint32_t seglog_crc32c_software(uint32_t crc, const void *data, size_t length)
    int seglog_crc32c_hardware_available()
    int seglog_crc32c_tier_count()
    const char *seglog_crc32c_tier_name(int tier)
    int seglog_crc32c_tier_available(int tier)
    int seglog_crc32c_selected_tier()
    uint32_t seglog_crc32c_tier(int tier, uint32_t crc, const void *data, size_t length)
    int32_t seglog_murmur2(const void *data, size_t length)
    void seglog_release_fence()
    void seglog_acquire_fence()
    int seglog_populate_write(void *address, size_t length)
    ctypedef struct seglog_prefaulter:
        pass
    seglog_prefaulter *seglog_prefaulter_new(size_t ahead, size_t step)
    void seglog_prefaulter_target(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start)
    void seglog_prefaulter_spare(seglog_prefaulter *p, uint8_t *base, size_t length)
    void seglog_prefaulter_unmap(seglog_prefaulter *p, void *address, size_t length)
    void seglog_prefaulter_release(seglog_prefaulter *p, uint8_t *base)
    void seglog_prefaulter_advance(seglog_prefaulter *p, size_t position)
    void seglog_prefaulter_free(seglog_prefaulter *p)


cdef enum:
    HEADER_SIZE = 64
    CRC_START = 12          # the CRC covers every byte after itself
    FORMAT_VERSION_1 = 1
    FORMAT_VERSION_2 = 2    # a batch is written as version 2 when it has a section of version 2
    FORMAT_VERSION_3 = 3    # compacted batches only: an explicit offsets column, the offsets with gaps
    MAGIC = 0x424C4753      # b"SGLB" read as a little-endian uint32

    FLAG_HAS_KEYS = 1 << 0
    FLAG_KEY_NULLS = 1 << 1
    FLAG_HAS_PROPERTIES = 1 << 2
    FLAG_EVENT_TIME_COLUMN = 1 << 3
    FLAG_EVENT_TIME_IS_TIMESTAMP = 1 << 4
    FLAG_VALUE_NULLS = 1 << 5              # version 2
    FLAG_ORDERING_KEYS = 1 << 6            # version 2
    FLAG_ORDERING_KEY_NULLS = 1 << 7       # version 2, only with FLAG_ORDERING_KEYS
    FLAG_LOG_APPEND_TIME = 1 << 8
    FLAG_BATCH_ATTRIBUTES = 1 << 9         # version 2
    FLAG_OFFSETS = 1 << 10                 # version 3
    KNOWN_FLAGS_V1 = 0x11F
    VERSION_2_FLAGS_MASK = 0x2E0
    KNOWN_FLAGS_V2 = 0x3FF
    VERSION_3_FLAGS_MASK = 0x400
    KNOWN_FLAGS_V3 = 0x7FF


# The fixed header, in file order; every field little-endian (docs/FORMAT.md).
cdef packed struct BatchHeader:
    uint32_t magic
    uint16_t version
    uint16_t header_size
    uint32_t crc
    uint32_t flags
    int64_t base_offset
    int64_t first_timestamp
    int64_t max_timestamp
    int32_t record_count
    uint32_t body_length
    uint64_t origin_cluster
    int64_t origin_base_offset


cdef inline Py_ssize_t align8(Py_ssize_t n) noexcept nogil:
    return (n + 7) & ~(<Py_ssize_t>7)


# One binary column (values, keys, property keys or values) of a batch being encoded, whatever its source:
# a list of bytes objects (sizes summed under the GIL), Arrow-style offsets plus data, or fixed-width
# records. `prefix[i]` is the byte position of record i in the concatenated data, so any record range
# [start, stop) has a size in O(1) and can be copied without the GIL.
cdef struct RawColumn:
    Py_ssize_t count
    const uint8_t *data            # offsets or fixed-width kinds: the concatenated data
    const int64_t *prefix64        # count + 1 positions (list and int64-offset kinds)
    const int32_t *prefix32        # count + 1 positions (int32-offset kinds)
    Py_ssize_t width               # fixed-width kind: bytes per record, else 0
    PyObject **items               # list kind: the items of a list of bytes no one else holds (see item_data)
    const uint8_t *validity        # Arrow-order bitmap, 1 = present; NULL = all present


cdef extern from "Python.h":
    char *bytes_data "PyBytes_AS_STRING" (PyObject *item) nogil


# The batch format's little-endian integers, read from a byte position that need not be aligned.
cdef inline int32_t read_i32(const uint8_t *p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)
    return v


cdef inline int64_t read_i64(const uint8_t *p) noexcept nogil:
    cdef int64_t v
    memcpy(&v, p, 8)
    return v


cdef inline const uint8_t *item_data(const RawColumn *c, Py_ssize_t i) noexcept nogil:
    """The data of item i of a list-kind column: pointer arithmetic on a bytes object, safe without the GIL
    because the column's private list keeps the object alive and no one else can replace it."""
    return <const uint8_t *>bytes_data(c.items[i])


cdef struct BatchColumns:
    Py_ssize_t count
    const int64_t *timestamps      # NULL: every record has constant_timestamp (the append time)
    int64_t constant_timestamp
    const int64_t *event_times     # NULL unless FLAG_EVENT_TIME_COLUMN
    uint32_t flags
    RawColumn values               # values.validity set when FLAG_VALUE_NULLS
    RawColumn keys                 # used when flags has FLAG_HAS_KEYS
    const int64_t *property_entries  # count + 1 entry positions, when FLAG_HAS_PROPERTIES
    RawColumn property_keys
    RawColumn property_values
    RawColumn ordering_keys        # used when flags has FLAG_ORDERING_KEYS
    RawColumn attribute_keys       # the batch's attributes, when FLAG_BATCH_ATTRIBUTES: one map written
    RawColumn attribute_values     # whole into every batch encoded from these columns


cdef Py_ssize_t encoded_batch_size(const BatchColumns *columns, Py_ssize_t start, Py_ssize_t stop) noexcept nogil
cdef Py_ssize_t encode_batch(uint8_t *dest, const BatchColumns *columns, Py_ssize_t start, Py_ssize_t stop,
                             int64_t base_offset, uint64_t origin_cluster, int64_t origin_base_offset) noexcept nogil
cdef Py_ssize_t fit_records(const BatchColumns *columns, Py_ssize_t start, Py_ssize_t space) noexcept nogil


# Where each column of a batch starts, relative to the batch's first byte (docs/FORMAT.md, "Body").
# Sections a batch does not have are -1. Data lengths come from the last entry of each offsets section.
cdef struct BatchLayout:
    Py_ssize_t count
    uint32_t flags
    Py_ssize_t offsets                 # version 3's offsets column, -1 without FLAG_OFFSETS
    Py_ssize_t timestamps
    Py_ssize_t event_times
    Py_ssize_t key_validity
    Py_ssize_t key_offsets
    Py_ssize_t key_data
    Py_ssize_t value_validity
    Py_ssize_t value_offsets
    Py_ssize_t value_data
    Py_ssize_t property_entries
    Py_ssize_t property_entry_count
    Py_ssize_t property_key_offsets
    Py_ssize_t property_key_data
    Py_ssize_t property_value_offsets
    Py_ssize_t property_value_data
    Py_ssize_t ordering_key_validity
    Py_ssize_t ordering_key_offsets
    Py_ssize_t ordering_key_data
    Py_ssize_t attributes              # the attribute_count section
    Py_ssize_t attribute_count         # its value (0 when the batch has no attributes)
    Py_ssize_t attribute_key_offsets
    Py_ssize_t attribute_key_data
    Py_ssize_t attribute_value_offsets
    Py_ssize_t attribute_value_data
    Py_ssize_t end


cdef int compute_layout(const uint8_t *batch, Py_ssize_t length, BatchLayout *out) noexcept nogil


# The bytes of stored values, from a batch's value offsets (a null value has none): record i's, and records
# [first, stop)'s.
cdef inline Py_ssize_t value_size(const uint8_t *batch, const BatchLayout *L, Py_ssize_t i) noexcept nogil:
    return read_i32(batch + L.value_offsets + 4 * i + 4) - read_i32(batch + L.value_offsets + 4 * i)


cdef inline Py_ssize_t values_span(const uint8_t *batch, const BatchLayout *L, Py_ssize_t first,
                                   Py_ssize_t stop) noexcept nogil:
    return read_i32(batch + L.value_offsets + 4 * stop) - read_i32(batch + L.value_offsets + 4 * first)
cdef const uint8_t *located_batch(const uint8_t[::1] view, Py_ssize_t position, BatchLayout *L) except NULL


# Some records of stored batches (of the same flags and attributes) as one compacted batch (format version 3,
# its offsets column first): `rows`, `n` of them, ascending record indexes of the batch at `batch`.
cdef struct Selection:
    const uint8_t *batch
    BatchLayout layout
    const int64_t *rows
    Py_ssize_t n

cdef Py_ssize_t selection_size(const Selection *sources, Py_ssize_t count) noexcept nogil
cdef Py_ssize_t encode_selection(uint8_t *dest, const Selection *sources, Py_ssize_t count) noexcept nogil


# entry_status (check_entry without Python objects): ENTRY_SOUND is SCAN_END (0), damage a SCAN_* code.
cdef enum:
    C_ENTRY_SOUND = 0
    C_ENTRY_PAST_DATA = -1
    C_ENTRY_DIFFERS = -2

cdef int entry_status(const uint8_t *data, Py_ssize_t size, Py_ssize_t start, Py_ssize_t end,
                      int64_t base_offset, int64_t count, bint verify_crc) noexcept nogil


cdef class Prefaulter:
    cdef seglog_prefaulter *native
    cdef uint8_t[::1] mapping
    cdef uint8_t[::1] spare
