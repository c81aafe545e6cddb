"""The database engine shared by the synchronous and the asynchronous API.

Two kinds of code live here, kept apart on purpose:

* **Hot paths** (``put``/``delete``/``write``, and the memtable / block-cache part of ``get``
  and ``scan``) are plain synchronous methods. They run on the caller's thread under
  ``self._lock`` (writes) or on an immutable :class:`ReadState` taken in one attribute read
  (reads), with no event-loop hop.
* **Protocol and I/O** run as trio tasks on the runtime's event loop (the sync API's runtime
  thread, or the caller's own loop with ``slatedb.aio``): writer open (epoch bump + writer
  checkpoint + WAL fence + replay), WAL flushes, memtable -> L0 flushes with manifest CAS, and
  manifest polling.

Write path (RFC 001 + 003). A write takes the next seq, goes into the live memtable and into
the WAL buffer. Every ``flush_interval`` (or when the buffer reaches ``l0_sst_size_bytes``)
the buffer becomes one WAL SST (group commit) and the writes in it become durable. When the
live memtable reaches ``l0_sst_size_bytes`` it is frozen *at a WAL cut* (together with the WAL
buffer, so every row of a frozen memtable is in a WAL object ``<= last_wal_id``), written as an
L0 SST, and committed by a manifest update that prepends the L0 view and advances
``replay_after_wal_id`` and ``last_l0_seq``. Back-pressure: while L0 holds ``l0_max_ssts`` SSTs
the L0 flusher waits (for a compactor); memtables pile up and writes wait once unflushed bytes
exceed ``max_unflushed_bytes``.

The writer in parts (each a module of this package, each stating what it requires):
:mod:`.write_path` (writes, thresholds, back-pressure, durability waits), :mod:`.flushers` (WAL
and L0 tasks), :mod:`.follower` (manifest polling and adoption, the writer checkpoint, user
checkpoints), :mod:`.services` (background tasks, in-process compactor and GC), and the read path
shared with ``DbReader`` (:mod:`slatedb.lsm.read_path`). The state they share -- memtables, WAL
buffer and cuts, byte counters, ``last_seq`` / ``durable_seq``, the read state -- is one object,
:class:`~.state.WriterState` (``self._w``), whose methods assert its invariants. This module holds
it, the gate and the protocol state, opening and closing.
"""

from __future__ import annotations

import threading
from typing import Any

import trio
from ulid import ULID

from slatedb.config import Settings
from slatedb.settings_writer import check_writer_settings
from slatedb.errors import ClosedError, FencedError, InvalidArgumentError, InvalidDbStateError, SlateDBError
from slatedb.format.layout import ulid_text
from slatedb.format.sst import sst_options_of
from slatedb.format.sst_reader import SstReader
from slatedb.format.types import ManifestV2
from slatedb.lsm.cache import BlockCache
from slatedb.lsm.paths import SstLocator
from slatedb.lsm.read_path import ReadPath, ReadState
from slatedb.lsm.view import build_view
from slatedb.manifest.edit import WriterFence
from slatedb.manifest.edits import AdvanceReplay, BumpWriterEpoch, ReleaseWriterCheckpoint
from slatedb.manifest.missing import initial_over_leftovers, latest_or_refuse
from slatedb.manifest.segments import refuse_segments
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.merge_operator import MergeFn
from slatedb.runtime import Runtime, opened, switches, with_max_retries
from slatedb.wal.writer import WalWriter, replay_wal

from .flushers import Flushers
from .follower import ManifestFollower
from .services import Services
from .state import ImmEntry, UnclampedWriterState, WriterState
from .write_path import MustWait, WritePath
from slatedb.redact import shown_url

__all__ = ["DbCore", "ImmEntry", "MustWait", "ReadState"]


async def _replay_point_kept(stored: StoredManifest) -> StoredManifest:
    """Open leaves the replay point where it is: the L0 flush of the replayed rows moves it."""
    return stored


class DbCore(WritePath, Flushers, ManifestFollower, Services, ReadPath):
    """One open writer of one database (see the module docstring). Build it with :meth:`open`,
    run its background tasks with :meth:`background`, stop it with :meth:`aclose`."""

    # ------------------------------------------------------------------------------------------
    # Opening
    # ------------------------------------------------------------------------------------------

    def __init__(self, store: ObjectStore, settings: Settings, runtime: Runtime,
                 merge_operator: MergeFn | None = None) -> None:
        self.store = store
        #: The merge operator given at open (spec/protocols/merge.md), for reads and the compactor.
        self.merge_operator = merge_operator
        self.settings = settings
        self.runtime = runtime
        self.manifests = ManifestStore(store, runtime)
        self.locator = SstLocator(store, runtime)
        self.sst_options = sst_options_of(settings)
        self.cache = BlockCache(settings.block_cache_size_bytes) if settings.block_cache_size_bytes > 0 else None
        self._readers: dict[ULID, SstReader] = {}
        # The writer's state (memtables, WAL buffer and cuts, byte counters, seqs, read state).
        # catalogued bug (sim/scenarios/catalogue.py): rows stamped with the clock as it reads (DUR-5)
        self._w = UnclampedWriterState() if switches.ROW_CLOCK_UNCLAMPED in runtime.bugs else WriterState()
        self._lock = self._w.lock
        self._durable_cv = threading.Condition(self._lock)
        self._room_cv = threading.Condition(self._lock)
        #: asyncio durability waits: (seq, loop, future), under ``_lock`` (WritePath.add_asyncio_durable_waiter)
        self._aio_durable_waiters: list = []
        # The gate of the write path (under _lock).
        self._gate = False  # True when a write must look at closed/error/back-pressure
        self._blocked = False
        self._kicked = False
        self._flusher_idle = False  # the WAL flusher sleeps until a row arrives (see _flush_loop)
        self._next_check_bytes = 0
        self._closing = False
        self._closed = False
        self._close_running: trio.Event | None = None  # set while a close flushes (aclose)
        self._error: SlateDBError | None = None
        # Protocol state (runtime thread only).
        self._stored: StoredManifest | None = None
        self._wal: WalWriter | None = None
        self.epoch = 0
        self._default_ttl_ms = settings.default_ttl_millis
        self._now_ms = runtime.now_ms
        self._l0_size = settings.l0_sst_size_bytes
        self._max_unflushed = settings.max_unflushed_bytes
        self._l0_max_ssts = settings.l0_max_ssts
        # trio plumbing (set in background()).
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._trio_thread: int | None = None
        self._tasks_scope: trio.CancelScope | None = None
        self._flush_wakeup = trio.Event()
        self._wal_arrival = trio.Event()  # set by the first row after the flusher went idle
        self._l0_wakeup = trio.Event()
        self._durable_event = trio.Event()
        self._room_event = trio.Event()
        self._l0_progress = trio.Event()  # set (and replaced) whenever a manifest is adopted
        self._force_l0 = 0  # > 0 while an explicit flush ignores l0_max_ssts
        self._l0_full_warned_s: float | None = None  # the last full-L0 warning (Flushers._warn_l0_full)
        self._flush_lock = trio.Lock()
        self._manifest_lock = trio.Lock()
        self._snapshot_seqs: dict[int, int] = {}
        self._next_snapshot = 0
        self.stats = {"wal_ssts": 0, "l0_ssts": 0, "manifest_writes": 0, "replayed_rows": 0}
        self._poll_wakeup = trio.Event()
        #: The in-process compactor (``compactor_options`` set), started by ``background()``.
        self.compactor: Any = None
        #: Why the in-process compactor stopped for good while the database runs (fenced by a
        #: compactor elsewhere, or an error it cannot go on after); None while it runs, or none is
        #: configured. The full-L0 warning names it (Flushers._warn_l0_full).
        self.compactor_stopped: str | None = None

    @classmethod
    async def open(cls, store: ObjectStore, settings: Settings, runtime: Runtime, create: str = "if_missing",
                   merge_operator: MergeFn | None = None) -> "DbCore":
        """The writer's open protocol: epoch bump with writer checkpoint, WAL fence, replay.
        ``create``: see :func:`slatedb.manifest.missing.latest_or_refuse`."""
        if not settings.wal_enabled:
            raise InvalidArgumentError("wal_enabled=false is not supported: every write goes through the WAL")
        check_writer_settings(settings)
        for part in ("compactor_options", "garbage_collector_options"):
            sub = getattr(settings, part)
            own = None if sub is None else sub.object_store_max_retries
            if own is not None and own != settings.object_store_max_retries:
                raise InvalidArgumentError(
                    f"setting {part}.object_store_max_retries={own} applies to a standalone process only: the "
                    f"in-process one shares the writer's object_store_max_retries ({settings.object_store_max_retries})")
        with_max_retries(runtime, settings.object_store_max_retries)
        core = cls(store, settings, runtime, merge_operator)
        await core._open(create)
        opened(runtime)  # from now on, the pauses of an open database (PRODUCTION_RETRIES)
        return core

    async def _open(self, create: str = "if_missing") -> None:
        rt = self.runtime
        latest = await latest_or_refuse(self.manifests, create=create)
        if latest is None:
            first_id, replay_after = 1, 0
            if create == "force":
                first_id, replay_after = await initial_over_leftovers(self.manifests)
            await self.manifests.create_initial(
                ManifestV2(initialized=True, replay_after_wal_id=replay_after, wal_id_last_seen=replay_after), first_id)
        elif not latest.manifest.initialized:  # the state of the stored database, not an argument
            raise InvalidDbStateError(
                f"database at {shown_url(self.store.url)} is not initialized (a clone, projection or union still being made, or one that never finished)"
            )
        else:
            refuse_segments(latest.manifest, self.store.url, "open a writer")

        try:
            orphan = switches.WRITER_CHECKPOINT_ORPHANED in rt.bugs
            bumped = await self.manifests.commit(BumpWriterEpoch(checkpoint_id=rt.new_uuid(), orphan_previous=orphan))
        except InvalidDbStateError as e:  # RFC 000 "Deleting a Database" (DESTROY-3): checked in the CAS
            raise InvalidDbStateError(f"database at {shown_url(self.store.url)}: {e}") from None
        stored = bumped.stored
        self.epoch = stored.manifest.writer_epoch
        rt.event("writer_epoch", epoch=self.epoch, manifest=stored.id)
        m = stored.manifest
        floor = max(m.replay_after_wal_id, m.wal_id_last_seen)
        self._wal = await WalWriter.fence(store=self.store, runtime=rt, manifests=self.manifests, epoch=self.epoch,
                                          floor_id=floor, sst_options=sst_options_of(self.settings, min_filter_keys=2**31))
        # The manifest may have moved on (a compactor) while we fenced: read the latest.
        stored, listed = await self.manifests.read_latest_listed()
        if stored is None or bumped.stored.id - 1 not in listed:  # DESTROY-7 (destroy seed 409)
            gc_opts = self.settings.garbage_collector_options
            if await self._wal.outlived_destroy(bumped.stored.id, listed, boundary_files=(
                    gc_opts is None or gc_opts.boundary_files_enabled)):
                raise InvalidDbStateError(f"database at {shown_url(self.store.url)} was destroyed while this writer opened it: its "
                                          f"epoch bump (manifest {bumped.stored.id}) landed after the database was "
                                          f"removed and is taken back")
        assert stored is not None
        self._stored = stored
        rows, _count = await replay_wal(self.store, rt, stored.manifest.replay_after_wal_id, self._wal.fence_id,
                                        after_seq=stored.manifest.last_l0_seq,  # DUR-4: not what L0 holds
                                        manifests=self.manifests, epoch=self.epoch)
        if switches.REPLAY_SKIP in rt.bugs:  # catalogued bug (sim/scenarios/catalogue.py): open without replaying the WAL
            rows = []
        self.stats["replayed_rows"] = len(rows)
        last = stored.manifest.last_l0_seq
        if rows:
            last = max(last, max(r.seq for r in rows))
        # The replayed rows are already durable in WAL objects up to fence_id - 1: they are
        # frozen as an immutable memtable bound for L0 at once. Left in the live memtable they
        # could hold more than max_unflushed_bytes (a predecessor may legally leave that much,
        # plus one write), and since only a write cuts the live memtable while every write waits
        # for room, nothing would ever reach L0 (found by the simulator).
        self._w.replayed(rows, last, self._wal.fence_id - 1, clock_ms=stored.manifest.last_l0_clock_tick)
        # The replay point moves only with the L0 flush of the replayed rows (RFC 003).
        progress = self._bug_record_replay_early if switches.REPLAY_PROGRESS_EARLY in rt.bugs else _replay_point_kept
        stored = self._stored = await progress(stored)
        await self.locator.update(stored.manifest)
        view = await build_view(stored.id, stored.manifest, self._readers, self._open_reader, self.runtime)
        self._w.publish(view)
        self._recompute_thresholds()
        opened_seq = self._w.last_seq
        if rt.metrics is not None:  # rows written since open, computed when read
            rt.metrics.derived["puts"] = lambda: self._w.last_seq - opened_seq

    def metrics(self) -> dict:
        """The engine's metrics as a dict (:mod:`slatedb.runtime.metrics`; empty without a
        registry, as in the simulator)."""
        m = self.runtime.metrics
        return {} if m is None else m.as_dict()

    async def _bug_record_replay_early(self, stored: StoredManifest) -> StoredManifest:
        """Catalogued bug ``replay-progress-early`` (sim/scenarios/catalogue.py): replay progress
        (``replay_after_wal_id = fence - 1``) is committed before the replayed rows reach L0."""
        assert self._wal is not None
        return (await self.manifests.commit(AdvanceReplay(self.epoch, self._wal.fence_id - 1))).stored

    async def _open_reader(self, sst_id: ULID) -> SstReader:
        store, key = self.locator.locate(sst_id)
        return await retry_transient(
            self.runtime,
            lambda: SstReader.open(store, key, block_cache=self.cache, cache_id=ulid_text(sst_id)),
            what=f"open {key}",
        )

    # ------------------------------------------------------------------------------------------
    # Background tasks
    # ------------------------------------------------------------------------------------------

    def _fail(self, error: SlateDBError) -> None:
        """Stop for good: every later write raises ``error``, every durability wait fails."""
        if self._wal is not None and isinstance(error, FencedError):
            self._wal.halted = True
        with self._lock:
            if self._error is None:
                self._error = error
            self._recompute_thresholds()
            self._release_durable_waiters()
            self._room_cv.notify_all()
        self._wake_all()

    def _wake_all(self) -> None:
        for name in ("_durable_event", "_room_event", "_l0_wakeup", "_flush_wakeup", "_wal_arrival", "_l0_progress"):
            getattr(self, name).set()
            setattr(self, name, trio.Event())

    # ------------------------------------------------------------------------------------------
    # Reads (any thread; synchronous parts)
    # ------------------------------------------------------------------------------------------

    @property
    def read_state(self) -> ReadState:
        return self._w.read_state

    def check_open(self) -> None:
        if self._closed:
            raise self._error if isinstance(self._error, ClosedError) else ClosedError("the database is closed")

    def after_fork_in_child(self, error: ClosedError) -> None:
        """(In a child made by ``os.fork``, from :meth:`RuntimeThread.forked`.) The runtime
        thread that flushes and polls is the parent's: every write and read here raises
        ``error``. The lock is new, since the parent's runtime thread may have held the old one
        at the fork (its holder does not exist here to release it)."""
        lock = threading.Lock()
        self._w.lock = self._lock = lock
        self._durable_cv = threading.Condition(lock)
        self._room_cv = threading.Condition(lock)
        self._error = error
        self._closed = True
        self._gate = True

    # ------------------------------------------------------------------------------------------
    # Snapshots
    # ------------------------------------------------------------------------------------------

    def register_snapshot(self) -> tuple[int, int, ReadState]:
        with self._lock:
            self.check_open()
            token = self._next_snapshot
            self._next_snapshot += 1
            seq = self._w.last_seq
            self._snapshot_seqs[token] = seq
            return token, seq, self._w.read_state

    def release_snapshot(self, token: int) -> None:
        with self._lock:
            self._snapshot_seqs.pop(token, None)

    def forget_snapshot(self, token: int) -> None:
        """A snapshot dropped without release (its finalizer, run by whichever thread let go
        of it, maybe inside a hold of ``_lock``): one atomic dict pop, without the lock."""
        self._snapshot_seqs.pop(token, None)

    # ------------------------------------------------------------------------------------------
    # Closing
    # ------------------------------------------------------------------------------------------

    @property
    def error(self) -> SlateDBError | None:
        return self._error

    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        """Flush the WAL and every memtable to L0 (as the official engine does at shutdown),
        stop the background tasks, release the store. A fenced database just stops.

        A close cancelled before its flush ended (a caller's timeout under trio) leaves the
        engine closing -- no more writes -- with what it had not flushed kept: the next close
        (or the ``async with`` block left normally, or the task of an awaited open) flushes it.
        Marking it closed there dropped the memtables, and the next close returned quietly as if
        it had flushed. A close while another runs waits for that one."""
        if self._closed:
            return
        running = self._close_running
        if running is not None:
            await running.wait()
            if self._closed:
                return
        done = self._close_running = trio.Event()
        try:
            await self._close_once()
        finally:
            self._close_running = None
            done.set()

    async def _close_once(self) -> None:
        if not self._closing:  # once: a close after a cancelled one goes on with the same close
            self.runtime.event("closing", epoch=self.epoch)
        with self._lock:
            self._closing = True
            self._recompute_thresholds()
            self._room_cv.notify_all()
        self._room_event.set()
        interrupted = False
        lost: SlateDBError | None = None
        try:
            if self._error is None:
                await self.flush_memtable()
                await self._release_writer_checkpoint()
            else:
                lost = self._unwritten_rows_error()
        except FencedError:
            pass  # fenced while closing: the newer writer owns the data; nothing more was acked
        except trio.Cancelled:
            # Given up on: stay closing, the unflushed rows kept for the next close (an engine
            # whose own tasks are torn down is aborted by its service runner instead).
            interrupted = self._error is None
            raise
        finally:
            if not interrupted:
                self._mark_closed()
        if lost is not None:
            raise lost

    def _unwritten_rows_error(self) -> SlateDBError | None:
        """The error that stopped the database, if it stopped with rows no WAL object holds:
        the close cannot write them, and a quiet close would tell a caller who never waited
        for durability (``durable=False`` puts, their WAL flusher gave up in the background)
        that they were kept. ``None`` when every row is durable, when another writer fenced this
        one (the rows were never acknowledged durable; docs/db.md ``FencedError``), or after
        an abort."""
        error = self._error
        if error is None or isinstance(error, (FencedError, ClosedError)):
            return None
        with self._lock:
            unwritten = self._w.last_seq - self._w.durable_seq
        if unwritten <= 0:
            return None
        error.add_note(f"close: the database had stopped on this error; the {unwritten} newest writes "
                       "(not acknowledged durable) were never written and are lost")
        return error

    def _mark_closed(self) -> None:
        """The end of a close: the background tasks stopped, the memory released."""
        if self._tasks_scope is not None:
            self._tasks_scope.cancel()
        with self._lock:
            self._closed = True
            self._release_durable_waiters()
            self._room_cv.notify_all()
            self._release_memory()
        self._wake_all()
        self.runtime.event("closed", epoch=self.epoch)

    async def _release_writer_checkpoint(self) -> None:
        """writer.md step 12: a clean close leaves no writer checkpoint behind (an engine that
        opens the database next may never remove it; spec "Checkpoints across engines").
        Usually the close's last L0 flush already dropped it (``AddL0`` with
        ``release_writer_checkpoint``): applied to the manifest that flush committed, the edit
        finds nothing to drop and writes nothing. A wrong guess (a compactor committed since)
        costs a conflict and a re-read, as any commit's."""
        async with self._manifest_lock:
            if self._error is not None or self._stored is None:
                return
            committed = await self.manifests.commit(
                ReleaseWriterCheckpoint(WriterFence(self.epoch), release_pins=self._close_pins()), current=self._stored)
            self._stored = committed.stored
            if committed.written:
                self.stats["manifest_writes"] += 1

    def _release_memory(self) -> None:
        """Drop memtables, SST readers and cached blocks (``_lock`` held): a closed database
        should not pin them until the caller lets go of the ``Db`` object."""
        self._w.release()
        self._readers.clear()
        if self.cache is not None:
            self.cache.clear()

    def abort(self) -> None:
        """Stop at once without flushing (a crash, as far as the store can tell)."""
        self.abort_reason("the database was aborted")

    def abort_reason(self, why: str) -> None:
        """:meth:`abort`, every later call raising ``ClosedError(why)`` (unless it already stopped
        on an error of its own, which it keeps)."""
        with self._lock:
            self._closing = True
            self._closed = True
            if self._error is None:
                self._error = ClosedError(why)
            self._recompute_thresholds()
            self._release_durable_waiters()
            self._room_cv.notify_all()
        if self._tasks_scope is not None:
            self._tasks_scope.cancel()
        self._wake_all()

