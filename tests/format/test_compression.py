"""Block codecs and CRC framing."""

from __future__ import annotations

import struct
import zlib

import pytest

from slatedb.errors import CorruptionError
from slatedb.format.compression import CompressionCodec, compress, decompress, frame_block, unframe_block

DATA = b"".join(b"key%010d:value-%d;" % (i, i * 7) for i in range(500))


@pytest.mark.parametrize("codec", list(CompressionCodec))
def test_round_trip(codec):
    framed = frame_block(codec, DATA)
    payload = framed[:-4]
    assert struct.unpack(">I", framed[-4:])[0] == zlib.crc32(payload)
    assert unframe_block(codec, framed, "o", 0) == DATA
    if codec != CompressionCodec.NONE:
        assert len(payload) < len(DATA)


def test_stream_formats():
    assert zlib.decompress(compress(CompressionCodec.ZLIB, DATA)) == DATA  # zlib stream
    lz4 = compress(CompressionCodec.LZ4, DATA)
    assert int.from_bytes(lz4[:4], "little") == len(DATA)  # LE size prefix
    assert compress(CompressionCodec.ZSTD, DATA)[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    snappy = compress(CompressionCodec.SNAPPY, DATA)
    assert not snappy.startswith(b"\xff\x06\x00\x00sNaPpY")  # raw, not the framing format
    assert compress(CompressionCodec.NONE, DATA) == DATA


@pytest.mark.parametrize("codec", list(CompressionCodec))
def test_crc_mismatch_is_corruption(codec):
    framed = bytearray(frame_block(codec, DATA))
    framed[len(framed) // 2] ^= 0x40
    with pytest.raises(CorruptionError) as e:
        unframe_block(codec, bytes(framed), "obj", 4096)
    assert e.value.offset == 4096 and "CRC" in e.value.reason


@pytest.mark.parametrize("codec", [c for c in CompressionCodec if c != CompressionCodec.NONE])
def test_garbage_payload_is_corruption(codec):
    with pytest.raises(CorruptionError):
        decompress(codec, b"\x00\xffgarbage\x01\x02\x03" * 3, "obj", 0)


def test_short_block_is_corruption():
    with pytest.raises(CorruptionError):
        unframe_block(CompressionCodec.NONE, b"\x00\x01", "obj", 0)


def test_lz4_implausible_size_prefix():
    with pytest.raises(CorruptionError):
        decompress(CompressionCodec.LZ4, b"\xff\xff\xff\xff\x00", "obj", 0)
