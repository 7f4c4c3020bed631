from libc.stdint cimport int64_t


cdef class MessageId:
    cdef readonly int partition
    cdef readonly int64_t offset
