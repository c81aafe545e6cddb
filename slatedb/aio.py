"""The asynchronous (trio) API, the same shape as :class:`slatedb.Db`::

    async with slatedb.aio.Db.open("file:///path/to/db") as db:
        await db.put(b"k", b"v")
        assert await db.get(b"k") == b"v"
        async for key, value in db.scan():
            ...

The background tasks run in a nursery owned by the ``async with`` block, on the caller's trio
loop. Writes and reads answered from memory do not yield to the loop; only block reads,
durability waits, flushes and back-pressure do.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from slatedb.api.async_reads import ITER_BATCH_ROWS, AsyncReads, DbIterator  # noqa: F401 (DbIterator: public)
from slatedb.api.portal import RuntimeArg, serve
from slatedb.batch import WriteBatch
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.config import Settings
from slatedb.api.args import check_create_mode, coerce_settings
from slatedb.db.common import SnapshotLifecycle
from slatedb.db.core import DbCore, MustWait
from slatedb.lsm.read_path import ReadState
from slatedb.errors import ClosedError, ReadOnlyError
from slatedb.objstore.base import ObjectStore
from slatedb.reader.aio import DbReader
from slatedb.runtime import Runtime

__all__ = ["Db", "DbIterator", "DbReader", "Snapshot", "WriteHandle"]


class WriteHandle:
    """A write's sequence number, and an awaitable durability wait."""

    __slots__ = ("_core", "seq")

    def __init__(self, core: DbCore, seq: int) -> None:
        self._core = core
        self.seq = seq

    @property
    def durable(self) -> bool:
        return self._core.durable_seq >= self.seq

    async def wait_durable(self) -> None:
        if self._core.durable_seq < self.seq:
            await self._core.wait_durable(self.seq)

    def __repr__(self) -> str:
        return f"WriteHandle(seq={self.seq}, durable={self.durable})"


class Snapshot(SnapshotLifecycle, AsyncReads):
    """A consistent read view (see :meth:`Db.snapshot`)."""

    async def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a snapshot is read-only: write through the Db")

    async def __aenter__(self) -> "Snapshot":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.release()

    delete = write = put


class Db(AsyncReads):
    """An open database on the caller's trio loop. Use :meth:`open` as ``async with``."""

    def __init__(self, core: DbCore) -> None:
        self._core = core

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str,
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        *,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: RuntimeArg = None,
        create: str = "if_missing",
    ) -> AsyncIterator["Db"]:
        """Open the database at ``url`` as its writer for the duration of the block; leaving the
        block closes it (flushing everything) -- or, on an exception, stops it without flushing.
        ``create`` as in :meth:`slatedb.Db.open`."""
        settings = coerce_settings(settings)
        create = check_create_mode(create)

        async def open_core(st: ObjectStore, rt: Runtime) -> DbCore:
            return await DbCore.open(st, settings, rt, create)

        async with serve(open_core, url, store=store, store_options=store_options, runtime=runtime) as core:
            yield cls(core)

    async def close(self) -> None:
        """Flush and stop (the ``async with`` block does this on exit)."""
        await self._core.aclose()

    # -- writes --------------------------------------------------------------------------------

    async def _write(self, op: Any, args: tuple, durable: bool) -> WriteHandle:
        """Run a core write, waiting out back-pressure (:class:`MustWait`) on the loop."""
        core = self._core
        while True:
            try:
                seq = op(*args)
                break
            except MustWait:
                await core.wait_for_room()
        handle = WriteHandle(core, seq)
        if durable:
            await handle.wait_durable()
        return handle

    async def put(self, key: bytes, value: bytes, ttl: float | None = None, *, durable: bool = False) -> WriteHandle:
        return await self._write(self._core.put, (key, value, ttl), durable)

    async def delete(self, key: bytes, *, durable: bool = False) -> WriteHandle:
        return await self._write(self._core.delete, (key,), durable)

    async def write(self, batch: WriteBatch, *, durable: bool = False) -> WriteHandle:
        return await self._write(self._core.write, (batch,), durable)

    async def flush(self, wal: bool = True) -> None:
        self._core.check_open()
        if wal:
            await self._core.flush_wal()
        else:
            await self._core.flush_memtable()

    async def flush_memtable(self) -> None:
        await self.flush(wal=False)

    async def create_checkpoint(self, scope: CheckpointScope = CheckpointScope.ALL,
                                options: CheckpointOptions = CheckpointOptions()) -> CheckpointCreateResult:
        """See :meth:`slatedb.Db.create_checkpoint`."""
        self._core.check_open()
        return await self._core.create_checkpoint(scope, options)

    async def refresh_manifest(self) -> None:
        await self._core.refresh_manifest()

    # -- reads ---------------------------------------------------------------------------------

    def _state(self) -> tuple[ReadState, int | None]:
        core = self._core
        if core.closed:
            raise ClosedError("the database is closed")
        return core.read_state, None

    def snapshot(self) -> Snapshot:
        token, seq, rs = self._core.register_snapshot()
        return Snapshot(self._core, token, seq, rs)

    @property
    def core(self) -> DbCore:
        """The engine (for the simulator and tests)."""
        return self._core

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._core.stats)
