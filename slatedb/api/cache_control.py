"""``warm_sst`` / ``evict_cached_sst`` on ``Db`` and ``DbReader``, sync and async (the official
binding's cache calls; the work is in :mod:`slatedb.lsm.warm`).

Arguments are checked at the call: an SST id that is not a ULID raises
:class:`~slatedb.errors.InvalidArgumentError`, one that the current manifest does not hold (L0 or
a sorted run) raises :class:`~slatedb.errors.NotFoundError`. (The official binding makes an
unreachable SST a silent no-op; ``slatedb.uniffi`` keeps that behaviour, ours names the mistake.)
"""

from __future__ import annotations

from typing import Any

from slatedb.lsm import warm as _warm


async def warm_in_core(core: Any, sst_id: Any, start: bytes | None, end: bytes | None) -> int:
    """Runs on the engine's loop: warm ``sst_id``'s blocks in ``[start, end)``."""
    reader = _warm.reader_in_view(core.read_state.view, sst_id, "the database")
    return await _warm.warm(reader, core.cache, start, end)


def _evict(core: Any, sst_id: Any) -> int:
    core.check_open()
    sid = _warm.sst_id_of(sst_id)
    return _warm.evict(_warm.reader_in_view(core.read_state.view, sid, "the database"), core.cache)


class SyncCacheControl:
    _core: Any
    _portal: Any

    def warm_sst(self, sst_id: Any, start: bytes | None = None, end: bytes | None = None) -> int:
        """Read the data blocks of SST ``sst_id`` (a ULID or its string) holding keys in
        ``[start, end)`` (None: unbounded) into the block cache, so reads of them need no store
        request; returns how many blocks the range covers (0 without a block cache). The SST's
        index and bloom filter are in memory already while it is in the manifest."""
        sid = _warm.sst_id_of(sst_id)
        _warm.check_range(start, end)
        self._core.check_open()
        _warm.reader_in_view(self._core.read_state.view, sid, "the database")  # NotFoundError at the call
        return self._portal(warm_in_core, self._core, sid, start, end)

    def evict_cached_sst(self, sst_id: Any) -> int:
        """Drop every cached block of SST ``sst_id``: the next read of it goes to the store.
        Returns how many blocks were cached."""
        return _evict(self._core, sst_id)


class AsyncCacheControl:
    _core: Any
    _host: Any

    async def warm_sst(self, sst_id: Any, start: bytes | None = None, end: bytes | None = None) -> int:
        """See :meth:`slatedb.Db.warm_sst`."""
        sid = _warm.sst_id_of(sst_id)
        _warm.check_range(start, end)
        self._core.check_open()
        _warm.reader_in_view(self._core.read_state.view, sid, "the database")
        return await self._host.acall(warm_in_core, self._core, sid, start, end)

    async def evict_cached_sst(self, sst_id: Any) -> int:
        """See :meth:`slatedb.Db.evict_cached_sst`."""
        return _evict(self._core, sst_id)
