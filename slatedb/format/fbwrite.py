"""FlatBuffers written without the generated builder code, for the two tables an SST writer
emits once per block: ``SsTableIndex`` (a ``BlockMeta`` per block) and ``SstStats`` (a
``BlockStats`` per block).

The generated code goes through ``flatbuffers.Builder`` a call per field with its checks, some
30 µs a block (0.2 s of a 100k-row L0 flush). :class:`LeanBuilder` does the same steps, in the
same order and with the same alignment and vtable sharing, on a list of chunks: the bytes are
the builder's, byte for byte (``tests/format/test_bulk_encode.py`` compares them with
hypothesis), so SSTs stay identical to what the generated code and the official engine's
readers expect. :mod:`slatedb.format.fbread` is the reading counterpart.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import chain

from slatedb.format.types import BlockMeta, SstStats

_U16 = struct.Struct("<H").pack
_U32 = struct.Struct("<I").pack
_I32 = struct.Struct("<i").pack
_U64 = struct.Struct("<Q").pack
_ZEROS = bytes(16)


class LeanBuilder:
    """The subset of ``flatbuffers.Builder`` these tables need, building back to front: ``off``
    is the builder's ``Offset()``, ``chunks`` the bytes written, last written first."""

    __slots__ = ("chunks", "off", "minalign", "vtable", "object_end", "vtables")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.off = 0
        self.minalign = 1
        self.vtable: list[int] = []
        self.object_end = 0
        self.vtables: dict[tuple[int, ...], int] = {}

    def prep(self, size: int, additional: int) -> None:
        if size > self.minalign:
            self.minalign = size
        pad = (-(self.off + additional)) & (size - 1)
        if pad:
            self.chunks.append(_ZEROS[:pad])
            self.off += pad

    def byte_vector(self, data: bytes) -> int:
        """``CreateByteVector``."""
        self.prep(4, len(data))
        self.chunks.append(data)
        self.chunks.append(_U32(len(data)))
        self.off += len(data) + 4
        return self.off

    def table_vector(self, offsets: Sequence[int]) -> int:
        """``StartVector(4, n, 4)``, ``PrependUOffsetTRelative`` of each, last first, ``EndVector``."""
        n = len(offsets)
        self.prep(4, 4 * n)
        append = self.chunks.append
        off = self.off
        for o in reversed(offsets):
            off += 4
            append(_U32(off - o))
        append(_U32(n))
        self.off = off + 4
        return self.off

    def start(self, numfields: int) -> None:
        self.vtable = [0] * numfields
        self.object_end = self.off

    def u64_slot(self, slot: int, x: int) -> None:
        if x:
            self.prep(8, 0)
            self.chunks.append(_U64(x))
            self.off += 8
            self.vtable[slot] = self.off

    def offset_slot(self, slot: int, x: int) -> None:
        if x:
            self.prep(4, 0)
            self.off += 4
            self.chunks.append(_U32(self.off - x))
            self.vtable[slot] = self.off

    def end(self) -> int:
        """``EndObject``: the soffset to the vtable, and the vtable unless an equal one exists."""
        self.prep(4, 0)
        self.off += 4
        object_offset = self.off
        chunks = self.chunks
        soffset_at = len(chunks)
        chunks.append(b"")  # placeholder for the soffset
        vtable = self.vtable
        trimmed = len(vtable)
        while trimmed and not vtable[trimmed - 1]:
            trimmed -= 1
        fields = [object_offset - v if v else 0 for v in vtable[:trimmed]]
        object_size = object_offset - self.object_end
        key = (*reversed(fields), object_size)
        existing = self.vtables.get(key)
        if existing is None:
            # Written back to front: the fields last first, then the object size, then the
            # vtable size (2-byte aligned already: everything before it was).
            self.prep(2, 0)
            for f in reversed(fields):
                chunks.append(_U16(f))
            chunks.append(_U16(object_size))
            chunks.append(_U16(2 * (trimmed + 2)))
            self.off += 2 * (trimmed + 2)
            chunks[soffset_at] = _I32(self.off - object_offset)
            self.vtables[key] = self.off
        else:
            chunks[soffset_at] = _I32(existing - object_offset)
        return object_offset

    def finish(self, root: int) -> bytes:
        self.prep(self.minalign, 4)
        self.prep(4, 0)
        self.off += 4
        self.chunks.append(_U32(self.off - root))
        return b"".join(reversed(self.chunks))


def encode_sst_index(block_meta: Sequence[BlockMeta]) -> bytes:
    """``fbcodec.encode_sst_index``'s bytes: the ``SsTableIndex`` of ``block_meta``."""
    return encode_sst_index_columns([m.first_key for m in block_meta], [m.offset for m in block_meta])


def encode_sst_index_columns(first_keys: Sequence[bytes], offsets: Sequence[int]) -> bytes:
    """The ``SsTableIndex`` of the blocks ``(offsets[i], first_keys[i])`` (no ``BlockMeta``
    object per block: the SST writer keeps its blocks as columns).

    Every ``BlockMeta`` is built the same way, so :class:`LeanBuilder`'s steps are unrolled
    here: the key vector (padded so that it ends 4-aligned), the offset (8-aligned, absent when
    0), the key's uoffset, the soffset to the vtable; a vtable is written only for a shape not
    seen before (the offset present or not, the padding before it). Once both shapes of a block
    with an offset have their vtable and the builder is 8-aligned, every later block's bytes
    depend on its key's length alone: :func:`_index_metas_bulk` writes them all at once.
    """
    b = LeanBuilder()
    chunks = b.chunks
    append = chunks.append
    vtables = b.vtables
    off = 0
    metas: list[int] = []
    n = len(first_keys)
    bulk_tried = n < _BULK_MIN_BLOCKS
    i = 0
    while i < n:
        if not bulk_tried and not off & 7 and _SHAPE_16 in vtables and _SHAPE_20 in vtables:
            bulk_tried = True
            done = _index_metas_bulk(first_keys[i:], offsets[i:], off, vtables)
            if done is not None:
                data, ends = done
                append(data)
                metas += ends
                off = ends[-1]
                b.minalign = 8
                break
        key = first_keys[i]
        offset = offsets[i]
        i += 1
        klen = len(key)
        pad = (-(off + klen)) & 3
        if pad:
            append(_ZEROS[:pad])
        append(key)
        append(_U32(klen))
        off += pad + klen + 4
        key_vec = object_end = off
        if offset:
            b.minalign = 8
            pad = (-off) & 7
            if pad:
                append(_ZEROS[:pad])
                off += pad
            append(_U64(offset))
            off += 12
            append(_U32(off - key_vec))
            off += 4
            shape = (4, 8, off - object_end)
        else:
            off += 4
            append(_U32(off - key_vec))
            off += 4
            shape = (4, 0, off - object_end)
        existing = vtables.get(shape)
        if existing is None:
            # back to front: field 1 (the key), field 0 (the offset), object size, vtable size
            chunks.extend((_I32(8), _U16(shape[0]), _U16(shape[1]), _U16(shape[2]), _U16(8)))
            off += 8
            vtables[shape] = off
        else:
            append(_I32(existing - off))
        metas.append(off - (8 if existing is None else 0))
    b.off = off
    if b.minalign < 4 and metas:
        b.minalign = 4
    vec = _table_vector(b, metas)
    b.start(1)
    b.offset_slot(0, vec)
    return b.finish(b.end())


#: The two shapes (key field at 4, offset field at 8, object size) of a ``BlockMeta`` with an
#: offset: 16 bytes, or 20 when its offset needs 4 bytes of padding to be 8-aligned.
_SHAPE_16, _SHAPE_20 = (4, 8, 16), (4, 8, 20)
#: From this many blocks on the index is written by :func:`_index_metas_bulk` (numpy's fixed
#: cost per call is above the loop's below it).
_BULK_MIN_BLOCKS = 64
def _meta_format(klen: int) -> bytes:
    """The ``struct`` format of one ``BlockMeta`` in memory order (see _index_metas_bulk)."""
    a = (-klen) & 3
    b = (-(a + klen + 4)) & 7
    return b"iIQ%dxI%ds%dx" % (b, klen, a)


#: :func:`_meta_format` of the usual key lengths.
_META_FORMATS = [_meta_format(klen) for klen in range(256)]


def _index_metas_bulk(keys: Sequence[bytes], offsets: Sequence[int], off: int,
                      vtables: dict) -> tuple[bytes, list[int]] | None:
    """The loop of :func:`encode_sst_index_columns` over ``keys``/``offsets`` from builder offset
    ``off`` (8-aligned, both vtables of a block with an offset written), in one
    ``struct.pack``: (the blocks' bytes in memory order, each table's offset), or None when a
    block has no offset (the loop then goes on).

    From an 8-aligned offset a block is: the key vector (its length, the key, ``a = -len % 4``
    bytes of padding), ``b`` bytes of padding that 8-align the table's end, the table (the
    soffset to its vtable, the key's uoffset ``b + 12``, the u64 offset), so its size is a
    multiple of 8 and the next block starts 8-aligned too. In memory (the builder writes back to
    front) the last block comes first, each as ``soffset, uoffset, offset, b pad, len, key, a pad``.
    """
    import numpy as np

    n = len(keys)
    if 0 in offsets:
        return None
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    a = -lens & 3
    key_vec = a + lens + 4
    b = -key_vec & 7
    ends = off + np.cumsum(key_vec + b + 16)
    soffsets = np.where(b == 0, vtables[_SHAPE_16], vtables[_SHAPE_20]) - ends
    lens_list = lens.tolist()
    formats = _META_FORMATS.__getitem__ if int(lens.max()) < len(_META_FORMATS) else _meta_format
    fmt = b"<" + b"".join(map(formats, reversed(lens_list)))
    args = chain.from_iterable(zip(soffsets[::-1].tolist(), (b[::-1] + 12).tolist(), reversed(offsets),
                                   reversed(lens_list), reversed(keys)))
    return struct.Struct(fmt).pack(*args), ends.tolist()


def _table_vector(b: LeanBuilder, offsets: Sequence[int]) -> int:
    """``b.table_vector(offsets)``; a long vector in one numpy expression."""
    n = len(offsets)
    if n < _BULK_MIN_BLOCKS:
        return b.table_vector(offsets)
    import numpy as np

    b.prep(4, 4 * n)
    off = b.off
    # Element j is written (n - j)-th, at off + 4 * (n - j): its uoffset is that minus offsets[j].
    rel = (off + 4 * np.arange(n, 0, -1, dtype=np.int64)) - np.asarray(offsets, dtype=np.int64)
    b.chunks.append(rel.astype("<u4").tobytes())
    b.chunks.append(_U32(n))
    b.off = off + 4 * n + 4
    return b.off


def encode_sst_stats(stats: SstStats) -> bytes:
    """``fbcodec.encode_sst_stats``'s bytes: the ``SstStats`` FlatBuffer."""
    bs = stats.block_stats
    return encode_sst_stats_columns(
        stats, [b.num_puts for b in bs], [b.num_deletes for b in bs], [b.num_merges for b in bs])


#: The shape (field at 6, object size 8) of a puts-only ``BlockStats`` at a 4-aligned offset.
_PUTS_SHAPE = (6, 8)
_PUTS_STATS = None  # numpy dtype of one such table in memory order (made at first use)


def _puts_stats_bulk(puts: Sequence[int], deletes: Sequence[int], merges: Sequence[int], off: int,
                     vtable: int) -> bytes | None:
    """The loop of :func:`encode_sst_stats_columns` over blocks of puts only, from a 4-aligned
    builder offset ``off`` with their vtable at ``vtable``: each is 8 bytes (its soffset, 2 bytes
    of padding, the u16 count), so block ``i`` ends at ``off + 8 * (i + 1)``; in memory the last
    comes first. None when a block is not puts-only or its count is not a u16 (the loop then
    goes on, or raises as before)."""
    import numpy as np

    global _PUTS_STATS
    p = np.asarray(puts, dtype=np.int64)
    if (np.count_nonzero(deletes) or np.count_nonzero(merges) or not int(p.min()) > 0
            or int(p.max()) > 0xFFFF):
        return None
    if _PUTS_STATS is None:
        _PUTS_STATS = np.dtype([("soffset", "<i4"), ("pad", "<u2"), ("count", "<u2")])
    n = len(p)
    out = np.zeros(n, dtype=_PUTS_STATS)
    out["soffset"] = vtable - (off + 8 * np.arange(n, 0, -1, dtype=np.int64))
    out["count"] = p[::-1]
    return out.tobytes()


def encode_sst_stats_columns(totals, puts: Sequence[int], deletes: Sequence[int], merges: Sequence[int]) -> bytes:
    """The ``SstStats`` FlatBuffer of per-block counts given as columns (``totals``: anything
    with ``num_puts``, ``num_deletes``, ``num_merges``, ``raw_key_size``, ``raw_val_size``)."""
    stats = totals
    b = LeanBuilder()
    blocks = []
    chunks = b.chunks
    append = chunks.append
    vtables = b.vtables
    off = 0
    u16 = _U16
    pad2 = _ZEROS[:2]
    bulk_tried = len(puts) < _BULK_MIN_BLOCKS
    for i, counts in enumerate(zip(puts, deletes, merges)):
        if not bulk_tried and not off & 3 and _PUTS_SHAPE in vtables:
            bulk_tried = True
            data = _puts_stats_bulk(puts[i:], deletes[i:], merges[i:], off, vtables[_PUTS_SHAPE])
            if data is not None:
                append(data)
                n_rest = len(puts) - i
                blocks += range(off + 8, off + 8 * n_rest + 1, 8)
                off += 8 * n_rest
                break
        p, d, mg = counts
        if p and not d and not mg:
            # A block of puts only (the usual case): the general steps below with their values
            # known. At off = 2 (mod 4) the table is the u16 and the soffset (6 bytes, field at
            # 4); at off = 0 the u16, 2 bytes of padding and the soffset (8 bytes, field at 6).
            if off & 3:
                append(u16(p))
                off += 6
                shape = (4, 6)
            else:
                append(u16(p))
                append(pad2)
                off += 8
                shape = (6, 8)
            existing = vtables.get(shape)
            if existing is None:
                chunks.extend((_I32(6), u16(shape[0]), u16(shape[1]), u16(6)))
                blocks.append(off)
                off += 6
                vtables[shape] = off
            else:
                append(_I32(existing - off))
                blocks.append(off)
            continue
        # LeanBuilder's start, u16_slot x 3 and end, unrolled: the u16s need no padding (the
        # buffer is always 2-aligned), the soffset 4-aligns.
        object_end = off
        slots = [0, 0, 0]
        for i, x in enumerate(counts):
            if x:
                append(_U16(x))
                off += 2
                slots[i] = off
        if off & 3:
            append(_ZEROS[:2])
            off += 2
        off += 4
        trimmed = 3
        while trimmed and not slots[trimmed - 1]:
            trimmed -= 1
        fields = [off - v if v else 0 for v in slots[:trimmed]]
        shape = (*reversed(fields), off - object_end)
        existing = vtables.get(shape)
        if existing is None:
            append(_I32(2 * (trimmed + 2)))
            for f in reversed(fields):
                append(_U16(f))
            append(_U16(off - object_end))
            append(_U16(2 * (trimmed + 2)))
            blocks.append(off)
            off += 2 * (trimmed + 2)
            vtables[shape] = off
        else:
            append(_I32(existing - off))
            blocks.append(off)
    b.off = off
    if blocks:
        b.minalign = 4
    vec = _table_vector(b, blocks)
    b.start(6)
    b.u64_slot(0, stats.num_puts)
    b.u64_slot(1, stats.num_deletes)
    b.u64_slot(2, stats.num_merges)
    b.u64_slot(3, stats.raw_key_size)
    b.u64_slot(4, stats.raw_val_size)
    b.offset_slot(5, vec)
    return b.finish(b.end())
