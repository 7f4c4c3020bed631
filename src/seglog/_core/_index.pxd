from libc.stdint cimport int64_t


cdef class IndexView:
    cdef const int64_t[:, ::1] offsets     # [capacity, 2]: next_offset, end_position
    cdef const int64_t[:, ::1] times       # [capacity, 2]: running max timestamp, next_offset
    cdef int64_t[:, ::1] offsets_w
    cdef int64_t[:, ::1] times_w
    cdef readonly Py_ssize_t capacity
    cdef readonly Py_ssize_t count
    cdef readonly int64_t base_offset
    cdef readonly bint writable
    cdef object owners

    cpdef Py_ssize_t refresh(self)
    cpdef tuple entry(self, Py_ssize_t i)
    cpdef Py_ssize_t find_offset(self, int64_t offset)
    cpdef Py_ssize_t find_timestamp(self, int64_t timestamp)
