"""WAL SSTs: ``wal/<id:020>.sst``.

A WAL SST is an SST with ``sst_type = Wal``: rows in seq order (keys unordered), no filter and
no stats (``filter_offset == index_offset``, ``filter_len == 0``), index keys and
``first_entry`` = the block's / the SST's first seq as 8 big-endian bytes, no ``last_entry``.

A **0-byte object is a fence**: a new writer creates it at the next WAL id so that an older
writer's create-if-absent of that id fails. It replays as an empty WAL SST; :class:`WalSst`
says so explicitly with ``is_fence``.

WAL SSTs are read whole (replay needs every row), so the reader is one ``get`` followed by the
pure decoders of :mod:`slatedb.format.sst`.
"""

from __future__ import annotations

import struct

import attrs

from slatedb.errors import CorruptionError
from slatedb.format.sst import SstOptions, decode_all_blocks, decode_layout
from slatedb.format.sst_writer import EncodedSst, SstWriter
from slatedb.format.types import SsTableInfo, SstType
from slatedb.row import Row

_U64 = struct.Struct(">Q")

#: The bytes of a fence object.
FENCE_BYTES = b""


@attrs.frozen
class WalSst:
    """A decoded WAL SST: its rows in seq order, or a fence (no rows, no info)."""

    rows: tuple[Row, ...]
    info: SsTableInfo | None
    is_fence: bool

    @property
    def first_seq(self) -> int | None:
        return self.rows[0].seq if self.rows else None

    @property
    def last_seq(self) -> int | None:
        return self.rows[-1].seq if self.rows else None


def encode_wal_sst(rows, options: SstOptions | None = None) -> EncodedSst:
    """The WAL SST of ``rows`` (non-empty, in seq order)."""
    writer = SstWriter(options, SstType.WAL)
    writer.add_all(rows)
    return writer.finish()


def decode_wal_sst(data: bytes, object_name: str) -> WalSst:
    """Decode a whole WAL object; ``b""`` is a fence."""
    if len(data) == 0:
        return WalSst(rows=(), info=None, is_fence=True)
    layout = decode_layout(data, object_name)
    info = layout.info
    if info.sst_type != SstType.WAL:
        raise CorruptionError(object_name, layout.metadata_offset, "not a WAL SST (sst_type is not Wal)")
    rows: list[Row] = []
    index = layout.index
    for i, block in enumerate(decode_all_blocks(data, layout)):
        if not block.rows:
            raise CorruptionError(object_name, index.offsets[i], "empty WAL block")
        expected_key = _U64.pack(block.rows[0].seq)
        if index.first_keys[i] != expected_key:
            raise CorruptionError(object_name, index.offsets[i], "WAL index key is not the block's first seq")
        rows.extend(block.rows)
    if info.first_entry is not None and info.first_entry != _U64.pack(rows[0].seq):
        raise CorruptionError(object_name, layout.metadata_offset, "WAL first_entry is not the first seq")
    for a, b in zip(rows, rows[1:]):
        if b.seq < a.seq:
            raise CorruptionError(object_name, 0, "WAL rows out of seq order")
    return WalSst(rows=tuple(rows), info=info, is_fence=False)


async def read_wal_sst(store, object_name: str) -> WalSst:
    """Fetch and decode ``object_name`` (one ``get`` of the whole object)."""
    result = await store.get(object_name)
    return decode_wal_sst(bytes(result.data), object_name)
