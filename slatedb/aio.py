"""The asynchronous API, under asyncio or trio, the same shape as :class:`slatedb.Db`::

    async with slatedb.aio.Db.open("file:///path/to/db") as db:   # or: db = await aio.Db.open(url)
        await db.put(b"k", b"v")
        assert await db.get(b"k") == b"v"
        async for key, value in db.scan():
            ...

The running library is detected (sniffio). Under trio the background tasks run on the caller's
loop: in a nursery owned by the ``async with`` block, or in a system task when ``open`` is
awaited (then ``await db.close()``). Under asyncio they run on a runtime thread of their own (a
trio loop, as for the sync API), and what must wait crosses to it without blocking the asyncio
loop. Either way writes and reads answered from memory run on the caller's thread without
yielding or hopping; only block reads, durability waits, flushes and back-pressure do.
"""

from __future__ import annotations

from slatedb.api.cache_control import AsyncCacheControl

import asyncio
import threading
from pathlib import Path
from typing import Any, Mapping

import sniffio
import trio

from slatedb.api.async_reads import ITER_BATCH_ROWS, RELEASED, AsyncReads, DbIterator, Released  # noqa: F401 (DbIterator: public)
from slatedb.api.options import DbStatus
from slatedb.api.read_kit import db_status
from slatedb.api.txn import AsyncTransaction, IsolationLevel, isolation_of
from slatedb.api.opening import Opening
from slatedb.api.portal import AsyncClosing, RuntimeArg
from slatedb.batch import WriteBatch, validate_flag
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.checkpoint.ops import delete_checkpoint
from slatedb.config import Settings
from slatedb.settings_writer import check_writer_settings
from slatedb.api.metrics_export import collector_of_core
from slatedb.api.args import check_create_mode, coerce_settings
from slatedb.db.common import SnapshotLifecycle
from slatedb.db.core import DbCore, MustWait
from slatedb.lsm.read_path import ReadState
from slatedb.errors import ClosedError, ReadOnlyError
from slatedb.objstore.base import ObjectStore
from slatedb.reader.aio import DbReader
from slatedb.merge_operator import merge_operator_of
from slatedb.runtime import Runtime
from slatedb.wal_reader import AsyncWalReader as WalReader

__all__ = ["Db", "DbIterator", "DbReader", "Snapshot", "WalReader", "WriteHandle"]


class WriteHandle:
    """A write's sequence number, and an awaitable durability wait."""

    __slots__ = ("_core", "_host", "seq")

    def __init__(self, core: DbCore, host: Any, seq: int) -> None:
        self._core = core
        self._host = host
        self.seq = seq

    @property
    def durable(self) -> bool:
        return self._core.durable_seq >= self.seq

    async def wait_durable(self) -> None:
        core, seq = self._core, self.seq
        if core.durable_seq >= seq:
            return
        if sniffio.current_async_library() != "asyncio":
            await self._host.acall(core.wait_durable, seq)
            return
        # An asyncio task waits on a future of its own loop, resolved by the WAL flush that makes
        # ``seq`` durable (one call_soon_threadsafe a loop and flush, not a task a waiter).
        loop = asyncio.get_running_loop()
        while core.durable_seq < seq:
            fut = loop.create_future()
            if not core.add_asyncio_durable_waiter(seq, loop, fut):
                return
            await fut

    def __repr__(self) -> str:
        return f"WriteHandle(seq={self.seq}, durable={self.durable})"


class Snapshot(SnapshotLifecycle, AsyncReads):
    """A consistent read view (see :meth:`Db.snapshot`)."""

    def __init__(self, db: "Db", token: int, seq: int, rs: ReadState) -> None:
        super().__init__(db._core, token, seq, rs)
        self._host = db._host

    async def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a snapshot is read-only: write through the Db")

    def close(self) -> Released:
        """Release the snapshot (no I/O: done when the call returns); ``await snap.close()``,
        as ``await db.close()``, works too. Idempotent."""
        self.release()
        return RELEASED

    async def __aenter__(self) -> "Snapshot":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.release()

    delete = write = merge = put


class Db(AsyncReads, AsyncCacheControl, AsyncClosing):
    """An open database under the caller's asyncio or trio loop: ``async with Db.open(url)``,
    or ``db = await Db.open(url)`` and ``await db.close()``."""

    def __init__(self, core: DbCore, host: Any) -> None:
        self._core = core
        self._host = host

    @classmethod
    def open(
        cls,
        url: str,
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        *,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: RuntimeArg = None,
        create: str = "if_missing",
        merge_operator: Any = None,
    ) -> Opening:
        """Open the database at ``url`` as its writer: ``await`` the result, or use it as
        ``async with`` (leaving the block closes the database, flushing everything -- or, on an
        exception, stops it without flushing). ``create`` as in :meth:`slatedb.Db.open`. Bad
        arguments raise here, before anything is awaited."""
        settings = check_writer_settings(coerce_settings(settings))
        create = check_create_mode(create)
        op = merge_operator_of(merge_operator)

        async def open_core(st: ObjectStore, rt: Runtime) -> DbCore:
            return await DbCore.open(st, settings, rt, create, op)

        return Opening(cls, open_core, url, store=store, store_options=store_options, runtime=runtime,
                       thread_name="slatedb-runtime", closed_message="the database is closed")

    async def close(self) -> None:
        """Flush and stop (leaving the ``async with`` block does this). Idempotent."""
        await self._host.aclose()

    # -- writes --------------------------------------------------------------------------------

    async def _write(self, op: Any, args: tuple, durable: bool) -> WriteHandle:
        """Run a core write, waiting out back-pressure (:class:`MustWait`) on the loop."""
        core = self._core
        validate_flag("durable", durable)
        while True:
            try:
                seq = op(*args)
                break
            except MustWait:
                await self._host.acall(core.wait_for_room)
        handle = WriteHandle(core, self._host, seq)
        if durable:
            await handle.wait_durable()
        return handle

    async def put(self, key: bytes, value: bytes, ttl: float | None = None, *, durable: bool = False,
                  expire_at_ms: int | None = None) -> WriteHandle:
        return await self._write(self._core.put, (key, value, ttl, expire_at_ms), durable)

    async def delete(self, key: bytes, *, durable: bool = False) -> WriteHandle:
        return await self._write(self._core.delete, (key,), durable)

    async def merge(self, key: bytes, operand: bytes, ttl: float | None = None, *, durable: bool = False,
                    expire_at_ms: int | None = None) -> WriteHandle:
        """See :meth:`slatedb.Db.merge`."""
        return await self._write(self._core.merge, (key, operand, ttl, expire_at_ms), durable)

    async def write(self, batch: WriteBatch, *, durable: bool = False) -> WriteHandle:
        return await self._write(self._core.write, (batch,), durable)

    async def flush(self, wal: bool = True) -> None:
        validate_flag("wal", wal)
        self._core.check_open()
        await self._host.acall(self._core.flush_wal if wal else self._core.flush_memtable)

    async def flush_memtable(self) -> None:
        await self.flush(wal=False)

    async def create_checkpoint(self, scope: CheckpointScope = CheckpointScope.ALL,
                                options: CheckpointOptions = CheckpointOptions()) -> CheckpointCreateResult:
        """See :meth:`slatedb.Db.create_checkpoint`. A call the caller gives up on (a timeout, a
        cancelled task) that added its checkpoint anyway deletes it: nobody learns its id, and
        without a lifetime it would pin its manifest and SSTs for good."""
        options = CheckpointOptions.of(options)  # a bad one refused here, before any flush
        core = self._core
        core.check_open()
        lock, state = threading.Lock(), {"gave_up": False, "made": None}

        async def create() -> CheckpointCreateResult:  # on the engine's loop
            made = await core.create_checkpoint(scope, options)
            with lock:
                state["made"] = None if state["gave_up"] else made
            if state["made"] is None:  # the caller stopped waiting while it ran
                with trio.CancelScope(shield=True):
                    await _forget_checkpoint(core, made.id)
            return made

        try:
            return await self._host.acall(create)
        except BaseException:
            with lock:  # under asyncio the call may have ended on the engine's thread, unseen
                state["gave_up"], made = True, state["made"]
            if made is not None:
                _FORGETTING.add(task := asyncio.ensure_future(self._host.acall(_forget_checkpoint, core, made.id)))
                task.add_done_callback(_FORGETTING.discard)
            raise

    async def begin(self, isolation: IsolationLevel | str = IsolationLevel.SNAPSHOT) -> AsyncTransaction:
        """A transaction at a snapshot of now (see :mod:`slatedb.api.txn`): SNAPSHOT or
        SERIALIZABLE_SNAPSHOT."""
        level = isolation_of(isolation)
        self._core.check_open()
        return AsyncTransaction(self, level)

    def metrics(self) -> dict:
        """Counters and histograms of this database (puts, gets, WAL writes and latency, L0
        flushes, bytes and latency, compactions and their bytes, GC deletes, retries) as a dict;
        :meth:`metrics_prometheus` gives the Prometheus text format."""
        return self._core.metrics()

    def metrics_prometheus(self) -> str:
        """:meth:`metrics` in the Prometheus text exposition format (``prometheus_client``)."""
        m = self._core.runtime.metrics
        return "" if m is None else m.prometheus_text()

    def metrics_collector(self, **labels: str) -> Any:
        """This database's :meth:`metrics` as one ``prometheus_client`` collector, each sample
        carrying ``labels`` (:func:`slatedb.api.metrics_export.collector_of_core`); several
        databases in one registry: :func:`slatedb.metrics_collector`."""
        return collector_of_core(self._core, labels)

    def status(self) -> DbStatus:
        """See :meth:`slatedb.Db.status` (synchronous, as in the official binding)."""
        return db_status(self._core)

    async def refresh_manifest(self) -> None:
        await self._host.acall(self._core.refresh_manifest)

    def __repr__(self) -> str:
        """As :class:`slatedb.Db`'s: the URL without secrets, the writer's epoch."""
        return f"aio.Db({self._core.store.shown_url!r}, epoch={self._core.epoch})"

    # -- reads ---------------------------------------------------------------------------------

    def _state(self) -> tuple[ReadState, int | None]:
        core = self._core
        if core.closed:
            core.check_open()  # raises: the database is closed (or was opened by the parent of this forked process)
        return core.read_state, None

    def snapshot(self) -> Snapshot:
        token, seq, rs = self._core.register_snapshot()
        return Snapshot(self, token, seq, rs)

    @property
    def core(self) -> DbCore:
        """The engine (for the simulator and tests)."""
        return self._core

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._core.stats)


#: Deletions of checkpoints whose caller gave up (asyncio tasks, held until done).
_FORGETTING: set = set()


async def _forget_checkpoint(core: DbCore, checkpoint_id: Any) -> None:
    """Delete a checkpoint nobody will learn of (its ``create_checkpoint`` was given up on)."""
    if core.error is None and not core.closed:
        await delete_checkpoint(core.manifests, core.runtime, checkpoint_id, missing_ok=True)
