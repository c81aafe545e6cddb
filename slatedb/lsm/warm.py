"""Warming and evicting one SST's blocks in the block cache (the official ``warm_sst`` /
``evict_cached_sst``).

An open SST reader keeps its index and bloom filter in memory for as long as the SST is in the
view (they are read when the view is built), so "warming" them is making sure the SST is in the
view; what the block cache holds is data blocks, keyed ``(str(sst id), block index)``. Warming
reads the data blocks overlapping a key range (one ranged read) into the cache; evicting drops
every cached block of the SST, so the next read of it goes to the store.
"""

from __future__ import annotations

from typing import Any

from ulid import ULID

from slatedb.errors import InvalidArgumentError, NotFoundError
from slatedb.format.sst_reader import SstReader
from slatedb.lsm.cache import BlockCache
from slatedb.lsm.view import LsmView


def sst_id_of(sst_id: Any) -> ULID:
    """``sst_id`` as a ULID (a ULID, its 26-character string, or its 16 bytes); anything else
    raises :class:`InvalidArgumentError` at the call."""
    if isinstance(sst_id, ULID):
        return sst_id
    try:
        if isinstance(sst_id, str):
            return ULID.from_str(sst_id)
        if isinstance(sst_id, (bytes, bytearray)):
            return ULID.from_bytes(bytes(sst_id))
    except ValueError as e:
        raise InvalidArgumentError(f"sst_id {sst_id!r} is not an SST id (a ULID): {e}") from None
    raise InvalidArgumentError(f"sst_id must be a ULID, its string or its 16 bytes, not {type(sst_id).__name__}")


def reader_in_view(view: LsmView, sst_id: ULID, where: str) -> SstReader:
    """The reader of ``sst_id`` in ``view``; :class:`NotFoundError` when the view (the current
    manifest's L0 and sorted runs) does not hold it."""
    for h in view.l0:
        if h.sst_id == sst_id:
            return h.reader
    for run in view.runs:
        for h in run.ssts:
            if h.sst_id == sst_id:
                return h.reader
    raise NotFoundError(f"SST {sst_id} is not in {where}'s current manifest (L0 or a sorted run)")


def block_span(reader: SstReader, start: bytes | None, end: bytes | None) -> tuple[int, int]:
    """Data blocks ``[first, last)`` that may hold keys in ``[start, end)`` (None: unbounded)."""
    index = reader.index
    n = len(index)
    first = 0 if start is None else index.find_block(start)
    last = n
    if end is not None:
        keys = index.first_keys
        while last > first and keys[last - 1] >= end:
            last -= 1
    return first, max(first, last)


def check_range(start: bytes | None, end: bytes | None) -> None:
    for name, v in (("start", start), ("end", end)):
        if v is not None and not isinstance(v, (bytes, bytearray)):
            raise InvalidArgumentError(f"{name} must be bytes or None, not {type(v).__name__}")
    if start is not None and end is not None and start > end:
        raise InvalidArgumentError(f"start {start!r} is after end {end!r}")


async def warm(reader: SstReader, cache: BlockCache | None, start: bytes | None, end: bytes | None) -> int:
    """Read the data blocks of ``reader`` overlapping ``[start, end)`` into ``cache``; the
    number of blocks the range covers (0 without a cache: nothing to warm)."""
    if cache is None:
        return 0
    first, last = block_span(reader, start, end)
    if last > first:
        await reader.read_blocks(first, last)
    return last - first


def evict(reader: SstReader, cache: BlockCache | None) -> int:
    """Drop every cached block of ``reader``; how many were cached."""
    if cache is None:
        return 0
    return cache.discard_all((reader.cache_id, i) for i in range(len(reader.index)))
