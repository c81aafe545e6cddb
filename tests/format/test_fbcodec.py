"""Round-trips and corruption handling of the SST metadata FlatBuffers codecs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError
from slatedb.format import fbcodec, fbread
from slatedb.format import types as t

u64 = st.integers(0, 2**64 - 1)
u16 = st.integers(0, 2**16 - 1)
opt_bytes = st.none() | st.binary(max_size=40)

sst_infos = st.builds(
    t.SsTableInfo,
    first_entry=opt_bytes,
    index_offset=u64,
    index_len=u64,
    filter_offset=u64,
    filter_len=u64,
    compression_format=st.sampled_from(t.CompressionFormat),
    sst_type=st.sampled_from(t.SstType),
    last_entry=opt_bytes,
    stats_offset=u64,
    stats_len=u64,
    filter_format=st.sampled_from(t.FilterFormat),
)
block_metas = st.lists(st.builds(t.BlockMeta, offset=u64, first_key=st.binary(max_size=30)), max_size=20)
sst_stats = st.builds(
    t.SstStats,
    num_puts=u64,
    num_deletes=u64,
    num_merges=u64,
    raw_key_size=u64,
    raw_val_size=u64,
    block_stats=st.lists(st.builds(t.BlockStats, num_puts=u16, num_deletes=u16, num_merges=u16), max_size=10).map(tuple),
)


@given(sst_infos)
def test_sst_info_round_trip(info: t.SsTableInfo) -> None:
    assert fbcodec.decode_sst_info(fbcodec.encode_sst_info(info), "x") == info


@given(block_metas)
def test_sst_index_round_trip(metas: list[t.BlockMeta]) -> None:
    assert fbcodec.decode_sst_index(fbcodec.encode_sst_index(metas), "x") == tuple(metas)


@given(sst_stats)
def test_sst_stats_round_trip(stats: t.SstStats) -> None:
    assert fbcodec.decode_sst_stats(fbcodec.encode_sst_stats(stats), "x") == stats


def test_absent_and_empty_entries_differ() -> None:
    wal_like = t.SsTableInfo(first_entry=b"\x00" * 8, last_entry=None, sst_type=t.SstType.WAL)
    assert fbcodec.decode_sst_info(fbcodec.encode_sst_info(wal_like), "x").last_entry is None
    empty = t.SsTableInfo(first_entry=b"")
    assert fbcodec.decode_sst_info(fbcodec.encode_sst_info(empty), "x").first_entry == b""


def test_unknown_enum_value_is_corruption() -> None:
    data = bytearray(fbcodec.encode_sst_info(t.SsTableInfo(compression_format=t.CompressionFormat.ZSTD)))
    idx = data.index(bytes([4]), 4)  # the only 0x04 byte after the root offset's first byte
    data[idx] = 9
    with pytest.raises(CorruptionError, match="compression_format"):
        fbcodec.decode_sst_info(bytes(data), "obj", 100)


def test_missing_required_block_meta_is_corruption() -> None:
    import flatbuffers

    from slatedb.format.fb import SsTableIndex as fb_SsTableIndex

    b = flatbuffers.Builder(16)
    fb_SsTableIndex.Start(b)
    b.Finish(fb_SsTableIndex.End(b))
    with pytest.raises(CorruptionError, match="block_meta"):
        fbcodec.decode_sst_index(bytes(b.Output()), "obj")


@pytest.mark.parametrize("data", [b"", b"\x01", b"\xff\xff\xff\xff", b"\x04\x00\x00\x00\x00\x00\x00\x00"])
def test_garbage_is_corruption_with_object_name(data: bytes) -> None:
    with pytest.raises(CorruptionError) as info:
        fbcodec.decode_sst_info(data, "wal/00000000000000000001.sst", 10)
    assert info.value.object_name == "wal/00000000000000000001.sst"


@settings(max_examples=300)
@given(sst_infos, st.data())
def test_mutated_sst_info_never_raises_anything_but_corruption(info: t.SsTableInfo, data) -> None:
    """SsTableInfo is CRC-protected by the SST layer; here we only require no foreign errors."""
    raw = bytearray(fbcodec.encode_sst_info(info))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        fbcodec.decode_sst_info(bytes(raw[:cut]), "x")
    except CorruptionError:
        pass


@given(block_metas.filter(bool), st.data())
def test_truncated_index_raises_corruption(metas: list[t.BlockMeta], data) -> None:
    raw = fbcodec.encode_sst_index(metas)
    cut = data.draw(st.integers(0, len(raw) - 1))
    try:
        decoded = fbcodec.decode_sst_index(raw[:cut], "x")
    except CorruptionError:
        return
    # FlatBuffers are built back to front; the trailing bytes may be vector padding.
    assert decoded == tuple(metas)


def _both(raw: bytes):
    """(outcome of decode_sst_index, outcome of the checked reader): a value or the error text."""
    out = []
    for fn in (fbcodec.decode_sst_index, fbcodec.checked_sst_index):
        try:
            out.append(fn(raw, "obj"))
        except CorruptionError as e:
            out.append(("error", str(e)))
    return out


@given(block_metas, st.data())
def test_the_fast_index_decoder_answers_exactly_as_the_checked_reader(metas: list[t.BlockMeta], data) -> None:
    """decode_sst_index reads indexes with struct alone and falls back to the checked reader at
    the first doubt: on intact, truncated and bit-flipped bytes both give the same blocks or the
    same CorruptionError."""
    raw = bytearray(fbcodec.encode_sst_index(metas))
    fast, checked = _both(bytes(raw))
    assert fast == checked == tuple(metas)
    cut = data.draw(st.integers(0, len(raw)))
    fast, checked = _both(bytes(raw[:cut]))
    assert fast == checked
    if raw:
        for _ in range(3):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        fast, checked = _both(bytes(raw))
        assert fast == checked


def test_the_fast_index_decoder_takes_the_fast_path_on_a_real_index() -> None:
    metas = [t.BlockMeta(offset=4096 * i, first_key=b"k%06d" % i) for i in range(500)]
    raw = fbcodec.encode_sst_index(metas)
    assert fbread.fast_sst_index(raw) == tuple(metas)


def _columns_of(result):
    return None if result is None else ([m.offset for m in result], [m.first_key for m in result])


@given(block_metas, st.data())
def test_the_numpy_index_reader_answers_exactly_as_the_struct_reader(metas: list[t.BlockMeta], data) -> None:
    """fast_sst_index_columns (numpy, every entry at once) gives what fast_sst_index gives, None
    included, on intact, truncated and bit-flipped indexes."""
    raw = bytearray(fbcodec.encode_sst_index(metas))
    assert fbread.fast_sst_index_columns(bytes(raw)) == _columns_of(fbread.fast_sst_index(bytes(raw)))
    cut = data.draw(st.integers(0, len(raw)))
    assert fbread.fast_sst_index_columns(bytes(raw[:cut])) == _columns_of(fbread.fast_sst_index(bytes(raw[:cut])))
    if raw:
        for _ in range(3):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        try:
            want = _columns_of(fbread.fast_sst_index(bytes(raw)))
        except struct.error:
            want = None
        assert fbread.fast_sst_index_columns(bytes(raw)) == want


@settings(max_examples=40, deadline=None)
@given(st.lists(st.builds(t.BlockMeta, offset=u64, first_key=st.binary(max_size=120)), min_size=1, max_size=60))
def test_index_columns_are_the_same_either_side_of_the_numpy_threshold(metas: list) -> None:
    """Small indexes are read by the struct reader, large ones with numpy: the same columns."""
    buf = fbcodec.encode_sst_index(metas)
    offsets, keys = fbcodec.decode_sst_index_columns(buf, "x")
    assert (offsets, keys) == ([m.offset for m in metas], [m.first_key for m in metas])
    assert fbread.fast_sst_index_columns(buf) == (offsets, keys)


def _reference_check_table(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    """FbReader.check_table as it was written first: one unpack per vtable field."""
    n = len(buf)
    if pos < 0 or pos + 4 > n or pos % 4:
        raise fbread.FbDecodeError(pos, f"{what}: table offset {pos} out of bounds or unaligned")
    (soff,) = struct.unpack_from("<i", buf, pos)
    vpos = pos - soff
    if vpos < 0 or vpos + 4 > n or vpos % 2:
        raise fbread.FbDecodeError(pos, f"{what}: vtable offset {vpos} out of bounds")
    vlen, tlen = struct.unpack_from("<HH", buf, vpos)
    if vlen < 4 or vlen % 2 or vpos + vlen > n:
        raise fbread.FbDecodeError(vpos, f"{what}: bad vtable length {vlen}")
    if tlen < 4 or pos + tlen > n:
        raise fbread.FbDecodeError(pos, f"{what}: table length {tlen} exceeds the buffer")
    for i in range((vlen - 4) // 2):
        (field,) = struct.unpack_from("<H", buf, vpos + 4 + 2 * i)
        if field and (field < 4 or field >= tlen):
            raise fbread.FbDecodeError(vpos, f"{what}: field {i} offset {field} outside its table")
    return vpos, vlen


def _outcome(check, *args) -> object:
    try:
        return check(*args)
    except fbread.FbDecodeError as e:
        return ("error", str(e))


@settings(max_examples=300)
@given(sst_infos, st.data())
def test_table_checks_answer_as_one_unpack_per_field_did(info: t.SsTableInfo, data) -> None:
    """check_table unpacks a vtable's fields at once; on valid and damaged tables alike it
    accepts, refuses (naming the first bad field, and a vector element's index) and finds the
    vtable exactly as the field-by-field loop did. The damage goes where the checks look: the
    root table's vtable (its length, table length and field offsets)."""
    raw = bytearray(fbcodec.encode_sst_info(info))
    pos = struct.unpack_from("<I", raw, 0)[0]
    vpos = pos - struct.unpack_from("<i", raw, pos)[0]
    vlen = struct.unpack_from("<H", raw, vpos)[0]
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(vpos, vpos + vlen - 1))
        raw[at] = data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 8, 0x7F, 0xFF, raw[at] ^ 1]))
    buf = bytes(raw)
    where = data.draw(st.sampled_from([pos, pos + 4, pos - 4, len(buf), 1]))
    index = data.draw(st.sampled_from([None, 0, 3]))
    name = "T" if index is None else f"T[{index}]"
    assert _outcome(fbcodec.FbReader(buf).check_table, where, "T", index) == _outcome(_reference_check_table, buf,
                                                                                      where, name)


def test_every_bad_field_offset_of_a_vtable_is_refused_by_name() -> None:
    """Each field offset of a real table set to 1, 2, 3 (inside the vtable offset), the table's
    length or more: refused, naming that field (and the element index); 0 (absent) and 4 pass."""
    raw = bytearray(fbcodec.encode_sst_info(t.SsTableInfo(first_entry=b"a", last_entry=b"z", index_offset=7)))
    pos = struct.unpack_from("<I", raw, 0)[0]
    vpos = pos - struct.unpack_from("<i", raw, pos)[0]
    vlen, tlen = struct.unpack_from("<HH", raw, vpos)
    assert (vlen - 4) // 2 >= 3
    for i in range((vlen - 4) // 2):
        for value in (0, 1, 2, 3, 4, tlen - 1, tlen, tlen + 1, 0xFFFF):
            buf = bytearray(raw)
            struct.pack_into("<H", buf, vpos + 4 + 2 * i, value)
            got = _outcome(fbcodec.FbReader(bytes(buf)).check_table, pos, "T", 5)
            assert got == _outcome(_reference_check_table, bytes(buf), pos, "T[5]"), (i, value)
            if 0 < value < 4 or value >= tlen:
                assert got == ("error", f"T[5]: field {i} offset {value} outside its table"), (i, value)
            else:
                assert got == (vpos, vlen)
