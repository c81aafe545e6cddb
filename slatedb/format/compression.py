"""Block compression codecs and the CRC framing every SST block carries.

SlateDB frames each block (data, filter, index, stats) as ``compress(raw) || crc32(payload)``
with the CRC (zlib's CRC-32/IEEE, big-endian) computed over the *compressed* payload. The codec
is recorded once per SST in ``SsTableInfo.compression_format``; the numbering below is the
FlatBuffers enum ``CompressionFormat``.

The codecs come from ``cramjam`` (one maintained native package for all four) rather than
hand-written code. Output bytes need not match the Rust encoders exactly: a reader only needs to
decode them, and the official engine decodes any valid stream of the right format.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format.types import CompressionFormat

CRC_SIZE_BYTES = 4
ZSTD_LEVEL = 3
ZLIB_LEVEL = 6  # flate2's Compression::default()
# A block's decompressed size is bounded by what a writer would ever produce; anything larger
# is a corrupt size prefix, refused before it turns into a huge allocation.
MAX_DECOMPRESSED_BLOCK_BYTES = 1 << 30

_crc32 = zlib.crc32
_CRC = struct.Struct(">I")


#: The codec enum is the FlatBuffers ``CompressionFormat`` (0 = no compression).
CompressionCodec = CompressionFormat


def compress(codec: CompressionCodec | int, raw: bytes) -> bytes:
    """Compress ``raw`` with ``codec`` in the stream format SlateDB expects."""
    if codec == CompressionCodec.NONE:
        return bytes(raw)
    if codec == CompressionCodec.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(raw))
    if codec == CompressionCodec.ZLIB:
        return bytes(cramjam.zlib.compress(raw, level=ZLIB_LEVEL))
    if codec == CompressionCodec.LZ4:
        # lz4_flex::compress_prepend_size: u32 little-endian uncompressed size, then the block.
        return bytes(cramjam.lz4.compress_block(raw, store_size=True))
    if codec == CompressionCodec.ZSTD:
        return bytes(cramjam.zstd.compress(raw, level=ZSTD_LEVEL))
    raise InvalidArgumentError(f"unknown compression codec {codec!r}")


def decompress(codec: CompressionCodec | int, payload: bytes, object_name: str, offset: int) -> bytes:
    """Inverse of :func:`compress`; any decoder failure is a :class:`CorruptionError`."""
    if codec == CompressionCodec.NONE:
        return payload
    try:
        if codec == CompressionCodec.SNAPPY:
            return bytes(cramjam.snappy.decompress_raw(payload))
        if codec == CompressionCodec.ZLIB:
            return bytes(cramjam.zlib.decompress(payload))
        if codec == CompressionCodec.LZ4:
            if len(payload) < 4:
                raise CorruptionError(object_name, offset, "lz4 block shorter than its size prefix")
            size = int.from_bytes(payload[:4], "little")
            if size > MAX_DECOMPRESSED_BLOCK_BYTES:
                raise CorruptionError(object_name, offset, f"lz4 size prefix {size} is implausible")
            out = bytes(cramjam.lz4.decompress_block(payload))
            if len(out) != size:
                raise CorruptionError(object_name, offset, "lz4 block shorter than its size prefix")
            return out
        if codec == CompressionCodec.ZSTD:
            return bytes(cramjam.zstd.decompress(payload))
    except CorruptionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueErrors
        raise CorruptionError(object_name, offset, f"{CompressionCodec(codec).name} decode failed: {exc}") from exc
    raise CorruptionError(object_name, offset, f"unknown compression codec {codec!r}")


def frame_block(codec: CompressionCodec | int, raw: bytes) -> bytes:
    """``compress(raw) || crc32(compressed) (BE)``: the on-store form of every SST block."""
    payload = compress(codec, raw)
    return payload + _CRC.pack(_crc32(payload))


def frame_slices(codec: CompressionCodec | int, data: bytes, ends: list[int]) -> tuple[bytes, list[int]]:
    """:func:`frame_block` of each of ``data[0:ends[0]]``, ``data[ends[0]:ends[1]]``, ...,
    concatenated, and each framed block's size. Without compression one join of views of
    ``data`` and the CRCs (no bytes object per block; the views die with the join, so that they
    add nothing to the cyclic GC's young generation)."""
    parts: list = []
    sizes: list[int] = []
    start = 0
    if codec == CompressionCodec.NONE:
        view = memoryview(data)
        for end in ends:
            block = view[start:end]
            parts += (block, _CRC.pack(_crc32(block)))
            sizes.append(end - start + CRC_SIZE_BYTES)
            start = end
        framed = b"".join(parts)
        del parts, block
        view.release()
        return framed, sizes
    for end in ends:
        parts.append(frame_block(codec, data[start:end]))
        sizes.append(len(parts[-1]))
        start = end
    return b"".join(parts), sizes


def unframe_block(codec: CompressionCodec | int, framed: bytes, object_name: str, offset: int) -> bytes:
    """Check the trailing CRC of a framed block and return its decompressed content.

    ``offset`` is where the framed block starts in the object, so that errors name it.
    """
    if len(framed) < CRC_SIZE_BYTES:
        raise CorruptionError(object_name, offset, f"block of {len(framed)} bytes cannot hold its CRC")
    end = len(framed) - CRC_SIZE_BYTES
    payload = framed[:end]
    (stored,) = _CRC.unpack_from(framed, end)
    if _crc32(payload) != stored:
        raise CorruptionError(object_name, offset, "block CRC mismatch")
    if not codec:  # CompressionCodec.NONE, without decompress's frame
        return payload
    return decompress(codec, payload, object_name, offset)


def codec_from_name(name: str | None) -> CompressionFormat:
    """The codec of a ``compression_codec`` setting ("Snappy", "Zlib", "Lz4", "Zstd"; None: none)."""
    if name is None:
        return CompressionFormat.NONE
    try:
        return CompressionFormat[name.upper()]
    except KeyError:
        raise InvalidArgumentError(f"unknown compression codec {name!r}") from None
