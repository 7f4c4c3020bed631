"""Batch sources for `send_batch`: the columns of one call, normalised for the shared encoder.

A list of bytes is walked once under the GIL to sum its sizes; Arrow arrays and numpy fixed-width records
are used in place. Either way the copy into the segment happens once, without the GIL."""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_GET_SIZE, PyBytes_Check
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.sequence cimport PySequence_Fast_ITEMS
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset

from seglog._core._format cimport (BatchColumns, BatchHeader, BatchLayout, RawColumn, Prefaulter, compute_layout,
                                   encode_batch, encoded_batch_size, fit_records, item_data, seglog_murmur2,
                                   seglog_prefaulter_advance, values_span,
                                   FLAG_HAS_KEYS, FLAG_KEY_NULLS, FLAG_HAS_PROPERTIES, FLAG_EVENT_TIME_COLUMN,
                                   FLAG_VALUE_NULLS, FLAG_ORDERING_KEYS, FLAG_ORDERING_KEY_NULLS,
                                   FLAG_BATCH_ATTRIBUTES, VERSION_2_FLAGS_MASK)
from seglog._core._index cimport IndexView

cimport numpy as cnp
import numpy as np

from seglog.errors import InvalidArgumentError, not_utf8

cnp.import_array()


cdef class Column:
    """One binary column: the raw description the encoder reads plus the objects that own its memory."""

    def __cinit__(self):
        memset(&self.raw, 0, sizeof(RawColumn))

    def __dealloc__(self):
        free(self.prefix_owned)

    @property
    def count(self) -> int:
        return self.raw.count

    @staticmethod
    def from_list(list items, str argument, bint allow_null=False):
        """A column over a list of bytes (str is encoded as UTF-8; None allowed only if `allow_null`).
        Raises a ValueError naming `argument` and the position of the first item it cannot take."""
        cdef Column column = Column()
        cdef Py_ssize_t i, n = PyList_GET_SIZE(items)
        cdef object item
        cdef object present = None  # bool per record, made on the first None only
        column.owners = items = list(items)  # a private copy, so a caller's later mutation cannot race the copy
        column.prefix_owned = <int64_t *>malloc(8 * (n + 1))
        if column.prefix_owned == NULL:
            raise MemoryError()
        column.prefix_owned[0] = 0
        for i in range(n):
            item = <object>PyList_GET_ITEM(items, i)
            if not PyBytes_Check(item):
                item = _as_bytes(item, argument, i, allow_null)
                if item is None:
                    if present is None:
                        present = np.ones(n, dtype=bool)
                    present[i] = False
                    item = b""
                items[i] = item
            column.prefix_owned[i + 1] = column.prefix_owned[i] + PyBytes_GET_SIZE(item)
        if column.prefix_owned[n] >= 2**31:
            raise _too_large(argument, column.prefix_owned[n])
        column.raw.count = n
        column.raw.prefix64 = column.prefix_owned
        column.raw.items = PySequence_Fast_ITEMS(items)  # the list is never resized from here on
        if present is not None:
            column.set_validity(np.packbits(present, bitorder="little"))
        return column

    @staticmethod
    def from_offsets(offsets, data, str argument, validity=None):
        """A column over Arrow-style offsets (int32 or int64, count + 1 entries) and a data buffer."""
        cdef Column column = Column()
        offsets = np.ascontiguousarray(offsets)
        if offsets.dtype != np.int32 and offsets.dtype != np.int64:
            raise TypeError(f"{argument}: offsets must be int32 or int64, not {offsets.dtype}")
        column._over_offsets(offsets, np.frombuffer(data, dtype=np.uint8), argument,
                             None if validity is None else np.ascontiguousarray(validity, dtype=np.uint8))
        return column

    cdef int _over_offsets(self, object offsets, object data, str argument, object validity) except -1:
        """Point at `offsets` (a 1-d C-contiguous int32 or int64 array), `data` and `validity` (1-d
        C-contiguous uint8 arrays; validity None for all present), which it keeps."""
        cdef cnp.ndarray o = offsets, d = data
        cdef Py_ssize_t count = cnp.PyArray_DIM(o, 0) - 1, size
        if cnp.PyArray_NDIM(o) != 1 or count < 0:
            raise ValueError(f"{argument}: offsets must be one dimension of count + 1 positions")
        if cnp.PyArray_TYPE(o) == cnp.NPY_INT64:
            self.raw.prefix64 = <const int64_t *>cnp.PyArray_DATA(o)
            size = self.raw.prefix64[count] - self.raw.prefix64[0]
        else:
            self.raw.prefix32 = <const int32_t *>cnp.PyArray_DATA(o)
            size = self.raw.prefix32[count] - self.raw.prefix32[0]
        if size >= 2**31:
            raise _too_large(argument, size)
        self.raw.count = count
        self.raw.data = <const uint8_t *>cnp.PyArray_DATA(d) if cnp.PyArray_SIZE(d) else <const uint8_t *>b""
        self.owners = (offsets, data, validity)
        if validity is not None:
            self.raw.validity = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>validity)
        return 0

    @staticmethod
    def from_fixed(data, Py_ssize_t width, Py_ssize_t count, str argument):
        """A column of `count` records of `width` bytes each, stored back to back in `data`."""
        cdef Column column = Column()
        cdef const uint8_t[::1] d = data
        if width <= 0:
            raise InvalidArgumentError(argument, "records of 0 bytes", "records at least 1 byte wide")
        if width * count >= 2**31:
            raise _too_large(argument, width * count)
        column.raw.count = count
        column.raw.width = width
        column.raw.data = &d[0] if d.shape[0] else <const uint8_t *>b""
        column.owners = data
        return column

    def set_validity(self, bitmap):
        """Attach an Arrow-order validity bitmap (bit i set = record i present)."""
        cdef const uint8_t[::1] v = np.ascontiguousarray(bitmap, dtype=np.uint8)
        self.owners = (self.owners, v)
        self.raw.validity = &v[0]


cdef object _as_bytes(object item, str argument, Py_ssize_t index, bint allow_null):
    if item is None:
        if allow_null:
            return None
        raise InvalidArgumentError(f"{argument}[{index}]", None, "bytes, bytearray, memoryview or str",
                                   "only keys, values and ordering keys may be None")
    if isinstance(item, str):
        try:
            return (<str>item).encode()
        except UnicodeEncodeError as error:
            raise not_utf8(f"{argument}[{index}]", error) from None
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise InvalidArgumentError(f"{argument}[{index}]", type(item).__name__,
                               "bytes, bytearray, memoryview, str" + (" or None" if allow_null else ""))


cdef object _int64s(object data):
    """`data` as a 1-d C-contiguous int64 array (None stays None)."""
    if data is None:
        return None
    array = np.ascontiguousarray(data, dtype=np.int64)
    if cnp.PyArray_NDIM(<cnp.ndarray>array) != 1:
        raise ValueError(f"expected one dimension of int64, not {cnp.PyArray_NDIM(<cnp.ndarray>array)}")
    return array


cdef inline Py_ssize_t _length(object array):
    return cnp.PyArray_DIM(<cnp.ndarray>array, 0)


cdef Column offsets_column(object offsets, object data, str argument, object validity):
    cdef Column column = Column.__new__(Column)
    column._over_offsets(offsets, data, argument, validity)
    return column


cdef BatchSource batch_source(Column values, Column keys, object timestamps, object event_times, unsigned int flags,
                              int64_t now, object property_entries, Column property_keys, Column property_values,
                              Column ordering_keys, Column attribute_keys, Column attribute_values):
    cdef BatchSource source = BatchSource.__new__(BatchSource)
    source._fill(values, keys, timestamps, event_times, flags, now, property_entries, property_keys,
                 property_values, ordering_keys, attribute_keys, attribute_values)
    return source


def _too_large(str argument, Py_ssize_t size):
    return InvalidArgumentError(argument, f"{size} bytes", "at most 2 GiB - 1 bytes of data per send_batch "
                                "call (split the call)")


cdef class BatchSource:
    """The columns of one send_batch call. `write` encodes records [start, stop) into a writable buffer,
    `append_to` as the next batch of a segment."""

    def __init__(self, Column values, Column keys, timestamps, event_times, unsigned int flags, int64_t now=0,
                 property_entries=None, Column property_keys=None, Column property_values=None,
                 Column ordering_keys=None, Column attribute_keys=None, Column attribute_values=None):
        """timestamps: one int64 per value, or None for `now` on every one (no array made). A null value
        (values with a validity bitmap) or ordering keys make a batch of format version 2, and so do
        attributes: attribute_keys and attribute_values, one item per attribute, the batch's map written
        whole into every batch encoded from this source; none when they hold no item."""
        self._fill(values, keys, _int64s(timestamps), _int64s(event_times), flags, now, _int64s(property_entries),
                   property_keys, property_values, ordering_keys, attribute_keys, attribute_values)

    cdef int _fill(self, Column values, Column keys, object timestamps, object event_times, unsigned int flags,
                   int64_t now, object property_entries, Column property_keys, Column property_values,
                   Column ordering_keys, Column attribute_keys, Column attribute_values) except -1:
        """__init__'s, given the int64 arrays 1-d and C-contiguous (or None)."""
        cdef Py_ssize_t n = values.raw.count
        memset(&self.columns, 0, sizeof(BatchColumns))
        self.values = values
        self.columns.count = n
        self.columns.values = values.raw
        self.columns.constant_timestamp = now
        self.owners = (timestamps, event_times, property_entries)
        if values.raw.validity != NULL:
            flags |= FLAG_VALUE_NULLS
        if timestamps is not None:
            if _length(timestamps) != n:
                raise ValueError(f"timestamps: {_length(timestamps)} given for {n} values; one per value is "
                                 "required")
            self.columns.timestamps = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>timestamps) if n else NULL
        if keys is not None:
            if keys.raw.count != n:
                raise ValueError(f"keys: {keys.raw.count} given for {n} values; one per value is required")
            self.keys = keys
            self.columns.keys = keys.raw
            flags |= FLAG_HAS_KEYS
            if keys.raw.validity != NULL:
                flags |= FLAG_KEY_NULLS
        if event_times is not None:
            if _length(event_times) != n:
                raise ValueError(f"event_times: {_length(event_times)} given for {n} values; one per value is "
                                 "required")
            self.columns.event_times = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>event_times) if n else NULL
            flags |= FLAG_EVENT_TIME_COLUMN
        if property_entries is not None:
            if _length(property_entries) != n + 1:
                raise ValueError(f"properties: {_length(property_entries) - 1} given for {n} values")
            self.property_keys = property_keys
            self.property_values = property_values
            self.columns.property_entries = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>property_entries)
            self.columns.property_keys = property_keys.raw
            self.columns.property_values = property_values.raw
            flags |= FLAG_HAS_PROPERTIES
        if ordering_keys is not None:
            if ordering_keys.raw.count != n:
                raise ValueError(f"ordering_keys: {ordering_keys.raw.count} given for {n} values; one per value "
                                 "is required")
            self.ordering_keys = ordering_keys
            self.columns.ordering_keys = ordering_keys.raw
            flags |= FLAG_ORDERING_KEYS
            if ordering_keys.raw.validity != NULL:
                flags |= FLAG_ORDERING_KEY_NULLS
        if (attribute_keys is None) != (attribute_values is None) or (
                attribute_keys is not None and attribute_keys.raw.count != attribute_values.raw.count):
            raise ValueError("attributes: one value per attribute key is required")
        if attribute_keys is not None and attribute_keys.raw.count:
            if attribute_keys.raw.validity != NULL or attribute_values.raw.validity != NULL:
                raise ValueError("attributes: keys and values cannot be null")
            self.attribute_keys = attribute_keys
            self.attribute_values = attribute_values
            self.columns.attribute_keys = attribute_keys.raw
            self.columns.attribute_values = attribute_values.raw
            flags |= FLAG_BATCH_ATTRIBUTES
        self.columns.flags = flags

    @property
    def version(self) -> int:
        """The format version its batches are written in: 2 if they have a section of version 2, else 1."""
        return 2 if self.columns.flags & VERSION_2_FLAGS_MASK else 1

    @property
    def count(self) -> int:
        return self.columns.count

    def size(self, Py_ssize_t start, Py_ssize_t stop) -> int:
        """Encoded bytes of records [start, stop) as one batch, header included."""
        return encoded_batch_size(&self.columns, start, stop)

    def fit(self, Py_ssize_t start, Py_ssize_t space) -> int:
        """The largest stop such that records [start, stop) fit in `space` bytes (start if none does)."""
        return fit_records(&self.columns, start, space)

    def write(self, buffer, Py_ssize_t position, int64_t base_offset, Py_ssize_t start, Py_ssize_t stop) -> int:
        """Encode records [start, stop) at `position` of `buffer`; returns the batch length."""
        cdef Py_buffer view
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
        try:
            return self._encode_into(&view, position, base_offset, start, stop)
        finally:
            PyBuffer_Release(&view)

    def append_to(self, data, IndexView index, Prefaulter prefaulter, int64_t base_offset, Py_ssize_t start,
                  Py_ssize_t stop) -> None:
        """Write records [start, stop) as the next batch of a segment, numbered from `base_offset`: encoded at
        its index's end position in its mapped log `data`, then its index entry published (readers see the
        batch from then on), then the prefault thread told how far the writer got."""
        cdef Py_buffer view
        cdef Py_ssize_t position = index.end_position_at(index.count), length
        PyObject_GetBuffer(data, &view, PyBUF_WRITABLE)
        try:
            length = self._encode_into(&view, position, base_offset, start, stop)
            _publish(index, <uint8_t *>view.buf + position, position + length)
        finally:
            PyBuffer_Release(&view)
        if prefaulter.native != NULL:  # (NULL once closed: a writer never appends after its close)
            seglog_prefaulter_advance(prefaulter.native, position + length)

    cdef Py_ssize_t _encode_into(self, Py_buffer *view, Py_ssize_t position, int64_t base_offset, Py_ssize_t start,
                                 Py_ssize_t stop) except -1:
        cdef Py_ssize_t size = encoded_batch_size(&self.columns, start, stop), written
        cdef uint8_t *dest = <uint8_t *>view.buf
        if not 0 <= start < stop <= self.columns.count:
            raise IndexError(f"record range [{start}, {stop}) outside 0..{self.columns.count}")
        if position < 0 or position + size > view.len:
            raise ValueError(f"batch of {size} bytes does not fit at position {position} of {view.len}")
        with nogil:
            written = encode_batch(dest + position, &self.columns, start, stop, base_offset, 0, 0)
        return written


cdef inline int _publish(IndexView index, const uint8_t *batch, Py_ssize_t end_position) except -1:
    """Publish the index entry of the batch just encoded at `batch`, which ends at `end_position` of its log:
    readers see it from then on."""
    cdef const BatchHeader *header = <const BatchHeader *>batch
    return index.append(header.base_offset + header.record_count, end_position, header.max_timestamp)


def measure(list sources) -> tuple:
    """(messages, bytes) of `sources` each encoded whole as one batch, as append_all writes them."""
    cdef Py_ssize_t count = 0, size = 0
    cdef BatchSource source
    for item in sources:
        source = <BatchSource?>item
        count += source.columns.count
        size += encoded_batch_size(&source.columns, 0, source.columns.count)
    return count, size


def append_all(list sources, data, IndexView index, Prefaulter prefaulter, int64_t base_offset) -> int:
    """Write each of `sources` whole as the next batch of a segment, numbered on from `base_offset`, as
    append_to writes one: encoded at its index's end position in its mapped log `data`, then its index entry
    published; the prefault thread told once how far the writer got. Returns the bytes of their values (what
    value_bytes reads back of each batch). ValueError, before anything is written, if they do not all fit in
    `data` and the index's free slots, or one of them holds no message."""
    cdef Py_buffer view
    cdef BatchSource source
    cdef BatchLayout layout
    cdef Py_ssize_t n = len(sources), i, size = 0, length, nbytes = 0
    cdef Py_ssize_t position = index.end_position_at(index.count)
    cdef int64_t offset = base_offset
    cdef uint8_t *batch
    for item in sources:
        source = <BatchSource?>item
        if source.columns.count == 0:
            raise ValueError("a batch source of no message cannot be written")
        size += encoded_batch_size(&source.columns, 0, source.columns.count)
    if index.count + n > index.capacity:
        raise ValueError(f"{n} batches do not fit in the {index.capacity - index.count} free index slots")
    PyObject_GetBuffer(data, &view, PyBUF_WRITABLE)
    try:
        if position + size > view.len:
            raise ValueError(f"{size} bytes of batches do not fit at position {position} of {view.len}")
        for i in range(n):
            source = <BatchSource>sources[i]
            batch = <uint8_t *>view.buf + position
            with nogil:
                length = encode_batch(batch, &source.columns, 0, source.columns.count, offset, 0, 0)
                compute_layout(batch, length, &layout)
                nbytes += values_span(batch, &layout, 0, layout.count)
            offset += source.columns.count
            position += length
            _publish(index, batch, position)
    finally:
        PyBuffer_Release(&view)
    if prefaulter.native != NULL:  # (NULL once closed: a writer never appends after its close)
        seglog_prefaulter_advance(prefaulter.native, position)
    return nbytes


def key_partitions(Column keys, int partitions):
    """The partition of each key by Kafka's rule (murmur2); a null key goes to partition i % partitions."""

    cdef Py_ssize_t i, n = keys.raw.count, start, stop
    cdef int32_t[::1] out
    result = np.empty(n, dtype=np.int32)
    out = result
    cdef const RawColumn *c = &keys.raw
    with nogil:
        for i in range(n):
            if c.validity != NULL and not (c.validity[i >> 3] & (1 << (i & 7))):
                out[i] = i % partitions
                continue
            if c.width:
                start, stop = i * c.width, (i + 1) * c.width
            elif c.prefix32 != NULL:
                start, stop = c.prefix32[i], c.prefix32[i + 1]
            else:
                start, stop = c.prefix64[i], c.prefix64[i + 1]
            if c.items != NULL:
                out[i] = (seglog_murmur2(item_data(c, i), stop - start) & 0x7FFFFFFF) % partitions
            else:
                out[i] = (seglog_murmur2(c.data + start, stop - start) & 0x7FFFFFFF) % partitions
    return result


def message_size(bytes value, key, bint event_time_column, dict properties) -> int:
    """The bytes one message takes stored alone in a batch: the encoder's own encoded_batch_size of a
    one-message batch, header included (a None value is a null one). send()'s backlog-quota check counts a
    message by it (at least what the message adds to the batch it joins) without building a batch per
    message."""
    cdef BatchColumns b
    cdef int64_t value_prefix[2]
    cdef int64_t key_prefix[2]
    cdef int64_t entries[2]
    cdef int64_t[::1] key_bytes, value_bytes
    cdef Py_ssize_t m
    memset(&b, 0, sizeof(BatchColumns))
    b.count = 1
    value_prefix[0], value_prefix[1] = 0, 0 if value is None else PyBytes_GET_SIZE(value)
    b.values.count, b.values.prefix64 = 1, value_prefix
    if value is None:
        b.flags |= FLAG_VALUE_NULLS
    if key is not None:
        key_prefix[0], key_prefix[1] = 0, PyBytes_GET_SIZE(<bytes?>key)
        b.keys.count, b.keys.prefix64 = 1, key_prefix
        b.flags |= FLAG_HAS_KEYS
    if event_time_column:
        b.flags |= FLAG_EVENT_TIME_COLUMN
    if properties is not None:
        m = len(properties)
        # only the first and last positions of a section are read for its size
        key_bytes, value_bytes = np.zeros(m + 1, dtype=np.int64), np.zeros(m + 1, dtype=np.int64)
        key_bytes[m] = sum(len(k.encode()) for k in properties)
        value_bytes[m] = sum(len(v.encode()) for v in properties.values())
        entries[0], entries[1] = 0, m
        b.property_entries = entries
        b.property_keys.count, b.property_keys.prefix64 = m, &key_bytes[0]
        b.property_values.count, b.property_values.prefix64 = m, &value_bytes[0]
        b.flags |= FLAG_HAS_PROPERTIES
    return encoded_batch_size(&b, 0, 1)
