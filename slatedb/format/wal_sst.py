"""WAL SSTs: ``wal/<id:020>.sst``.

A WAL SST is an SST with ``sst_type = Wal``: rows in seq order (keys unordered), no filter and
no stats (``filter_offset == index_offset``, ``filter_len == 0``), index keys and
``first_entry`` = the block's / the SST's first seq as 8 big-endian bytes, no ``last_entry``.

A **0-byte object is a fence**: a new writer creates it at the next WAL id so that an older
writer's create-if-absent of that id fails. It replays as an empty WAL SST; :class:`WalSst`
says so explicitly with ``is_fence``.

WAL SSTs are read whole (replay needs every row), so the reader is one ``get`` followed by the
pure decoders of :mod:`slatedb.format.sst`.
"""

from __future__ import annotations

import struct

import attrs

from typing import Sequence

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import memo
from slatedb.format.block import RESTART_INTERVAL
from slatedb.format.compression import frame_block
from slatedb.format.block_bulk import Columns, KeysTooWide, encode_blocks
from slatedb.format.kept_columns import ColumnsPart
from slatedb.format.fbcodec import encode_sst_index
from slatedb.format.fbwrite import encode_sst_index_columns
from slatedb.format.row_codec import (
    FLAG_HAS_CREATE_TS,
    FLAG_HAS_EXPIRE_TS,
    FLAG_MERGE_OPERAND,
    FLAG_TOMBSTONE,
    check_row_encodable,
)
from slatedb.format.sst import FORMAT_VERSION_LATEST, SstOptions, decode_all_blocks, decode_layout, encode_info_with_crc, encode_trailer
from slatedb.format.sst_writer import EncodedSst, SstWriter
from slatedb.format.types import BlockMeta, FilterFormat, SsTableInfo, SstType
from slatedb.row import Row, RowKind, as_row

_U64 = struct.Struct(">Q")
_SEQ_FLAGS = struct.Struct(">QB")
_I64 = struct.Struct(">q")
_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE


def varint_bytes(n: int) -> bytes:
    """LEB128 encoding of ``n`` (a u32)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)

#: The bytes of a fence object.
FENCE_BYTES = b""


@attrs.frozen
class WalSst:
    """A decoded WAL SST: its rows in seq order, or a fence (no rows, no info)."""

    rows: tuple[Row, ...]
    info: SsTableInfo | None
    is_fence: bool

    @property
    def first_seq(self) -> int | None:
        return self.rows[0].seq if self.rows else None

    @property
    def last_seq(self) -> int | None:
        return self.rows[-1].seq if self.rows else None


def encode_wal_sst(rows, options: SstOptions | None = None) -> EncodedSst:
    """The WAL SST of ``rows`` (non-empty, in seq order), through the general SST writer."""
    writer = SstWriter(options, SstType.WAL)
    writer.add_all(rows)
    return writer.finish()


#: From this many rows on, :func:`encode_wal_sst_fast` encodes with numpy (the row loop is faster
#: below: numpy's fixed cost per call).
BULK_MIN_ROWS = 256


def encode_wal_sst_fast(rows: Sequence[Row], options: SstOptions | None = None,
                        keep: list[ColumnsPart] | None = None) -> EncodedSst:
    """:func:`encode_wal_sst_rows`' bytes; many rows at once through the bulk block encoder
    (:func:`_encode_wal_sst_bulk`, same bytes, ``tests/format/test_wal_fast.py``). With
    ``keep``, the bulk encoder appends the columns it extracted (:class:`ColumnsPart`, in seq
    order) for the L0 encode of the same rows to reuse."""
    if len(rows) >= BULK_MIN_ROWS:
        encoded = _encode_wal_sst_bulk(rows, options or SstOptions(), keep)
        if encoded is not None:
            return encoded
    return encode_wal_sst_rows(rows, options)


def _wal_info(first_entry: bytes, index_offset: int, index_len: int, codec) -> SsTableInfo:
    """The info block of a WAL SST: no filter (its offset is the index's), no last entry."""
    return SsTableInfo(first_entry=first_entry, index_offset=index_offset, index_len=index_len,
                       filter_offset=index_offset, filter_len=0, compression_format=codec,
                       sst_type=SstType.WAL, last_entry=None, filter_format=FilterFormat.COMPOSITE)


#: Rows per call of the bulk block encoder (the rows of its last, still open block go on to the
#: next call): its arrays and joins stay small enough for the CPU's caches. 100k rows of the
#: bench at once took 104 ms, in chunks of 8,192 73 ms (columns and blocks).
WAL_ENCODE_CHUNK_ROWS = 8192


def _encode_wal_sst_bulk(rows: Sequence[Row], options: SstOptions,
                         keep: list[ColumnsPart] | None = None) -> EncodedSst | None:
    """The WAL SST of ``rows`` from :func:`~slatedb.format.block_bulk.encode_blocks` with no
    shared key prefix (every entry as a restart's), as :func:`encode_wal_sst_rows` writes them; None
    for rows it leaves to the row loop (one the format refuses, seqs out of order, keys too wide
    for one key matrix), which then names the problem or encodes them.

    The rows go through the encoder :data:`WAL_ENCODE_CHUNK_ROWS` at a time; each call leaves its
    last block open (``final=False``) and the next starts with that block's rows, so the blocks
    are cut exactly as one call over every row would cut them (the size rule looks only at the
    rows of the block it fills). Consecutive chunks share at least that row, so the seq order
    is checked across every boundary too."""
    import numpy as np

    codec = options.compression
    n = len(rows)
    framed: list[bytes] = []
    framed_sizes: list[int] = []
    first_seqs: list[int] = []
    parts: list[ColumnsPart] = []
    at = 0  # the first row not yet in a block
    size = WAL_ENCODE_CHUNK_ROWS
    while at < n:
        end = min(at + size, n)
        try:
            cols = Columns.of(rows[at:end], shared_prefixes=False)
        except KeysTooWide:
            return None
        if cols is None or (cols.seqs[1:] < cols.seqs[:-1]).any():
            return None
        final = end == n
        enc = encode_blocks(cols, options.block_size_bytes, codec, final=final)
        if not enc.rows_used:  # the chunk is one open block: take more rows
            size *= 2
            continue
        framed.append(enc.framed)
        framed_sizes += enc.framed_sizes
        first_seqs += cols.seqs[enc.starts].tolist()
        if keep is not None:
            parts.append(ColumnsPart.of(cols, enc.rows_used))
        at += enc.rows_used
        size = WAL_ENCODE_CHUNK_ROWS
    index_keys = tuple(map(_U64.pack, first_seqs))
    offsets = np.zeros(len(framed_sizes), dtype=np.int64)
    np.cumsum(framed_sizes[:-1], out=offsets[1:])
    offset = int(offsets[-1]) + framed_sizes[-1]
    block_offsets = tuple(offsets.tolist())
    index = frame_block(codec, encode_sst_index_columns(index_keys, block_offsets))
    info = _wal_info(index_keys[0], offset, len(index), codec)
    offset += len(index)
    framed += (index, encode_info_with_crc(info), encode_trailer(offset, FORMAT_VERSION_LATEST))
    data = b"".join(framed)
    if keep is not None:
        keep += parts
    return EncodedSst(data=data, info=info, format_version=FORMAT_VERSION_LATEST, index_keys=index_keys,
                      block_offsets=block_offsets, num_rows=len(rows))


def encode_wal_sst_rows(rows: Sequence[Row], options: SstOptions | None = None) -> EncodedSst:
    """The WAL SST of ``rows`` (non-empty, in seq order), built for speed, a row at a time: the
    writer's WAL flush is on the write path's CPU budget.

    Same format as :func:`encode_wal_sst`, with one permitted difference: no key prefix
    compression (every entry has ``shared = 0``, which every reader accepts; WAL keys follow
    seq order, so prefixes are rarely shared anyway). Blocks still get a restart point every
    16 entries and split at ``block_size_bytes``.
    """
    options = options or SstOptions()
    codec = options.compression
    block_size = options.block_size_bytes
    pack_tail = _SEQ_FLAGS.pack
    pack_i64 = _I64.pack
    chunks: list[bytes] = []
    block_meta: list[BlockMeta] = []
    offset = 0
    parts: list[bytes] = []
    restarts: list[int] = []
    size = 0  # bytes of entries in the open block
    count = 0
    last_seq = -1
    for row in rows:
        key, seq, kind, value, expire, create = row
        if not key or seq < last_seq:
            check_row_encodable(as_row(row))
            raise InvalidArgumentError("WAL SST rows must be in seq order")
        last_seq = seq
        kl = len(key)
        if kind == _TOMBSTONE:  # a RowKind, or a plain row's int
            if value:
                check_row_encodable(as_row(row))
            value = b""
            flags = FLAG_TOMBSTONE
        else:
            flags = 0 if kind == _VALUE else FLAG_MERGE_OPERAND
        vl = len(value)
        if kl < 128 and vl < 128:
            head = bytes((0, kl, vl))
        else:
            check_row_encodable(as_row(row))
            head = b"\x00" + varint_bytes(kl) + varint_bytes(vl)
        if expire is not None:
            flags |= FLAG_HAS_EXPIRE_TS
        if create is not None:
            flags |= FLAG_HAS_CREATE_TS
        tail = pack_tail(seq, flags)
        if expire is not None:
            tail += pack_i64(expire)
        if create is not None:
            tail += pack_i64(create)
        entry = len(head) + kl + vl + len(tail)
        is_restart = count % RESTART_INTERVAL == 0
        if count and size + entry + 2 * (len(restarts) + (2 if is_restart else 1)) > block_size:
            framed = _finish_wal_block(codec, parts, restarts)
            block_meta.append(BlockMeta(offset, _U64.pack(first_seq)))
            chunks.append(framed)
            offset += len(framed)
            parts = []
            restarts = []
            size = 0
            count = 0
            is_restart = True
        if count == 0:
            first_seq = seq
        if is_restart:
            restarts.append(size)
        parts += (head, key, value, tail)
        size += entry
        count += 1
    if count == 0:
        raise InvalidArgumentError("a WAL SST needs at least one row")
    framed = _finish_wal_block(codec, parts, restarts)
    block_meta.append(BlockMeta(offset, _U64.pack(first_seq)))
    chunks.append(framed)
    offset += len(framed)
    index = frame_block(codec, encode_sst_index(block_meta))
    chunks.append(index)
    info = _wal_info(_U64.pack(rows[0][1]), offset, len(index), codec)
    offset += len(index)
    chunks.append(encode_info_with_crc(info))
    chunks.append(encode_trailer(offset, FORMAT_VERSION_LATEST))
    return EncodedSst(
        data=b"".join(chunks),
        info=info,
        format_version=FORMAT_VERSION_LATEST,
        index_keys=tuple(m.first_key for m in block_meta),
        block_offsets=tuple(m.offset for m in block_meta),
        num_rows=len(rows),
    )


def _finish_wal_block(codec, parts: list[bytes], restarts: list[int]) -> bytes:
    assert restarts[-1] <= 0xFFFF, "restart offset must fit in u16"
    tail = struct.pack(f">{len(restarts) + 1}H", *restarts, len(restarts))
    parts.append(tail)
    return frame_block(codec, b"".join(parts))


def decode_wal_sst(data: bytes, object_name: str) -> WalSst:
    """Decode a whole WAL object; ``b""`` is a fence. Within a simulated run, bytes decoded
    before give the value they gave (:mod:`slatedb.format.memo`: readers, replays and the
    checkers decode the same WAL objects)."""
    if len(data) == 0:
        return WalSst(rows=(), info=None, is_fence=True)
    if type(data) is bytes:
        known = memo.recall("wal_sst", data)
        if known is not None:
            return known
    wal = _decode_wal_sst(data, object_name)
    if type(data) is bytes:
        memo.remember("wal_sst", data, wal, memo.MAX_DECODED)
    return wal


def _decode_wal_sst(data: bytes, object_name: str) -> WalSst:
    layout = decode_layout(data, object_name)
    info = layout.info
    if info.sst_type != SstType.WAL:
        raise CorruptionError(object_name, layout.metadata_offset, "not a WAL SST (sst_type is not Wal)")
    rows: list[Row] = []
    index = layout.index
    for i, block in enumerate(decode_all_blocks(data, layout)):
        if not block.rows:
            raise CorruptionError(object_name, index.offsets[i], "empty WAL block")
        expected_key = _U64.pack(block.rows[0].seq)
        if index.first_keys[i] != expected_key:
            raise CorruptionError(object_name, index.offsets[i], "WAL index key is not the block's first seq")
        rows.extend(block.rows)
    if info.first_entry is not None and info.first_entry != _U64.pack(rows[0].seq):
        raise CorruptionError(object_name, layout.metadata_offset, "WAL first_entry is not the first seq")
    for a, b in zip(rows, rows[1:]):
        if b.seq < a.seq:
            raise CorruptionError(object_name, 0, "WAL rows out of seq order")
    return WalSst(rows=tuple(rows), info=info, is_fence=False)


async def read_wal_sst(store, object_name: str) -> WalSst:
    """Fetch and decode ``object_name`` (one ``get`` of the whole object)."""
    result = await store.get(object_name)
    return decode_wal_sst(bytes(result.data), object_name)
