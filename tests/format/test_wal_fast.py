"""The WAL flush's fast encoder writes the same rows as the general SST writer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.errors import InvalidArgumentError
from slatedb.format import wal_sst
from slatedb.format.sst import SstOptions
from slatedb.format.types import CompressionFormat
from slatedb.format.wal_sst import (
    _encode_wal_sst_bulk,
    decode_wal_sst,
    encode_wal_sst,
    encode_wal_sst_fast,
    encode_wal_sst_rows,
)
from slatedb.row import Row, RowKind

rows_st = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=300),
        st.sampled_from(list(RowKind)),
        st.binary(max_size=600),
        st.none() | st.integers(-(2**63), 2**63 - 1),
        st.none() | st.integers(-(2**63), 2**63 - 1),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(spec=rows_st, block=st.sampled_from([64, 512, 4096]), codec=st.sampled_from(list(CompressionFormat)))
def test_fast_wal_encoding_round_trips_like_the_general_writer(spec, block, codec) -> None:
    rows = []
    seq = 1
    for key, kind, value, expire, create, step in spec:
        rows.append(Row(key, seq, kind, b"" if kind is RowKind.TOMBSTONE else value, expire, create))
        seq += step
    options = SstOptions(block_size_bytes=block, compression=codec)
    fast = encode_wal_sst_fast(rows, options)
    assert decode_wal_sst(fast.data, "fast").rows == tuple(rows)
    assert decode_wal_sst(encode_wal_sst(rows, options).data, "general").rows == tuple(rows)
    assert fast.info.first_entry == rows[0].seq.to_bytes(8, "big") and fast.info.filter_len == 0


@settings(max_examples=60, deadline=None)
@given(spec=rows_st, block=st.sampled_from([64, 512, 4096]), codec=st.sampled_from(list(CompressionFormat)),
       repeat=st.integers(1, 3), chunk=st.sampled_from([1, 2, 5, 64, wal_sst.WAL_ENCODE_CHUNK_ROWS]))
def test_bulk_wal_encoding_writes_the_row_loops_bytes(spec, block, codec, repeat, chunk) -> None:
    """Many rows (numpy, ``_encode_wal_sst_bulk``) and few (the row loop) give the same bytes,
    whatever the rows per call of the block encoder (``chunk``: a chunk's open block goes on
    into the next); rows the bulk path leaves to the loop (a tombstone with a value, seqs going
    back) still raise the loop's error."""
    default = wal_sst.WAL_ENCODE_CHUNK_ROWS
    wal_sst.WAL_ENCODE_CHUNK_ROWS = chunk
    try:
        _bulk_is_the_loop(spec, block, codec, repeat)
    finally:
        wal_sst.WAL_ENCODE_CHUNK_ROWS = default


def _bulk_is_the_loop(spec, block, codec, repeat) -> None:
    rows = []
    seq = 1
    for key, kind, value, expire, create, step in spec * repeat:
        rows.append(Row(key, seq, kind, b"" if kind is RowKind.TOMBSTONE else value, expire, create))
        seq += step
    options = SstOptions(block_size_bytes=block, compression=codec, min_filter_keys=2**31)
    bulk = _encode_wal_sst_bulk(rows, options)
    assert bulk is not None
    loop = encode_wal_sst_rows(rows, options)
    assert (bulk.data, bulk.info, bulk.index_keys, bulk.block_offsets, bulk.num_rows) == (
        loop.data, loop.info, loop.index_keys, loop.block_offsets, loop.num_rows)
    if len(rows) > 1:  # the last seq below the one before it: left to the loop, which refuses it
        back = rows[:-1] + [rows[-1]._replace(seq=rows[-2].seq - 1)]
        assert _encode_wal_sst_bulk(back, options) is None


def test_wal_flushes_of_many_rows_take_the_bulk_path(monkeypatch) -> None:
    calls = []
    real = wal_sst._encode_wal_sst_bulk
    monkeypatch.setattr(wal_sst, "_encode_wal_sst_bulk",
                        lambda rows, options, *keep: calls.append(len(rows)) or real(rows, options, *keep))
    rows = [Row(b"k%05d" % i, i + 1, RowKind.VALUE, b"v") for i in range(wal_sst.BULK_MIN_ROWS)]
    assert encode_wal_sst_fast(rows).data == encode_wal_sst_rows(rows).data
    encode_wal_sst_fast(rows[:10])
    assert calls == [wal_sst.BULK_MIN_ROWS]
    bad = rows[:-1] + [Row(b"t", rows[-1].seq, RowKind.TOMBSTONE, b"not empty")]
    with pytest.raises(InvalidArgumentError, match="tombstone"):
        encode_wal_sst_fast(bad)
