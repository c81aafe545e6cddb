"""The WAL flush's fast encoder writes the same rows as the general SST writer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.format.sst import SstOptions
from slatedb.format.types import CompressionFormat
from slatedb.format.wal_sst import decode_wal_sst, encode_wal_sst, encode_wal_sst_fast
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
