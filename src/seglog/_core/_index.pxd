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
    cpdef int append(self, int64_t next_offset, int64_t end_position, int64_t max_timestamp) except -1

    cdef inline int64_t end_position_at(self, Py_ssize_t count) noexcept:
        """The byte position after the first `count` batches (0 for none)."""
        return self.offsets[count - 1, 1] if count else 0
    cpdef tuple entry(self, Py_ssize_t i)
    cpdef Py_ssize_t find_offset(self, int64_t offset)
    cpdef Py_ssize_t find_timestamp(self, int64_t timestamp)
