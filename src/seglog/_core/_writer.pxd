from libc.stdint cimport int64_t

from seglog._core._format cimport BatchColumns, RawColumn


cdef class Column:
    cdef RawColumn raw
    cdef object owners
    cdef int64_t *prefix_owned

    cdef int _over_offsets(self, object offsets, object data, str argument, object validity) except -1


cdef class BatchSource:
    cdef BatchColumns columns
    cdef readonly Column values
    cdef readonly Column keys
    cdef readonly Column property_keys
    cdef readonly Column property_values
    cdef readonly Column ordering_keys
    cdef readonly Column attribute_keys
    cdef readonly Column attribute_values
    cdef object owners

    cdef int _fill(self, Column values, Column keys, object timestamps, object event_times, unsigned int flags,
                   int64_t now, object property_entries, Column property_keys, Column property_values,
                   Column ordering_keys, Column attribute_keys, Column attribute_values) except -1
    cdef Py_ssize_t _encode_into(self, Py_buffer *view, Py_ssize_t position, int64_t base_offset, Py_ssize_t start,
                                 Py_ssize_t stop) except -1


# For other modules that make columns natively: a Column over int64 offsets and uint8 data (C-contiguous
# numpy arrays of theirs, as made), and a BatchSource of columns and int64 arrays as made, without a call
# into numpy to check what is known to be so.
cdef Column offsets_column(object offsets, object data, str argument, object validity)
cdef BatchSource batch_source(Column values, Column keys, object timestamps, object event_times, unsigned int flags,
                              int64_t now, object property_entries, Column property_keys, Column property_values,
                              Column ordering_keys, Column attribute_keys, Column attribute_values)
