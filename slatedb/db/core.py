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
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import attrs
import trio
from ulid import ULID

import slatedb.batch as _batch
from slatedb.batch import (
    OpKind,
    WriteBatch,
    expire_ts_ms,
    validate_key,
    validate_ttl_s,
    validate_value,
)
from slatedb.config import Settings
from slatedb.errors import (
    ClosedError,
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
    SlateDBError,
)
from slatedb.format.compression import codec_from_name
from slatedb.format.sst import SstOptions, decode_layout
from slatedb.format.sst_reader import NEED_IO, SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.format.types import (
    CompactedSsTableV2,
    ManifestV2,
)
from slatedb.checkpoint import CheckpointCreateResult, CheckpointScope
from slatedb.manifest.edit import WriterFence
from slatedb.manifest.edits import AddCheckpoint, AddL0, AdvanceReplay, BumpWriterEpoch, RefreshWriterCheckpoint
from slatedb.manifest.missing import initial_over_leftovers, latest_or_refuse
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.memtable import ROW_OVERHEAD_BYTES, Memtable
from slatedb.merge import resolve_row, visible
from slatedb.objstore.base import OVERWRITE, ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.row import Row, RowKind
from slatedb.runtime import Runtime, with_max_retries
from slatedb.wal.writer import WalWriter, replay_wal, wal_key

from .cache import BlockCache
from .paths import SstLocator
from .scan import MemSource, MergeScan, SstSource
from .view import EMPTY_VIEW, KeyBounds, LsmView, build_view, sst_key

_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE


class MustWait(Exception):
    """Internal: the write must wait for room (back-pressure); the wrapper waits and retries."""


@attrs.frozen(eq=False)
class ReadState:
    """What a read consults, swapped as one object: memtables newest first (the live one
    first), then the SST view."""

    mems: tuple[Memtable, ...]
    view: LsmView


class ImmEntry:
    """A frozen memtable waiting for its L0 flush. ``last_wal_id`` is set once every row of it
    is in a WAL object (then it may be flushed to L0 and ``replay_after_wal_id`` advanced)."""

    __slots__ = ("mem", "last_wal_id", "size_bytes")

    def __init__(self, mem: Memtable) -> None:
        self.mem = mem
        self.last_wal_id: int | None = None
        self.size_bytes = mem.size_bytes


def sst_options_of(settings: Settings, *, min_filter_keys: int | None = None) -> SstOptions:
    return SstOptions(
        block_size_bytes=settings.block_size_bytes,
        min_filter_keys=settings.min_filter_keys if min_filter_keys is None else min_filter_keys,
        filter_bits_per_key=settings.filter_bits_per_key,
        compression=codec_from_name(settings.compression_codec),
    )


class DbCore:
    """One open writer of one database (see the module docstring). Build it with :meth:`open`,
    run its background tasks with :meth:`background`, stop it with :meth:`aclose`."""

    # ------------------------------------------------------------------------------------------
    # Opening
    # ------------------------------------------------------------------------------------------

    def __init__(self, store: ObjectStore, settings: Settings, runtime: Runtime) -> None:
        self.store = store
        self.settings = settings
        self.runtime = runtime
        self.manifests = ManifestStore(store, runtime)
        self.locator = SstLocator(store, runtime)
        self.sst_options = sst_options_of(settings)
        self.cache = BlockCache(settings.block_cache_size_bytes) if settings.block_cache_size_bytes > 0 else None
        self._readers: dict[ULID, SstReader] = {}
        self._lock = threading.Lock()
        self._durable_cv = threading.Condition(self._lock)
        self._room_cv = threading.Condition(self._lock)
        # Write state (under _lock).
        self._memtable = Memtable()
        self._imms: list[ImmEntry] = []  # newest first
        self._wal_rows: list[Row] = []
        self._wal_cuts: list[tuple[list[Row], ImmEntry | None]] = []  # buffers cut with a memtable
        self._wal_bytes = 0
        self._unflushed_bytes = 0
        self._last_seq = 0
        self._durable_seq = 0
        self._gate = False  # True when a write must look at closed/error/back-pressure
        self._blocked = False
        self._kicked = False
        self._next_check_bytes = 0
        self._closing = False
        self._closed = False
        self._error: SlateDBError | None = None
        # Read state.
        self._read_state = ReadState((self._memtable,), EMPTY_VIEW)
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
        self._l0_wakeup = trio.Event()
        self._durable_event = trio.Event()
        self._room_event = trio.Event()
        self._l0_progress = trio.Event()  # set (and replaced) whenever a manifest is adopted
        self._force_l0 = 0  # > 0 while an explicit flush ignores l0_max_ssts
        self._flush_lock = trio.Lock()
        self._manifest_lock = trio.Lock()
        self._snapshot_seqs: dict[int, int] = {}
        self._next_snapshot = 0
        self.stats = {"wal_ssts": 0, "l0_ssts": 0, "manifest_writes": 0, "replayed_rows": 0}
        self._poll_wakeup = trio.Event()
        #: The in-process compactor (``compactor_options`` set), started by ``background()``.
        self.compactor: Any = None

    @classmethod
    async def open(cls, store: ObjectStore, settings: Settings, runtime: Runtime, create: str = "if_missing") -> "DbCore":
        """The writer's open protocol: epoch bump with writer checkpoint, WAL fence, replay.
        ``create``: see :func:`slatedb.manifest.missing.latest_or_refuse`."""
        if not settings.wal_enabled:
            raise InvalidArgumentError("wal_enabled=false is not supported: every write goes through the WAL")
        for part in ("compactor_options", "garbage_collector_options"):
            sub = getattr(settings, part)
            own = None if sub is None else sub.object_store_max_retries
            if own is not None and own != settings.object_store_max_retries:
                raise InvalidArgumentError(
                    f"setting {part}.object_store_max_retries={own} applies to a standalone process only: the "
                    f"in-process one shares the writer's object_store_max_retries ({settings.object_store_max_retries})")
        with_max_retries(runtime, settings.object_store_max_retries)
        core = cls(store, settings, runtime)
        await core._open(create)
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
        elif not latest.manifest.initialized:
            raise InvalidArgumentError(
                f"database at {self.store.url} is not initialized (a clone that never finished opening)"
            )

        try:
            bumped = await self.manifests.commit(BumpWriterEpoch(checkpoint_id=rt.new_uuid()))
        except InvalidDbStateError as e:  # RFC 000 "Deleting a Database" (DESTROY-3): checked in the CAS
            raise InvalidDbStateError(f"database at {self.store.url}: {e}") from None
        stored = bumped.stored
        self.epoch = stored.manifest.writer_epoch
        rt.event("writer_epoch", epoch=self.epoch, manifest=stored.id)
        m = stored.manifest
        floor = max(m.replay_after_wal_id, m.wal_id_last_seen)
        self._wal = await WalWriter.fence(store=self.store, runtime=rt, manifests=self.manifests, epoch=self.epoch,
                                          floor_id=floor, sst_options=sst_options_of(self.settings, min_filter_keys=2**31))
        # The manifest may have moved on (a compactor) while we fenced: read the latest.
        stored = await self.manifests.read_latest()
        assert stored is not None
        self._stored = stored
        rows, _count = await replay_wal(self.store, rt, stored.manifest.replay_after_wal_id, self._wal.fence_id,
                                        manifests=self.manifests, epoch=self.epoch)
        if "replay-skip" in rt.bugs:  # catalogued bug (sim/bugs.py): open without replaying the WAL
            rows = []
        mem = self._memtable
        for row in rows:
            mem.put(row)
        self.stats["replayed_rows"] = len(rows)
        last = stored.manifest.last_l0_seq
        if rows:
            last = max(last, max(r.seq for r in rows))
        self._last_seq = self._durable_seq = last
        self._unflushed_bytes = mem.size_bytes
        if rows:
            # The replayed rows are already durable in WAL objects up to fence_id - 1: freeze
            # them as an immutable memtable bound for L0 at once. Left in the live memtable they
            # could hold more than max_unflushed_bytes (a predecessor may legally leave that
            # much, plus one write), and since only a write cuts the live memtable while every
            # write waits for room, nothing would ever reach L0 (found by the simulator).
            mem.freeze()
            entry = ImmEntry(mem)
            entry.last_wal_id = self._wal.fence_id - 1
            self._imms.insert(0, entry)
            mem = self._memtable = Memtable()
        if "replay-progress-early" in rt.bugs:  # catalogued bug (sim/bugs.py): replay point persisted before L0
            stored = (await self.manifests.commit(AdvanceReplay(self.epoch, self._wal.fence_id - 1))).stored
            self._stored = stored
        await self.locator.update(stored.manifest)
        view = await build_view(stored.id, stored.manifest, self._readers, self._open_reader)
        self._read_state = ReadState((mem, *[e.mem for e in self._imms]), view)
        self._recompute_thresholds()

    async def _open_reader(self, sst_id: ULID) -> SstReader:
        store, key = self.locator.locate(sst_id)
        return await retry_transient(
            self.runtime,
            lambda: SstReader.open(store, key, block_cache=self.cache, cache_id=str(sst_id)),
            what=f"open {key}",
        )

    # ------------------------------------------------------------------------------------------
    # Background tasks
    # ------------------------------------------------------------------------------------------

    def background(self):
        """Async context manager running the WAL flusher, the L0 flusher and the manifest poller."""
        return _Background(self)

    async def _flush_loop(self) -> None:
        interval = self.settings.flush_interval
        while True:
            await self.runtime.wait_event(self._flush_wakeup, interval)
            self._flush_wakeup = trio.Event()
            await self.flush_wal()

    async def _l0_loop(self) -> None:
        while True:
            entry = self._next_imm_to_flush()
            if entry is None:
                await self._l0_wakeup.wait()
                self._l0_wakeup = trio.Event()
                continue
            await self._flush_imm(entry)

    def _next_imm_to_flush(self) -> ImmEntry | None:
        if not self._imms or self._error is not None:
            return None
        entry = self._imms[-1]  # oldest
        if entry.last_wal_id is None:
            return None
        if len(self._read_state.view.l0) >= self._l0_max_ssts and not (self._closing or self._force_l0):
            return None  # back-pressure: wait for a compactor to drain L0
        return entry

    async def _poll_loop(self) -> None:
        while True:
            await self.runtime.wait_event(self._poll_wakeup, self.settings.manifest_poll_interval)
            self._poll_wakeup = trio.Event()
            await self.refresh_manifest()

    async def _compactor_loop(self) -> None:
        """The in-process compactor (RFC 003: "the compactor will run alongside the main
        writer"). Its commits wake the manifest poller, so back-pressure eases at once. A
        compactor fenced by another one just stops; a compactor failure is reported as an
        event and does not stop the writer (it only stops compacting)."""
        from slatedb.compactor import Compactor

        def adopted(_stored: Any) -> None:
            self._poll_wakeup.set()

        self.compactor = Compactor(self.store, self.runtime, self.settings, on_commit=adopted)
        try:
            await self.compactor.run()
        except* SlateDBError as group:  # from the compactor's nursery: a group
            for e in group.exceptions:
                self.runtime.event("compactor_error", error=f"{type(e).__name__}: {e}")
            self.stats["compactor_errors"] = self.stats.get("compactor_errors", 0) + 1

    async def _gc_loop(self) -> None:
        """The in-process garbage collector (``garbage_collector_options``, slatedb/gc/): each
        directory on its own interval, the first pass one interval after open (a short-lived
        database is never collected under itself). A GC failure is reported as an event and
        counted; it never stops the writer."""
        from slatedb.gc import GarbageCollector

        options = self.settings.garbage_collector_options
        self.gc = GarbageCollector(self.store, self.runtime, options)
        try:
            await self.gc.run()
        except* SlateDBError as group:
            for e in group.exceptions:
                self.runtime.event("gc_error", error=f"{type(e).__name__}: {e}")
            self.stats["gc_errors"] = self.stats.get("gc_errors", 0) + 1
        finally:
            await self.gc.locator.aclose()

    def _kick_flush(self) -> None:
        """Wake the WAL flusher from any thread (called with ``_lock`` held)."""
        if self._kicked:
            return
        self._kicked = True
        if threading.get_ident() == self._trio_thread:
            self._flush_wakeup.set()
        elif self._trio_token is not None:
            try:
                self._trio_token.run_sync_soon(lambda: self._flush_wakeup.set())
            except trio.RunFinishedError:
                pass

    # ------------------------------------------------------------------------------------------
    # Write path (any thread)
    # ------------------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl_s: float | None = None) -> int:
        # The checks of validate_key/validate_value, inlined for the common case (hot path).
        if type(key) is not bytes or not key or len(key) > _batch.MAX_KEY_SIZE_BYTES:
            key = validate_key(key)
        if type(value) is not bytes or len(value) > _batch.MAX_VALUE_SIZE_BYTES:
            value = validate_value(value)
        now = self._now_ms()
        if ttl_s is None and self._default_ttl_ms is None:
            expire = None
        else:
            expire = expire_ts_ms(now, validate_ttl_s(ttl_s), self._default_ttl_ms)
        return self._append(key, _VALUE, value, expire, now)

    def delete(self, key: bytes) -> int:
        key = validate_key(key)
        return self._append(key, _TOMBSTONE, b"", None, self._now_ms())

    def _append(self, key: bytes, kind: RowKind, value: bytes, expire: int | None, now: int) -> int:
        """One validated row into the live memtable and the WAL buffer, under the write lock."""
        with self._lock:
            if self._gate:
                self._check_gate()
            seq = self._last_seq + 1
            row = Row(key, seq, kind, value, expire, now)
            self._memtable.put(row)
            self._last_seq = seq
            self._wal_rows.append(row)
            size = len(key) + len(value) + ROW_OVERHEAD_BYTES
            self._wal_bytes += size
            self._unflushed_bytes += size
            if self._unflushed_bytes >= self._next_check_bytes:
                self._on_threshold()
        return seq

    def write(self, batch: WriteBatch) -> int:
        """Apply ``batch`` atomically (consecutive seqs, one lock hold); returns the last seq."""
        if not isinstance(batch, WriteBatch):
            raise InvalidArgumentError(f"write() takes a WriteBatch, not {type(batch).__name__}")
        ops = batch._ops  # validated when added
        if not ops:
            raise InvalidArgumentError("write() of an empty WriteBatch")
        for op in ops:
            if op.kind is OpKind.MERGE:
                raise InvalidArgumentError("merge operands need a merge operator, which this database does not have")
        now = self._now_ms()
        default_ttl = self._default_ttl_ms
        put_kind = OpKind.PUT
        with self._lock:
            if self._gate:
                self._check_gate()
            seq = self._last_seq
            mem_put = self._memtable.put
            wal_append = self._wal_rows.append
            size = 0
            for kind, key, value, ttl_s in ops:
                seq += 1
                if kind is put_kind:
                    if ttl_s is None and default_ttl is None:
                        row = Row(key, seq, _VALUE, value, None, now)
                    else:
                        row = Row(key, seq, _VALUE, value, expire_ts_ms(now, ttl_s, default_ttl), now)
                else:
                    row = Row(key, seq, _TOMBSTONE, b"", None, now)
                mem_put(row)
                wal_append(row)
                size += len(key) + len(value)
            size += ROW_OVERHEAD_BYTES * len(ops)
            self._last_seq = seq
            self._wal_bytes += size
            self._unflushed_bytes += size
            if self._unflushed_bytes >= self._next_check_bytes:
                self._on_threshold()
        return seq

    def _check_gate(self) -> None:
        """Slow path of a write (``_lock`` held): raise when closed or fenced, or
        :class:`MustWait` under back-pressure."""
        if self._error is not None:
            raise self._error
        if self._closing:
            raise ClosedError("the database is closed")
        if self._blocked:
            raise MustWait()

    def _on_threshold(self) -> None:
        """A size threshold was crossed (``_lock`` held): cut a full memtable, kick the
        flusher, maybe block."""
        if self._memtable.size_bytes >= self._l0_size:
            self._cut_memtable()
            self._kicked = False
            self._kick_flush()
        elif self._wal_bytes >= self._l0_size:
            self._kick_flush()
        self._recompute_thresholds()

    def _recompute_thresholds(self) -> None:
        """Recompute ``_blocked``, ``_gate`` and the next byte count at which a write must call
        :meth:`_on_threshold` (``_lock`` held, or before the database is shared)."""
        # A full L0 stops the L0 flusher (see _next_imm_to_flush), not writes: memtables pile
        # up until max_unflushed_bytes, and only then do writes wait. Blocking writes on the L0
        # count itself would stall forever after an explicit flush pushed L0 past the limit.
        self._blocked = self._unflushed_bytes > self._max_unflushed
        self._gate = self._blocked or self._closing or self._error is not None
        u = self._unflushed_bytes
        deltas = [self._max_unflushed - u + 1]
        deltas.append(self._l0_size - self._memtable.size_bytes)
        if not self._kicked:
            deltas.append(self._l0_size - self._wal_bytes)
        self._next_check_bytes = u + max(1, min(deltas))

    def wait_for_room_sync(self) -> None:
        with self._lock:
            while self._blocked and self._error is None and not self._closing:
                self._room_cv.wait(timeout=1.0)

    async def wait_for_room(self) -> None:
        while self._blocked and self._error is None and not self._closing:
            event = self._room_event
            await event.wait()

    def _signal_room(self) -> None:
        """(runtime thread, ``_lock`` not held) Wake writers waiting for room."""
        with self._lock:
            self._recompute_thresholds()
            self._room_cv.notify_all()
        self._room_event.set()
        self._room_event = trio.Event()

    # ------------------------------------------------------------------------------------------
    # Durability
    # ------------------------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def durable_seq(self) -> int:
        return self._durable_seq

    def wait_durable_sync(self, seq: int, timeout_s: float | None = None) -> None:
        with self._lock:
            while self._durable_seq < seq:
                if self._error is not None:
                    raise self._error
                if self._closed:
                    raise ClosedError(f"the database closed before seq {seq} was durable")
                if not self._durable_cv.wait(timeout=timeout_s):
                    raise TimeoutError(f"seq {seq} not durable after {timeout_s} s")

    async def wait_durable(self, seq: int) -> None:
        while self._durable_seq < seq:
            if self._error is not None:
                raise self._error
            if self._closed:
                raise ClosedError(f"the database closed before seq {seq} was durable")
            await self._durable_event.wait()

    def _fail(self, error: SlateDBError) -> None:
        """Stop for good: every later write raises ``error``, every durability wait fails."""
        if self._wal is not None and isinstance(error, FencedError):
            self._wal.halted = True
        with self._lock:
            if self._error is None:
                self._error = error
            self._recompute_thresholds()
            self._durable_cv.notify_all()
            self._room_cv.notify_all()
        self._wake_all()

    def _wake_all(self) -> None:
        for name in ("_durable_event", "_room_event", "_l0_wakeup", "_flush_wakeup", "_l0_progress"):
            getattr(self, name).set()
            setattr(self, name, trio.Event())

    # ------------------------------------------------------------------------------------------
    # Flushing
    # ------------------------------------------------------------------------------------------

    async def flush_wal(self, *, freeze: bool = False) -> None:
        """Write the WAL buffer as WAL SSTs (group commit: one per memtable cut, usually one);
        with ``freeze`` also cut the live memtable for its L0 flush."""
        async with self._flush_lock:
            if self._error is not None:
                raise self._error
            with self._lock:
                if freeze and not self._memtable.is_empty:
                    self._cut_memtable()
                cuts = self._wal_cuts
                self._wal_cuts = []
                if self._wal_rows:
                    cuts.append((self._wal_rows, None))
                self._wal_rows = []
                self._wal_bytes = 0
                self._kicked = False
                self._recompute_thresholds()
            assert self._wal is not None
            for rows, entry in cuts:
                if rows:
                    await self._write_wal(rows)
                if entry is not None:
                    entry.last_wal_id = self._wal.last_id
                    self._l0_wakeup.set()

    def _cut_memtable(self) -> None:
        """Freeze the live memtable together with the WAL buffer (``_lock`` held): the frozen
        memtable's rows are exactly those of the WAL objects up to this cut."""
        mem = self._memtable
        mem.freeze()
        entry = ImmEntry(mem)
        self._imms.insert(0, entry)
        self._wal_cuts.append((self._wal_rows, entry))
        self._wal_rows = []
        self._memtable = Memtable()
        self._read_state = ReadState((self._memtable, *[e.mem for e in self._imms]), self._read_state.view)

    async def _write_wal(self, rows: list[Row]) -> None:
        assert self._wal is not None
        with trio.CancelScope(shield=True):
            try:
                wal_id = await self._wal.write(rows)
            except FencedError as e:
                self._fail(e)
                raise
            self.stats["wal_ssts"] += 1
            with self._lock:
                # FENCE-3: nothing is acknowledged after a halt (unless the catalogued bug is on).
                if self._error is None or "zombie-ack" in self.runtime.bugs:
                    self._durable_seq = rows[-1].seq
                    self.runtime.event("ack", path=wal_key(wal_id), epoch=self.epoch, seq=rows[-1].seq)
                    self._durable_cv.notify_all()
            self._durable_event.set()
            self._durable_event = trio.Event()

    async def flush_memtable(self) -> None:
        """Freeze the live memtable at a WAL cut and wait until every frozen memtable is in L0
        (ignoring ``l0_max_ssts``: an explicit flush is the caller's decision)."""
        await self.flush_wal(freeze=True)
        self._force_l0 += 1
        try:
            while self._imms:
                if self._error is not None:
                    raise self._error
                progress = self._l0_progress
                self._l0_wakeup.set()
                await progress.wait()
        finally:
            self._force_l0 -= 1

    async def _flush_imm(self, entry: ImmEntry) -> None:
        """Write the oldest frozen memtable as an L0 SST and commit it to the manifest."""
        assert entry.last_wal_id is not None
        if self._error is not None:
            raise self._error
        encoded = write_sst(entry.mem.iter_range(), self.sst_options)
        sst_id = self.runtime.new_ulid()
        key = sst_key(sst_id)
        await retry_transient(self.runtime, lambda: self.store.put(key, encoded.data, OVERWRITE), what=f"put {key}")
        async with self._manifest_lock:
            if entry not in self._imms:
                # Only this task removes flushed entries, so the database closed (memory released)
                # while we waited for the lock -- e.g. the poller halted it, and the lock was handed
                # to us just before the close cancelled us.
                raise self._error or ClosedError("the database closed during an L0 flush")
            with trio.CancelScope(shield=True):
                epoch = self.epoch
                wal_last = self._wal.last_id if self._wal is not None else 0
                replay_after = entry.last_wal_id
                if "replay-point-ahead" in self.runtime.bugs:  # catalogued bug (sim/bugs.py)
                    replay_after = wal_last  # past WAL objects whose rows are in later memtables

                # catalogued bug (sim/bugs.py): no writer-epoch guard on the L0 commit (FENCE-5)
                fence = _UncheckedFence(epoch) if "l0-commit-unfenced" in self.runtime.bugs else WriterFence(epoch)
                edit = AddL0(
                    fence, CompactedSsTableV2(sst_id, encoded.info, encoded.format_version),
                    replay_after=replay_after, wal_last=wal_last, last_seq=entry.mem.last_seq or 0,
                    checkpoint_id=self.runtime.new_uuid(), snapshot_floor=min(self._snapshot_seqs.values(), default=None),
                )
                try:
                    stored = (await self.manifests.commit(edit, current=self._stored)).stored
                except FencedError as e:
                    self.runtime.event("halt", epoch=epoch, reason="manifest")
                    self._fail(e)
                    raise
                self.stats["manifest_writes"] += 1
                self.stats["l0_ssts"] += 1
                if self.compactor is not None:
                    self.compactor.wake()  # a new L0 SST may be what the scheduler waits for
                self._readers[sst_id] = SstReader(
                    self.store, decode_layout(encoded.data, key), block_cache=self.cache, cache_id=str(sst_id)
                )
                await self._adopt(stored, flushed=entry)

    # ------------------------------------------------------------------------------------------
    # Manifest adoption (runtime thread, _manifest_lock held)
    # ------------------------------------------------------------------------------------------

    async def _adopt(self, stored: StoredManifest, *, flushed: ImmEntry | None = None) -> None:
        await self.locator.update(stored.manifest)
        view = await build_view(stored.id, stored.manifest, self._readers, self._open_reader)
        self._stored = stored
        with self._lock:
            if flushed is not None:
                self._imms.remove(flushed)
                self._unflushed_bytes -= flushed.size_bytes
            self._read_state = ReadState((self._memtable, *[e.mem for e in self._imms]), view)
            live = view.sst_ids
        for sst_id in [s for s in self._readers if s not in live]:
            del self._readers[sst_id]
        self._signal_room()
        self._l0_wakeup.set()
        self._l0_progress.set()
        self._l0_progress = trio.Event()

    async def refresh_manifest(self) -> None:
        """Poll: adopt changes made by others (a compactor); halt if a newer writer exists.

        When the L0 / sorted-run set changed, re-establish the writer checkpoint on the new
        manifest (RFC 000 "Refreshing the Checkpoint").
        """
        async with self._manifest_lock:
            if self._error is not None:
                return
            latest = await self.manifests.read_latest()
            assert latest is not None and self._stored is not None
            if latest.id == self._stored.id:
                return
            if latest.manifest.writer_epoch > self.epoch:
                self.runtime.event("halt", epoch=self.epoch, newer=latest.manifest.writer_epoch)
                self._fail(FencedError(f"writer epoch {self.epoch} was fenced by epoch {latest.manifest.writer_epoch}"))
                return
            old = self._stored.manifest
            changed = (old.l0, old.compacted) != (latest.manifest.l0, latest.manifest.compacted)
            if changed:
                epoch = self.epoch

                with trio.CancelScope(shield=True):
                    try:
                        edit = RefreshWriterCheckpoint(WriterFence(epoch), self.runtime.new_uuid())
                        latest = (await self.manifests.commit(edit, current=latest)).stored
                    except FencedError as e:
                        self._fail(e)
                        return
                    self.stats["manifest_writes"] += 1
            await self._adopt(latest)

    # ------------------------------------------------------------------------------------------
    # Checkpoints (runtime thread)
    # ------------------------------------------------------------------------------------------

    async def create_checkpoint(self, scope: Any, options: Any) -> Any:
        """RFC 000 ``Db::create_checkpoint``. ``ALL``: write the WAL buffer, cut the memtable and
        flush the frozen memtables to L0 unless L0 is full (best effort: back-pressure is not
        waited out); ``DURABLE``: nothing is flushed. Then one manifest update (fenced by the
        writer epoch) adds the checkpoint, pinning the very manifest that adds it, and raises
        its ``wal_id_last_seen`` to the last WAL object written: a reader of the pinned manifest
        (its SSTs, then WAL ids in ``(replay_after_wal_id, wal_id_last_seen]``) sees every write
        issued before the call (``ALL``) or every write durable at the call (``DURABLE``)."""
        if not isinstance(scope, CheckpointScope):
            raise InvalidArgumentError(f"scope must be a CheckpointScope, got {scope!r}")
        if self._error is not None:
            raise self._error
        if scope is CheckpointScope.ALL:
            await self.flush_wal(freeze=True)
            await self._flush_l0_unless_blocked()
        async with self._manifest_lock:
            if self._error is not None:
                raise self._error
            with trio.CancelScope(shield=True):
                epoch = self.epoch
                assert self._wal is not None
                wal_last = self._wal.last_id
                edit = AddCheckpoint(self.runtime.new_uuid(), lifetime_s=options.lifetime_s, name=options.name,
                                     source=options.source, wal_last_seen=wal_last, fence=WriterFence(epoch))
                try:
                    added = await self.manifests.commit(edit, current=self._stored)
                except FencedError as e:
                    self.runtime.event("halt", epoch=epoch, reason="manifest")
                    self._fail(e)
                    raise
                self.stats["manifest_writes"] += 1
                await self._adopt(added.stored)
        cp = added.result.checkpoint
        self.runtime.event("checkpoint_create", id=str(cp.id), manifest_id=cp.manifest_id,
                           expire_s=cp.checkpoint_expire_time_s, scope=scope.value)
        return CheckpointCreateResult(cp.id, cp.manifest_id)

    async def _flush_l0_unless_blocked(self) -> None:
        """Flush the frozen memtables to L0, oldest first, stopping (without waiting) as soon as
        L0 holds ``l0_max_ssts`` SSTs: RFC 000's best-effort flush of ``CheckpointScope.ALL``."""
        targets = list(self._imms)
        while any(e in self._imms for e in targets):
            if self._error is not None:
                raise self._error
            if len(self._read_state.view.l0) >= self._l0_max_ssts:
                self.runtime.event("checkpoint_flush_blocked", l0=len(self._read_state.view.l0))
                return
            progress = self._l0_progress
            self._l0_wakeup.set()
            await progress.wait()

    # ------------------------------------------------------------------------------------------
    # Reads (any thread; synchronous parts)
    # ------------------------------------------------------------------------------------------

    @property
    def read_state(self) -> ReadState:
        return self._read_state

    def check_open(self) -> None:
        if self._closed:
            raise ClosedError("the database is closed")

    def get_fast(self, key: bytes, rs: ReadState, max_seq: int | None) -> bytes | None | object:
        """``get`` from memtables and cached blocks; :data:`NEED_IO` when a block must be read."""
        now = self.runtime.now_ms()
        for mem in rs.mems:
            row = mem.get(key, max_seq)
            if row is not None:
                return resolve_row(row, now)
        for h in rs.view.point_candidates(key):
            row = h.reader.get_cached(key, max_seq)
            if row is NEED_IO:
                return NEED_IO
            if row is not None:
                return resolve_row(row, now)  # type: ignore[arg-type]
        return None

    async def get_slow(self, key: bytes, rs: ReadState, max_seq: int | None) -> bytes | None:
        """``get`` with block reads (runtime thread)."""
        now = self.runtime.now_ms()
        for mem in rs.mems:
            row = mem.get(key, max_seq)
            if row is not None:
                return resolve_row(row, now)
        for h in rs.view.point_candidates(key):
            reader = h.reader
            row = await retry_transient(self.runtime, lambda: reader.get(key, max_seq), what=f"get {reader.object_name}")
            if row is not None:
                return resolve_row(row, now)
        return None

    def scan_merge(
        self, rs: ReadState, bounds: KeyBounds, reverse: bool, max_seq: int
    ) -> tuple[MergeScan | None, Iterator[tuple[bytes, bytes]] | None]:
        """A merge over every source of ``rs`` within ``bounds``; for a scan served by one
        memtable alone, a plain generator instead (the fast path)."""
        now = self.runtime.now_ms()
        with self._lock:  # iterator creation orders the live memtable's new keys (a mutation)
            mem_iters = [
                m.iter_range(bounds.lo, bounds.hi, start_inclusive=bounds.lo_inclusive,
                             end_inclusive=bounds.hi_inclusive, reverse=reverse, max_seq=max_seq)
                for m in rs.mems
                if not m.is_empty
            ]
        view = rs.view
        if not view.l0 and not view.runs and len(mem_iters) <= 1:
            it = mem_iters[0] if mem_iters else iter(())
            return None, visible(it, snapshot_seq=max_seq, now_ms=now)
        sources: list[Any] = [MemSource(it) for it in mem_iters]
        sources.extend(SstSource([h], bounds, reverse) for h in view.l0)
        sources.extend(SstSource(run.ssts, bounds, reverse) for run in view.runs)
        return MergeScan(sources, reverse=reverse, max_seq=max_seq, now_ms=now), None

    async def load_blocks(self, reader: SstReader, first: int, last_exclusive: int):
        return await retry_transient(
            self.runtime, lambda: reader.read_blocks(first, last_exclusive), what=f"read {reader.object_name}"
        )

    # ------------------------------------------------------------------------------------------
    # Snapshots
    # ------------------------------------------------------------------------------------------

    def register_snapshot(self) -> tuple[int, int, ReadState]:
        with self._lock:
            self.check_open()
            token = self._next_snapshot
            self._next_snapshot += 1
            seq = self._last_seq
            self._snapshot_seqs[token] = seq
            return token, seq, self._read_state

    def release_snapshot(self, token: int) -> None:
        with self._lock:
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
        stop the background tasks, release the store. A fenced database just stops."""
        if self._closed:
            return
        with self._lock:
            self._closing = True
            self._recompute_thresholds()
            self._room_cv.notify_all()
        self._room_event.set()
        try:
            if self._error is None:
                await self.flush_memtable()
        except FencedError:
            pass  # fenced while closing: the newer writer owns the data; nothing more was acked
        finally:
            if self._tasks_scope is not None:
                self._tasks_scope.cancel()
            with self._lock:
                self._closed = True
                self._durable_cv.notify_all()
                self._room_cv.notify_all()
                self._release_memory()
            self._wake_all()
            self.runtime.event("closed", epoch=self.epoch)

    def _release_memory(self) -> None:
        """Drop memtables, SST readers and cached blocks (``_lock`` held): a closed database
        should not pin them until the caller lets go of the ``Db`` object."""
        self._memtable = Memtable()
        self._imms = []
        self._wal_rows = []
        self._wal_cuts = []
        self._read_state = ReadState((self._memtable,), EMPTY_VIEW)
        self._readers.clear()
        if self.cache is not None:
            self.cache.clear()

    def abort(self) -> None:
        """Stop at once without flushing (a crash, as far as the store can tell)."""
        with self._lock:
            self._closing = True
            self._closed = True
            if self._error is None:
                self._error = ClosedError("the database was aborted")
            self._recompute_thresholds()
            self._durable_cv.notify_all()
            self._room_cv.notify_all()
        if self._tasks_scope is not None:
            self._tasks_scope.cancel()
        self._wake_all()


class _Background:
    """``async with core.background():`` runs the background tasks for the block's duration."""

    def __init__(self, core: DbCore) -> None:
        self.core = core
        self._cm: Any = None

    async def __aenter__(self) -> DbCore:
        core = self.core
        core._trio_token = trio.lowlevel.current_trio_token()
        core._trio_thread = threading.get_ident()
        self._cm = core.runtime.task_group()
        tg = await self._cm.__aenter__()
        core._tasks_scope = tg.nursery.cancel_scope
        tg.spawn(self._guard, core._flush_loop, name="wal-flush")
        tg.spawn(self._guard, core._l0_loop, name="l0-flush")
        tg.spawn(self._guard, core._poll_loop, name="manifest-poll")
        if core.settings.compactor_options is not None:
            tg.spawn(core._compactor_loop, name="compactor")
        if core.settings.garbage_collector_options is not None:
            tg.spawn(core._gc_loop, name="gc")
        return core

    async def _guard(self, fn: Callable[[], Any]) -> None:
        """Run a loop; a failure stops the database (typed) instead of tearing down the caller."""
        try:
            await fn()
        except SlateDBError as e:
            self.core._fail(e)
        except AssertionError as e:  # pragma: no cover - engine bug
            self.core._fail(SlateDBError(f"background task failed: {e!r}"))
            raise

    async def __aexit__(self, *exc: Any) -> bool | None:
        core = self.core
        close_error: BaseException | None = None
        try:
            if not core._closed:
                if exc[0] is None:
                    await core.aclose()
                else:
                    core.abort()
        except BaseException as e:  # the nursery below must be exited whatever happens
            close_error = e
            core.abort()
        result = await self._cm.__aexit__(*exc)
        if close_error is not None:
            raise close_error
        return result


class _UncheckedFence(WriterFence):
    """The ``l0-commit-unfenced`` catalogue switch's fence: carries the epoch, checks nothing."""

    def check(self, m) -> None:
        return None
