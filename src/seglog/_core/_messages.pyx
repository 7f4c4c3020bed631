"""Message and MessageId, and turning a stored batch into Message objects (the iteration path).

One Python object per message is the point of this path (users asked for them); it is built here, in one
C loop over the batch's columns, so the cost is the objects themselves and nothing around them."""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, INT64_MIN
from libc.string cimport memcpy

from seglog._core._format cimport (BatchLayout, compute_layout, HEADER_SIZE, FLAG_EVENT_TIME_COLUMN,
                                   FLAG_EVENT_TIME_IS_TIMESTAMP, BatchHeader)

from seglog.errors import InvalidArgumentError


cdef class MessageId:
    """Where a message is stored: its partition and offset. Ordered, hashable, comparable to a tuple."""

    def __init__(self, partition, offset):
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < 2**31:
            raise InvalidArgumentError("partition", partition, "an int from 0 to 2**31 - 1")
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < 2**63:
            raise InvalidArgumentError("offset", offset, "an int from 0 to 2**63 - 1")
        self.partition = partition
        self.offset = offset

    def __repr__(self):
        return f"MessageId(partition={self.partition}, offset={self.offset})"

    def __iter__(self):
        yield self.partition
        yield self.offset

    def __hash__(self):
        return hash((self.partition, self.offset))

    def __richcmp__(self, other, int op):
        if isinstance(other, MessageId):
            other = ((<MessageId>other).partition, (<MessageId>other).offset)
        elif not isinstance(other, tuple):
            return NotImplemented
        mine = (self.partition, self.offset)
        if op == 0: return mine < other
        if op == 1: return mine <= other
        if op == 2: return mine == other
        if op == 3: return mine != other
        if op == 4: return mine > other
        return mine >= other

    def __reduce__(self):
        return MessageId, (self.partition, self.offset)


@cython.no_gc  # holds only bytes, ints, None and a str-to-str dict: no cycles to collect, and tracking
@cython.freelist(256)  # a million messages would make the cyclic GC rescan every one of them, repeatedly
cdef class Message:
    """One message read from a partition.

    `timestamp` is the topic's timestamp (the producer's CreateTime, or the broker's LogAppendTime), in ms
    since the epoch; `event_time` is the timestamp the producer gave, or None when it gave none."""
    cdef readonly int partition
    cdef readonly int64_t offset
    cdef readonly object key
    cdef readonly bytes value
    cdef readonly int64_t timestamp
    cdef readonly object event_time
    cdef object _properties  # None when the batch has none: no empty dict allocated per message

    @property
    def properties(self) -> dict:
        """The message's properties (a new empty dict when it has none)."""
        return {} if self._properties is None else self._properties

    @property
    def message_id(self) -> MessageId:
        return MessageId(self.partition, self.offset)

    def __repr__(self):
        value = self.value if len(self.value) <= 40 else self.value[:40] + b"..."
        return (f"Message(partition={self.partition}, offset={self.offset}, key={self.key!r}, "
                f"value={value!r}, timestamp={self.timestamp})")

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        cdef Message o = other
        return (self.partition == o.partition and self.offset == o.offset and self.key == o.key
                and self.value == o.value and self.timestamp == o.timestamp
                and self.event_time == o.event_time and self.properties == o.properties)

    __hash__ = None


cdef inline int32_t i32(const uint8_t *p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)
    return v


cdef inline int64_t i64(const uint8_t *p) noexcept nogil:
    cdef int64_t v
    memcpy(&v, p, 8)
    return v


cdef inline bytes binary_item(const uint8_t *batch, Py_ssize_t offsets_at, Py_ssize_t data_at, Py_ssize_t i):
    cdef int32_t start = i32(batch + offsets_at + 4 * i), stop = i32(batch + offsets_at + 4 * i + 4)
    return PyBytes_FromStringAndSize(<const char *>batch + data_at + start, stop - start)


cdef inline str string_item(const uint8_t *batch, Py_ssize_t offsets_at, Py_ssize_t data_at, Py_ssize_t i):
    cdef int32_t start = i32(batch + offsets_at + 4 * i), stop = i32(batch + offsets_at + 4 * i + 4)
    return PyUnicode_DecodeUTF8(<const char *>batch + data_at + start, stop - start, "strict")


def messages_from_batch(buffer, Py_ssize_t position, int partition, Py_ssize_t start, Py_ssize_t stop) -> list:
    """Messages [start, stop) (record indexes within the batch) of the sound batch at `position`."""
    cdef const uint8_t[::1] view = buffer
    cdef const uint8_t *batch = &view[position]
    cdef BatchHeader h
    cdef BatchLayout L
    cdef Py_ssize_t i, e, e_stop
    cdef Message m
    cdef list out = []
    cdef int64_t ev
    memcpy(&h, batch, HEADER_SIZE)
    if compute_layout(batch, HEADER_SIZE + h.body_length, &L) != 0:
        raise ValueError(f"batch at position {position}: column sections do not fit its length")
    stop = min(stop, L.count)
    for i in range(start, stop):
        m = Message.__new__(Message)
        m.partition = partition
        m.offset = h.base_offset + i
        m.timestamp = i64(batch + L.timestamps + 8 * i)
        m.value = binary_item(batch, L.value_offsets, L.value_data, i)
        if L.key_offsets >= 0 and (L.key_validity < 0 or batch[L.key_validity + (i >> 3)] & (1 << (i & 7))):
            m.key = binary_item(batch, L.key_offsets, L.key_data, i)
        else:
            m.key = None
        if L.event_times >= 0:
            ev = i64(batch + L.event_times + 8 * i)
            m.event_time = None if ev == INT64_MIN else ev
        elif L.flags & FLAG_EVENT_TIME_IS_TIMESTAMP:
            m.event_time = m.timestamp
        else:
            m.event_time = None
        if L.property_entries >= 0:
            e = i32(batch + L.property_entries + 4 * i)
            e_stop = i32(batch + L.property_entries + 4 * i + 4)
            m._properties = {string_item(batch, L.property_key_offsets, L.property_key_data, j):
                            string_item(batch, L.property_value_offsets, L.property_value_data, j)
                            for j in range(e, e_stop)}
        out.append(m)
    return out
