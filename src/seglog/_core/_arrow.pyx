# cython: freethreading_compatible=False
"""A stored record batch as a pyarrow.RecordBatch over the segment's own memory (zero copy).

One C walk fills the structs of the Arrow C Data Interface (https://arrow.apache.org/docs/format/
CDataInterface.html) and one pyarrow call imports them. Built from pyarrow's Python constructors
(from_buffers per column, nulls, from_arrays) the same batch cost about 25 µs, most of read_batch()'s time
at 1,000 messages a batch; this is a few µs. The batch holds a buffer export of the map, so the map stays
mapped (and its file's pages valid) until the last array that points into it is gone."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from seglog._core._format cimport (BatchHeader, BatchLayout, C_ENTRY_SOUND, HEADER_SIZE, compute_layout,
                                   entry_status)
from seglog._core._index cimport IndexView

import pyarrow as pa

PROPERTIES_TYPE = pa.map_(pa.string(), pa.string())
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
SCHEMA = pa.schema([
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", TIMESTAMP_TYPE, nullable=False),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),  # null where a message has a null value (format version 2)
    pa.field("properties", PROPERTIES_TYPE),
])
cdef object _import_batch = pa.RecordBatch._import_from_c


cdef struct ArrowArray:  # the C Data Interface's struct, field for field
    int64_t length
    int64_t null_count
    int64_t offset
    int64_t n_buffers
    int64_t n_children
    const void **buffers
    ArrowArray **children
    ArrowArray *dictionary
    void (*release)(ArrowArray *) noexcept nogil
    void *private_data


cdef enum:
    # The arrays below the root: offset, timestamp, key, value, properties, the properties' entries (a
    # struct) and its key and value strings. Buffers: 2 + 2 + 3 + 3 + 2 + 1 + 3 + 3, and the root's one.
    CHILDREN = 8
    BUFFERS = 20


# Everything one imported batch owns, in one allocation, followed by its offset column (int64[n]).
cdef struct StoredBatch:
    Py_ssize_t size  # of the allocation
    Py_buffer view  # the export that keeps the map mapped
    ArrowArray arrays[CHILDREN]
    ArrowArray *columns[5]
    ArrowArray *map_entries[1]
    ArrowArray *entry_fields[2]
    const void *buffers[BUFFERS]


# All-null columns (a batch without keys or properties) point their validity and offsets here: zeros
# shared by every batch. When a longer batch needs more, a larger area replaces it and the old one is kept
# (batches still point into it): they add up to less than twice the largest, and calloc maps that much
# untouched, so it costs address space, not memory.
cdef const uint8_t *_zeros = NULL
cdef Py_ssize_t _zeros_size = 0


cdef const uint8_t *zeros(Py_ssize_t size) except NULL:
    global _zeros, _zeros_size
    if size > _zeros_size:
        size = max(size, 2 * _zeros_size, 1 << 16)
        fresh = <const uint8_t *>calloc(size, 1)
        if fresh == NULL:
            raise MemoryError()
        _zeros, _zeros_size = fresh, size
    return _zeros


# A few allocations of released batches, reused by the next ones: a reader releases each batch before it
# reads the next, and malloc and free of these sizes cost as much as filling the structs (above 128 KiB, a
# 16k-message batch, malloc maps fresh pages each time). Touched only with the GIL held.
cdef enum:
    KEPT_ALLOCATIONS = 4
    KEPT_MAX_BYTES = 1 << 20
cdef StoredBatch *_kept[KEPT_ALLOCATIONS]
cdef int _kept_count = 0


cdef StoredBatch *allocate(Py_ssize_t size) except NULL:
    """A StoredBatch of at least `size` bytes: a kept one if one is large enough."""
    global _kept_count
    cdef StoredBatch *stored
    cdef int i
    for i in range(_kept_count):
        if _kept[i].size >= size:
            stored = _kept[i]
            _kept_count -= 1
            _kept[i] = _kept[_kept_count]
            return stored
    stored = <StoredBatch *>malloc(size)
    if stored == NULL:
        raise MemoryError()
    stored.size = size
    return stored


cdef void keep_or_free(StoredBatch *stored) noexcept:
    global _kept_count
    if _kept_count < KEPT_ALLOCATIONS and stored.size <= KEPT_MAX_BYTES:
        _kept[_kept_count] = stored
        _kept_count += 1
    else:
        free(stored)


cdef void release_batch(ArrowArray *root) noexcept nogil:
    """The root's release callback: pyarrow calls it once no array of the batch is referenced, from any
    thread, holding the GIL or not."""
    cdef StoredBatch *stored = <StoredBatch *>root.private_data
    with gil:
        PyBuffer_Release(&stored.view)
        keep_or_free(stored)
    root.release = NULL


cdef void release_child(ArrowArray *array) noexcept nogil:
    array.release = NULL  # its memory is the root's, freed with it


# Hands out the arrays and buffer slots of a StoredBatch in order.
cdef struct Filler:
    StoredBatch *stored
    int arrays
    int buffers


cdef ArrowArray *next_array(Filler *f, int64_t length, int64_t null_count, int n_buffers, int n_children,
                            ArrowArray **children) noexcept nogil:
    cdef ArrowArray *a = &f.stored.arrays[f.arrays]
    f.arrays += 1
    a.length = length
    a.null_count = null_count
    a.offset = 0
    a.n_buffers = n_buffers
    a.n_children = n_children
    a.buffers = &f.stored.buffers[f.buffers]
    f.buffers += n_buffers
    a.children = children
    a.dictionary = NULL
    a.release = release_child
    a.private_data = NULL
    return a


cdef ArrowArray *binary_array(Filler *f, int64_t length, int64_t null_count, const void *validity,
                              const void *offsets, const void *data) noexcept nogil:
    """A binary or string array: validity (NULL: no nulls), int32 offsets, data."""
    cdef ArrowArray *a = next_array(f, length, null_count, 3, 0, NULL)
    a.buffers[0] = validity
    a.buffers[1] = offsets
    a.buffers[2] = data
    return a


cdef ArrowArray *fixed_array(Filler *f, int64_t length, const void *values) noexcept nogil:
    """An int64 or timestamp array without nulls."""
    cdef ArrowArray *a = next_array(f, length, 0, 2, 0, NULL)
    a.buffers[0] = NULL
    a.buffers[1] = values
    return a


cdef void fill_keys(Filler *f, const uint8_t *batch, const BatchLayout *layout, const uint8_t *zeroed) noexcept nogil:
    cdef int64_t n = layout.count
    if layout.key_offsets < 0:  # no keys: every one null
        f.stored.columns[2] = binary_array(f, n, n, zeroed, zeroed, zeroed)
    elif layout.key_validity < 0:
        f.stored.columns[2] = binary_array(f, n, 0, NULL, batch + layout.key_offsets, batch + layout.key_data)
    else:  # -1: pyarrow counts the nulls when asked
        f.stored.columns[2] = binary_array(f, n, -1, batch + layout.key_validity, batch + layout.key_offsets,
                                           batch + layout.key_data)


cdef void fill_properties(Filler *f, const uint8_t *batch, const BatchLayout *layout,
                          const uint8_t *zeroed) noexcept nogil:
    """A map<string, string> column: each record's map (empty when it has none) if the batch has properties,
    else every record null over zeroed memory and an empty entries array."""
    cdef StoredBatch *s = f.stored
    cdef int64_t n = layout.count, m = layout.property_entry_count
    cdef ArrowArray *properties
    if layout.property_entries >= 0:
        s.entry_fields[0] = binary_array(f, m, 0, NULL, batch + layout.property_key_offsets,
                                         batch + layout.property_key_data)
        s.entry_fields[1] = binary_array(f, m, 0, NULL, batch + layout.property_value_offsets,
                                         batch + layout.property_value_data)
        properties = next_array(f, n, 0, 2, 1, s.map_entries)
        properties.buffers[0] = NULL
        properties.buffers[1] = batch + layout.property_entries
    else:
        s.entry_fields[0] = binary_array(f, 0, 0, NULL, zeroed, zeroed)
        s.entry_fields[1] = binary_array(f, 0, 0, NULL, zeroed, zeroed)
        properties = next_array(f, n, n, 2, 1, s.map_entries)
        properties.buffers[0] = zeroed
        properties.buffers[1] = zeroed
    s.map_entries[0] = next_array(f, m if layout.property_entries >= 0 else 0, 0, 1, 2, s.entry_fields)
    s.map_entries[0].buffers[0] = NULL
    s.columns[4] = properties


cdef void fill_batch(StoredBatch *s, const uint8_t *batch, const BatchLayout *layout, const int64_t *offsets,
                     const uint8_t *zeroed, ArrowArray *root) noexcept nogil:
    cdef Filler f
    cdef int64_t n = layout.count
    f.stored, f.arrays, f.buffers = s, 0, 0
    s.columns[0] = fixed_array(&f, n, offsets)
    s.columns[1] = fixed_array(&f, n, batch + layout.timestamps)
    fill_keys(&f, batch, layout, zeroed)
    if layout.value_validity < 0:
        s.columns[3] = binary_array(&f, n, 0, NULL, batch + layout.value_offsets, batch + layout.value_data)
    else:  # null values: the batch's own bitmap, pyarrow counts the nulls when asked
        s.columns[3] = binary_array(&f, n, -1, batch + layout.value_validity, batch + layout.value_offsets,
                                    batch + layout.value_data)
    fill_properties(&f, batch, layout, zeroed)
    root.length = n
    root.null_count = 0
    root.offset = 0
    root.n_buffers = 1
    root.n_children = 5
    root.buffers = &s.buffers[f.buffers]
    root.buffers[0] = NULL
    root.children = s.columns
    root.dictionary = NULL
    root.release = release_batch
    root.private_data = s


cdef const uint8_t *locate(const Py_buffer *view, Py_ssize_t position, BatchHeader *h,
                           BatchLayout *layout) except NULL:
    cdef const uint8_t *data = <const uint8_t *>view.buf
    if position < 0 or position + HEADER_SIZE > view.len:
        raise ValueError(f"no batch header at position {position}")
    memcpy(h, data + position, HEADER_SIZE)
    if h.record_count <= 0:
        raise ValueError(f"batch at position {position}: no records")
    if position + HEADER_SIZE + <Py_ssize_t>h.body_length > view.len or \
            compute_layout(data + position, HEADER_SIZE + h.body_length, layout) != 0:
        raise ValueError(f"batch at position {position}: column sections do not fit its length")
    return data + position


def record_batch(buffer, Py_ssize_t position):
    """The batch at `position` of `buffer` (a segment's map, or any bytes-like object holding batches) as a
    RecordBatch of SCHEMA: `offset` computed from the base offset (a compacted batch's own offsets column),
    `timestamp`, `key`, `value` (its validity
    bitmap too, when the batch has null values) and `properties` the batch's own sections. Ordering keys
    and batch attributes are not columns (docs/FORMAT.md): Message objects and Reader.batch_infos have them. ValueError if its sections do not fit its length. The caller
    has checked the batch (its header against the index, its CRC when asked)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    return import_batch(&view, position)


def indexed_batch(data, IndexView index, Py_ssize_t entry, bint verify_crc):
    """record_batch of index entry `entry` of a segment whose log is mapped as `data`, checked as
    _format.check_entry checks it, when nothing stands in the way: the entry is published, its batch lies
    inside the map and is sound as the entry names it. None otherwise, and SegmentView.batch_at then does
    what is needed (maps the log again), or says what is wrong. The reader's way on to the next batch, in
    one call."""
    cdef Py_buffer view
    cdef int64_t base, next_offset, start, end
    if not 0 <= entry < index.count:
        return None
    base, start = index.base_offset, 0
    if entry:
        base, start = index.offsets[entry - 1, 0], index.offsets[entry - 1, 1]
    next_offset, end = index.offsets[entry, 0], index.offsets[entry, 1]
    if data is None:
        return None
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    if entry_status(<const uint8_t *>view.buf, view.len, start, end, base, next_offset - base,
                    verify_crc) != C_ENTRY_SOUND:
        PyBuffer_Release(&view)
        return None
    return import_batch(&view, start)


cdef object import_batch(Py_buffer *view, Py_ssize_t position):
    """The RecordBatch of the batch at `position` of `view`, which it takes over (released with the batch,
    or here on an error)."""
    cdef BatchHeader h
    cdef BatchLayout layout
    cdef ArrowArray root
    cdef StoredBatch *stored
    cdef const uint8_t *batch
    cdef const uint8_t *zeroed
    cdef int64_t *offsets
    cdef Py_ssize_t i
    try:
        batch = locate(view, position, &h, &layout)
        zeroed = zeros(4 * (layout.count + 1))  # null keys and properties: validity and offsets
        stored = allocate(sizeof(StoredBatch) + 8 * layout.count)
    except BaseException:
        PyBuffer_Release(view)
        raise
    stored.view = view[0]  # moved: released once, with the batch
    if layout.offsets >= 0:  # a compacted batch: its own column, the offsets with gaps
        fill_batch(stored, batch, &layout, <const int64_t *>(batch + layout.offsets), zeroed, &root)
    else:
        offsets = <int64_t *>(stored + 1)
        for i in range(layout.count):
            offsets[i] = h.base_offset + i
        fill_batch(stored, batch, &layout, offsets, zeroed, &root)
    try:
        return _import_batch(<uintptr_t>&root, SCHEMA)
    finally:
        if root.release != NULL:  # pyarrow did not take it (an error): it marks the struct released if it did
            root.release(&root)
