"""The per-message send path: an accumulator per partition and the producer's `send`.

An accumulator holds references to the messages sent since the last flush, not copies: when it is drained
the batch encoder copies each value once, straight into the segment. Offsets are assigned at `send`
(one writer per partition makes them known), so `send` returns the final MessageId at once.

Thread safety comes from the GIL: append, drain and reserve are single C-level steps that never release
it, and they allocate before they change anything (an allocation may run the garbage collector, whose
finalizers can let another thread in, which must then find the accumulator consistent). The writer holds
the partition's write lock from drain or reserve to the end of the copy, so batches land in offset order."""

from cpython.bytes cimport PyBytes_Check, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t

from seglog._core._format cimport seglog_murmur2
from seglog._core._messages cimport MessageId, new_message_id

from seglog.errors import ClosedError, InvalidArgumentError, not_utf8


cdef class Accumulator:
    """Messages sent one by one to one partition, waiting to be written as one batch."""
    cdef readonly int64_t next_offset
    cdef readonly Py_ssize_t pending_bytes
    cdef readonly Py_ssize_t batches_taken  # numbers the batch being gathered (linger tells them apart)
    cdef list values
    cdef list keys
    cdef list timestamps
    cdef list properties

    def __init__(self, int64_t next_offset):
        self.next_offset = next_offset
        self._reset()

    cdef _reset(self):
        self.values = []
        self.keys = None
        self.timestamps = None
        self.properties = None
        self.pending_bytes = 0

    @property
    def pending(self) -> int:
        return len(self.values)

    cpdef int64_t append(self, value, key, timestamp, properties) except -1:
        """Queue one message; returns its offset. `value` is bytes, or None for a null value (the producer
        converted it)."""
        cdef Py_ssize_t n = len(self.values)
        # A column's list is made (None for the messages before) before anything is queued: see the docstring.
        if key is not None and self.keys is None:
            self.keys = [None] * n
        if timestamp is not None and self.timestamps is None:
            self.timestamps = [None] * n
        if properties is not None and self.properties is None:
            self.properties = [None] * n
        self.values.append(value)
        if self.keys is not None:
            self.keys.append(key)
        if self.timestamps is not None:
            self.timestamps.append(timestamp)
        if self.properties is not None:
            self.properties.append(properties)
        if value is not None:
            self.pending_bytes += PyBytes_GET_SIZE(value)
        self.next_offset += 1
        return self.next_offset - 1

    def drain(self):
        """Take the pending messages: (base_offset, values, keys, timestamps, properties), the last three
        None when no message had one. Returns None when nothing is pending."""
        return self._take() if self.values else None

    def reserve(self, int64_t count):
        """Take the pending messages (as drain does) and reserve the `count` offsets after them for a batch
        the caller writes next; returns (pending or None, the first reserved offset). One step: a send()
        from another thread numbers its message after the reserved range, never inside it."""
        pending = self._take() if self.values else None
        cdef int64_t base = self.next_offset
        self.next_offset += count
        return pending, base

    cdef tuple _take(self):
        cdef list fresh = []
        taken = (self.next_offset - len(self.values), self.values, self.keys, self.timestamps, self.properties)
        # No allocation from here on: the references in `taken` keep the old lists alive.
        self.values = fresh
        self.keys = None
        self.timestamps = None
        self.properties = None
        self.pending_bytes = 0
        self.batches_taken += 1
        return taken

    def discard(self, int64_t next_offset) -> int:
        """Drop the pending messages after a failed write and restart numbering at `next_offset`."""
        cdef Py_ssize_t dropped = len(self.values)
        self._reset()
        self.next_offset = next_offset
        return dropped


cdef class SendPath:
    """The producer's per-message `send`, in C: choose the partition, convert the value, queue it.

    The Python Producer subclasses this and provides `_batch_full(partition)` and `_first_pending(partition)`,
    called when a batch reaches the producer's batch size and when a partition's first message is queued."""
    cdef list _accumulators
    cdef int _partitions
    cdef Py_ssize_t _batch_size
    cdef unsigned int _next_partition
    cdef public object _quota_gate  # called as gate(partition, value, key, timestamp, properties) before a
                                    # message is queued
    cdef const uint8_t[::1] _fence  # the topic's fence byte (fence.py): set when the topic is deleted

    def _init_send_path(self, list accumulators, Py_ssize_t batch_size, fence):
        self._accumulators = accumulators
        self._fence = fence
        self._partitions = len(accumulators)
        self._batch_size = batch_size
        self._next_partition = 0

    cpdef MessageId send(self, value, key=None, timestamp=None, properties=None, partition=None, deliver_at=None,
                         deliver_after=None):
        """Queue one message; returns its MessageId (the offset is final at once, see docs).

        value: bytes (str is encoded as UTF-8; bytearray and memoryview are copied), or None for a null
        value (no value, unlike an empty one: Message.value is None).
        key: bytes or str; chooses the partition by Kafka's murmur2 hash unless `partition` is given.
        timestamp: ms since the epoch (the producer's CreateTime); default: the time of the write.
        properties: a dict of str to str.
        partition: an explicit partition; otherwise by key, or round robin when there is no key.
        deliver_at, deliver_after: a delayed message (see Producer.send_batch), written at once in a batch
        of its own, since the delivery time is kept per stored batch."""
        cdef int p
        cdef Accumulator acc
        cdef int64_t offset
        cdef bint first
        if self._partitions == 0:
            raise ClosedError("producer is closed")
        if self._fence[0]:
            self._fenced()
        if value is not None and not PyBytes_Check(value):
            value = _to_bytes(value, "value")
        if key is not None and not PyBytes_Check(key):
            key = _to_bytes(key, "key")
        if deliver_at is not None or deliver_after is not None:
            return self._send_delayed(value, key, timestamp, properties, partition, deliver_at, deliver_after)
        if partition is not None:
            p = _check_partition(partition, self._partitions)
        elif key is not None:
            p = (seglog_murmur2(<const char *>key, PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % self._partitions
        else:
            p = self._next_partition % self._partitions
            self._next_partition += 1
        if timestamp is not None:
            timestamp = _check_timestamp(timestamp)
        if properties is not None:
            properties = _check_properties(properties)
        if self._quota_gate is not None:
            self._quota_gate(p, value, key, timestamp, properties)
        acc = <Accumulator?>self._accumulators[p] if self._accumulators[p] is not None else self._open_partition(p)
        first = not acc.values
        offset = acc.append(value, key, timestamp, properties)
        if first:  # after the append: the batch the linger is for holds the message
            self._first_pending(p)
        if acc.pending_bytes >= self._batch_size:
            self._batch_full(p)
        return new_message_id(p, offset)

    def _first_pending(self, int partition):
        raise NotImplementedError

    def _send_delayed(self, value, key, timestamp, properties, partition, deliver_at, deliver_after):
        raise NotImplementedError

    def _fenced(self):
        raise NotImplementedError

    def _open_partition(self, int partition):
        raise NotImplementedError

    def _batch_full(self, int partition):
        raise NotImplementedError


cdef bytes _to_bytes(object item, str argument):
    if isinstance(item, str):
        return _utf8(<str>item, argument)
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise InvalidArgumentError(argument, type(item).__name__, "bytes, bytearray, memoryview, str or None")


cdef int _check_partition(object partition, int partitions) except -1:
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < partitions:
        raise InvalidArgumentError("partition", partition, f"an int from 0 to {partitions - 1}")
    return partition


cdef object _check_timestamp(object timestamp):
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp < 2**63:
        raise InvalidArgumentError("timestamp", timestamp, "an int: milliseconds since the epoch, >= 0")
    return timestamp


cdef object _check_properties(object properties):
    """The properties, if the batch encoder will take them: checked here, since a message refused at the
    write would take the messages queued with it down too."""
    if not isinstance(properties, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
        raise InvalidArgumentError("properties", properties, "a dict mapping str to str")
    for key, value in properties.items():
        _utf8(key, "properties")
        _utf8(value, f"properties[{key!r}]")
    return properties


cdef bytes _utf8(str text, str argument):
    try:
        return text.encode()
    except UnicodeEncodeError as error:
        raise not_utf8(argument, error) from None
