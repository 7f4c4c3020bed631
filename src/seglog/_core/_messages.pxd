from libc.stdint cimport int64_t


cdef class MessageId:
    cdef readonly int partition
    cdef readonly int64_t offset


cdef inline MessageId new_message_id(int partition, int64_t offset):
    """A MessageId without going through Python's call protocol (the send() hot path makes one per message)."""
    cdef MessageId message_id = MessageId.__new__(MessageId)
    message_id.partition = partition
    message_id.offset = offset
    return message_id
