"""SST layout shared by the writer and the readers: trailer, metadata, index, filter.

An SST object is, in order::

    data blocks | [filter block] | index block | [stats block] | SsTableInfo | crc32 | trailer

where every block is framed ``compress(raw) || crc32`` (see :mod:`slatedb.format.compression`),
the ``SsTableInfo`` FlatBuffer is followed by the big-endian CRC-32 of its bytes, and the
10-byte trailer is ``u64 metadata_offset (BE) | u16 format_version (BE)``.

Everything here is a pure function over bytes: the async :class:`~slatedb.format.sst_reader.SstReader`
fetches ranges and hands them to these functions; the WAL reader and tests pass whole objects.
Every structural problem raises :class:`CorruptionError` with the object name and the offset.
"""

from __future__ import annotations

import operator
import struct
import zlib
from itertools import islice
from bisect import bisect_right

from typing import Any

import attrs

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import fbcodec, memo
from slatedb.format.bloom import DEFAULT_BITS_PER_KEY, DEFAULT_MIN_FILTER_KEYS, BloomFilter, decode_filter_block
from slatedb.format.block import DEFAULT_BLOCK_SIZE_BYTES, Block, decode_block
from slatedb.format.compression import codec_from_name, unframe_block
from slatedb.format.types import BlockMeta, CompressionFormat, SsTableInfo, SstStats, SstType

TRAILER_SIZE_BYTES = 10
CRC_SIZE_BYTES = 4
FORMAT_VERSION_V1 = 1  # block V1 + row codec V0 (read only)
FORMAT_VERSION_V2 = 2  # block V2 + row codec V2 (what we write)
FORMAT_VERSION_LATEST = FORMAT_VERSION_V2
SUPPORTED_FORMAT_VERSIONS = (FORMAT_VERSION_V1, FORMAT_VERSION_V2)

_TRAILER = struct.Struct(">QH")
_CRC = struct.Struct(">I")


@attrs.frozen
class SstOptions:
    """Writer settings; the defaults are the official engine's.

    ``min_filter_keys``: a bloom filter is written only for SSTs with at least this many rows.
    """

    block_size_bytes: int = DEFAULT_BLOCK_SIZE_BYTES
    min_filter_keys: int = DEFAULT_MIN_FILTER_KEYS
    filter_bits_per_key: int = DEFAULT_BITS_PER_KEY
    compression: CompressionFormat = CompressionFormat.NONE

    def __attrs_post_init__(self) -> None:
        if not 0 < self.block_size_bytes <= 65536:
            raise InvalidArgumentError(f"block_size_bytes {self.block_size_bytes} must be in 1..65536")
        if self.filter_bits_per_key <= 0:
            raise InvalidArgumentError("filter_bits_per_key must be positive")
        if self.min_filter_keys < 0:
            raise InvalidArgumentError("min_filter_keys must be >= 0")
        CompressionFormat(self.compression)


def sst_options_of(settings: Any, *, min_filter_keys: int | None = None) -> SstOptions:
    """The SST writer options of a database's settings (``slatedb.config.Settings``:
    ``block_size_bytes``, ``min_filter_keys``, ``filter_bits_per_key``, ``compression_codec``)."""
    return SstOptions(
        block_size_bytes=settings.block_size_bytes,
        min_filter_keys=settings.min_filter_keys if min_filter_keys is None else min_filter_keys,
        filter_bits_per_key=settings.filter_bits_per_key,
        compression=codec_from_name(settings.compression_codec),
    )


# ---------------------------------------------------------------------------------------------
# Trailer and SsTableInfo
# ---------------------------------------------------------------------------------------------


def encode_trailer(metadata_offset: int, format_version: int) -> bytes:
    return _TRAILER.pack(metadata_offset, format_version)


def decode_trailer(trailer: bytes, object_size: int, object_name: str) -> tuple[int, int]:
    """(metadata offset, format version) from the last 10 bytes of an ``object_size`` object."""
    trailer_offset = object_size - TRAILER_SIZE_BYTES
    if object_size < TRAILER_SIZE_BYTES or len(trailer) != TRAILER_SIZE_BYTES:
        raise CorruptionError(object_name, max(trailer_offset, 0), f"object of {object_size} bytes is too short for an SST")
    metadata_offset, version = _TRAILER.unpack(trailer)
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise CorruptionError(object_name, trailer_offset + 8, f"unknown SST format version {version}")
    if metadata_offset + CRC_SIZE_BYTES >= trailer_offset:
        raise CorruptionError(object_name, trailer_offset, f"metadata offset {metadata_offset} out of range")
    return metadata_offset, version


def encode_info_with_crc(info: SsTableInfo) -> bytes:
    data = fbcodec.encode_sst_info(info)
    return data + _CRC.pack(zlib.crc32(data))


def decode_info_with_crc(data: bytes, object_name: str, offset: int) -> SsTableInfo:
    """Decode ``SsTableInfo || crc32``; ``offset`` is where it starts in the object."""
    if len(data) <= CRC_SIZE_BYTES:
        raise CorruptionError(object_name, offset, "SST metadata too short")
    body = data[:-CRC_SIZE_BYTES]
    (stored,) = _CRC.unpack_from(data, len(data) - CRC_SIZE_BYTES)
    if zlib.crc32(body) != stored:
        raise CorruptionError(object_name, offset, "SST metadata CRC mismatch")
    return fbcodec.decode_sst_info(body, object_name, offset)


def check_info(info: SsTableInfo, metadata_offset: int, object_name: str) -> None:
    """Every block the info points at must lie before the metadata, in the documented order."""
    where = metadata_offset

    def in_range(name: str, off: int, length: int) -> None:
        if off < 0 or length < 0 or off + length > metadata_offset:
            raise CorruptionError(object_name, where, f"{name} [{off}, +{length}) out of range")

    in_range("index block", info.index_offset, info.index_len)
    if info.index_len <= CRC_SIZE_BYTES:
        raise CorruptionError(object_name, where, "SST has no index block")
    in_range("filter block", info.filter_offset, info.filter_len)
    if info.filter_len and info.filter_offset + info.filter_len > info.index_offset:
        raise CorruptionError(object_name, where, "filter block overlaps the index block")
    in_range("stats block", info.stats_offset, info.stats_len)
    if info.stats_len and info.stats_offset < info.index_offset + info.index_len:
        raise CorruptionError(object_name, where, "stats block overlaps the index block")


def data_end_offset(info: SsTableInfo) -> int:
    """Where the data blocks end: the filter if there is one, else the index."""
    return info.filter_offset if info.filter_len > 0 else info.index_offset


# ---------------------------------------------------------------------------------------------
# Index
# ---------------------------------------------------------------------------------------------


@attrs.define(slots=True, eq=False)
class SstIndex:
    """The decoded index: block ``i`` spans ``[offsets[i], offsets[i+1])`` of the object.

    ``offsets`` has one more element than ``first_keys``: the end of the data blocks.
    """

    first_keys: list[bytes]
    offsets: list[int]

    def __len__(self) -> int:
        return len(self.first_keys)

    def block_range(self, i: int) -> tuple[int, int]:
        return self.offsets[i], self.offsets[i + 1]

    def find_block(self, key: bytes) -> int:
        """The first block that may hold ``key`` (or the first key after it).

        A block's index key is > every key of the previous block, except when one key's
        versions straddle the boundary; then it equals that key, so an exact match steps back.
        """
        i = bisect_right(self.first_keys, key) - 1
        if i <= 0:
            return 0
        if self.first_keys[i] == key:
            while i > 0 and self.first_keys[i] == key:
                i -= 1
        return i

    def find_last_block(self, key: bytes) -> int:
        """The last block that may hold ``key``: the last whose first key is ``<= key`` (a key
        equal to a block's first key lies in that block, and perhaps also in the ones before
        it, which :meth:`find_block` steps back to)."""
        return max(0, bisect_right(self.first_keys, key) - 1)

    def to_block_meta(self) -> tuple[BlockMeta, ...]:
        return tuple(BlockMeta(o, k) for o, k in zip(self.offsets, self.first_keys))


def decode_index(
    framed: bytes, info: SsTableInfo, object_name: str
) -> SstIndex:
    """Decode and check the framed index block of an SST whose metadata is ``info``."""
    raw = unframe_block(info.compression_format, framed, object_name, info.index_offset)
    return decode_index_raw(raw, info, object_name)


def decode_index_raw(raw: bytes, info: SsTableInfo, object_name: str) -> SstIndex:
    """:func:`decode_index` of an index block already unframed (its CRC checked)."""
    offsets, keys = fbcodec.decode_sst_index_columns(raw, object_name, info.index_offset)
    data_end = data_end_offset(info)
    if not offsets:
        raise CorruptionError(object_name, info.index_offset, "SST index lists no block")
    if offsets[0] != 0:
        raise CorruptionError(object_name, info.index_offset, "first data block does not start at 0")
    # The whole lists compared in C first; the loops run only to name what is wrong.
    if not (all(map(operator.lt, offsets, islice(offsets, 1, None))) and offsets[-1] + CRC_SIZE_BYTES < data_end):
        prev = -1
        for off in offsets:
            if off <= prev or off + CRC_SIZE_BYTES >= data_end:
                raise CorruptionError(object_name, info.index_offset, f"block offset {off} out of order or out of range")
            prev = off
    if info.sst_type == SstType.COMPACTED:
        if keys[0] != b"":
            raise CorruptionError(object_name, info.index_offset, "first block's index key is not empty")
        if not all(map(operator.le, keys, islice(keys, 1, None))):
            raise CorruptionError(object_name, info.index_offset, "index keys out of order")
    offsets.append(data_end)
    return SstIndex(keys, offsets)


def decode_filter(framed: bytes, info: SsTableInfo, object_name: str) -> BloomFilter | None:
    raw = unframe_block(info.compression_format, framed, object_name, info.filter_offset)
    return decode_filter_block(raw, info.filter_format, object_name, info.filter_offset)


def decode_stats(framed: bytes, info: SsTableInfo, object_name: str) -> SstStats:
    raw = unframe_block(info.compression_format, framed, object_name, info.stats_offset)
    return fbcodec.decode_sst_stats(raw, object_name, info.stats_offset)


def decode_data_block(
    framed: bytes, info: SsTableInfo, format_version: int, block_offset: int, object_name: str
) -> Block:
    """Check, decompress and decode one framed data block starting at ``block_offset``.

    Within a simulated run, bytes decoded before (with the same codec and format version) give
    the block they gave (:mod:`slatedb.format.memo`; a :class:`Block` is immutable and shared
    by the block caches anyway): the compactor reads the blocks its writer and the checkers
    also read, and COMPACT-9's check runs every committed job's compaction again (seven in
    ten of a compactor-workers world's block decodes were of bytes decoded before)."""
    codec = info.compression_format
    if type(framed) is bytes:
        known = memo.recall("block", framed)
        if known is not None and known[0] == codec and known[1] == format_version:
            return known[2]
    raw = unframe_block(codec, framed, object_name, block_offset)
    block = decode_block(raw, format_version, object_name, block_offset)
    if type(framed) is bytes:
        memo.remember("block", framed, (codec, format_version, block), memo.MAX_DECODED)
    return block


# ---------------------------------------------------------------------------------------------
# Whole-object decoding (WAL replay, tests, tools)
# ---------------------------------------------------------------------------------------------


@attrs.define(slots=True, eq=False)
class SstLayout:
    """Everything needed to locate and check any block of one SST."""

    object_name: str
    format_version: int
    info: SsTableInfo
    index: SstIndex | None  # None: decoded from ``index_raw`` on first use (SstReader.open)
    filter: BloomFilter | None
    metadata_offset: int
    #: The index block unframed (its CRC checked) and not decoded yet, when ``index`` is None.
    index_raw: bytes | None = None


def _slice(data: bytes, start: int, end: int, object_name: str) -> bytes:
    if start < 0 or end > len(data) or start > end:
        raise CorruptionError(object_name, start, f"range [{start}, {end}) outside the {len(data)}-byte object")
    return data[start:end]


def decode_layout(data: bytes, object_name: str) -> SstLayout:
    """Metadata, index and filter of the SST held whole in ``data``."""
    size = len(data)
    metadata_offset, version = decode_trailer(data[size - TRAILER_SIZE_BYTES :], size, object_name)
    info = decode_info_with_crc(data[metadata_offset : size - TRAILER_SIZE_BYTES], object_name, metadata_offset)
    check_info(info, metadata_offset, object_name)
    index = decode_index(
        _slice(data, info.index_offset, info.index_offset + info.index_len, object_name), info, object_name
    )
    bloom = None
    if info.filter_len:
        bloom = decode_filter(
            _slice(data, info.filter_offset, info.filter_offset + info.filter_len, object_name), info, object_name
        )
    return SstLayout(object_name, version, info, index, bloom, metadata_offset)


def decode_all_blocks(data: bytes, layout: SstLayout) -> list[Block]:
    """Every data block of the SST held whole in ``data``, in order."""
    out = []
    index = layout.index
    for i in range(len(index)):
        start, end = index.block_range(i)
        out.append(
            decode_data_block(data[start:end], layout.info, layout.format_version, start, layout.object_name)
        )
    return out


def decode_all_rows(data: bytes, object_name: str) -> list:
    """All rows of the SST held whole in ``data``, in stored order."""
    layout = decode_layout(data, object_name)
    rows = []
    for block in decode_all_blocks(data, layout):
        rows.extend(block.rows)
    return rows
