"""A faster FlatBuffers builder with the same output, byte for byte.

``flatbuffers.Builder`` writes every scalar through four or five Python calls (the typed slot
method, ``PrependSlot``, two range checks, ``Prepend``, ``Prep``, ``Place``, ``encode.Write``);
a manifest of a few dozen SSTs is thousands of them, and encoding manifests and ``.compactions``
objects was a tenth of a simulated compactor world's CPU (issue 27 item 2).
:class:`FastBuilder` is the same builder -- the same algorithm, alignment, padding, vtable
de-duplication and buffer growth, the base class's state -- with the hot methods written out in
one frame each. Its output is the stock builder's (``tests/format/test_fbbuild.py`` compares
the two on random manifests, ``.compactions`` and SST infos; the SST index and stats, written
once per block, have :mod:`slatedb.format.fbwrite`'s leaner builder), and a value out of its
type's range still raises the stock builder's ``TypeError``, only checked by ``struct`` first.

The pure-Python FlatBuffers encoding is the only one there is: the format's bytes are those of
the official engine (``tests/format/test_manifest_official.py``), so it is built, not replaced.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any, Callable, NamedTuple

import flatbuffers
from flatbuffers import number_types as N
from flatbuffers.builder import OffsetArithmeticError

from slatedb.format import memo

_U16 = struct.Struct("<H").pack_into
_I32 = struct.Struct("<i").pack_into
_U32 = struct.Struct("<I").pack_into
_ZEROS = bytes(16)
_U16S: dict[int, struct.Struct] = {}


def _u16s(n: int) -> struct.Struct:
    """The packer of ``n`` little-endian uint16s (a vtable)."""
    packer = _U16S.get(n)
    if packer is None:
        packer = _U16S[n] = struct.Struct(f"<{n}H")
    return packer


#: Every vtable shape a :class:`FastBuilder` wrote (its field offsets, trimmed, reversed, and
#: the object size: the stock builder's key) -> its number. A :class:`FastBuilder`'s
#: ``vtables`` are keyed by these numbers. Shapes are few (a schema's tables and their fields'
#: sizes) and the numbers are never reused.
_VTABLE_IDS: dict[tuple[int, ...], int] = {}
_VTABLE_NUMBERS = itertools.count()


class FastBuilder(flatbuffers.Builder):
    """``flatbuffers.Builder`` with its hot methods in one frame each (same bytes)."""

    #: ``_log``: while :func:`build_cached` records a part, the vtables its tables wrote or
    #: pointed to outside the part (None otherwise).
    #: ``_splicing``: made within a simulated run (:func:`slatedb.format.memo.active`), so
    #: :func:`build_cached` may splice recorded parts in.
    __slots__ = ("_log", "_splicing")

    def __init__(self, initialSize: int = 1024) -> None:
        super().__init__(initialSize)
        self._log = None
        self._splicing = memo.active()

    # -- alignment ------------------------------------------------------------------------

    def Prep(self, size: int, additionalBytes: int) -> None:
        if size > self.minalign:
            self.minalign = size
        head = self.head
        buf_len = len(self.Bytes)
        align = (-(buf_len - head + additionalBytes)) & (size - 1)
        needed = align + size + additionalBytes
        while head < needed:
            old = buf_len
            self.GrowByteBuffer()
            buf_len = len(self.Bytes)
            head += buf_len - old
        if align:
            new_head = head - align
            self.Bytes[new_head:head] = _ZEROS[:align] if align <= 16 else bytes(align)
            head = new_head
        self.head = head

    # -- scalars --------------------------------------------------------------------------

    def Place(self, x, flags) -> None:  # noqa: ANN001 - the base class's signature
        new_head = self.head - flags.bytewidth
        try:
            flags.packer_type.pack_into(self.Bytes, new_head, x)
        except struct.error:
            N.enforce_number(x, flags)  # the stock builder's TypeError for an out-of-range value
            raise
        self.head = new_head

    def Prepend(self, flags, off) -> None:  # noqa: ANN001
        self.Prep(flags.bytewidth, 0)
        self.Place(off, flags)

    def PrependSlot(self, flags, o, x, d) -> None:  # noqa: ANN001
        if x != d or (self.forceDefaults and d is not None):
            if not self.nested:
                self.assertNested()
            self.Prep(flags.bytewidth, 0)
            self.Place(x, flags)
            self.current_vtable[o] = len(self.Bytes) - self.head

    def Slot(self, slotnum: int) -> None:
        if not self.nested:
            self.assertNested()
        self.current_vtable[slotnum] = len(self.Bytes) - self.head

    # -- offsets --------------------------------------------------------------------------

    def PrependUOffsetTRelative(self, off: int) -> None:
        # Prep(4, 0) inline while no growth is needed (Prep itself when it is)
        if self.minalign < 4:
            self.minalign = 4
        buf = self.Bytes
        head = self.head
        align = (head - len(buf)) & 3
        if head < align + 4:
            self.Prep(4, 0)
            buf = self.Bytes
            head = self.head
        elif align:
            buf[head - align:head] = _ZEROS[:align]
            head -= align
        offset = len(buf) - head
        if not (off <= offset):
            self.head = head
            raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        head -= 4
        _U32(buf, head, offset - off + 4)
        self.head = head

    def PrependUOffsetTRelativeSlot(self, o: int, x: int, d: int) -> None:
        if x != d or self.forceDefaults:
            self.PrependUOffsetTRelative(x)
            self.Slot(o)

    def PrependVOffsetT(self, x: int) -> None:
        self.Prep(2, 0)
        head = self.head - 2
        _U16(self.Bytes, head, x)
        self.head = head

    # -- tables and vectors ---------------------------------------------------------------

    def StartObject(self, numfields: int) -> None:
        if self.nested:
            self.assertNotNested()
        self.current_vtable = [0] * numfields
        self.objectEnd = len(self.Bytes) - self.head
        self.nested = True

    def EndObject(self) -> int:
        if not self.nested:
            self.assertNested()
        self.nested = False
        return self.WriteVtable()

    def WriteVtable(self) -> int:
        # The stock algorithm (see flatbuffers.Builder.WriteVtable), in one frame.
        # PrependSOffsetTRelative(0): a placeholder for the offset to the vtable, after
        # Prep(4, 0) (inline while no growth is needed)
        if self.minalign < 4:
            self.minalign = 4
        buf = self.Bytes
        head = self.head
        align = (head - len(buf)) & 3
        if head < align + 4:
            self.Prep(4, 0)
            buf = self.Bytes
            head = self.head
        elif align:
            buf[head - align:head] = _ZEROS[:align]
            head -= align
        _I32(buf, head - 4, len(buf) - head + 4)
        head -= 4
        self.head = head
        objectOffset = len(buf) - head
        vtable = self.current_vtable
        key = []
        trim = True
        for elem in reversed(vtable):
            if elem == 0:
                if trim:
                    continue
            else:
                elem = objectOffset - elem
                trim = False
            key.append(elem)
        objectSize = objectOffset - self.objectEnd
        key.append(objectSize)
        # The vtable's shape, by its number (see _VTABLE_IDS): the same sharing as the stock
        # builder's dict of shapes, with an int to hash where build_cached looks a part's up.
        shape = tuple(key)
        vt_key = _VTABLE_IDS.get(shape)
        if vt_key is None:  # one C call each (threads may race: each shape gets one number)
            vt_key = _VTABLE_IDS.setdefault(shape, next(_VTABLE_NUMBERS))
        existing = self.vtables.get(vt_key)
        if existing is None:
            # The stock builder prepends the field offsets (last field first, trailing absent
            # fields trimmed), the object size and the vtable size, each a uint16 after
            # Prep(2, 0). The head is 4-aligned here (the placeholder above), so none of them
            # is padded: the same bytes in one write, from the lowest address up: the vtable
            # size, the object size, then the field offsets first to last -- ``key`` reversed.
            n = len(key) + 1
            size = 2 * n
            while head < size:
                old = len(buf)
                self.GrowByteBuffer()
                buf = self.Bytes
                head += len(buf) - old
            head -= size
            key.append(size)
            key.reverse()
            _u16s(n).pack_into(buf, head, *key)
            self.head = head
            objectStart = len(buf) - objectOffset
            _I32(buf, objectStart, (len(buf) - head) - objectOffset)
            self.vtables[vt_key] = len(buf) - head
            if self._log is not None:
                self._log.append((False, vt_key, len(buf) - head))
        else:
            objectStart = len(buf) - objectOffset
            self.head = objectStart
            _I32(buf, objectStart, existing - objectOffset)
            if self._log is not None:
                self._log.append((True, vt_key, objectOffset, existing))
        self.current_vtable = None
        return objectOffset

    def StartVector(self, elemSize: int, numElems: int, alignment: int) -> int:
        if self.nested:
            self.assertNotNested()
        self.nested = True
        self.vectorNumElems = numElems
        self.Prep(4, elemSize * numElems)
        self.Prep(alignment, elemSize * numElems)
        return len(self.Bytes) - self.head

    def OffsetVector(self, offsets) -> int:  # noqa: ANN001
        """A vector of already-built tables (``offsets``, in order): ``StartVector(4, n, 4)``,
        ``PrependUOffsetTRelative`` of each from the last, ``EndVector()`` -- the same bytes and
        state, in one frame: the offsets packed at once (``StartVector``'s first ``Prep(4, 4n)``
        aligned the space and made room for them; its second then has nothing to do)."""
        n = len(offsets)
        if self.nested:
            self.assertNotNested()
        self.Prep(4, 4 * n)
        buf = self.Bytes
        head = self.head
        used = len(buf) - head
        if n and max(offsets) > used:
            self.nested = True
            self.vectorNumElems = n
            raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        head -= 4 * n
        # element i sits at used + 4 * (n - i) once written; its offset is that minus off
        struct.pack_into(f"<{n}I", buf, head, *[used + 4 * (n - i) - off for i, off in enumerate(offsets)])
        head -= 4  # EndVector: the element count
        _U32(buf, head, n)
        self.head = head
        self.vectorNumElems = None
        return len(buf) - head

    def EndVector(self, numElems=None) -> int:  # noqa: ANN001
        if numElems is not None:
            return super().EndVector(numElems)
        if not self.nested:
            self.assertNested()
        self.nested = False
        head = self.head - 4
        _U32(self.Bytes, head, self.vectorNumElems)
        self.head = head
        self.vectorNumElems = None
        return len(self.Bytes) - head


def _typed_slot(flags):  # noqa: ANN001, ANN202
    width = flags.bytewidth
    mask = width - 1
    pack_into = flags.packer_type.pack_into

    def slot(self: FastBuilder, o: int, x, d) -> None:  # noqa: ANN001
        if x != d or (self.forceDefaults and d is not None):
            if not self.nested:
                self.assertNested()
            # Prep(width, 0) inline while no growth is needed (Prep itself when it is)
            if width > self.minalign:
                self.minalign = width
            buf = self.Bytes
            head = self.head
            align = (head - len(buf)) & mask
            if head < align + width:
                self.Prep(width, 0)
                buf = self.Bytes
                head = self.head
            elif align:
                buf[head - align:head] = _ZEROS[:align]
                head -= align
            self.head = head
            head -= width
            try:
                pack_into(buf, head, x)
            except struct.error:
                N.enforce_number(x, flags)
                raise
            self.head = head
            self.current_vtable[o] = len(buf) - head

    return slot


def _typed_prepend(flags):  # noqa: ANN001, ANN202
    width = flags.bytewidth
    pack_into = flags.packer_type.pack_into

    def prepend(self: FastBuilder, x) -> None:  # noqa: ANN001
        self.Prep(width, 0)
        head = self.head - width
        try:
            pack_into(self.Bytes, head, x)
        except struct.error:
            N.enforce_number(x, flags)
            raise
        self.head = head

    return prepend


for _name, _flags in (("Bool", N.BoolFlags), ("Byte", N.Uint8Flags), ("Uint8", N.Uint8Flags),
                      ("Uint16", N.Uint16Flags), ("Uint32", N.Uint32Flags), ("Uint64", N.Uint64Flags),
                      ("Int8", N.Int8Flags), ("Int16", N.Int16Flags), ("Int32", N.Int32Flags),
                      ("Int64", N.Int64Flags), ("Float32", N.Float32Flags), ("Float64", N.Float64Flags)):
    setattr(FastBuilder, f"Prepend{_name}Slot", _typed_slot(_flags))
    setattr(FastBuilder, f"Prepend{_name}", _typed_prepend(_flags))
del _name, _flags


# -- parts built once, spliced in again ----------------------------------------------------
#
# A manifest or ``.compactions`` file is rebuilt whole at every commit and heartbeat, though
# most of its parts (SST entries, views, sorted runs, checkpoints, compaction jobs) are the same
# values as in the previous one. :func:`build_cached` builds a part once and afterwards copies its
# bytes in: the builder's bytes for a part depend only on the part's value, on where the part
# starts modulo its alignment, and on which vtables the buffer already holds (the builder
# shares an equal vtable instead of writing it again). So a recording is reused only at the
# same start modulo 8, with the same vtables already present (those it pointed to) and absent
# (those it wrote), and the offsets to vtables outside the part are written for the new
# position: the stock builder's bytes (``tests/format/test_fbbuild.py``).


class _Splice(NamedTuple):
    """One recording of a part (a ``NamedTuple``, not a frozen attrs class: one is made for
    every part built in a simulated run, and a tuple is made in one call, as ``Row`` is)."""

    mod: int  # where the part started, modulo 8
    data: bytes  # the part's bytes
    ret: int  # the part's table, relative to its start
    align: int  # the largest alignment inside
    refs: tuple[tuple[int, int], ...]  # (table, its vtable key) of tables using an outer vtable
    news: tuple[tuple[int, int], ...]  # (vtable, its key) of vtables the part wrote
    ref_keys: frozenset  # the keys of refs: present for the part's bytes to be these
    new_keys: frozenset  # the keys of news: absent for the part's bytes to be these


#: Recorded parts by (build function, id of the value); the value is kept in the entry, so its
#: id stays its own. Cleared when the simulator's run ends (:func:`slatedb.format.memo.remembering`).
_SPLICES: dict[tuple[Any, int], tuple[Any, list[_Splice]]] = {}
MAX_SPLICED = 8192
_VARIANTS = 8


def build_cached(b: flatbuffers.Builder, build: Callable[[Any, Any], int], value: Any) -> int:
    """``build(b, value)``: the part's table offset, its bytes copied from an earlier build of
    the same value object when that build's bytes are what ``build`` would write here.

    Only within the simulator's runs (:func:`slatedb.format.memo.active`), where every commit
    re-encodes the same parts; elsewhere it builds. Parts nest: a part recorded inside another
    is logged in the outer part's record as well."""
    if type(b) is not FastBuilder or not b._splicing or b.nested:
        return build(b, value)
    key = (build, id(value))
    entry = _SPLICES.get(key)
    start = len(b.Bytes) - b.head
    if entry is not None and entry[0] is value:
        mod = start & 7
        present = b.vtables.keys()
        for s in entry[1]:
            if s.mod == mod and s.ref_keys <= present and (not s.new_keys or present.isdisjoint(s.new_keys)):
                return _splice(b, s, start)
    saved_align = b.minalign
    b.minalign = 1
    outer = b._log  # recording a part around this one: it sees this part's vtables too
    b._log = log = []
    try:
        ret = build(b, value)
    finally:
        b._log = outer
        if outer is not None:
            outer.extend(log)
        align = b.minalign
        if saved_align > b.minalign:
            b.minalign = saved_align
    if align > 8 or b.nested:
        return ret
    head = b.head
    refs = []
    news = []
    for e in log:  # (True, key, table, vtable) a table using a vtable; (False, key, vtable) one written
        if e[0]:
            if e[3] <= start:  # outside the part
                refs.append((e[2] - start, e[1]))
        else:
            news.append((e[2] - start, e[1]))
    s = _Splice(start & 7, bytes(b.Bytes[head:len(b.Bytes) - start]), ret - start, align,
                tuple(refs), tuple(news),
                frozenset([k for _, k in refs]) if refs else _NO_KEYS,
                frozenset([k for _, k in news]) if news else _NO_KEYS)
    if entry is None or entry[0] is not value:
        if len(_SPLICES) >= MAX_SPLICED:
            _SPLICES.clear()
        entry = _SPLICES[key] = (value, [])
    variants = entry[1]
    variants.append(s)
    if len(variants) > _VARIANTS:
        del variants[0]
    return ret


_NO_KEYS: frozenset = frozenset()


def _splice(b: FastBuilder, s: _Splice, start: int) -> int:
    n = len(s.data)
    head = b.head
    while head < n:
        old = len(b.Bytes)
        b.GrowByteBuffer()
        head += len(b.Bytes) - old
    new_head = head - n
    buf = b.Bytes
    buf[new_head:head] = s.data
    b.head = new_head
    end = len(buf)
    vtables = b.vtables
    log = b._log  # a part around this one is being recorded: what this part's tables did
    for rel, k in s.refs:
        table = start + rel
        existing = vtables[k]
        _I32(buf, end - table, existing - table)
        if log is not None:
            log.append((True, k, table, existing))
    for rel, k in s.news:
        vtables[k] = start + rel
        if log is not None:
            log.append((False, k, start + rel))
    if s.align > b.minalign:
        b.minalign = s.align
    return start + s.ret


memo._AT_END.append(_SPLICES.clear)  # every recorded part is dropped when the simulated run ends
