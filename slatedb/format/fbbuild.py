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

import struct

import flatbuffers
from flatbuffers import number_types as N
from flatbuffers.builder import OffsetArithmeticError

_U16 = struct.Struct("<H").pack_into
_I32 = struct.Struct("<i").pack_into
_U32 = struct.Struct("<I").pack_into
_ZEROS = bytes(16)


class FastBuilder(flatbuffers.Builder):
    """``flatbuffers.Builder`` with its hot methods in one frame each (same bytes)."""

    __slots__ = ()

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
        self.Prep(4, 0)
        offset = len(self.Bytes) - self.head
        if not (off <= offset):
            raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        head = self.head - 4
        _U32(self.Bytes, head, offset - off + 4)
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
        self.Prep(4, 0)  # PrependSOffsetTRelative(0): a placeholder for the offset to the vtable
        head = self.head - 4
        _I32(self.Bytes, head, len(self.Bytes) - self.head + 4)
        self.head = head
        objectOffset = len(self.Bytes) - head
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
        vt_key = tuple(key)
        existing = self.vtables.get(vt_key)
        if existing is None:
            i = len(vtable) - 1
            trailing = 0
            trim = True
            while i >= 0:
                off = 0
                elem = vtable[i]
                i -= 1
                if elem == 0:
                    if trim:
                        trailing += 1
                        continue
                else:
                    off = objectOffset - elem
                    trim = False
                self.PrependVOffsetT(off)
            self.PrependVOffsetT(objectSize)
            self.PrependVOffsetT((len(vtable) - trailing + 2) * 2)
            objectStart = len(self.Bytes) - objectOffset
            _I32(self.Bytes, objectStart, (len(self.Bytes) - self.head) - objectOffset)
            self.vtables[vt_key] = len(self.Bytes) - self.head
        else:
            objectStart = len(self.Bytes) - objectOffset
            self.head = objectStart
            _I32(self.Bytes, objectStart, existing - objectOffset)
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
    pack_into = flags.packer_type.pack_into

    def slot(self: FastBuilder, o: int, x, d) -> None:  # noqa: ANN001
        if x != d or (self.forceDefaults and d is not None):
            if not self.nested:
                self.assertNested()
            self.Prep(width, 0)
            head = self.head - width
            try:
                pack_into(self.Bytes, head, x)
            except struct.error:
                N.enforce_number(x, flags)
                raise
            self.head = head
            self.current_vtable[o] = len(self.Bytes) - head

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
