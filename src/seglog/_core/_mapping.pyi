from typing_extensions import Self

MADV_RANDOM: int

class Mapping:
    """A whole file mapped shared, read-only or writable, holding no file descriptor: a buffer with len(),
    madvise(), flush() and close() as mmap.mmap has. The caller checks `length` against the file's size."""

    def __new__(cls, fd: int, length: int, writable: bool) -> Self: ...
    @property
    def closed(self) -> bool: ...
    def __len__(self) -> int: ...
    # The buffer protocol (PEP 688; CPython names these slots from 3.12 on): memoryview, numpy, pyarrow take it.
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...
    def madvise(self, advice: int, start: int = 0, length: int | None = None) -> None:
        """Advise the kernel how bytes [start, start + length) (default: to the end) will be used."""
    def flush(self) -> None:
        """Write the mapping's dirty pages to the file and wait for the disk (msync MS_SYNC)."""
    def close(self) -> None:
        """Unmap now; BufferError while a buffer still points into the mapping."""
    def detach(self) -> tuple[int, int]:
        """Hand the pages over to a caller that unmaps them itself: (address, length); leaves this closed."""
