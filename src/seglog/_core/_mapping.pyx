# cython: freethreading_compatible=False
"""Memory maps that hold no file descriptor.

Python's mmap.mmap duplicates the descriptor it maps and keeps it until the map is closed (3.13 added
trackfd=False to stop that). A pyarrow RecordBatch that seglog returns keeps its segment's map alive, so
every kept batch from another segment cost a descriptor: about 500 of them ran into the usual limit of
1,024. The kernel keeps a mapped file open by itself, so a Mapping is made from a descriptor that its
caller closes right after, and the pages stay valid until the Mapping is closed or collected."""

from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_WRITABLE
from cpython.exc cimport PyErr_SetFromErrno
from posix.mman cimport MADV_RANDOM as C_MADV_RANDOM
from posix.mman cimport MAP_FAILED, MAP_SHARED, MS_SYNC, PROT_READ, PROT_WRITE, madvise, mmap, msync, munmap
from libc.stdint cimport uintptr_t
from posix.types cimport off_t

MADV_RANDOM = C_MADV_RANDOM
cdef char *UNSIGNED_BYTES = b"B"  # the buffer's struct format: the same as mmap.mmap's


cdef class Mapping:
    """A whole file mapped shared, read-only or writable: a buffer (numpy, pyarrow, memoryview, Cython
    memoryviews take it without a copy), with len(), madvise(), flush() and close() as mmap.mmap has.

    Mapping(fd, length, writable) maps the first `length` bytes of the file open as `fd`, which the caller
    may close at once. The caller checks `length` against the file's size: pages past its end fault with
    SIGBUS."""
    cdef char *address
    cdef Py_ssize_t length
    cdef bint writable
    cdef Py_ssize_t exports  # buffers handed out and not yet released: the pages must stay mapped

    def __cinit__(self, int fd, Py_ssize_t length, bint writable):
        if length <= 0:
            raise ValueError(f"a mapping needs a positive length, not {length}")
        cdef void *address = mmap(NULL, length, PROT_READ | (PROT_WRITE if writable else 0), MAP_SHARED, fd,
                                  <off_t>0)
        if address == MAP_FAILED:
            PyErr_SetFromErrno(OSError)
        self.address = <char *>address
        self.length = length
        self.writable = writable

    @property
    def closed(self) -> bool:
        return self.address == NULL

    cdef int _check_open(self) except -1:
        if self.address == NULL:
            raise ValueError("the mapping is closed")
        return 0

    def __len__(self) -> int:
        self._check_open()
        return self.length

    def madvise(self, int advice, Py_ssize_t start=0, length=None) -> None:
        """Advise the kernel how bytes [start, start + length) (default: to the end) will be used."""
        self._check_open()
        cdef Py_ssize_t count = self.length - start if length is None else length
        if start < 0 or count < 0 or start + count > self.length:
            raise ValueError(f"madvise range {start}+{count} is outside the mapping of {self.length} bytes")
        if madvise(self.address + start, count, advice) != 0:
            PyErr_SetFromErrno(OSError)

    def flush(self) -> None:
        """Write the mapping's dirty pages to the file and wait for the disk (msync MS_SYNC)."""
        self._check_open()
        cdef int result
        self.exports += 1  # close() from another thread must not unmap the pages under msync
        try:
            with nogil:
                result = msync(self.address, self.length, MS_SYNC)
        finally:
            self.exports -= 1
        if result != 0:
            PyErr_SetFromErrno(OSError)

    def close(self) -> None:
        """Unmap now. Refused with BufferError while a buffer still points into the mapping (as mmap.mmap
        refuses): the mapping is then unmapped when the last such buffer and the Mapping itself are gone."""
        if self.exports:
            raise BufferError(f"cannot close a mapping while {self.exports} buffers point into it")
        self._unmap()

    def detach(self) -> tuple:
        """Hand the pages over to a caller that unmaps them itself (the prefault thread): returns (address,
        length) and leaves this Mapping closed. Refused with BufferError while a buffer points into it."""
        self._check_open()
        if self.exports:
            raise BufferError(f"cannot detach a mapping while {self.exports} buffers point into it")
        pages = (<uintptr_t>self.address, self.length)
        self.address = NULL
        return pages

    cdef void _unmap(self) noexcept:
        cdef char *address = self.address
        self.address = NULL
        if address != NULL:
            with nogil:
                munmap(address, self.length)

    def __dealloc__(self):
        self._unmap()  # a buffer holds a reference to its Mapping, so none is left by now

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        self._check_open()
        if (flags & PyBUF_WRITABLE) and not self.writable:
            raise BufferError("the mapping is read-only")
        buffer.buf = self.address
        buffer.obj = self
        buffer.len = self.length
        buffer.readonly = not self.writable
        buffer.itemsize = 1
        buffer.format = UNSIGNED_BYTES if (flags & PyBUF_FORMAT) else NULL
        buffer.ndim = 1
        buffer.shape = &buffer.len if (flags & PyBUF_ND) else NULL
        buffer.strides = &buffer.itemsize if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buffer.suboffsets = NULL
        buffer.internal = NULL
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *buffer):
        self.exports -= 1
