"""The async reader (asyncio or trio), the same shape as :class:`slatedb.DbReader`::

    async with slatedb.aio.DbReader.open("file:///path/to/db") as r:
        await r.get(b"k")
        async for key, value in r.scan():
            ...

``await DbReader.open(...)`` works too (then ``await r.close()``). Under trio the maintenance
task runs on the caller's loop; under asyncio on a runtime thread (see :mod:`slatedb.aio`).
Reads are :class:`slatedb.api.async_reads.AsyncReads` over :class:`~slatedb.reader.core.ReaderCore`;
the service runner is :func:`slatedb.api.portal.serve`, as for :class:`slatedb.aio.Db`.
"""

from __future__ import annotations

from slatedb.api.cache_control import AsyncCacheControl

import uuid
from pathlib import Path
from typing import Any, Mapping

from slatedb.api.async_reads import AsyncReads
from slatedb.api.options import DbReaderStatus
from slatedb.api.read_kit import reader_status
from slatedb.api.opening import Opening
from slatedb.api.portal import AsyncClosing, RuntimeArg
from slatedb.config import Settings
from slatedb.api.args import coerce_settings
from slatedb.lsm.read_path import ReadState
from slatedb.errors import ReadOnlyError
from slatedb.objstore.base import ObjectStore
from slatedb.merge_operator import merge_operator_of
from slatedb.runtime import Runtime

from .core import ReaderCore, as_checkpoint_id
from .options import DbReaderOptions


class DbReader(AsyncReads, AsyncCacheControl, AsyncClosing):
    """A read-only view of a database under the caller's asyncio or trio loop; see :meth:`open`."""

    def __init__(self, core: ReaderCore, host: Any) -> None:
        self._core = core
        self._host = host

    @classmethod
    def open(
        cls,
        url: str,
        checkpoint_id: uuid.UUID | str | None = None,
        *,
        options: DbReaderOptions = DbReaderOptions(),
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: RuntimeArg = None,
        merge_operator: Any = None,
    ) -> Opening:
        """Open a reader (see :meth:`slatedb.DbReader.open`): ``await`` it, or use it as
        ``async with`` (leaving the block deletes the reader's own checkpoint)."""
        settings = coerce_settings(settings)
        op = merge_operator_of(merge_operator)
        options = DbReaderOptions.of(options)  # bad arguments raise here, at the call
        checkpoint_id = None if checkpoint_id is None else as_checkpoint_id(checkpoint_id)

        async def open_core(st: ObjectStore, rt: Runtime) -> ReaderCore:
            return await ReaderCore.open(st, rt, options, settings, checkpoint_id, op)

        return Opening(cls, open_core, url, store=store, store_options=store_options, runtime=runtime,
                       thread_name="slatedb-reader", closed_message="the reader is closed")

    async def close(self) -> None:
        await self._host.aclose()

    def _state(self) -> tuple[ReadState, int | None]:
        return self._core.read_state, None

    async def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a DbReader is read-only: write through the Db")

    delete = write = merge = put

    async def refresh(self) -> None:
        """One maintenance round now (see :meth:`slatedb.DbReader.refresh`)."""
        self._core.check_open()
        await self._host.acall(self._core.maintain)

    def status(self) -> DbReaderStatus:
        """See :meth:`slatedb.DbReader.status` (synchronous, as ``Db.status()``)."""
        return reader_status(self._core)

    @property
    def checkpoint_id(self) -> uuid.UUID | None:
        return self._core.checkpoint_id

    @property
    def manifest_id(self) -> int:
        return self._core.manifest_id

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._core.stats)

    @property
    def core(self) -> ReaderCore:
        return self._core

    def __repr__(self) -> str:
        return f"aio.DbReader({self._core.store.shown_url!r}, checkpoint={self._core.checkpoint_id})"
