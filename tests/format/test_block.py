"""Block V2 builder sizing and layout, V2/V1 decoding, restart-point seek."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError
from slatedb.format import block as blk
from slatedb.format.row_codec import encoded_size_v2
from slatedb.row import Row, RowKind


def vrow(i: int, value: bytes = b"v" * 20, seq: int = 1) -> Row:
    return Row(b"key%06d" % i, seq, RowKind.VALUE, value, None, 1000)


def test_restart_every_16_entries():
    b = blk.BlockBuilderV2(65536)
    for i in range(40):
        assert b.add(vrow(i))
    raw = b.build()
    (n,) = struct.unpack(">H", raw[-2:])
    assert n == 3
    restarts = struct.unpack(">3H", raw[-8:-2])
    assert restarts[0] == 0
    decoded = blk.decode_block_v2(raw, "o", 0)
    assert decoded.rows == [vrow(i) for i in range(40)]
    # Entry 16 starts at restart 1 and stores its full key (shared = 0).
    assert raw[restarts[1]] == 0 and raw[restarts[1] + 1] == len(b"key000016")


def test_official_sizing_rule():
    """current (entries + 2*restarts + 2) + entry (+2 at a restart) must be <= block size."""
    b = blk.BlockBuilderV2(4096)
    added = 0
    while b.add(vrow(added)):
        added += 1
    size = b.current_size_bytes()
    assert size <= 4096
    shared = 0 if added % 16 == 0 else 6
    nxt = encoded_size_v2(shared, vrow(added)) + (2 if added % 16 == 0 else 0)
    assert size + nxt > 4096
    assert len(b.build()) == size


def test_oversized_entry_gets_its_own_block():
    b = blk.BlockBuilderV2(4096)
    assert b.add(vrow(0))
    big = vrow(1, b"x" * 10000)
    assert not b.add(big)
    b2 = blk.BlockBuilderV2(4096)
    assert b2.add(big)
    assert not b2.add(vrow(2))
    assert blk.decode_block_v2(b2.build(), "o", 0).rows == [big]


def test_block_seek():
    rows = [vrow(i * 2) for i in range(50)]
    block = blk.decode_block_v2(blk.encode_block_v2(rows), "o", 0)
    assert block.seek(b"key000010") == 5
    assert block.seek(b"key000011") == 6
    assert block.seek(b"a") == 0
    assert block.seek(b"z") == 50
    assert list(block.rows_from(b"key000095")) == rows[48:]


keys_st = st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=80, unique=True)


@settings(max_examples=150, deadline=None)
@given(keys_st, st.binary(max_size=14))
def test_restart_seek_matches_full_decode(keys, probe):
    rows = [Row(k, 3, RowKind.VALUE, k * 2, None, None) for k in sorted(keys)]
    raw = blk.encode_block_v2(rows)
    block = blk.decode_block_v2(raw, "o", 0)
    assert block.rows == rows
    spans, ended = blk.seek_key_v2(raw, probe, "o", 0) if probe else ((), False)
    assert [raw[a:m] for a, m in zip(spans[::2], spans[1::2])] == [r.value for r in rows if r.key == probe]
    assert ended is (bool(probe) and probe >= rows[-1].key)


def test_v1_block_round_trip():
    rows = [vrow(i) for i in range(30)] + [Row(b"key999999", 2, RowKind.TOMBSTONE, b"", 7, None)]
    raw = blk.encode_block_v1(rows)
    assert blk.decode_block(raw, 1, "o", 0).rows == rows
    # V1 trailer: one u16 offset per entry then the count.
    assert struct.unpack(">H", raw[-2:])[0] == len(rows)


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x00", b"\x00\x00", b"\x00\x05", b"\x00\x00\x00\x01"],
)
def test_bad_trailers_are_corruption(raw):
    with pytest.raises(CorruptionError):
        blk.decode_block_v2(raw, "o", 0)
    with pytest.raises(CorruptionError):
        blk.decode_block_v1(raw, "o", 0)


def test_restart_offset_inside_an_entry_is_corruption():
    raw = bytearray(blk.encode_block_v2([vrow(i) for i in range(20)]))
    # Move restart 1 by one byte: it no longer points at an entry start.
    pos = len(raw) - 4
    (r1,) = struct.unpack(">H", raw[pos : pos + 2])
    raw[pos : pos + 2] = struct.pack(">H", r1 + 1)
    with pytest.raises(CorruptionError):
        blk.decode_block_v2(bytes(raw), "o", 0)


def test_unknown_format_version():
    with pytest.raises(CorruptionError):
        blk.decode_block(blk.encode_block_v2([vrow(0)]), 3, "o", 0)
