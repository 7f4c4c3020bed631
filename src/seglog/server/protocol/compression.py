"""The compression codecs of Pulsar's MessageMetadata.compression, undone on the broker so that a batch's
messages are stored as ordinary seglog messages.

Formats as Pulsar's clients write them: LZ4 is a raw LZ4 block (no frame), ZLIB the zlib format, ZSTD a zstd
frame, SNAPPY raw snappy (no framing). cramjam (one maintained package, Rust bindings to the reference
codecs) handles LZ4, ZSTD and SNAPPY; zlib is the standard library's.

A payload never inflates past the size its metadata declares, and that size is checked against a limit before
anything is inflated: a few KiB that would inflate to gigabytes (a decompression bomb) cost the broker no more
than the limit. Each codec writes into an output of the declared size, or stops one byte past it."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import cramjam

from seglog.server.protocol import pulsar_api_pb2 as api


class DecompressionError(Exception):
    pass


def decompress(kind: int, data: bytes, uncompressed_size: int, limit: int) -> bytes:
    """The payload of a SEND whose metadata says `compression=kind` and `uncompressed_size`; DecompressionError
    if that size is over `limit` (bytes), or the payload does not inflate to exactly that size."""
    if kind == api.NONE:
        return data
    name = api.CompressionType.Name(kind) if kind in api.CompressionType.values() else None
    if name is None:
        raise DecompressionError(f"unknown compression type {kind}: expected one of "
                                 f"{', '.join(api.CompressionType.keys())}")
    if uncompressed_size > limit:
        raise DecompressionError(f"{name} payload declares {uncompressed_size} bytes uncompressed, over the "
                                 f"{limit} this server accepts (the max message size)")
    try:
        out = _inflate(kind, data, uncompressed_size)
    except (cramjam.DecompressionError, zlib.error, ValueError) as error:
        raise DecompressionError(f"{name} payload does not decompress to the {uncompressed_size} bytes its "
                                 f"metadata gives: {error}") from None
    if len(out) != uncompressed_size:
        inflated = f"{len(out)} bytes" if len(out) < uncompressed_size else "more"
        raise DecompressionError(f"{name} payload decompressed to {inflated}, not the {uncompressed_size} bytes "
                                 "its metadata gives")
    return out


def _inflate(kind: int, data: bytes, size: int) -> bytes:
    """`data` inflated into at most `size` bytes (zlib: `size` + 1 when it holds more), or an error."""
    if kind == api.ZLIB:
        inflater = zlib.decompressobj()
        out = inflater.decompress(data, size + 1)
        if len(out) <= size and not inflater.eof:
            raise ValueError("the zlib stream is cut short")
        return out
    # cramjam's codecs write into a buffer of the declared size and fail when the payload holds more
    # (decompress_block would instead pad a short LZ4 block with zeros up to output_len)
    codecs: dict[int, Callable[[bytes, bytearray], int]] = {
        api.LZ4: cramjam.lz4.decompress_block_into, api.ZSTD: cramjam.zstd.decompress_into,
        api.SNAPPY: cramjam.snappy.decompress_raw_into}
    buffer = bytearray(size)
    del buffer[codecs[kind](data, buffer):]
    return bytes(buffer)
