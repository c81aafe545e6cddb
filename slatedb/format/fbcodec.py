"""FlatBuffers <-> value-type codecs for the tables shared by SSTs, manifests and compactions.

Public API (SST metadata):
``encode_sst_info`` / ``decode_sst_info``, ``encode_sst_index`` / ``decode_sst_index``,
``encode_sst_stats`` / ``decode_sst_stats``.

Why decoding is careful: the Python FlatBuffers runtime does no verification. A corrupt
offset makes it raise ``IndexError``/``struct.error``, or worse, silently read a truncated
slice. :class:`FbReader` therefore bounds-checks every table, vtable, vector and string it
visits before using the generated accessors, checks required fields and enum values, and
:func:`decoding` turns anything that still goes wrong into a
:class:`~slatedb.errors.CorruptionError` naming the object and the (object-relative) offset.

Why encoding is slot-exact: the official engine reads fields by vtable slot, so every value is
written through the generated ``Add*`` functions (slot = schema position). Scalars equal to
their schema default are omitted (as the official Rust builder does); optional ``= null``
scalars and optional tables are written only when not ``None``.
"""

from __future__ import annotations

import contextlib
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import flatbuffers
from flatbuffers.table import Table
from ulid import ULID

from slatedb.errors import CorruptionError
from slatedb.format import fbwrite, memo
from slatedb.format import types as t
from slatedb.format.fbread import FastTable, FbDecodeError, fast_sst_index, fast_sst_index_columns
from slatedb.format.fb import BlockMeta as fb_BlockMeta
from slatedb.format.fb import BlockStats as fb_BlockStats
from slatedb.format.fb import BytesBound as fb_BytesBound
from slatedb.format.fb import BytesRange as fb_BytesRange
from slatedb.format.fb import CompactedSsTable as fb_CompactedSsTable
from slatedb.format.fb import SsTableIndex as fb_SsTableIndex
from slatedb.format.fb import SsTableInfo as fb_SsTableInfo
from slatedb.format.fb import SstStats as fb_SstStats
from slatedb.format.fb import Ulid as fb_Ulid
from slatedb.format.fb import Uuid as fb_Uuid
from slatedb.format.fbbuild import FastBuilder as _Builder  # the stock builder's bytes, faster
from slatedb.format.fbbuild import FastBuilder as _FastBuilder  # its vectors of offsets in one call
from slatedb.format.fbbuild import build_cached

E = TypeVar("E")
_U64_MASK = (1 << 64) - 1


@contextlib.contextmanager
def decoding(object_name: str, base_offset: int = 0) -> Iterator[None]:
    """Map every failure inside the block to ``CorruptionError(object_name, offset, reason)``.

    ``base_offset`` is where the FlatBuffer starts inside the object, so that reported
    offsets are object-relative. Any exception (the runtime's ``IndexError``,
    ``struct.error``, a ``UnicodeDecodeError``, ...) means the bytes cannot be trusted.
    """
    try:
        yield
    except CorruptionError:
        raise
    except FbDecodeError as e:
        offset = None if e.offset is None else base_offset + e.offset
        raise CorruptionError(object_name, offset, e.reason) from e
    except Exception as e:  # noqa: BLE001 - by design: untrusted bytes, see docstring
        raise CorruptionError(
            object_name, base_offset, f"malformed FlatBuffer ({type(e).__name__}: {e})"
        ) from e


_I32_FROM = struct.Struct("<i").unpack_from
_U16X2_FROM = struct.Struct("<HH").unpack_from
_U16S: dict[int, struct.Struct] = {}


def _u16s(count: int) -> struct.Struct:
    """``count`` little-endian u16s (a vtable's field offsets)."""
    got = _U16S.get(count)
    if got is None:
        got = _U16S[count] = struct.Struct(f"<{count}H")
    return got


def _named(what: str, index: int | None) -> str:
    return what if index is None else f"{what}[{index}]"


class FbReader:
    """Bounds-checked helpers over one FlatBuffer (the generated code does no checks)."""

    def __init__(self, buf: bytes) -> None:
        self.buf = bytes(buf)
        self.size = len(self.buf)

    # -- structure ----------------------------------------------------------------------------

    def root(self, cls: type[E], what: str) -> E:
        """The root table, as an instance of the generated class ``cls``."""
        if self.size < 4:
            raise FbDecodeError(0, f"{what}: buffer of {self.size} bytes is too short")
        (pos,) = struct.unpack_from("<I", self.buf, 0)
        return self._init(cls, pos, what)

    def _init(self, cls: type[E], pos: int, what: str, index: int | None = None) -> E:
        vpos, vlen = self.check_table(pos, what, index)
        obj = cls()
        obj._tab = FastTable(self.buf, pos, vpos, vlen)  # type: ignore[attr-defined]  (what Init does, faster)
        return obj

    def check_table(self, pos: int, what: str, index: int | None = None) -> tuple[int, int]:
        """Check that the table at ``pos`` and its vtable lie inside the buffer; its vtable's
        position and length. ``what`` names the table in errors (``what[index]`` with an index:
        an element of a vector, named only when something is wrong)."""
        buf, n = self.buf, self.size
        if pos < 0 or pos + 4 > n or pos % 4:
            raise FbDecodeError(pos, f"{_named(what, index)}: table offset {pos} out of bounds or unaligned")
        (soff,) = _I32_FROM(buf, pos)
        vpos = pos - soff
        if vpos < 0 or vpos + 4 > n or vpos % 2:
            raise FbDecodeError(pos, f"{_named(what, index)}: vtable offset {vpos} out of bounds")
        vlen, tlen = _U16X2_FROM(buf, vpos)
        if vlen < 4 or vlen % 2 or vpos + vlen > n:
            raise FbDecodeError(vpos, f"{_named(what, index)}: bad vtable length {vlen}")
        if tlen < 4 or pos + tlen > n:
            raise FbDecodeError(pos, f"{_named(what, index)}: table length {tlen} exceeds the buffer")
        count = (vlen - 4) // 2
        if count:
            fields = _u16s(count).unpack_from(buf, vpos + 4)
            # A field's offset is 0 (absent) or inside the table, past its vtable offset: one
            # pass in C over the fields, and the first bad one named when there is one.
            if max(fields) >= tlen or 1 in fields or 2 in fields or 3 in fields:
                for i, field in enumerate(fields):
                    if field and (field < 4 or field >= tlen):
                        raise FbDecodeError(vpos, f"{_named(what, index)}: field {i} offset {field} outside its table")
        return vpos, vlen

    def sub(self, obj: object, vtable_offset: int, cls: type[E], what: str) -> E | None:
        """The optional sub-table in the slot at ``vtable_offset`` of ``obj``, or None."""
        tab: Table = obj._tab  # type: ignore[attr-defined]
        o = tab.Offset(vtable_offset)
        if o == 0:
            return None
        self._need(tab.Pos + o, 4, what)
        return self._init(cls, tab.Indirect(tab.Pos + o), what)

    def req(self, obj: object, vtable_offset: int, cls: type[E], what: str) -> E:
        """Like :meth:`sub` for a ``(required)`` field: absence is corruption."""
        found = self.sub(obj, vtable_offset, cls, what)
        if found is None:
            raise FbDecodeError(obj._tab.Pos, f"required field {what} is missing")  # type: ignore[attr-defined]
        return found

    def union(self, table: Table | None, cls: type[E], what: str) -> E:
        """Re-type the generic union table ``table`` (as returned by generated code)."""
        if table is None:
            raise FbDecodeError(None, f"{what}: union value missing")
        return self._init(cls, table.Pos, what)

    def _need(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise FbDecodeError(pos, f"{what}: {length} bytes at {pos} exceed the buffer")

    def _vector(self, obj: object, vtable_offset: int, elem_size: int, what: str) -> tuple[int, int] | None:
        """(start, count) of the vector in a slot, bounds-checked; None when absent."""
        tab: Table = obj._tab  # type: ignore[attr-defined]
        o = tab.Offset(vtable_offset)
        if o == 0:
            return None
        self._need(tab.Pos + o, 4, what)
        vec_pos = tab.Indirect(tab.Pos + o)
        self._need(vec_pos, 4, what)
        count = tab.VectorLen(o)
        start = vec_pos + 4
        self._need(start, count * elem_size, what)
        return start, count

    # -- leaf values ---------------------------------------------------------------------------

    def bytes_opt(self, obj: object, vtable_offset: int, what: str) -> bytes | None:
        vec = self._vector(obj, vtable_offset, 1, what)
        if vec is None:
            return None
        start, count = vec
        return self.buf[start : start + count]

    def bytes_req(self, obj: object, vtable_offset: int, what: str) -> bytes:
        found = self.bytes_opt(obj, vtable_offset, what)
        if found is None:
            raise FbDecodeError(obj._tab.Pos, f"required field {what} is missing")  # type: ignore[attr-defined]
        return found

    def string_opt(self, obj: object, vtable_offset: int, what: str) -> str | None:
        raw = self.bytes_opt(obj, vtable_offset, what)
        return None if raw is None else raw.decode("utf-8")

    def string_req(self, obj: object, vtable_offset: int, what: str) -> str:
        raw = self.bytes_req(obj, vtable_offset, what)
        return raw.decode("utf-8")

    def u32_vector(self, obj: object, vtable_offset: int, what: str) -> tuple[int, ...]:
        vec = self._vector(obj, vtable_offset, 4, what)
        if vec is None:
            return ()
        start, count = vec
        return struct.unpack_from(f"<{count}I", self.buf, start)

    def tables(
        self,
        obj: object,
        vtable_offset: int,
        cls: type[E],
        convert: Callable[[E], object],
        what: str,
        required: bool = False,
    ) -> tuple:
        """Decode a vector of tables with ``convert``; absent = () unless ``required``."""
        vec = self._vector(obj, vtable_offset, 4, what)
        if vec is None:
            if required:
                raise FbDecodeError(obj._tab.Pos, f"required field {what} is missing")  # type: ignore[attr-defined]
            return ()
        start, count = vec
        out = []
        for i in range(count):
            elem_pos = start + 4 * i
            (rel,) = struct.unpack_from("<I", self.buf, elem_pos)
            out.append(convert(self._init(cls, elem_pos + rel, what, i)))
        return tuple(out)

    @staticmethod
    def enum(enum_cls: type[E], value: int, what: str) -> E:
        try:
            return enum_cls(value)  # type: ignore[call-arg]
        except ValueError:
            raise FbDecodeError(None, f"{what}: unknown enum value {value}") from None


# ---------------------------------------------------------------------------------------------
# Small shared tables: Ulid, Uuid, BytesBound, BytesRange
# ---------------------------------------------------------------------------------------------


def build_ulid(b: flatbuffers.Builder, value: ULID) -> int:
    n = int(value)
    fb_Ulid.Start(b)
    fb_Ulid.AddHigh(b, n >> 64)
    fb_Ulid.AddLow(b, n & _U64_MASK)
    return fb_Ulid.End(b)


def read_ulid(fb: fb_Ulid.Ulid) -> ULID:
    return ULID.from_int((fb.High() << 64) | fb.Low())


def build_uuid(b: flatbuffers.Builder, value: uuid.UUID) -> int:
    fb_Uuid.Start(b)
    fb_Uuid.AddHigh(b, value.int >> 64)
    fb_Uuid.AddLow(b, value.int & _U64_MASK)
    return fb_Uuid.End(b)


def read_uuid(fb: fb_Uuid.Uuid) -> uuid.UUID:
    return uuid.UUID(int=(fb.High() << 64) | fb.Low())


def build_ulid_vector(b: flatbuffers.Builder, values: Sequence[ULID]) -> int:
    return build_table_vector(b, [build_ulid(b, v) for v in values])


def read_ulid_vector(r: FbReader, obj: object, vtable_offset: int, what: str, required: bool = False) -> tuple[ULID, ...]:
    return r.tables(obj, vtable_offset, fb_Ulid.Ulid, read_ulid, what, required)


def build_table_vector(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    """A vector of already-built tables, in the given order."""
    if type(b) is _FastBuilder:
        return b.OffsetVector(offsets)
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def build_u32_vector(b: flatbuffers.Builder, values: Sequence[int]) -> int:
    b.StartVector(4, len(values), 4)
    for v in reversed(values):
        b.PrependUint32(v)
    return b.EndVector()


def build_bytes_range(b: flatbuffers.Builder, value: t.BytesRange) -> int:
    start = _build_bytes_bound(b, value.start_bound)
    end = _build_bytes_bound(b, value.end_bound)
    fb_BytesRange.Start(b)
    fb_BytesRange.AddStartBound(b, start)
    fb_BytesRange.AddEndBound(b, end)
    return fb_BytesRange.End(b)


def _build_bytes_bound(b: flatbuffers.Builder, value: t.BytesBound) -> int:
    key = None if value.key is None else b.CreateByteVector(value.key)
    fb_BytesBound.Start(b)
    if key is not None:
        fb_BytesBound.AddKey(b, key)
    fb_BytesBound.AddBoundType(b, int(value.bound_type))
    return fb_BytesBound.End(b)


def read_bytes_range(r: FbReader, fb: fb_BytesRange.BytesRange) -> t.BytesRange:
    start = r.req(fb, 4, fb_BytesBound.BytesBound, "BytesRange.start_bound")
    end = r.req(fb, 6, fb_BytesBound.BytesBound, "BytesRange.end_bound")
    return t.BytesRange(_read_bytes_bound(r, start), _read_bytes_bound(r, end))


def _read_bytes_bound(r: FbReader, fb: fb_BytesBound.BytesBound) -> t.BytesBound:
    return t.BytesBound(
        key=r.bytes_opt(fb, 4, "BytesBound.key"),
        bound_type=r.enum(t.BoundType, fb.BoundType(), "BytesBound.bound_type"),
    )


# ---------------------------------------------------------------------------------------------
# SsTableInfo
# ---------------------------------------------------------------------------------------------


def build_sst_info(b: flatbuffers.Builder, info: t.SsTableInfo) -> int:
    first = None if info.first_entry is None else b.CreateByteVector(info.first_entry)
    last = None if info.last_entry is None else b.CreateByteVector(info.last_entry)
    fb_SsTableInfo.Start(b)
    if first is not None:
        fb_SsTableInfo.AddFirstEntry(b, first)
    fb_SsTableInfo.AddIndexOffset(b, info.index_offset)
    fb_SsTableInfo.AddIndexLen(b, info.index_len)
    fb_SsTableInfo.AddFilterOffset(b, info.filter_offset)
    fb_SsTableInfo.AddFilterLen(b, info.filter_len)
    fb_SsTableInfo.AddCompressionFormat(b, int(info.compression_format))
    fb_SsTableInfo.AddSstType(b, int(info.sst_type))
    if last is not None:
        fb_SsTableInfo.AddLastEntry(b, last)
    fb_SsTableInfo.AddStatsOffset(b, info.stats_offset)
    fb_SsTableInfo.AddStatsLen(b, info.stats_len)
    fb_SsTableInfo.AddFilterFormat(b, int(info.filter_format))
    return fb_SsTableInfo.End(b)


def read_sst_info(r: FbReader, fb: fb_SsTableInfo.SsTableInfo) -> t.SsTableInfo:
    return t.SsTableInfo(
        first_entry=r.bytes_opt(fb, 4, "SsTableInfo.first_entry"),
        index_offset=fb.IndexOffset(),
        index_len=fb.IndexLen(),
        filter_offset=fb.FilterOffset(),
        filter_len=fb.FilterLen(),
        compression_format=r.enum(
            t.CompressionFormat, fb.CompressionFormat(), "SsTableInfo.compression_format"
        ),
        sst_type=r.enum(t.SstType, fb.SstType(), "SsTableInfo.sst_type"),
        last_entry=r.bytes_opt(fb, 18, "SsTableInfo.last_entry"),
        stats_offset=fb.StatsOffset(),
        stats_len=fb.StatsLen(),
        filter_format=r.enum(t.FilterFormat, fb.FilterFormat(), "SsTableInfo.filter_format"),
    )


def _finish(b: flatbuffers.Builder, root: int) -> bytes:
    b.Finish(root)
    return bytes(b.Output())


def encode_sst_info(info: t.SsTableInfo) -> bytes:
    """The ``SsTableInfo`` FlatBuffer (without the CRC the SST writer appends)."""
    b = _Builder(256)
    return _finish(b, build_sst_info(b, info))


def decode_sst_info(data: bytes, object_name: str, base_offset: int = 0) -> t.SsTableInfo:
    """Decode an ``SsTableInfo`` FlatBuffer; ``base_offset`` = its offset inside the object.
    Within a simulated run, bytes decoded before give the value they gave
    (:mod:`slatedb.format.memo`: an SST's metadata is decoded at every open of it)."""
    if type(data) is bytes:
        known = memo.recall("sst_info", data)
        if known is not None:
            return known
    with decoding(object_name, base_offset):
        r = FbReader(data)
        info = read_sst_info(r, r.root(fb_SsTableInfo.SsTableInfo, "SsTableInfo"))
    if type(data) is bytes:
        memo.remember("sst_info", data, info, memo.MAX_DECODED)
    return info


# ---------------------------------------------------------------------------------------------
# SsTableIndex / BlockMeta
# ---------------------------------------------------------------------------------------------


def encode_sst_index(block_meta: Sequence[t.BlockMeta]) -> bytes:
    """The ``SsTableIndex`` FlatBuffer listing every data block in file order
    (:func:`slatedb.format.fbwrite.encode_sst_index`: the bytes of
    :func:`encode_sst_index_builder`, without the generated code's per-field calls)."""
    return fbwrite.encode_sst_index(block_meta)


def encode_sst_index_builder(block_meta: Sequence[t.BlockMeta]) -> bytes:
    """The ``SsTableIndex`` FlatBuffer through the generated builder code (the reference)."""
    b = flatbuffers.Builder(64 + 32 * len(block_meta))
    metas = []
    for meta in block_meta:
        key = b.CreateByteVector(meta.first_key)
        fb_BlockMeta.Start(b)
        fb_BlockMeta.AddOffset(b, meta.offset)
        fb_BlockMeta.AddFirstKey(b, key)
        metas.append(fb_BlockMeta.End(b))
    vec = build_table_vector(b, metas)
    fb_SsTableIndex.Start(b)
    fb_SsTableIndex.AddBlockMeta(b, vec)
    return _finish(b, fb_SsTableIndex.End(b))


def _read_block_meta(r: FbReader) -> Callable[[fb_BlockMeta.BlockMeta], t.BlockMeta]:
    def convert(fb: fb_BlockMeta.BlockMeta) -> t.BlockMeta:
        return t.BlockMeta(offset=fb.Offset(), first_key=r.bytes_req(fb, 6, "BlockMeta.first_key"))

    return convert


def decode_sst_index(data: bytes, object_name: str, base_offset: int = 0) -> tuple[t.BlockMeta, ...]:
    """Decode an (uncompressed) ``SsTableIndex`` FlatBuffer into its block list."""
    buf = bytes(data)
    try:
        fast = fast_sst_index(buf)
    except struct.error:
        fast = None
    if fast is not None:
        return fast
    return checked_sst_index(buf, object_name, base_offset)


#: Indexes shorter than this go through :func:`decode_sst_index` (the ``struct`` reader): numpy's
#: fixed cost per call is more than a few blocks' entries cost one by one (a simulated world's
#: SSTs have a handful of blocks; the numpy reader was 8-10% of a db or takeover seed).
_COLUMNS_MIN_BYTES = 2048


def decode_sst_index_columns(data: bytes, object_name: str, base_offset: int = 0) -> tuple[list[int], list[bytes]]:
    """:func:`decode_sst_index` as (block offsets, first keys): read with numpy over all entries
    at once (:func:`~slatedb.format.fbread.fast_sst_index_columns`), else as
    :func:`decode_sst_index` reads it (which names any problem)."""
    buf = bytes(data)
    if len(buf) >= _COLUMNS_MIN_BYTES:
        try:
            fast = fast_sst_index_columns(buf)
        except (struct.error, IndexError, ValueError):
            fast = None
        if fast is not None:
            return fast
    metas = decode_sst_index(buf, object_name, base_offset)
    return [m.offset for m in metas], [m.first_key for m in metas]


def checked_sst_index(data: bytes, object_name: str, base_offset: int = 0) -> tuple[t.BlockMeta, ...]:
    """:func:`decode_sst_index` through the generated accessors and :class:`FbReader` alone
    (the fast path's fallback, and its reference in tests)."""
    with decoding(object_name, base_offset):
        r = FbReader(data)
        root = r.root(fb_SsTableIndex.SsTableIndex, "SsTableIndex")
        return r.tables(
            root, 4, fb_BlockMeta.BlockMeta, _read_block_meta(r), "SsTableIndex.block_meta", True
        )


# ---------------------------------------------------------------------------------------------
# SstStats / BlockStats
# ---------------------------------------------------------------------------------------------


def encode_sst_stats(stats: t.SstStats) -> bytes:
    """The ``SstStats`` FlatBuffer. ``block_stats`` is always written (possibly empty).
    Through :func:`slatedb.format.fbwrite.encode_sst_stats` (the bytes of
    :func:`encode_sst_stats_builder`)."""
    return fbwrite.encode_sst_stats(stats)


def encode_sst_stats_builder(stats: t.SstStats) -> bytes:
    """The ``SstStats`` FlatBuffer through the generated builder code (the reference)."""
    b = flatbuffers.Builder(128 + 16 * len(stats.block_stats))
    blocks = []
    for bs in stats.block_stats:
        fb_BlockStats.Start(b)
        fb_BlockStats.AddNumPuts(b, bs.num_puts)
        fb_BlockStats.AddNumDeletes(b, bs.num_deletes)
        fb_BlockStats.AddNumMerges(b, bs.num_merges)
        blocks.append(fb_BlockStats.End(b))
    vec = build_table_vector(b, blocks)
    fb_SstStats.Start(b)
    fb_SstStats.AddNumPuts(b, stats.num_puts)
    fb_SstStats.AddNumDeletes(b, stats.num_deletes)
    fb_SstStats.AddNumMerges(b, stats.num_merges)
    fb_SstStats.AddRawKeySize(b, stats.raw_key_size)
    fb_SstStats.AddRawValSize(b, stats.raw_val_size)
    fb_SstStats.AddBlockStats(b, vec)
    return _finish(b, fb_SstStats.End(b))


def _read_block_stats(fb: fb_BlockStats.BlockStats) -> t.BlockStats:
    return t.BlockStats(num_puts=fb.NumPuts(), num_deletes=fb.NumDeletes(), num_merges=fb.NumMerges())


def decode_sst_stats(data: bytes, object_name: str, base_offset: int = 0) -> t.SstStats:
    """Decode an (uncompressed) ``SstStats`` FlatBuffer."""
    with decoding(object_name, base_offset):
        r = FbReader(data)
        fb = r.root(fb_SstStats.SstStats, "SstStats")
        return t.SstStats(
            num_puts=fb.NumPuts(),
            num_deletes=fb.NumDeletes(),
            num_merges=fb.NumMerges(),
            raw_key_size=fb.RawKeySize(),
            raw_val_size=fb.RawValSize(),
            block_stats=r.tables(fb, 14, fb_BlockStats.BlockStats, _read_block_stats, "SstStats.block_stats"),
        )


# ---------------------------------------------------------------------------------------------
# CompactedSsTable (V1 manifest entry; also the compactions file's outputs)
# ---------------------------------------------------------------------------------------------


def build_compacted_sst(b: flatbuffers.Builder, sst: t.CompactedSsTable) -> int:
    # its info and range are often the same values as another entry's (the same SST in a job's
    # outputs and its subcompaction's, then in the manifest): spliced in when built before
    sid = build_ulid(b, sst.id)
    info = build_cached(b, build_sst_info, sst.info)
    rng = None if sst.visible_range is None else build_cached(b, build_bytes_range, sst.visible_range)
    fb_CompactedSsTable.Start(b)
    fb_CompactedSsTable.AddId(b, sid)
    fb_CompactedSsTable.AddInfo(b, info)
    if rng is not None:
        fb_CompactedSsTable.AddVisibleRange(b, rng)
    if sst.format_version is not None:
        fb_CompactedSsTable.AddFormatVersion(b, sst.format_version)
    return fb_CompactedSsTable.End(b)


def read_compacted_sst(r: FbReader) -> Callable[[fb_CompactedSsTable.CompactedSsTable], t.CompactedSsTable]:
    def convert(fb: fb_CompactedSsTable.CompactedSsTable) -> t.CompactedSsTable:
        rng = r.sub(fb, 8, fb_BytesRange.BytesRange, "CompactedSsTable.visible_range")
        return t.CompactedSsTable(
            id=read_ulid(r.req(fb, 4, fb_Ulid.Ulid, "CompactedSsTable.id")),
            info=read_sst_info(r, r.req(fb, 6, fb_SsTableInfo.SsTableInfo, "CompactedSsTable.info")),
            visible_range=None if rng is None else read_bytes_range(r, rng),
            format_version=fb.FormatVersion(),
        )

    return convert
