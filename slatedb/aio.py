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

from slatedb.batch import WriteBatch, validate_key
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.config import Settings
from slatedb.db.common import SnapshotLifecycle, check_create_mode, coerce_settings, prefix_bounds, scan_bounds
from slatedb.db.core import DbCore, MustWait, ReadState
from slatedb.db.scan import MergeScan, NeedIO
from slatedb.db.view import KeyBounds
from slatedb.errors import ClosedError, ReadOnlyError, sole_exception
from slatedb.format.sst_reader import NEED_IO
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime

__all__ = ["Db", "DbIterator", "DbReader", "Snapshot", "WriteHandle"]


def __getattr__(name: str) -> Any:
    if name == "DbReader":  # lazily: slatedb.reader.aio builds on this module's read mixin
        from slatedb.reader.aio import DbReader

        return DbReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

ITER_BATCH_ROWS = 256


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


class DbIterator:
    """Async iterator of ``(key, value)`` pairs; also :meth:`next_batch`."""

    def __init__(self, core: DbCore, merge: MergeScan | None, gen: Any) -> None:
        self._core = core
        self._merge = merge
        self._gen = gen
        self._buf: list[tuple[bytes, bytes]] = []
        self._pos = 0

    def __aiter__(self) -> "DbIterator":
        return self

    async def __anext__(self) -> tuple[bytes, bytes]:
        if self._gen is not None:
            try:
                return next(self._gen)
            except StopIteration:
                raise StopAsyncIteration from None
        if self._pos >= len(self._buf):
            self._buf = await self._pull(ITER_BATCH_ROWS)
            self._pos = 0
            if not self._buf:
                raise StopAsyncIteration
        item = self._buf[self._pos]
        self._pos += 1
        return item

    async def next_batch(self, n: int = 1000) -> list[tuple[bytes, bytes]]:
        if self._gen is not None:
            out = []
            for item in self._gen:
                out.append(item)
                if len(out) >= n:
                    break
            return out
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        if len(out) < n:
            out.extend(await self._pull(n - len(out)))
        return out

    async def _pull(self, n: int) -> list[tuple[bytes, bytes]]:
        merge = self._merge
        assert merge is not None
        while True:
            try:
                return merge.next_batch(n)
            except NeedIO as e:
                source = e.source
                reader, first, last = source.io_request()
                source.supply(first, await self._core.load_blocks(reader, first, last))


class _ReadMixin:
    _core: DbCore

    def _state(self) -> tuple[ReadState, int | None]:
        raise NotImplementedError

    async def get(self, key: bytes) -> bytes | None:
        key = validate_key(key)
        rs, max_seq = self._state()
        value = self._core.get_fast(key, rs, max_seq)
        if value is NEED_IO:
            value = await self._core.get_slow(key, rs, max_seq)
        return value  # type: ignore[return-value]

    def _scan(self, bounds: KeyBounds, reverse: bool) -> DbIterator:
        rs, max_seq = self._state()
        if max_seq is None:
            max_seq = self._core.last_seq
        merge, gen = self._core.scan_merge(rs, bounds, reverse, max_seq)
        return DbIterator(self._core, merge, gen)

    def scan(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False) -> DbIterator:
        return self._scan(scan_bounds(start, end), bool(reverse))

    def scan_prefix(self, prefix: bytes, *, reverse: bool = False) -> DbIterator:
        return self._scan(prefix_bounds(prefix), bool(reverse))


class Snapshot(SnapshotLifecycle, _ReadMixin):
    """A consistent read view (see :meth:`Db.snapshot`)."""

    async def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a snapshot is read-only: write through the Db")

    async def __aenter__(self) -> "Snapshot":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.release()

    delete = write = put


class Db(_ReadMixin):
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
        runtime: Runtime | None = None,
        create: str = "if_missing",
    ) -> AsyncIterator["Db"]:
        """Open the database at ``url`` as its writer for the duration of the block; leaving the
        block closes it (flushing everything) -- or, on an exception, stops it without flushing.
        ``create`` as in :meth:`slatedb.Db.open`."""
        settings = coerce_settings(settings)
        create = check_create_mode(create)
        if runtime is None:
            from slatedb.runtime.production import ProductionRuntime

            runtime = ProductionRuntime()
        own_store = store is None
        st = store if store is not None else resolve_store(url, options=store_options, clock_ms=runtime.now_ms)
        try:
            core = await DbCore.open(st, settings, runtime, create)
            try:
                async with core.background():
                    yield cls(core)
            except BaseExceptionGroup as group:
                # The background tasks never raise (a failure stops the database instead), so
                # a group here wraps the block's own exception: give it back as it was raised.
                error = sole_exception(group)
                if error is group:
                    raise
                raise error from None
        finally:
            if own_store:
                await st.aclose()

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
