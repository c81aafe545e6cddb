"""The fast half of FlatBuffer decoding (:mod:`slatedb.format.fbcodec` is the checked half):
a ``Table`` whose accessors read with ``struct`` directly, and the SST index read with
``struct`` alone. Both answer exactly as the library and the checked reader do; the index
reader gives up (None) at the first doubt so that the checked reader names the problem."""

from __future__ import annotations

import struct

from flatbuffers.table import Table

from slatedb.format import types as t


class FbDecodeError(Exception):
    """Internal: a structural problem found at ``offset`` (relative to the FlatBuffer)."""

    def __init__(self, offset: int | None, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason



_u32 = struct.Struct("<I").unpack_from
_u16 = struct.Struct("<H").unpack_from


class FastTable(Table):
    """``flatbuffers.table.Table`` with the accessors the generated code calls done by ``struct``
    directly (the library's go through ``enforce_number`` and a memoryview per read: most of a
    manifest decode). Same answers; a negative offset, which the library refuses, raises here
    too. :class:`FbReader` has checked every table it hands out (``check_table``)."""

    __slots__ = ("_vtable", "_vtable_len")

    def __init__(self, buf: bytes, pos: int, vtable: int, vtable_len: int) -> None:
        # pos, and its vtable's position and length, checked by FbReader.check_table (the
        # buffer is immutable bytes: Offset reads the vtable without finding it again).
        self.Bytes = buf
        self.Pos = pos
        self._vtable = vtable
        self._vtable_len = vtable_len

    def Offset(self, vtableOffset: int) -> int:
        if vtableOffset < self._vtable_len:
            return _u16(self.Bytes, self._vtable + vtableOffset)[0]
        return 0

    def Indirect(self, off: int) -> int:
        if off < 0:
            raise FbDecodeError(off, "negative offset")
        return off + _u32(self.Bytes, off)[0]

    def VectorLen(self, off: int) -> int:
        off += self.Pos
        off += _u32(self.Bytes, off)[0]
        return _u32(self.Bytes, off)[0]

    def Vector(self, off: int) -> int:
        off += self.Pos
        return off + _u32(self.Bytes, off)[0] + 4

    def Get(self, flags, off: int):  # type: ignore[no-untyped-def]
        if off < 0:
            raise FbDecodeError(off, "negative offset")
        return flags.py_type(flags.packer_type.unpack_from(self.Bytes, off)[0])



_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16X2 = struct.Struct("<HH")
_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")


def _checked_table(buf: bytes, n: int, pos: int) -> tuple[int, int, int] | None:
    """(vtable pos, vtable length, table length) of the table at ``pos`` after
    FbReader.check_table's checks; None at the first that does not hold."""
    if pos < 0 or pos + 4 > n or pos % 4:
        return None
    vpos = pos - _I32.unpack_from(buf, pos)[0]
    if vpos < 0 or vpos + 4 > n or vpos % 2:
        return None
    vlen, tlen = _U16X2.unpack_from(buf, vpos)
    if vlen < 4 or vlen % 2 or vpos + vlen > n or tlen < 4 or pos + tlen > n:
        return None
    u16 = _U16.unpack_from
    for f in range(vpos + 4, vpos + vlen, 2):
        field = u16(buf, f)[0]
        if field and (field < 4 or field >= tlen):
            return None
    return vpos, vlen, tlen


def fast_sst_index(buf: bytes) -> tuple[t.BlockMeta, ...] | None:
    """``SsTableIndex.block_meta`` read with ``struct`` alone (every SST open decodes one index
    of one entry per block; the generated accessors cost ~50 us an entry). The same bounds
    checks as :class:`FbReader`, table by table; None at the first thing that does not hold,
    and the caller then decodes with the checked reader, which names the problem."""
    n = len(buf)
    u32, u16, u64 = _U32.unpack_from, _U16.unpack_from, _U64.unpack_from
    block_meta = t.BlockMeta

    def table(pos: int) -> tuple[int, int, int] | None:
        return _checked_table(buf, n, pos)

    if n < 4:
        return None
    root = u32(buf, 0)[0]
    got = table(root)
    if got is None:
        return None
    vpos, vlen, _ = got
    field = u16(buf, vpos + 4)[0] if vlen > 4 else 0  # SsTableIndex.block_meta (required)
    if not field or root + field + 4 > n:
        return None
    vec = root + field + u32(buf, root + field)[0]
    if vec + 4 > n:
        return None
    count = u32(buf, vec)[0]
    start = vec + 4
    if start + 4 * count > n:
        return None
    out = []
    for elem in range(start, start + 4 * count, 4):
        pos = elem + u32(buf, elem)[0]
        got = table(pos)
        if got is None:
            return None
        vpos, vlen, tlen = got
        f_off = u16(buf, vpos + 4)[0] if vlen > 4 else 0
        f_key = u16(buf, vpos + 6)[0] if vlen > 6 else 0
        if not f_key or (f_off and f_off + 8 > tlen) or pos + f_key + 4 > n:
            return None
        kv = pos + f_key + u32(buf, pos + f_key)[0]
        if kv + 4 > n:
            return None
        klen = u32(buf, kv)[0]
        if kv + 4 + klen > n:
            return None
        out.append(block_meta(offset=u64(buf, pos + f_off)[0] if f_off else 0, first_key=buf[kv + 4: kv + 4 + klen]))
    return tuple(out)


def fast_sst_index_columns(buf: bytes) -> tuple[list[int], list[bytes]] | None:
    """:func:`fast_sst_index` as two lists, (block offsets, first keys), with every entry's
    checks run as numpy array operations over all entries at once (an SST of a 100k-row L0
    has ~3,300 blocks: the per-entry ``struct`` reads were most of a reopen). The same checks
    and the same answers, None included (``tests/format/test_fbcodec.py`` compares them)."""
    import numpy as np

    n = len(buf)
    if n < 4:
        return None
    u32 = _U32.unpack_from
    root = u32(buf, 0)[0]
    head = _fast_root(buf, root)
    if head is None:
        return None
    start, count = head
    if count == 0:
        return [], []
    b = np.frombuffer(buf, dtype=np.uint8)

    def le(pos: np.ndarray, width: int, dtype=np.int64) -> np.ndarray:  # little-endian unsigned at each pos
        out = b[pos].astype(dtype)
        for i in range(1, width):
            out |= b[pos + i].astype(dtype) << dtype(8 * i)
        return out

    elems = start + 4 * np.arange(count, dtype=np.int64)
    pos = elems + le(elems, 4)
    if not ((pos >= 0) & (pos + 4 <= n) & (pos % 4 == 0)).all():
        return None
    soff = le(pos, 4)
    soff = np.where(soff >= 1 << 31, soff - (1 << 32), soff)  # i32
    vpos = pos - soff
    if not ((vpos >= 0) & (vpos + 4 <= n) & (vpos % 2 == 0)).all():
        return None
    vlen, tlen = le(vpos, 2), le(vpos + 2, 2)
    if not ((vlen >= 4) & (vlen % 2 == 0) & (vpos + vlen <= n) & (tlen >= 4) & (pos + tlen <= n)).all():
        return None
    # Each distinct vtable's fields (writers share one vtable among equal-shaped entries; its
    # position determines its length and the table length it records).
    u16, u16x2 = _U16.unpack_from, _U16X2.unpack_from
    for vp in set(vpos.tolist()):
        vl, tl = u16x2(buf, vp)
        for f in range(vp + 4, vp + vl, 2):
            field = u16(buf, f)[0]
            if field and (field < 4 or field >= tl):
                return None
    has_off, has_key = vlen > 4, vlen > 6
    f_off = np.where(has_off, le(np.where(has_off, vpos + 4, 0), 2), 0)
    f_key = np.where(has_key, le(np.where(has_key, vpos + 6, 0), 2), 0)
    if not ((f_key > 0) & ((f_off == 0) | (f_off + 8 <= tlen)) & (pos + f_key + 4 <= n)).all():
        return None
    kv = pos + f_key + le(pos + f_key, 4)
    if not (kv + 4 <= n).all():
        return None
    klen = le(kv, 4)
    if not (kv + 4 + klen <= n).all():
        return None
    offsets = np.where(f_off > 0, le(np.where(f_off > 0, pos + f_off, 0), 8, np.uint64), np.uint64(0))
    ks = (kv + 4).tolist()
    ke = (kv + 4 + klen).tolist()
    return offsets.tolist(), [buf[s:e] for s, e in zip(ks, ke)]


def _fast_root(buf: bytes, root: int) -> tuple[int, int] | None:
    """(first element's position, count) of the root ``SsTableIndex``'s ``block_meta`` vector,
    with :func:`fast_sst_index`'s checks."""
    n = len(buf)
    u32, u16 = _U32.unpack_from, _U16.unpack_from
    checked = _checked_table(buf, n, root)
    if checked is None:
        return None
    vpos, vlen, _tlen = checked
    field = u16(buf, vpos + 4)[0] if vlen > 4 else 0
    if not field or root + field + 4 > n:
        return None
    vec = root + field + u32(buf, root + field)[0]
    if vec + 4 > n:
        return None
    count = u32(buf, vec)[0]
    start = vec + 4
    if start + 4 * count > n:
        return None
    return start, count
