"""The bulk encoders write the same bytes as the row-at-a-time ones they replace on the flush path:

* ``SstWriter.add_sorted`` (numpy blocks, :mod:`slatedb.format.block_bulk`) against ``SstWriter.add``
  of each row (:class:`~slatedb.format.block.BlockBuilderV2`), in slices of any size, mixed with
  ``add``, with every codec, block size and filter threshold; and the same errors;
* the numpy bloom filter (:mod:`slatedb.format.bloom_bulk`) against ``BloomFilter.build`` over
  ``filter_hash`` (the SipHash-1-3 of the ``siphash24`` package);
* the lean FlatBuffers of the index and the stats (:mod:`slatedb.format.fbwrite`) against the
  generated builder code.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.errors import InvalidArgumentError
from slatedb.format import fbcodec, fbwrite
from slatedb.format.bloom import BloomFilter, filter_hash
from slatedb.format.bloom_bulk import build_bloom, siphash13_many, siphash13_rows
from slatedb.format.block_bulk import KeyMatrix
from slatedb.format.sst import SstOptions, decode_layout
from slatedb.format.sst_writer import SstWriter
from slatedb.format.types import BlockMeta, BlockStats, CompressionFormat, SstStats
from slatedb.row import Row, RowKind

_ts = st.none() | st.integers(-(2**63), 2**63 - 1)
# Keys from a small alphabet, often behind a long shared prefix: prefix compression, restart
# points and (with long prefixes and small blocks) the block-cut search's slow path.
_key = st.tuples(st.sampled_from([b"", b"p" * 40, b"q" * 300]), st.binary(min_size=1, max_size=12).map(
    lambda b: bytes(c % 3 for c in b))).map(lambda t: t[0] + t[1])
_versions = st.lists(
    st.tuples(st.sampled_from(list(RowKind)), st.binary(max_size=300) | st.sampled_from([b"", b"v" * 700]), _ts, _ts),
    min_size=1, max_size=3)
_table = st.dictionaries(_key, _versions, min_size=1, max_size=150)


def _rows(table: dict) -> list[Row]:
    rows, seq = [], 10**6
    for key in sorted(table):
        for kind, value, expire, create in table[key]:
            rows.append(Row(key, seq, kind, b"" if kind is RowKind.TOMBSTONE else value, expire, create))
            seq -= 3
    return rows


def _row_by_row(rows: list[Row], options: SstOptions):
    writer = SstWriter(options)
    writer.add_all(rows)
    return writer.finish()


@settings(max_examples=50, deadline=None)
@given(
    table=_table,
    cuts=st.lists(st.integers(1, 60), max_size=8),
    one_at_a_time=st.sets(st.integers(0, 8), max_size=3),
    block=st.sampled_from([64, 200, 1024, 4096]),
    codec=st.sampled_from(list(CompressionFormat)),
    min_filter_keys=st.sampled_from([0, 5, 1000]),
)
def test_add_sorted_writes_the_bytes_add_writes(table, cuts, one_at_a_time, block, codec, min_filter_keys) -> None:
    rows = _rows(table)
    options = SstOptions(block_size_bytes=block, compression=codec, min_filter_keys=min_filter_keys, filter_bits_per_key=7)
    want = _row_by_row(rows, options)
    writer = SstWriter(options)
    at = 0
    for i, size in enumerate([*cuts, len(rows)]):
        part = rows[at : at + size]
        if i in one_at_a_time:
            writer.add_all(part)  # add() and add_sorted mixed in one SST
        else:
            writer.add_sorted(part)
        at += size
        if at >= len(rows):
            break
    got = writer.finish()
    assert got.data == want.data
    assert (got.info, got.block_meta, got.stats, got.num_rows) == (want.info, want.block_meta, want.stats, want.num_rows)
    decoded = decode_layout(got.data, "sst")
    layout = got.layout("sst")
    assert (layout.index.first_keys, layout.index.offsets) == (decoded.index.first_keys, decoded.index.offsets)
    assert (layout.filter is None) == (decoded.filter is None)
    if decoded.filter is not None:
        assert layout.filter.encode() == decoded.filter.encode()
    assert (layout.info, layout.metadata_offset, layout.format_version) == (
        decoded.info, decoded.metadata_offset, decoded.format_version)


@pytest.mark.parametrize("bad", [
    Row(b"", 5, RowKind.VALUE, b"v"),  # empty key
    Row(b"k", -1, RowKind.VALUE, b"v"),  # not a u64
    Row(b"k", 2**64, RowKind.VALUE, b"v"),
    Row(b"k", 5, RowKind.TOMBSTONE, b"v"),  # a tombstone with a value
    Row(b"a", 5, RowKind.VALUE, b"v"),  # before the previous key
    Row(b"m", 100, RowKind.VALUE, b"v"),  # the previous key with a higher seq
])
def test_add_sorted_refuses_what_add_refuses_after_the_same_rows(bad) -> None:
    good = [Row(b"b", 9, RowKind.VALUE, b"x"), Row(b"m", 7, RowKind.VALUE, b"y")]
    errors = []
    for bulk in (False, True):
        writer = SstWriter(SstOptions(min_filter_keys=0))
        with pytest.raises(InvalidArgumentError) as e:
            if bulk:
                writer.add_sorted([*good, bad])
            else:
                writer.add_all([*good, bad])
        errors.append(str(e.value))
        assert len(writer) == 2
    assert errors[0] == errors[1]


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.binary(max_size=70), max_size=300), bits=st.integers(1, 40))
def test_numpy_bloom_is_the_bloom_filter_bit_for_bit(keys, bits) -> None:
    hashes = [filter_hash(k) for k in keys]
    assert siphash13_many(keys).tolist() == hashes
    nonempty = [k for k in keys if k]
    if nonempty:
        assert siphash13_rows(KeyMatrix.of(nonempty)).tolist() == [filter_hash(k) for k in nonempty]
    assert build_bloom(keys, bits).encode() == BloomFilter.build(hashes, bits).encode()


_u64 = st.integers(0, 2**64 - 1) | st.just(0)
_u16 = st.integers(0, 2**16 - 1) | st.just(0)


@settings(max_examples=60, deadline=None)
@given(
    metas=st.lists(st.tuples(_u64, st.binary(max_size=40)), max_size=40),
    stats=st.tuples(_u64, _u64, _u64, _u64, _u64),
    # puts-only blocks (the usual case, encode_sst_stats_columns' short path) among any others
    blocks=st.lists(st.tuples(_u16, _u16, _u16) | st.tuples(st.integers(1, 2**16 - 1), st.just(0), st.just(0)),
                    max_size=40),
)
def test_lean_flatbuffers_are_the_generated_builders_bytes(metas, stats, blocks) -> None:
    block_meta = [BlockMeta(o, k) for o, k in metas]
    assert fbwrite.encode_sst_index(block_meta) == fbcodec.encode_sst_index_builder(block_meta)
    sst_stats = SstStats(*stats, tuple(BlockStats(*b) for b in blocks))
    assert fbwrite.encode_sst_stats(sst_stats) == fbcodec.encode_sst_stats_builder(sst_stats)


# Long indexes and stats (at least fbwrite._BULK_MIN_BLOCKS blocks): after the first blocks the
# lean encoders write the rest in one step (_index_metas_bulk, _puts_stats_bulk, _table_vector).
@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(64, 300),
    key_lengths=st.sampled_from([(13,), (9, 10, 11, 12, 13), tuple(range(15)), (0,), (3, 256, 300)]),
    first_offset=st.sampled_from([0, 4096]),
    zero_step=st.sampled_from([None, 1, 70, 150]),  # two blocks at one offset, or a later offset of 0
    others=st.lists(st.tuples(st.integers(0, 299), st.tuples(_u16, _u16, _u16)), max_size=2),
)
def test_long_lean_flatbuffers_are_the_generated_builders_bytes(seed, n, key_lengths, first_offset, zero_step,
                                                                 others) -> None:
    rng = random.Random(seed)
    offsets, at = [], first_offset
    for i in range(n):
        offsets.append(0 if zero_step == 150 and i == 150 else at)
        at += 0 if i == zero_step else rng.randint(1, 2**20)
    block_meta = [BlockMeta(o, rng.randbytes(rng.choice(key_lengths))) for o in offsets]
    assert fbwrite.encode_sst_index(block_meta) == fbcodec.encode_sst_index_builder(block_meta)
    blocks = [BlockStats(rng.choice([1, 33, 2**16 - 1, rng.randint(1, 2**16 - 1)]), 0, 0) for _ in range(n)]
    for i, counts in others:
        if i < n:
            blocks[i] = BlockStats(*counts)
    sst_stats = SstStats(sum(b.num_puts for b in blocks), 0, 0, 1, 2, tuple(blocks))
    assert fbwrite.encode_sst_stats(sst_stats) == fbcodec.encode_sst_stats_builder(sst_stats)


def test_blocks_are_cut_where_add_cuts_them_at_every_block_size() -> None:
    """Every block size from 24 to 199 bytes over one set of rows: each cut lands where the
    row-at-a-time builder's size rule puts it, to the byte (a restart point's two bytes, the
    count's two, a row that fits exactly)."""
    rows = []
    for i in range(70):
        key = b"key%03d" % (i // 2) + (b"x" * (i % 5) if i % 2 else b"")
        rows.append(Row(key, 1000 - i, RowKind.VALUE if i % 7 else RowKind.TOMBSTONE,
                        b"" if i % 7 == 0 else bytes(range(i % 23)), None, 1700000000000 + i if i % 3 else None))
    for block in range(24, 200):
        options = SstOptions(block_size_bytes=block, min_filter_keys=10**6)
        writer = SstWriter(options)
        writer.add_sorted(rows)
        assert writer.finish().data == _row_by_row(rows, options).data, block


def test_long_keys_are_encoded_in_fewer_rows_at_a_time(monkeypatch) -> None:
    """A key matrix above the bound splits the rows (down to one, then the row-at-a-time
    builder), in add_sorted and at finish: still the same bytes."""
    from slatedb.format import block_bulk

    rows = [Row(b"k%02d" % i + b"x" * (i % 40), 100 - i, RowKind.VALUE, b"v" * (i % 9), None, 7) for i in range(60)]
    options = SstOptions(block_size_bytes=256, min_filter_keys=0)
    want = _row_by_row(rows, options).data
    monkeypatch.setattr(block_bulk, "MAX_KEY_MATRIX_BYTES", 64)
    writer = SstWriter(options)
    writer.add_sorted(rows[:35])
    writer.add_sorted(rows[35:])
    assert writer.finish().data == want
    monkeypatch.setattr(block_bulk, "MAX_KEY_MATRIX_BYTES", 1 << 23)
    writer = SstWriter(options)
    writer.add_sorted(rows)  # the last block's rows wait for finish...
    monkeypatch.setattr(block_bulk, "MAX_KEY_MATRIX_BYTES", 64)
    assert writer.finish().data == want  # ...which finds them too wide
