"""Row codecs V2 and V0: byte layout, flags, varints, corruption."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import row_codec as rc
from slatedb.row import Row, RowKind


def test_v2_layout_of_a_value_row():
    out = bytearray()
    rc.encode_row_v2(out, 3, Row(b"abcxyz", 7, RowKind.VALUE, b"val", None, 1000))
    assert out[:3] == bytes([3, 3, 3])  # shared, unshared, value_len
    assert out[3:6] == b"xyz" and out[6:9] == b"val"
    assert struct.unpack(">QB", out[9:18]) == (7, rc.FLAG_HAS_CREATE_TS)
    assert struct.unpack(">q", out[18:]) == (1000,)
    assert len(out) == rc.encoded_size_v2(3, Row(b"abcxyz", 7, RowKind.VALUE, b"val", None, 1000))


def test_v2_tombstone_has_zero_value_len_and_expire_before_create():
    out = bytearray()
    rc.encode_row_v2(out, 0, Row(b"k", 1, RowKind.TOMBSTONE, b"", 5, 6))
    assert out[:3] == bytes([0, 1, 0])
    assert out[4:12] == struct.pack(">Q", 1)
    assert out[12] == rc.FLAG_TOMBSTONE | rc.FLAG_HAS_EXPIRE_TS | rc.FLAG_HAS_CREATE_TS
    assert struct.unpack(">qq", out[13:]) == (5, 6)


def test_merge_operand_flag():
    out = bytearray()
    rc.encode_row_v2(out, 0, Row(b"k", 1, RowKind.MERGE_OPERAND, b"m"))
    assert out[-1] == rc.FLAG_MERGE_OPERAND


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**32 - 1])
def test_varint_round_trip(value):
    out = bytearray()
    rc.write_varint(out, value)
    assert len(out) == rc.varint_len(value)
    assert rc.read_varint_u32(bytes(out), 0, len(out)) == (value, len(out))


def test_varint_rejects_overlong_and_truncated():
    with pytest.raises(ValueError):
        rc.read_varint_u32(b"\x80\x80\x80\x80\x80\x01", 0, 6)
    with pytest.raises(ValueError):
        rc.read_varint_u32(b"\x80", 0, 1)
    with pytest.raises(ValueError):
        rc.read_varint_u32(b"\xff\xff\xff\xff\x7f", 0, 5)  # > u32


@pytest.mark.parametrize("flags", [0x10, 0x80, 0x09, 0xFF])
def test_invalid_flags_are_corruption(flags):
    out = bytearray()
    rc.encode_row_v2(out, 0, Row(b"key", 1, RowKind.VALUE, b"v"))
    out[-1] = flags
    with pytest.raises(CorruptionError) as e:
        rc.decode_entries_v2(bytes(out), len(out), [0], "obj", 100)
    assert e.value.object_name == "obj" and e.value.offset == 100


def test_unencodable_rows_are_rejected():
    with pytest.raises(InvalidArgumentError):
        rc.check_row_encodable(Row(b"", 1, RowKind.VALUE, b"v"))
    with pytest.raises(InvalidArgumentError):
        rc.check_row_encodable(Row(b"k", -1, RowKind.VALUE, b"v"))
    with pytest.raises(InvalidArgumentError):
        rc.check_row_encodable(Row(b"k", 1, RowKind.TOMBSTONE, b"v"))


def test_common_prefix_len():
    assert rc.common_prefix_len(b"abcdef", b"abcxyz") == 3
    assert rc.common_prefix_len(b"abc", b"abc") == 3
    assert rc.common_prefix_len(b"abc", b"abcd") == 3
    assert rc.common_prefix_len(b"", b"abcd") == 0
    assert rc.common_prefix_len(b"x", b"abcd") == 0


rows_st = st.builds(
    lambda key, seq, kind, value, exp, cre: Row(key, seq, kind, b"" if kind is RowKind.TOMBSTONE else value, exp, cre),
    st.binary(min_size=1, max_size=40),
    st.integers(0, 2**64 - 1),
    st.sampled_from(list(RowKind)),
    st.binary(max_size=300),
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(rows_st, min_size=1, max_size=40))
def test_v2_entries_round_trip(rows):
    rows = sorted(rows, key=lambda r: r.key)
    out = bytearray()
    restarts = []
    prev = b""
    for i, row in enumerate(rows):
        if i % 16 == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = rc.common_prefix_len(prev, row.key)
        rc.encode_row_v2(out, shared, row)
        prev = row.key
    keys, decoded = rc.decode_entries_v2(bytes(out), len(out), restarts, "o", 0)
    assert decoded == rows and keys == [r.key for r in rows]


@settings(max_examples=200, deadline=None)
@given(st.lists(rows_st, min_size=1, max_size=20))
def test_v0_entries_round_trip(rows):
    out = bytearray()
    first = None
    spans = []
    for row in rows:
        start = len(out)
        rc.encode_entry_v0(out, first, row)
        spans.append((start, len(out)))
        first = first if first is not None else row.key
    first = None
    for row, (start, end) in zip(rows, spans):
        key, got, pos = rc.decode_entry_v0(bytes(out), start, end, first, "o", 0)
        assert got == row and pos == end
        first = first if first is not None else key
