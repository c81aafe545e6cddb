"""The read-only engine behind :class:`slatedb.DbReader` (RFC 000 "Readers", RFC 001 "Reader
Protocol"); the protocol and its invariants are ``spec/protocols/reader.md``.

Two modes:

* **Checkpoint** (a checkpoint id given): read the manifest the checkpoint pins, replay its WAL
  range ``(replay_after_wal_id, wal_id_last_seen]`` and serve that, unchanged, for the reader's
  lifetime. Nothing is written to the store.
* **Managed** (no id): establish a checkpoint of our own -- read the latest manifest ``V``, check
  it is initialized and not destroyed, *then* list the WAL (RFC 001's NOTE), write ``V+1`` with a
  new checkpoint on ``V+1`` and ``wal_id_last_seen`` raised to the highest WAL id listed (CAS,
  retried from the read) -- replay ``(replay_after_wal_id, wal_id_last_seen]`` into bounded
  in-memory tables, and keep it up in a background task: every poll interval, re-establish
  when the L0 / sorted-run set changed or the checkpoint is gone or expired (READ-4), else
  refresh the expiry once less than half the lifetime remains; with ``follow_latest``, also
  apply WAL objects written since (``wal_id_last_seen + 1``, ``+ 2``, ... while they exist).

The read state (tables newest first, then the SST view of the pinned manifest) is swapped as one
object, and what it holds is always the rows of the WAL objects up to some id -- the SSTs hold
those ``<= replay_after_wal_id``, the tables the rest -- so every read sees a prefix of the
durable history (READ-3). Reads are served by the read path it shares with the writer (:class:`~slatedb.lsm.read_path.ReadPath`)
(``get_fast`` / ``get_slow`` / ``scan_merge`` / ``load_blocks``), which need only ``runtime``
and ``_lock`` of the object they run on.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import trio
from ulid import ULID

from slatedb.checkpoint import (
    delete_checkpoint,
    find_checkpoint,
    is_expired,
    refresh_checkpoint,
)
from slatedb.config import Settings
from slatedb.lsm.cache import BlockCache
from slatedb.lsm.read_path import ReadPath, ReadState
from slatedb.lsm.paths import SstLocator
from slatedb.lsm.view import EMPTY_VIEW, LsmView, build_view
from slatedb.errors import (
    CheckpointNotFoundError, ClosedError, CommitOutcomeUnknownError, InvalidArgumentError, InvalidDbStateError,
    ObjectNotFoundError, ObjectStoreError, ObjectStoreRetriesExhaustedError, SlateDBError, TransientObjectStoreError,
)
from slatedb.format.sst_reader import SstReader
from slatedb.format.types import ManifestV2
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.manifest.edits import AddReaderCheckpoint
from slatedb.manifest.segments import refuse_segments
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.memtable import Memtable
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.row import Row
from slatedb.runtime import Runtime, TaskScopes, opened, probes, switches, with_max_retries
from slatedb.wal.writer import in_l0, list_wal_ids, wal_key

from .options import DbReaderOptions


class WalObjectMissingError(InvalidDbStateError):
    """A WAL object of the pinned manifest's replay range is gone (READ-1/READ-2 say it cannot
    be while the checkpoint pinning it is active)."""


class WalTable:
    """One bounded in-memory table of replayed WAL rows, from WAL ids ``first_wal..last_wal``."""

    __slots__ = ("mem", "first_wal", "last_wal")

    def __init__(self, first_wal: int) -> None:
        self.mem = Memtable()
        self.first_wal = first_wal
        self.last_wal = first_wal

    def __repr__(self) -> str:
        return f"WalTable(wal {self.first_wal}..{self.last_wal}, {self.mem.size_bytes} B)"


def _without_l0_rows(tables: list[WalTable], l0_seq: int) -> list[WalTable]:
    """``tables`` without their rows of ``seq <= l0_seq`` (DUR-4): those are in the L0 SSTs of
    the view the tables are shown over, maybe folded by a compaction into a row of the same seq
    (an operand left above would shadow its own fold). A table left empty goes."""
    out: list[WalTable] = []
    for t in tables:
        first = t.mem.first_seq
        if first is None or not in_l0(first, l0_seq):
            out.append(t)
            continue
        kept = [r for r in t.mem.iter_range() if not in_l0(r.seq, l0_seq)]
        if kept:
            fresh = WalTable(t.first_wal)
            fresh.last_wal = t.last_wal
            for r in sorted(kept, key=lambda r: r.seq):
                fresh.mem.put(r)
            out.append(fresh)
    return out


def as_checkpoint_id(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidArgumentError(f"checkpoint_id must be a UUID (or its string), got {value!r}")


def _sst_set(m: ManifestV2) -> tuple:
    return (m.l0, m.compacted)


def _sst_set_changed(latest: ManifestV2, pinned: ManifestV2) -> bool:
    """Whether the latest manifest's SSTs differ from the pinned one's (an L0 flush, a
    compaction): the reader re-establishes its checkpoint to catch up."""
    return _sst_set(latest) != _sst_set(pinned)


def _bug_never_changed(latest: ManifestV2, pinned: ManifestV2) -> bool:
    """Catalogued bug ``reader-ignores-new-ssts`` (sim/scenarios/catalogue.py): the reader never notices that the
    SST set changed; it stays a valid prefix but stops catching up (READ-5)."""
    return False


class ReaderCore(ReadPath):
    """One open reader of one database (see the module docstring). Build it with :meth:`open`,
    run its maintenance with :meth:`background`, stop it with :meth:`aclose`."""

    def __init__(self, store: ObjectStore, runtime: Runtime, options: DbReaderOptions, settings: Settings,
                 checkpoint_id: uuid.UUID | None) -> None:
        self.store = store
        self.runtime = runtime
        self.options = options
        self.settings = settings
        self.manifests = ManifestStore(store, runtime)
        self.locator = SstLocator(store, runtime)
        self.cache = BlockCache(settings.block_cache_size_bytes) if settings.block_cache_size_bytes > 0 else None
        #: True when the caller named the checkpoint (never refreshed nor re-established).
        self.fixed = checkpoint_id is not None
        #: The checkpoint the current view is pinned by.
        self.checkpoint_id: uuid.UUID | None = checkpoint_id
        self._expire_s = 0
        self._retired: list[uuid.UUID] = []  # our earlier checkpoints, deleted at the next round
        self._lock = threading.Lock()
        self._readers: dict[ULID, SstReader] = {}
        self._pinned: StoredManifest | None = None
        self._tables: list[WalTable] = []  # oldest first
        self._applied_wal = 0  # every WAL id <= this is in the view (SSTs or tables)
        self._last_seq = 0
        self._read_state = ReadState((), EMPTY_VIEW)
        self._error: SlateDBError | None = None
        self._closed = False
        self._tasks_scope: trio.CancelScope | None = None
        self._maintenance_lock = trio.Lock()
        self._poll_wakeup = trio.Event()
        self.stats = {"establishes": 0, "refreshes": 0, "wal_replayed": 0, "wal_followed": 0, "rows_replayed": 0}

    # ------------------------------------------------------------------------------------------
    # Opening
    # ------------------------------------------------------------------------------------------

    @classmethod
    async def open(cls, store: ObjectStore, runtime: Runtime, options: DbReaderOptions, settings: Settings,
                   checkpoint_id: uuid.UUID | str | None = None, merge_operator: Any = None) -> "ReaderCore":
        options = DbReaderOptions.of(options)  # a dict of its fields too (docs/reader.md)
        cid = None if checkpoint_id is None else as_checkpoint_id(checkpoint_id)
        with_max_retries(runtime, settings.object_store_max_retries)
        core = cls(store, runtime, options, settings, cid)
        core.merge_operator = merge_operator  # folds merge operands on reads (spec/protocols/merge.md)
        try:
            await (core._establish("open") if cid is None else core._open_checkpoint(cid))
        except BaseException:
            with trio.CancelScope(shield=True):
                try:
                    await core._delete_retired()  # a checkpoint committed by a failed open
                except SlateDBError:
                    pass  # it lapses after its lifetime
                await core.locator.aclose()
            raise
        opened(runtime)  # from now on, the pauses of an open database (PRODUCTION_RETRIES)
        return core

    async def _latest(self, what: str) -> StoredManifest:
        latest = await self.manifests.read_latest()
        if latest is None:
            raise InvalidDbStateError(f"cannot {what}: no database at {self.store.shown_url} (no manifest)")
        refuse_segments(latest.manifest, self.store.url, what)
        return latest

    async def _open_checkpoint(self, cid: uuid.UUID) -> None:
        """Checkpoint mode: the manifest ``cid`` pins, and its WAL range."""
        latest = await self._latest("open a reader")
        if not latest.manifest.initialized:
            raise InvalidDbStateError("cannot open a reader: the database is not initialized (a clone, projection or union still being made, or one that never finished)")
        cp = find_checkpoint(latest.manifest, cid)
        if cp is None:
            raise CheckpointNotFoundError(cid, f"the latest manifest ({latest.id}) of {self.store.shown_url}")
        if is_expired(cp, self.runtime.now_ms() // 1000):
            raise InvalidDbStateError(f"checkpoint {cid} expired at {cp.checkpoint_expire_time_s} s")
        if cp.manifest_id == latest.id:
            pinned = latest
        else:
            try:
                pinned = await self.manifests.read(cp.manifest_id)
            except ObjectNotFoundError:
                raise InvalidDbStateError(f"checkpoint {cid} pins manifest {cp.manifest_id}, which is gone") from None
        self._expire_s = cp.checkpoint_expire_time_s
        await self._adopt(pinned, "checkpoint")

    async def _establish(self, reason: str) -> None:
        """RFC 000 "Establishing the Checkpoint" (steps 1-5), then adopt the new manifest."""
        rt = self.runtime
        # Only after the manifest read is the WAL listed (RFC 001 NOTE): GC deletes WAL ids <= the
        # replay point of a newer manifest only, and a newer manifest fails our CAS.
        while True:
            edit = AddReaderCheckpoint(rt.new_uuid(), lifetime_s=self.options.checkpoint_lifetime_s,
                                       refuse="open a reader")
            current = await self._latest("open a reader")
            try:
                added = await self.manifests.commit(edit, current=current, list_wal=lambda: list_wal_ids(self.store, rt))
            except BaseException as e:
                # Cancelled (or left unknown by the store) after the manifest was written, it may have
                # landed: ours to delete (missing_ok), or it outlives a cancelled open by its lifetime.
                if not isinstance(e, Exception) or isinstance(e, (ObjectStoreError, CommitOutcomeUnknownError)):
                    self._retired.append(edit.checkpoint_id)
                raise
            stored, cp = added.stored, added.result.checkpoint
            # READ-1: a checkpoint whose commit took so long (a stalled reply, a frozen process)
            # that less than half its lifetime is left -- or none -- may already be expired in
            # GC's eyes (clocks differ), and GC may have collected the WAL objects it pins (gc
            # seeds 371, 383): never adopt it; drop it and establish another.
            left_s = cp.checkpoint_expire_time_s - rt.now_ms() / 1000
            if left_s < self.options.checkpoint_lifetime_s / 2:
                self._retired.append(cp.id)
                rt.event("reader_checkpoint_stale", id=str(cp.id), manifest_id=stored.id, left_s=round(left_s, 3))
                continue
            old, old_expire_s = self.checkpoint_id, self._expire_s
            self.checkpoint_id = cp.id
            self._expire_s = cp.checkpoint_expire_time_s
            self.stats["establishes"] += 1
            rt.event("reader_checkpoint", id=str(cp.id), manifest_id=stored.id, reason=reason,
                     replay_after=stored.manifest.replay_after_wal_id, last_seen=stored.manifest.wal_id_last_seen,
                     expire_s=cp.checkpoint_expire_time_s, replaced=None if old is None else str(old))
            try:
                await self._adopt(stored, reason)
            except BaseException as e:
                # The view was not switched: keep reading through the old checkpoint, drop the new.
                self.checkpoint_id, self._expire_s = old, old_expire_s
                self._retired.append(cp.id)
                # READ-4: the replay outlived the new checkpoint (a stalled read, a frozen
                # process) and GC collected a WAL object it pinned: not a fatal error, the same
                # case as a stale commit above; establish another (gc seed 47). A WAL object
                # missing under a checkpoint still active is READ-1's violation: raised.
                left_s = cp.checkpoint_expire_time_s - rt.now_ms() / 1000
                if isinstance(e, WalObjectMissingError) and left_s < self.options.checkpoint_lifetime_s / 2:
                    rt.event("reader_checkpoint_stale", id=str(cp.id), manifest_id=stored.id, left_s=round(left_s, 3))
                    continue
                raise
            break
        if old is not None:
            self._retired.append(old)

    # ------------------------------------------------------------------------------------------
    # The view: SSTs of the pinned manifest + WAL tables
    # ------------------------------------------------------------------------------------------

    async def _open_reader(self, sst_id: ULID) -> SstReader:
        store, key = self.locator.locate(sst_id)
        return await retry_transient(
            self.runtime,
            lambda: SstReader.open(store, key, block_cache=self.cache, cache_id=str(sst_id)),
            what=f"open {key}",
        )

    async def _fetch_wal(self, wal_id: int) -> tuple[Row, ...] | None:
        """The rows of WAL object ``wal_id``; None when it does not exist."""
        key = wal_key(wal_id)
        try:
            got = await retry_transient(self.runtime, lambda: self.store.get(key), what=f"get {key}")
        except ObjectNotFoundError:
            return None
        wal = decode_wal_sst(bytes(got.data), key)  # CorruptionError on a bad CRC: never a wrong answer
        if wal.is_fence:
            self.runtime.probe(probes.WAL_REPLAY_FENCE)
        self.runtime.event("replay", path=key, rows=len(wal.rows), fence=wal.is_fence)
        return wal.rows

    def _apply_rows(self, wal_id: int, rows: tuple[Row, ...], tables: list[WalTable], l0_seq: int) -> bool:
        """Add the rows of ``wal_id`` with ``seq > l0_seq`` to ``tables`` (``_lock`` held; rows at
        or below the ``last_l0_seq`` of the view they are shown over are in its SSTs, DUR-4);
        True when a table was added."""
        limit = self.options.max_memtable_bytes
        added = False
        for row in rows:
            if in_l0(row.seq, l0_seq):
                continue
            if not tables or tables[-1].mem.size_bytes >= limit:
                tables.append(WalTable(wal_id))
                added = True
            t = tables[-1]
            t.mem.put(row)
            t.last_wal = wal_id
        if rows:
            self._last_seq = max(self._last_seq, max(r.seq for r in rows))
        self._applied_wal = max(self._applied_wal, wal_id)
        self.stats["rows_replayed"] += len(rows)
        return added

    def _view_l0_seq(self) -> int:
        """``last_l0_seq`` of the pinned manifest (0 before the first view)."""
        return 0 if self._pinned is None else self._pinned.manifest.last_l0_seq

    def _publish(self, view: LsmView) -> None:
        """Swap in tables + ``view`` as the read state (``_lock`` held)."""
        self._read_state = ReadState(tuple(t.mem for t in reversed(self._tables)), view)

    async def _adopt(self, stored: StoredManifest, reason: str) -> None:
        """Make ``stored`` the pinned manifest: replay its WAL range beyond what the tables hold,
        build its SST view, then swap, dropping tables wholly covered by its SSTs."""
        m = stored.manifest
        replay_after = m.replay_after_wal_id
        last_seen = max(m.wal_id_last_seen, replay_after)
        start = max(replay_after, self._applied_wal) + 1
        # A range that does not continue the tables (the new SSTs cover WAL ids the tables never
        # held) is replayed into fresh tables, published only with the new SST view: shown over
        # the old view it would skip those ids (not a prefix: found by the gc simulation).
        gap = start > self._applied_wal + 1
        tables = [] if gap else self._tables
        # Rows shown over the current view skip what its SSTs hold; fresh tables, shown only
        # with P's view, what P's hold (DUR-4).
        shown_l0_seq = m.last_l0_seq if gap else self._view_l0_seq()
        applied, last_seq = self._applied_wal, self._last_seq
        try:
            for wal_id in range(start, last_seen + 1):
                rows = await self._fetch_wal(wal_id)
                if rows is None:  # READ-1/READ-2 say this cannot happen
                    raise WalObjectMissingError(
                        f"{wal_key(wal_id)} is missing from the WAL range ({replay_after}, {last_seen}] pinned by "
                        f"manifest {stored.id}")
                with self._lock:
                    # The current view stays a prefix: these rows follow every row it holds.
                    self._apply_rows(wal_id, rows, tables, shown_l0_seq)
                    if not gap:
                        self._publish(self._read_state.view)
                self.stats["wal_replayed"] += 1
            await self.locator.update(m)
            view = await build_view(stored.id, m, self._readers, self._open_reader, self.runtime)
        except BaseException:
            if gap:  # nothing of this range was published
                self._applied_wal, self._last_seq = applied, last_seq
            raise
        with self._lock:
            self._tables = _without_l0_rows([t for t in tables if t.last_wal > replay_after], m.last_l0_seq)
            self._applied_wal = max(self._applied_wal, last_seen)
            self._last_seq = max(self._last_seq, m.last_l0_seq)
            self._pinned = stored
            self._publish(view)
        live = view.sst_ids
        for sst_id in [s for s in self._readers if s not in live]:
            del self._readers[sst_id]
        self.runtime.event("reader_view", manifest_id=stored.id, reason=reason, replay_after=replay_after,
                           wal_applied=self._applied_wal, tables=len(self._tables), last_seq=self._last_seq)

    # ------------------------------------------------------------------------------------------
    # Maintenance (managed mode only)
    # ------------------------------------------------------------------------------------------

    async def _lost(self, *, expired: bool) -> None:
        """GC (or someone) removed our checkpoint, or it lapsed: pin afresh (READ-4)."""
        self.runtime.probe(probes.READER_CHECKPOINT_EXPIRED if expired else probes.READER_CHECKPOINT_GONE)
        self.runtime.event("reader_checkpoint_lost", id=str(self.checkpoint_id), expired=expired)
        await self._establish("lost")

    async def _bug_lost_is_fatal(self, *, expired: bool) -> None:
        """Catalogued bug ``expired-checkpoint-fatal`` (sim/scenarios/catalogue.py): a lost or expired checkpoint
        fails the reader for good instead of establishing a new one."""
        raise InvalidDbStateError(f"checkpoint {self.checkpoint_id} expired or is gone")

    async def maintain(self) -> None:
        """One maintenance round (what the background task runs every poll interval)."""
        if self.fixed or self._closed:
            return
        async with self._maintenance_lock:
            if self._closed:
                return
            if self._error is not None:
                raise self._error
            await self._delete_retired()
            latest = await self._latest("maintain the reader's checkpoint")
            m = latest.manifest
            if m.destroyed_at_s or not m.initialized:
                await self._stop(latest)
                return
            assert self._pinned is not None and self.checkpoint_id is not None
            cp = find_checkpoint(m, self.checkpoint_id)
            now_s = self.runtime.now_ms() // 1000
            if cp is None or is_expired(cp, now_s):
                lost = self._bug_lost_is_fatal if switches.EXPIRED_CHECKPOINT_FATAL in self.runtime.bugs else self._lost
                await lost(expired=cp is not None)
                return
            changed = _bug_never_changed if switches.READER_IGNORES_NEW_SSTS in self.runtime.bugs else _sst_set_changed
            if changed(m, self._pinned.manifest):
                await self._establish("changed")
                return
            lifetime = self.options.checkpoint_lifetime_s
            if cp.checkpoint_expire_time_s - self.runtime.now_ms() / 1000 < lifetime / 2:
                try:
                    new = await refresh_checkpoint(self.manifests, self.runtime, self.checkpoint_id, lifetime)
                except CheckpointNotFoundError:
                    self.runtime.probe(probes.READER_CHECKPOINT_GONE)
                    self.runtime.event("reader_checkpoint_lost", id=str(self.checkpoint_id), expired=False)
                    await self._establish("lost")
                    return
                self._expire_s = new.checkpoint_expire_time_s
                self.stats["refreshes"] += 1
            if self.options.follow_latest:
                await self._follow_wal()

    async def _follow_wal(self) -> None:
        """Apply WAL objects ``_applied_wal + 1, + 2, ...`` while they exist (RFC 001: poll for
        the next id). A missing id is "not written yet" -- or collected after an L0 flush, which
        the next round's manifest poll turns into a re-establish."""
        while True:
            wal_id = self._applied_wal + 1
            rows = await self._fetch_wal(wal_id)
            if rows is None:
                return
            with self._lock:
                self._apply_rows(wal_id, rows, self._tables, self._view_l0_seq())
                self._publish(self._read_state.view)
            self.stats["wal_followed"] += 1
            self.runtime.event("reader_wal", wal_id=wal_id, rows=len(rows), last_seq=self._last_seq)

    async def _stop(self, latest: StoredManifest) -> None:
        """The database was destroyed under us: release our checkpoints and fail the reader."""
        what = "destroyed" if latest.manifest.destroyed_at_s else "no longer initialized"
        self._error = InvalidDbStateError(f"the database at {self.store.shown_url} was {what} (manifest {latest.id})")
        self.runtime.event("reader_stopped", reason=what)
        await self._delete_own_checkpoints()

    async def _delete_retired(self) -> None:
        while self._retired:
            cid = self._retired[0]
            await delete_checkpoint(self.manifests, self.runtime, cid, missing_ok=True)
            self._retired.pop(0)

    async def _delete_own_checkpoints(self) -> None:
        if self.fixed:
            return
        if self.checkpoint_id is not None:
            self._retired.append(self.checkpoint_id)
            self.checkpoint_id = None
        await self._delete_retired()

    async def _maintenance_loop(self) -> None:
        while True:
            await self.runtime.wait_event(self._poll_wakeup, self.options.manifest_poll_interval_s)
            self._poll_wakeup = trio.Event()
            try:
                await self.maintain()
            except (TransientObjectStoreError, ObjectStoreRetriesExhaustedError) as e:
                # The store is unreachable past the retry bound (an S3 endpoint down for a while):
                # not fatal (READ-4), the next round tries again and the reader serves what it has.
                self.runtime.event("reader_error", error=f"{type(e).__name__}: {e}", fatal=False)
            except SlateDBError as e:
                self.runtime.event("reader_error", error=f"{type(e).__name__}: {e}", fatal=True)
                self._error = e
                return

    def background(self):
        """Async context manager running the maintenance task (managed mode)."""
        return _Background(self)

    # ------------------------------------------------------------------------------------------
    # Reads
    # ------------------------------------------------------------------------------------------

    def after_fork_in_child(self, error: ClosedError) -> None:
        """(In a child made by ``os.fork``.) The runtime thread that polls is the parent's:
        every read here raises ``error`` (a new lock: the parent's thread may have held it)."""
        self._lock = threading.Lock()
        self._error = error

    @property
    def read_state(self) -> ReadState:
        if self._closed:
            raise ClosedError("the reader is closed")
        if self._error is not None:
            raise self._error
        return self._read_state

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def error(self) -> SlateDBError | None:
        return self._error

    def check_open(self) -> None:
        if self._closed:
            raise ClosedError("the reader is closed")

    @property
    def manifest_id(self) -> int:
        """The id of the manifest the current view is pinned to."""
        assert self._pinned is not None
        return self._pinned.id

    @property
    def wal_range(self) -> tuple[int, int]:
        """``(replay_after_wal_id, highest WAL id applied)`` of the current view."""
        assert self._pinned is not None
        return self._pinned.manifest.replay_after_wal_id, self._applied_wal

    @property
    def tables(self) -> list[WalTable]:
        return list(self._tables)

    # ------------------------------------------------------------------------------------------
    # Closing
    # ------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop maintenance (letting a round in progress finish), delete our own checkpoints
        (managed mode), release memory. Quiet after a fatal error, as a ``Db``'s close (docs/reader.md)."""
        if self._closed:
            return
        self._closed = True  # reads fail from now on
        with trio.CancelScope(shield=True):
            async with self._maintenance_lock:
                if self._tasks_scope is not None:
                    self._tasks_scope.cancel()
                try:
                    await self._delete_own_checkpoints()
                except SlateDBError:
                    if self._error is None:  # not stopped by a fatal error: the close's own failure
                        raise
                finally:
                    self._release()
                    await self.locator.aclose()
                    self.runtime.event("reader_closed")

    def abort(self) -> None:
        """Stop without deleting the checkpoint (a crash: it lapses after its lifetime)."""
        self._closed = True
        if self._tasks_scope is not None:
            self._tasks_scope.cancel()
        self._release()

    def _release(self) -> None:
        with self._lock:
            self._tables = []
            self._read_state = ReadState((), EMPTY_VIEW)
        self._readers.clear()
        if self.cache is not None:
            self.cache.clear()


class _Background:
    """``async with core.background():`` runs the maintenance task for the block's duration."""

    def __init__(self, core: ReaderCore) -> None:
        self.core = core
        self._cm: Any = None

    async def __aenter__(self) -> ReaderCore:
        core = self.core
        self._cm = core.runtime.task_group()
        tg = await self._cm.__aenter__()
        core._tasks_scope = scopes = TaskScopes()  # close cancels these, not the block around them
        if not core.fixed:
            tg.spawn_in(scopes, core._maintenance_loop, name="reader-maintenance")
        return core

    async def __aexit__(self, *exc: Any) -> bool | None:
        core = self.core
        close_error: BaseException | None = None
        try:
            await core.aclose()  # also after an error in the block: our checkpoint goes either way
        except BaseException as e:
            core.abort()
            if exc[0] is None:
                close_error = e
        result = await self._cm.__aexit__(*exc)
        if close_error is not None:
            raise close_error
        return result

