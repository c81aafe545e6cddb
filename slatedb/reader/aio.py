"""The trio reader, the same shape as :class:`slatedb.DbReader`::

    async with slatedb.aio.DbReader.open("file:///path/to/db") as r:
        await r.get(b"k")
        async for key, value in r.scan():
            ...

The maintenance task runs in a nursery owned by the ``async with`` block, on the caller's loop.
Reads are :class:`slatedb.api.async_reads.AsyncReads` over :class:`~slatedb.reader.core.ReaderCore`;
the service runner is :func:`slatedb.api.portal.serve`, as for :class:`slatedb.aio.Db`.
"""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from slatedb.api.async_reads import AsyncReads
from slatedb.api.portal import RuntimeArg, serve
from slatedb.config import Settings
from slatedb.api.args import coerce_settings
from slatedb.lsm.read_path import ReadState
from slatedb.errors import ReadOnlyError
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime

from .core import ReaderCore
from .options import DbReaderOptions


class DbReader(AsyncReads):
    """A read-only view of a database on the caller's trio loop; see :meth:`open`."""

    def __init__(self, core: ReaderCore) -> None:
        self._core = core

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str,
        checkpoint_id: uuid.UUID | str | None = None,
        *,
        options: DbReaderOptions = DbReaderOptions(),
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: RuntimeArg = None,
    ) -> AsyncIterator["DbReader"]:
        """Open a reader for the duration of the block (see :meth:`slatedb.DbReader.open`);
        leaving the block deletes the reader's own checkpoint."""
        settings = coerce_settings(settings)

        async def open_core(st: ObjectStore, rt: Runtime) -> ReaderCore:
            return await ReaderCore.open(st, rt, options, settings, checkpoint_id)

        async with serve(open_core, url, store=store, store_options=store_options, runtime=runtime) as core:
            yield cls(core)

    async def close(self) -> None:
        await self._core.aclose()

    def _state(self) -> tuple[ReadState, int | None]:
        return self._core.read_state, None

    async def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a DbReader is read-only: write through the Db")

    delete = write = put

    async def refresh(self) -> None:
        """One maintenance round now (see :meth:`slatedb.DbReader.refresh`)."""
        self._core.check_open()
        await self._core.maintain()

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
