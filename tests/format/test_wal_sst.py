"""WAL SSTs: layout facts, round trip, the 0-byte fence."""

from __future__ import annotations

import struct

import pytest

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format.sst import SstOptions, decode_layout
from slatedb.format.sst_writer import write_sst
from slatedb.format.types import SstType
from slatedb.format.wal_sst import decode_wal_sst, encode_wal_sst, read_wal_sst
from slatedb.row import Row, RowKind


def wal_rows(n: int, start_seq: int = 10) -> list[Row]:
    # Keys unordered, seqs increasing: as a WAL holds writes.
    return [
        Row(b"user%05d" % ((i * 7919) % 1000), start_seq + i, RowKind.TOMBSTONE if i % 10 == 3 else RowKind.VALUE,
            b"" if i % 10 == 3 else b"v" * 120, None, 1_700_000_000_000 + i)
        for i in range(n)
    ]


def test_wal_layout_facts():
    rows = wal_rows(2000)
    enc = encode_wal_sst(rows)
    info = enc.info
    assert info.sst_type == SstType.WAL
    assert info.filter_len == 0 and info.filter_offset == info.index_offset
    assert info.stats_len == 0 and info.stats_offset == 0
    assert info.first_entry == struct.pack(">Q", 10) and info.last_entry is None
    layout = decode_layout(enc.data, "wal/00000000000000000001.sst")
    assert layout.filter is None
    assert len(layout.index) > 1
    assert layout.index.first_keys[0] == struct.pack(">Q", 10)
    wal = decode_wal_sst(enc.data, "w")
    assert not wal.is_fence and list(wal.rows) == rows
    assert wal.first_seq == 10 and wal.last_seq == 2009
    for key, meta in zip(layout.index.first_keys, enc.block_meta):
        assert len(key) == 8 and key == meta.first_key


def test_fence_is_an_empty_wal():
    wal = decode_wal_sst(b"", "wal/00000000000000000002.sst")
    assert wal.is_fence and wal.rows == () and wal.info is None and wal.first_seq is None


def test_wal_rows_must_be_in_seq_order():
    with pytest.raises(InvalidArgumentError):
        encode_wal_sst([Row(b"a", 2, RowKind.VALUE, b""), Row(b"b", 1, RowKind.VALUE, b"")])
    # Equal seqs (rows of one batch) are allowed.
    rows = [Row(b"b", 5, RowKind.VALUE, b"1"), Row(b"a", 5, RowKind.VALUE, b"2")]
    assert list(decode_wal_sst(encode_wal_sst(rows).data, "w").rows) == rows


def test_compacted_sst_is_not_a_wal():
    enc = write_sst([Row(b"a", 1, RowKind.VALUE, b"x")])
    with pytest.raises(CorruptionError):
        decode_wal_sst(enc.data, "w")


def test_compressed_wal():
    rows = wal_rows(300)
    enc = encode_wal_sst(rows, SstOptions(compression=4))
    assert list(decode_wal_sst(enc.data, "w").rows) == rows


class _Store:
    def __init__(self, data):
        self.data = data

    async def get(self, key, byte_range=None):
        class R:
            pass

        r = R()
        r.data = self.data
        return r


async def test_read_wal_sst_through_a_store():
    rows = wal_rows(50)
    assert list((await read_wal_sst(_Store(encode_wal_sst(rows).data), "w")).rows) == rows
    assert (await read_wal_sst(_Store(b""), "w")).is_fence
