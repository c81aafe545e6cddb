"""The official ``Db.warm_sst`` / ``evict_cached_sst`` over ours (:mod:`slatedb.api.cache_control`).

Official semantics kept: an SST the current manifest does not hold, or a database without a
block cache, makes both calls a no-op. ``CacheTarget.FILTERS`` / ``INDEX`` load nothing more
here: an SST's index and bloom filter stay in memory while it is in the manifest.
``CacheTarget.STATS`` loads nothing: the read path never reads the stats block.
``CacheTarget.DATA(range)`` reads the data blocks overlapping ``range`` into the block cache.
"""

from __future__ import annotations

from typing import Any

from slatedb.errors import NotFoundError
from slatedb.uniffi.convert import bounds_of, half_open
from slatedb.uniffi.errors import Error, translated
from slatedb.uniffi.values import CacheTarget, SsTableId


def _sst_id(sst_id: Any) -> str:
    if not isinstance(sst_id, SsTableId):
        raise Error.Invalid(f"sst_id must be an SsTableId, not {type(sst_id).__name__}")
    return sst_id.value


def _ranges(targets: Any) -> list[tuple[bytes | None, bytes | None]]:
    if not isinstance(targets, (list, tuple)):
        raise Error.Invalid(f"targets must be a list of CacheTarget, not {type(targets).__name__}")
    out = []
    for t in targets:
        if not isinstance(t, CacheTarget):
            raise Error.Invalid(f"a cache target must be a CacheTarget, not {type(t).__name__}")
        if t.is_DATA():
            out.append(half_open(bounds_of(t.range)))
    return out


async def warm_sst(ours: Any, sst_id: Any, targets: Any, reason: Any = None) -> None:
    sid, ranges = _sst_id(sst_id), _ranges(targets)
    with translated(reason):
        for start, end in ranges:
            try:
                await ours.warm_sst(sid, start, end)
            except NotFoundError:
                return  # not in the current manifest: a no-op, as in the official binding


async def evict_cached_sst(ours: Any, sst_id: Any, reason: Any = None) -> None:
    sid = _sst_id(sst_id)
    with translated(reason):
        try:
            await ours.evict_cached_sst(sid)
        except NotFoundError:
            return
