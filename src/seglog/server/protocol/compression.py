"""The compression codecs of Pulsar's MessageMetadata.compression, undone on the broker so that a batch's
messages are stored as ordinary seglog messages.

Formats as Pulsar's clients write them: LZ4 is a raw LZ4 block (no frame), ZLIB the zlib format, ZSTD a zstd
frame, SNAPPY raw snappy (no framing). cramjam (one maintained package, Rust bindings to the reference
codecs) handles LZ4, ZSTD and SNAPPY; zlib is the standard library's."""

from __future__ import annotations

import zlib

import cramjam

from seglog.server.protocol import pulsar_api_pb2 as api


class DecompressionError(Exception):
    pass


def decompress(kind: int, data: bytes, uncompressed_size: int) -> bytes:
    """The payload of a SEND whose metadata says `compression=kind` (`uncompressed_size` from the metadata)."""
    if kind == api.NONE:
        return data
    try:
        if kind == api.LZ4:
            out = bytes(cramjam.lz4.decompress_block(data, output_len=uncompressed_size))
        elif kind == api.ZLIB:
            out = zlib.decompress(data)
        elif kind == api.ZSTD:
            out = bytes(cramjam.zstd.decompress(data))
        elif kind == api.SNAPPY:
            out = bytes(cramjam.snappy.decompress_raw(data))
        else:
            raise DecompressionError(f"unknown compression type {kind}")
    except (cramjam.DecompressionError, zlib.error, ValueError) as error:
        raise DecompressionError(f"{api.CompressionType.Name(kind)} payload does not decompress: {error}") from None
    if len(out) != uncompressed_size:
        raise DecompressionError(f"{api.CompressionType.Name(kind)} payload decompressed to {len(out)} bytes, "
                                 f"not the {uncompressed_size} its metadata gives")
    return out
