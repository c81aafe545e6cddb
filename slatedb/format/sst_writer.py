"""The SST writer: rows in, one SST object's bytes out (format version 2).

Compacted SSTs take rows ordered by key ascending, then seq descending; WAL SSTs take rows in
seq order (see :mod:`slatedb.format.wal_sst`). The writer builds the whole object in memory:
SSTs are written with one ``put``, and the largest (``max_sst_size``, 256 MiB by default) still
fits comfortably.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import attrs

from slatedb.errors import InvalidArgumentError
from slatedb.format.block import BlockBuilderV2
from slatedb.format.block_bulk import Columns, KeysTooWide, encode_blocks
from slatedb.format.kept_columns import KeptColumns
from slatedb.format.bloom import BLOOM_FILTER_NAME, BloomFilter, encode_composite_filter
from slatedb.format.bloom_bulk import build_bloom_bits, siphash13_many, siphash13_rows
from slatedb.format.compression import frame_block
from slatedb.format.fbwrite import encode_sst_index_columns, encode_sst_stats_columns
from slatedb.format.row_codec import check_row_encodable, common_prefix_len
from slatedb.format.sst import (
    FORMAT_VERSION_LATEST,
    SstIndex,
    SstLayout,
    SstOptions,
    data_end_offset,
    encode_info_with_crc,
    encode_trailer,
)
from slatedb.format.types import BlockMeta, BlockStats, FilterFormat, SsTableInfo, SstStats, SstType
from slatedb.row import Row, as_row

_U64 = struct.Struct(">Q")


def compute_index_key(prev_block_last_key: bytes | None, block_first_key: bytes) -> bytes:
    """Separator stored in the index for a block (compacted SSTs).

    Empty for the first block; otherwise the shortest prefix of ``block_first_key`` that sorts
    after ``prev_block_last_key``, or the whole key when the two are equal (one key's versions
    straddling the boundary).
    """
    if prev_block_last_key is None:
        return b""
    assert prev_block_last_key <= block_first_key, "blocks must be in key order"
    n = common_prefix_len(prev_block_last_key, block_first_key)
    if n == len(block_first_key):
        return block_first_key
    return block_first_key[: n + 1]


@attrs.frozen
class EncodedSst:
    """A finished SST: the object's bytes and the metadata the manifest records.

    The blocks are kept as columns (``index_keys``, ``block_offsets``; per-block row counts in
    ``block_counts``): a 100k-row L0 SST has some 3,000 blocks, and an object per block and per
    block's stats cost the flush more than their encoding (allocations, and the cyclic GC passes
    they trigger). :attr:`block_meta` and :attr:`stats` build the objects when asked.
    """

    data: bytes
    info: SsTableInfo
    format_version: int
    index_keys: tuple[bytes, ...]
    block_offsets: tuple[int, ...]
    num_rows: int
    #: The bloom filter written (None: none), and where the metadata starts.
    filter: BloomFilter | None = None
    metadata_offset: int | None = None
    #: Compacted SSTs: (puts, deletes, merges) per block, and (raw key bytes, raw value bytes).
    block_counts: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None
    raw_sizes: tuple[int, int] = (0, 0)

    @property
    def size_bytes(self) -> int:
        return len(self.data)

    @property
    def block_meta(self) -> tuple[BlockMeta, ...]:
        return tuple(map(BlockMeta, self.block_offsets, self.index_keys))

    @property
    def stats(self) -> SstStats | None:
        """The stats block's content (None for a WAL SST, which has none)."""
        if self.block_counts is None:
            return None
        puts, deletes, merges = self.block_counts
        return SstStats(num_puts=sum(puts), num_deletes=sum(deletes), num_merges=sum(merges),
                        raw_key_size=self.raw_sizes[0], raw_val_size=self.raw_sizes[1],
                        block_stats=tuple(map(BlockStats, puts, deletes, merges)))

    def layout(self, object_name: str) -> SstLayout:
        """What :func:`~slatedb.format.sst.decode_layout` would read back from :attr:`data`,
        without decoding it (the writer that just built the SST opens a reader on it)."""
        assert self.metadata_offset is not None, "an SST written by SstWriter"
        offsets = list(self.block_offsets)
        offsets.append(data_end_offset(self.info))
        index = SstIndex(list(self.index_keys), offsets)
        return SstLayout(object_name, self.format_version, self.info, index, self.filter, self.metadata_offset)


class SstWriter:
    """Accumulates rows into framed blocks and finishes them into an SST object."""

    def __init__(self, options: SstOptions | None = None, sst_type: SstType = SstType.COMPACTED) -> None:
        self.options = options or SstOptions()
        self.sst_type = SstType(sst_type)
        self._codec = self.options.compression
        self._builder = BlockBuilderV2(self.options.block_size_bytes)
        self._chunks: list[bytes] = []
        self._offset = 0  # bytes of framed data blocks so far
        # The blocks, as columns: offset, index key, puts, deletes, merges.
        self._block_offsets: list[int] = []
        self._index_keys: list[bytes] = []
        self._puts: list[int] = []
        self._deletes: list[int] = []
        self._merges: list[int] = []
        self._prev_block_last_key: bytes | None = None
        # The keys add() took (add_sorted hashes its own as it goes): hashed into the filter at
        # finish, if the SST is large enough; the count and the first key of every row added.
        self._keys: list[bytes] = []
        self._num_keys = 0
        self._first_key: bytes | None = None
        self._last: Row | None = None
        self._first_seq: int | None = None
        self._open_block_first_seq = 0
        self._raw_key_size = 0
        self._raw_val_size = 0
        self._finished = False
        # add_sorted: the rows of the open block, not encoded yet (a later call may extend it).
        self._carry: list[Row] = []
        self._carry_bytes = 0
        # add_sorted with kept columns: (the KeptColumns, where its next rows start) when the
        # carried rows are its rows just before that point.
        self._kept_at: tuple[KeptColumns, int] | None = None
        # Filter hashes of the keys add_sorted took.
        self._hashes: list = []

    # -- adding rows ---------------------------------------------------------------------------

    def add(self, row: Row) -> None:
        assert not self._finished, "writer already finished"
        if self._carry:
            self._drain_carry()
        check_row_encodable(row)
        last = self._last
        if last is not None:
            if self.sst_type == SstType.COMPACTED:
                if row.key < last.key or (row.key == last.key and row.seq >= last.seq):
                    raise InvalidArgumentError(
                        "compacted SST rows must be ordered by key ascending, then seq descending"
                    )
            elif row.seq < last.seq:
                raise InvalidArgumentError("WAL SST rows must be in seq order")
        else:
            self._first_seq = row.seq
        opens_block = self._builder.is_empty()
        if not self._builder.add(row):
            self._finish_block()
            added = self._builder.add(row)
            assert added, "an empty block accepts any row"
            opens_block = True
        if opens_block:
            self._open_block_first_seq = row.seq
        self._last = row
        self._keys.append(row.key)
        if self._first_key is None:
            self._first_key = row.key
        self._num_keys += 1
        self._raw_key_size += len(row.key)
        self._raw_val_size += len(row.value)

    def add_all(self, rows) -> None:
        for row in rows:
            self.add(row)

    def add_sorted(self, rows: Sequence[Row], kept: KeptColumns | None = None, at: int = 0) -> None:
        """Add ``rows`` (compacted SSTs: key ascending, then seq descending) many at once.

        The SST comes out byte for byte as :meth:`add` of each row would make it, with the same
        errors, about ten times faster (:mod:`slatedb.format.block_bulk`). The rows of the last
        block stay pending until a later call or :meth:`finish` (they may share it with later
        rows); :meth:`estimated_size_bytes` counts them by an estimate.

        ``kept``: columns already extracted from these rows, which are ``kept``'s rows
        ``at ..`` (a memtable's L0 flush, :class:`~slatedb.format.kept_columns.KeptColumns`); where
        it has none, the columns are extracted here.
        """
        assert not self._finished, "writer already finished"
        assert self.sst_type == SstType.COMPACTED, "add_sorted builds compacted SSTs"
        rows = rows if isinstance(rows, list) else list(rows)
        kept_at, self._kept_at = self._kept_at, None
        if not rows:
            return
        if not self._builder.is_empty():  # rows were added one at a time: go on that way
            for row in rows:
                self.add(as_row(row))
            return
        carried = len(self._carry)
        all_rows = self._carry + rows if carried else rows
        cols = None
        if kept is not None and (not carried or kept_at == (kept, at)):
            cols = kept.columns(at - carried, at + len(rows), all_rows)
        try:
            if cols is None:
                cols = Columns.of(all_rows)
        except KeysTooWide:  # long keys: fewer rows at a time
            if len(rows) == 1:
                self._drain_carry()
                self.add(as_row(rows[0]))
                return
            half = len(rows) // 2
            self.add_sorted(rows[:half])
            self.add_sorted(rows[half:])
            return
        last = self._last
        if (cols is None or not cols.in_order() or (not carried and last is not None and (
                rows[0][0] < last.key or (rows[0][0] == last.key and rows[0][1] >= last.seq)))):
            # a row the format refuses, or out of order: add() names it
            self._drain_carry()
            for row in rows:
                self.add(as_row(row))
            return
        enc = encode_blocks(cols, self.options.block_size_bytes, self._codec, final=False)
        self._take_blocks(enc, cols, all_rows)
        if self._first_key is None:
            self._first_key = rows[0][0]
        self._num_keys += len(rows)
        self._hashes.append(siphash13_rows(cols.km, carried))
        self._raw_key_size += int(cols.km.lengths[carried:].sum())
        self._raw_val_size += int(cols.vlen[carried:].sum())
        if self._first_seq is None:
            self._first_seq = rows[0][1]
        self._last = as_row(rows[-1])
        self._carry = all_rows[enc.rows_used :]
        self._carry_bytes = sum(len(r[0]) + len(r[3]) + 20 for r in self._carry)
        if kept is not None:
            self._kept_at = (kept, at + len(rows))

    def _take_blocks(self, enc, cols: Columns, rows: Sequence[Row]) -> None:
        """Record the framed blocks :func:`encode_blocks` made of ``rows`` (columns ``cols``)."""
        lengths, cpl = cols.km.lengths, cols.cpl
        for size, s, e in zip(enc.framed_sizes, enc.starts, enc.ends):
            first = rows[s][0]
            if self._prev_block_last_key is None:
                index_key = b""
            elif s == 0:
                index_key = compute_index_key(self._prev_block_last_key, first)
            else:
                c = int(cpl[s])
                index_key = first if c == int(lengths[s]) else first[: c + 1]
            self._block_offsets.append(self._offset)
            self._index_keys.append(index_key)
            self._offset += size
            self._prev_block_last_key = rows[e - 1][0]
        if enc.framed:
            self._chunks.append(enc.framed)
        self._puts += enc.puts
        self._deletes += enc.deletes
        self._merges += enc.merges

    def _flush_carry(self) -> None:
        """Encode the pending rows of :meth:`add_sorted` as the SST's last blocks."""
        kept_at, self._kept_at = self._kept_at, None
        cols = None
        if kept_at is not None:  # the carried rows end where the kept columns' next rows start
            kept, at = kept_at
            cols = kept.columns(at - len(self._carry), at, self._carry)
        try:
            if cols is None:
                cols = Columns.of(self._carry)
        except KeysTooWide:
            self._drain_carry()  # the row-at-a-time builder takes them (finish closes its block)
            return
        assert cols is not None, "carried rows were checked"
        rows = self._carry
        self._carry = []
        self._carry_bytes = 0
        self._take_blocks(encode_blocks(cols, self.options.block_size_bytes, self._codec, final=True), cols, rows)

    def _drain_carry(self) -> None:
        """Hand the pending rows of :meth:`add_sorted` to the row-at-a-time builder (they start
        a block, so it cuts them exactly as the bulk encoder would)."""
        rows = self._carry
        self._carry = []
        self._carry_bytes = 0
        self._kept_at = None
        builder = self._builder
        assert builder.is_empty()
        for row in map(as_row, rows):
            if builder.is_empty():
                self._open_block_first_seq = row.seq
            if not builder.add(row):
                self._finish_block()
                builder = self._builder
                added = builder.add(row)
                assert added, "an empty block accepts any row"
                self._open_block_first_seq = row.seq

    def __len__(self) -> int:
        return self._num_keys

    def estimated_size_bytes(self) -> int:
        """Bytes written so far plus the open block (for size-based SST rolling)."""
        return self._offset + self._builder.current_size_bytes() + self._carry_bytes

    def _finish_block(self) -> None:
        builder = self._builder
        assert not builder.is_empty()
        if self.sst_type == SstType.COMPACTED:
            index_key = compute_index_key(self._prev_block_last_key, builder.first_key)
        else:
            index_key = _U64.pack(self._open_block_first_seq)  # WAL: the block's first seq
        framed = frame_block(self._codec, builder.build())
        self._block_offsets.append(self._offset)
        self._index_keys.append(index_key)
        self._puts.append(builder.num_puts)
        self._deletes.append(builder.num_deletes)
        self._merges.append(builder.num_merges)
        self._chunks.append(framed)
        self._offset += len(framed)
        self._prev_block_last_key = builder.last_key
        self._builder = BlockBuilderV2(self.options.block_size_bytes)

    # -- finishing -----------------------------------------------------------------------------

    def finish(self) -> EncodedSst:
        """The finished SST. At least one row is required (an SST has at least one block)."""
        assert not self._finished, "writer already finished"
        if not self._num_keys:
            raise InvalidArgumentError("an SST needs at least one row")
        self._finished = True
        if self.sst_type == SstType.WAL:
            return self._finish_wal()
        return self._finish_compacted()

    def _finish_compacted(self) -> EncodedSst:
        if self._carry:
            self._flush_carry()
        if not self._builder.is_empty():
            self._finish_block()
        codec = self._codec
        chunks = self._chunks
        offset = self._offset

        filter_offset = offset
        filter_len = 0
        bloom = None
        if self._num_keys >= self.options.min_filter_keys:
            bloom = self._filter()
            framed = frame_block(codec, encode_composite_filter([(BLOOM_FILTER_NAME, bloom.encode())]))
            chunks.append(framed)
            filter_len = len(framed)
            offset += filter_len

        index_offset = offset
        framed = frame_block(codec, encode_sst_index_columns(self._index_keys, self._block_offsets))
        chunks.append(framed)
        index_len = len(framed)
        offset += index_len

        totals = SstStats(num_puts=sum(self._puts), num_deletes=sum(self._deletes), num_merges=sum(self._merges),
                          raw_key_size=self._raw_key_size, raw_val_size=self._raw_val_size)
        stats_offset = offset
        framed = frame_block(codec, encode_sst_stats_columns(totals, self._puts, self._deletes, self._merges))
        chunks.append(framed)
        stats_len = len(framed)
        offset += stats_len

        assert self._last is not None
        info = SsTableInfo(
            first_entry=self._first_key,
            index_offset=index_offset,
            index_len=index_len,
            filter_offset=filter_offset,
            filter_len=filter_len,
            compression_format=codec,
            sst_type=SstType.COMPACTED,
            last_entry=self._last.key,
            stats_offset=stats_offset,
            stats_len=stats_len,
            filter_format=FilterFormat.COMPOSITE,
        )
        return self._seal(info, offset, bloom, compacted=True)

    def _finish_wal(self) -> EncodedSst:
        self._finish_block()
        codec = self._codec
        offset = self._offset
        index_offset = offset
        framed = frame_block(codec, encode_sst_index_columns(self._index_keys, self._block_offsets))
        self._chunks.append(framed)
        index_len = len(framed)
        offset += index_len
        assert self._first_seq is not None
        info = SsTableInfo(
            first_entry=_U64.pack(self._first_seq),
            index_offset=index_offset,
            index_len=index_len,
            filter_offset=index_offset,
            filter_len=0,
            compression_format=codec,
            sst_type=SstType.WAL,
            last_entry=None,
            stats_offset=0,
            stats_len=0,
            filter_format=FilterFormat.COMPOSITE,
        )
        return self._seal(info, offset, None, compacted=False)

    def _filter(self) -> BloomFilter:
        """The bloom filter of every key: hashed by add_sorted as it went, the keys add() took
        here (the filter is a set of bits, whatever order the keys were hashed in)."""
        import numpy as np

        hashes = self._hashes
        if self._keys:
            hashes = hashes + [siphash13_many(self._keys)]
        return build_bloom_bits(np.concatenate(hashes) if hashes else np.zeros(0, np.uint64),
                                self.options.filter_bits_per_key)

    def _seal(self, info: SsTableInfo, metadata_offset: int, bloom: BloomFilter | None, *,
              compacted: bool) -> EncodedSst:
        chunks = self._chunks
        chunks.append(encode_info_with_crc(info))
        chunks.append(encode_trailer(metadata_offset, FORMAT_VERSION_LATEST))
        data = b"".join(chunks)
        self._chunks = []
        return EncodedSst(
            data=data,
            info=info,
            format_version=FORMAT_VERSION_LATEST,
            index_keys=tuple(self._index_keys),
            block_offsets=tuple(self._block_offsets),
            num_rows=self._num_keys,
            filter=bloom,
            metadata_offset=metadata_offset,
            block_counts=(tuple(self._puts), tuple(self._deletes), tuple(self._merges)) if compacted else None,
            raw_sizes=(self._raw_key_size, self._raw_val_size),
        )


def write_sst(rows, options: SstOptions | None = None, sst_type: SstType = SstType.COMPACTED) -> EncodedSst:
    """Convenience: an SST of ``rows`` in one call."""
    writer = SstWriter(options, sst_type)
    writer.add_all(rows)
    return writer.finish()
