"""Message and MessageId, and turning a stored batch into Message objects (the iteration path).

One Python object per message is the point of this path (users asked for them); it is built here, in one
C loop over the batch's columns, so the cost is the objects themselves and nothing around them."""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, INT64_MIN
from libc.string cimport memcmp

from seglog._core._format cimport (BatchLayout, FLAG_EVENT_TIME_COLUMN, FLAG_EVENT_TIME_IS_TIMESTAMP, located_batch,
                                   read_i32, read_i64)

from types import MappingProxyType

import numpy as np

from seglog.errors import InvalidArgumentError

# The batch attributes of every message of a batch without any: one shared empty read-only mapping.
cdef object NO_ATTRIBUTES = MappingProxyType({})


@cython.freelist(256)  # send() makes one per message, which the caller mostly drops at once
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


@cython.no_gc  # holds only bytes, ints, None, a str-to-str dict and a read-only view of one: no cycles to
@cython.freelist(256)  # collect, and tracking a million messages would make the cyclic GC rescan every one
cdef class Message:     # of them, repeatedly
    """One message read from a partition.

    `value` is None for a null value (sent as None: no value, unlike an empty one). `timestamp` is the
    topic's timestamp (the producer's CreateTime, or the broker's LogAppendTime), in ms since the epoch;
    `event_time` is the timestamp the producer gave, or None when it gave none. `ordering_key` and
    `batch_attributes` are what the writer of its batch gave (PartitionWriter.source), if anything."""
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
    def ordering_key(self):
        """The message's ordering key (bytes), or None when it has none."""
        return None

    @property
    def batch_attributes(self):
        """The attributes of the batch the message was written in: a read-only mapping of str to str,
        the same object for the messages of a batch read together (empty when the batch has none)."""
        return NO_ATTRIBUTES

    @property
    def message_id(self) -> MessageId:
        return MessageId(self.partition, self.offset)

    def __repr__(self):
        value = self.value if self.value is None or len(self.value) <= 40 else self.value[:40] + b"..."
        return (f"Message(partition={self.partition}, offset={self.offset}, key={self.key!r}, "
                f"value={value!r}, timestamp={self.timestamp})")

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        cdef Message o = other
        return (self.partition == o.partition and self.offset == o.offset and self.key == o.key
                and self.value == o.value and self.timestamp == o.timestamp
                and self.event_time == o.event_time and self.properties == o.properties
                and self.ordering_key == o.ordering_key and self.batch_attributes == o.batch_attributes)

    __hash__ = None


@cython.no_gc
@cython.freelist(64)
@cython.final
cdef class _MessageWithExtras(Message):
    """A Message of a batch with ordering keys or attributes (format version 2). Their fields live here, so
    that the messages of other batches pay nothing for them: two more object fields in Message cost every
    message a reference to None set and dropped twice, iteration about 6% slower (measured)."""
    cdef object _ordering_key
    cdef object _attributes  # the batch's read-only mapping, shared by its messages; None when it has none

    @property
    def ordering_key(self):
        """The message's ordering key (bytes), or None when it has none."""
        return self._ordering_key

    @property
    def batch_attributes(self):
        """The attributes of the batch the message was written in: a read-only mapping of str to str,
        the same object for the messages of a batch read together (empty when the batch has none)."""
        return NO_ATTRIBUTES if self._attributes is None else self._attributes


cdef inline bytes binary_item(const uint8_t *batch, Py_ssize_t offsets_at, Py_ssize_t data_at, Py_ssize_t i):
    cdef int32_t start = read_i32(batch + offsets_at + 4 * i), stop = read_i32(batch + offsets_at + 4 * i + 4)
    return PyBytes_FromStringAndSize(<const char *>batch + data_at + start, stop - start)


cdef inline str string_item(const uint8_t *batch, Py_ssize_t offsets_at, Py_ssize_t data_at, Py_ssize_t i):
    cdef int32_t start = read_i32(batch + offsets_at + 4 * i), stop = read_i32(batch + offsets_at + 4 * i + 4)
    return PyUnicode_DecodeUTF8(<const char *>batch + data_at + start, stop - start, "strict")


cdef inline bint present(const uint8_t *batch, Py_ssize_t validity_at, Py_ssize_t i) noexcept nogil:
    """Whether item i of a column is present (not null): always, without a validity bitmap (-1)."""
    return validity_at < 0 or (batch[validity_at + (i >> 3)] & (1 << (i & 7))) != 0


cdef object attributes_of(const uint8_t *batch, const BatchLayout *L):
    """The batch's attributes as a new read-only mapping, or None when it has none."""
    if L.attributes < 0:
        return None
    return MappingProxyType({string_item(batch, L.attribute_key_offsets, L.attribute_key_data, j):
                             string_item(batch, L.attribute_value_offsets, L.attribute_value_data, j)
                             for j in range(L.attribute_count)})


def batch_attributes(buffer, Py_ssize_t position):
    """The attributes of the sound batch at `position`: a read-only mapping of str to str (empty when it
    has none), read from its attribute sections alone."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout L
    attributes = attributes_of(located_batch(view, position, &L), &L)
    return NO_ATTRIBUTES if attributes is None else attributes


cdef Message with_extras(const uint8_t *batch, const BatchLayout *L, Py_ssize_t i, object attributes):
    """A new message of record i of a batch with ordering keys or attributes, those fields filled in."""
    cdef _MessageWithExtras m = _MessageWithExtras.__new__(_MessageWithExtras)
    if L.ordering_key_offsets >= 0 and present(batch, L.ordering_key_validity, i):
        m._ordering_key = binary_item(batch, L.ordering_key_offsets, L.ordering_key_data, i)
    m._attributes = attributes
    return m


def batch_attribute(buffer, Py_ssize_t position, bytes name):
    """The value of the attribute `name` (UTF-8 bytes) of the sound batch at `position`, or None when the
    batch has no such attribute: one attribute without making the mapping, for dispatch, which asks each
    batch it reads (storage.delayed)."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout L
    cdef const uint8_t *batch = located_batch(view, position, &L)
    cdef Py_ssize_t j, length = len(name)
    cdef const char *wanted = name
    cdef int32_t start, stop
    if L.attributes < 0:
        return None
    for j in range(L.attribute_count):
        start = read_i32(batch + L.attribute_key_offsets + 4 * j)
        stop = read_i32(batch + L.attribute_key_offsets + 4 * j + 4)
        if stop - start == length and memcmp(batch + L.attribute_key_data + start, wanted, length) == 0:
            return string_item(batch, L.attribute_value_offsets, L.attribute_value_data, j)
    return None


def messages_from_batch(buffer, Py_ssize_t position, int partition, Py_ssize_t start, Py_ssize_t stop) -> list:
    """Messages [start, stop) (record indexes within the batch) of the sound batch at `position`."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout L
    cdef const uint8_t *batch = located_batch(view, position, &L)
    cdef int64_t base_offset = read_i64(batch + 16)  # the header's base_offset (docs/FORMAT.md)
    cdef Py_ssize_t i, e, e_stop
    cdef Message m
    cdef list out = []
    cdef int64_t ev
    cdef object attributes = attributes_of(batch, &L)
    cdef bint extras = attributes is not None or L.ordering_key_offsets >= 0
    stop = min(stop, L.count)
    for i in range(start, stop):
        if not extras:
            m = Message.__new__(Message)
        else:
            m = with_extras(batch, &L, i, attributes)
        m.partition = partition
        m.offset = base_offset + i if L.offsets < 0 else read_i64(batch + L.offsets + 8 * i)
        m.timestamp = read_i64(batch + L.timestamps + 8 * i)
        if present(batch, L.value_validity, i):
            m.value = binary_item(batch, L.value_offsets, L.value_data, i)
        else:
            m.value = None
        if L.key_offsets >= 0 and present(batch, L.key_validity, i):
            m.key = binary_item(batch, L.key_offsets, L.key_data, i)
        else:
            m.key = None
        if L.event_times >= 0:
            ev = read_i64(batch + L.event_times + 8 * i)
            m.event_time = None if ev == INT64_MIN else ev
        elif L.flags & FLAG_EVENT_TIME_IS_TIMESTAMP:
            m.event_time = m.timestamp
        else:
            m.event_time = None
        if L.property_entries >= 0:
            e = read_i32(batch + L.property_entries + 4 * i)
            e_stop = read_i32(batch + L.property_entries + 4 * i + 4)
            m._properties = {string_item(batch, L.property_key_offsets, L.property_key_data, j):
                            string_item(batch, L.property_value_offsets, L.property_value_data, j)
                            for j in range(e, e_stop)}
        out.append(m)
    return out


def batch_offsets(buffer, Py_ssize_t position):
    """The offsets of the records of the sound batch at `position`, ascending: a compacted batch's offsets
    column (a read-only view of `buffer`, docs/FORMAT.md), else its base offset onwards, one by one."""
    cdef const uint8_t[::1] view = buffer
    cdef BatchLayout L
    cdef const uint8_t *batch = located_batch(view, position, &L)
    cdef int64_t base_offset = read_i64(batch + 16)
    if L.offsets >= 0:
        return np.frombuffer(buffer, dtype=np.int64, count=L.count, offset=position + L.offsets)
    return np.arange(base_offset, base_offset + L.count, dtype=np.int64)
