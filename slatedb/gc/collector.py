"""The garbage collector (RFC 000 § "Garbage Collector", RFC 002 § "Garbage Collection
Integration", RFC 004; spec/protocols/checkpoints-gc.md steps 5-8 and
spec/protocols/sequenced-metadata.md GC steps 1-3).

One pass, in the RFC's order:

1. read the latest manifest (none: nothing to do);
2. a soft-destroyed database past its grace period with no active checkpoint is removed
   (:mod:`slatedb.gc.destroyed`), and GC stops for good; a destroyed database not yet ready
   is left alone: the pass writes and deletes nothing;
3. expired checkpoints are removed from the manifest (a CAS, retried from a fresh read);
4. each enabled directory is collected: ``manifest/`` and ``compactions/`` (boundary first),
   ``wal/`` (data objects, then 0-byte fences under their own options), ``compacted/``; then
   clones whose parent SSTs are no longer referenced detach from their parents.

Every directory pass reads the latest manifest afresh and the manifests its active checkpoints
pin (the set M of RFC 000). Its deletes are limited to what that read proves unreferenced, and
each delete is preceded by a check of the rule that allows it (:class:`GcInvariantError` if a
selection bug ever picked something to keep). A ``dry_run`` directory deletes nothing and
moves no boundary: it counts (and traces, ``gc_would_delete``) what it would delete.

Time: ages compare the store's ``last_modified`` with ``runtime.now_ms()``; the loop sleeps with
``runtime.sleep``. Both assume, like the official engine, that clocks differ by less than
``min_age``.
"""

from __future__ import annotations

import collections
from typing import Any, Awaitable, Callable

import attrs
import trio
from ulid import ULID

from slatedb.checkpoint import active_checkpoints
from slatedb.compactor.store import CompactionsStore
from slatedb.config import GarbageCollectorDirectoryOptions, GarbageCollectorOptions
from slatedb.lsm.paths import SstLocator
from slatedb.lsm.view import COMPACTED_DIR, sst_key
from slatedb.errors import BoundaryVanishedError, InvalidDbStateError, ObjectNotFoundError, SlateDBError, sole_exception
from slatedb.format.layout import parse_sst_ulid
from slatedb.format.types import Checkpoint, ExternalDb, ManifestV2
from slatedb.manifest.edit import Edit
from slatedb.manifest.edits import DetachExternalDb, ExpireCheckpoints
from slatedb.manifest.store import Committed, ManifestStore, SequencedStore, StoredManifest, parse_id
from slatedb.objstore.base import ObjectMeta, ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import Runtime, TaskGroup, probes, switches
from slatedb.wal.writer import WAL_DIR, WAL_SUFFIX, wal_key

from .destroyed import (
    boundary_create_outlived,
    destroy_database,
    manifest_create_outlived,
    ready_to_destroy,
    release_parent_checkpoint,
)
from .errors import GcInvariantError, PinnedManifestMissingError
from .retention import (
    in_flight_sst_ids,
    manifest_sst_ids,
    older_than,
    sst_ulid_cutoff_ms,
    wal_kept,
)
from .sequenced import list_namespace, settle_boundary
from .stats import GcStats

#: RFC 000 ``db_delete_grace``: how long a soft-destroyed database is kept before GC removes it.
#: The RFC gives no default; a day (as ``slatedb run-gc --db-delete-grace``) leaves time to
#: notice a mistaken destroy.
DEFAULT_DB_DELETE_GRACE_S = 86400.0

#: Floor of a directory's interval in :meth:`GarbageCollector.run` (``interval: 0`` would spin).
MIN_INTERVAL_S = 0.01

#: Reads of the latest manifest and its pinned manifests before a pass gives up (a pinned
#: manifest can vanish only if a concurrent GC saw a newer manifest without the checkpoint).
_SNAPSHOT_ATTEMPTS = 3


class _DestroyedUnderPass(Exception):
    """Internal: a create of this pass landed on a database a destroy had marked or removed
    meanwhile; the create was taken back (DESTROY-7) and the pass ends."""


@attrs.frozen
class Snapshot:
    """The latest manifest, its active (unexpired) checkpoints, and the manifests they pin
    (RFC 000's set M), read together at the start of a directory pass."""

    latest: StoredManifest
    active: tuple[Checkpoint, ...]
    pinned: tuple[StoredManifest, ...]

    @property
    def manifests(self) -> tuple[ManifestV2, ...]:
        """The latest manifest and every pinned one: what must stay readable."""
        return (self.latest.manifest, *(p.manifest for p in self.pinned))


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise GcInvariantError(f"GC refused to delete: {what}")


_parse_sst_ulid = parse_sst_ulid


def _too_young(sst_id: ULID, meta: ObjectMeta, cutoff_ms: int, now_ms: int, min_age_s: float) -> bool:
    """An unreferenced SST GC must keep for now: its ULID is at or after the cutoff (a compaction
    in flight or an L0 flush may still commit it), or it is younger than ``min_age_s``."""
    return sst_id.milliseconds >= cutoff_ms or not older_than(meta, now_ms, min_age_s)


def _bug_never_too_young(sst_id: ULID, meta: ObjectMeta, cutoff_ms: int, now_ms: int, min_age_s: float) -> bool:
    """Catalogued bug ``gc-no-min-age`` (sim/scenarios/catalogue.py): no age rule and no ULID cutoff."""
    return False


class GarbageCollector:
    """The garbage collector of the database at ``store`` (one instance per database).

    :meth:`run_once` runs one pass over every enabled directory; :meth:`run` runs each
    directory on its own interval until cancelled, the database is removed, or it has no
    manifest. Passes of one collector never overlap (a lock), so a directory's rules always see
    the effect of the previous pass. ``totals`` sums the stats of every pass; ``errors`` counts
    passes that failed (reported as ``gc_error`` events; :meth:`run` carries on).
    """

    def __init__(self, store: ObjectStore, runtime: Runtime, options: GarbageCollectorOptions | None = None, *,
                 db_delete_grace_s: float = DEFAULT_DB_DELETE_GRACE_S) -> None:
        if db_delete_grace_s < 0:
            raise ValueError(f"db_delete_grace_s must be >= 0, got {db_delete_grace_s!r}")
        self.store = store
        self.runtime = runtime
        self.options = options if options is not None else GarbageCollectorOptions()
        self.db_delete_grace_s = db_delete_grace_s
        self.manifests = ManifestStore(store, runtime)
        self.compactions = CompactionsStore(store, runtime)
        self.locator = SstLocator(store, runtime)
        self.totals = GcStats()
        self.errors = 0
        #: Set once the database was removed or found without a manifest: :meth:`run` stops.
        self.finished = False
        self._lock = trio.Lock()
        #: Decoded checkpointed manifests by id. A committed manifest never changes, and an id
        #: pinned by an active checkpoint is never deleted (so never re-created by a stale
        #: writer): the cache is exact. Entries no longer pinned are dropped at each snapshot.
        self._pinned_cache: dict[int, StoredManifest] = {}
        #: The latest manifest read by the current pass's preparation (see :meth:`snapshot`).
        self._latest_hint: StoredManifest | None = None
        #: The clock right before the read the hint comes from (snapshot() judges expiry there).
        self._latest_hint_ms = 0

    # ------------------------------------------------------------------------------------------
    # Entry points
    # ------------------------------------------------------------------------------------------

    async def run_once(self) -> GcStats:
        """One full pass: destroy check, expired checkpoints, then every enabled directory."""
        o = self.options
        passes = [
            ("manifest", o.manifest_options, self._collect_manifests),
            ("wal", o.wal_options, self._collect_wal),
            ("wal_fence", o.wal_fence_options, self._collect_wal_fences),
            ("compacted", o.compacted_options, self._collect_ssts),
            ("compactions", o.compactions_options, self._collect_compactions),
            ("detach", o.detach_options, self._detach_clones),
        ]
        return await self._pass([(name, fn) for name, opts, fn in passes if opts is not None])

    async def run(self) -> None:
        """Collect each enabled directory every ``interval`` (its first pass after one interval:
        a just-opened database is left alone), until cancelled or :attr:`finished`. A failing
        pass is reported and retried at the next interval; a vanished boundary file
        (:class:`BoundaryVanishedError`, unless a destroy deleted it: then the pass ends and the
        next one finds the destroyed manifest) or a :class:`GcInvariantError` stops GC."""
        o = self.options
        schedules = [
            ("manifest", o.manifest_options, self._collect_manifests),
            ("wal", o.wal_options, self._collect_wal),
            ("wal_fence", o.wal_fence_options, self._collect_wal_fences),
            ("compacted", o.compacted_options, self._collect_ssts),
            ("compactions", o.compactions_options, self._collect_compactions),
            ("detach", o.detach_options, self._detach_clones),
        ]
        scheduled = [(name, opts.interval, fn) for name, opts, fn in schedules
                     if opts is not None and opts.interval is not None]
        if not scheduled:
            return
        try:
            async with self.runtime.task_group() as tg:
                for name, interval_s, fn in scheduled:
                    tg.spawn(self._every, name, interval_s, fn, tg, name=f"gc-{name}")
        except BaseExceptionGroup as group:
            error = sole_exception(group)
            if error is group:
                raise
            raise error from None

    async def _every(self, name: str, interval_s: float, fn: Callable[["GcTally"], Awaitable[None]],
                     tg: TaskGroup) -> None:
        while not self.finished:
            await self.runtime.sleep(max(interval_s, MIN_INTERVAL_S))
            if self.finished:
                break
            try:
                await self._pass([(name, fn)])
            except (BoundaryVanishedError, GcInvariantError):
                raise
            except SlateDBError as e:
                self.errors += 1
                self.runtime.event("gc_error", directory=name, error=f"{type(e).__name__}: {e}")
        tg.cancel()

    async def _pass(self, passes: list[tuple[str, Callable[["GcTally"], Awaitable[None]]]]) -> GcStats:
        tally = GcTally()
        async with self._lock:
            try:
                await self._passes(passes, tally)
            except _DestroyedUnderPass as e:
                self.runtime.event("gc_skip", directory="*", reason=str(e))
        stats = tally.freeze()
        if stats is _NO_WORK:  # most passes of a quiet database: nothing to add, the fields known
            self.runtime.event("gc_pass", **_NO_WORK_FIELDS)
            return stats
        self.totals = self.totals + stats
        self.runtime.event("gc_pass", **stats.as_dict())
        return stats

    async def _passes(self, passes: list[tuple[str, Callable[["GcTally"], Awaitable[None]]]],
                      tally: "GcTally") -> None:
        latest = None if self.finished else await self._prepare(tally)
        if latest is None:
            return
        for name, fn in passes:
            self._latest_hint = latest
            try:
                await fn(tally)
            except PinnedManifestMissingError as e:
                self.runtime.event("gc_skip", directory=name, reason=str(e))
            except BoundaryVanishedError:
                if not await self._destroyed():
                    raise
                # A destroy deleted the boundary file under this pass (its update-if-match
                # failed, nothing was written): the next pass sees the destroyed manifest.
                self.runtime.event("gc_skip", directory=name, reason="boundary deleted by a destroy")
                break

    def _shield_creates(self) -> bool:
        """Whether a create and its DESTROY-7 look run shielded from a stop (catalogued bug
        ``gc-take-back-unshielded``, sim/scenarios/catalogue.py: not)."""
        return switches.GC_TAKE_BACK_UNSHIELDED not in self.runtime.bugs

    async def _take_back(self, key: str, what: str) -> None:
        """DESTROY-7: delete what this pass just created on a database destroyed under it, and end
        the pass (a removed database ends GC for good; a marked one is left to step 5)."""
        self.runtime.probe(probes.GC_CREATE_OUTLIVED_DESTROY)
        if switches.GC_KEEPS_CREATE_AFTER_DESTROY in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
            return
        await self._delete(key, "undo", None)
        self.finished = await self.manifests.read_latest() is None
        raise _DestroyedUnderPass(f"{what} created after a destroy marked or removed the database: taken back")

    async def _commit(self, edit: Edit[Any], *, current: StoredManifest | None = None) -> Committed[Any]:
        """GC's manifest edits (expired checkpoints, detach): :meth:`ManifestStore.commit`, then,
        for a write, DESTROY-7's look at the manifest below it (skipped without boundary files,
        which the look's proof needs: :func:`manifest_create_outlived`)."""
        # The create, its look and a take-back go together (DESTROY-7): a stop of GC between the
        # landing and the look left a lone manifest on a removed database (destroy seed 177).
        # Shielded: a stop waits for the commit to end. A first attempt on ``current`` that
        # writes nothing (most checkpoint expiries) awaits nothing: done without the scope.
        if current is not None:
            unchanged = self.manifests.commit_unchanged(edit, current=current)
            if unchanged is not None:
                return unchanged
        with trio.CancelScope(shield=self._shield_creates()):
            try:
                committed = await self.manifests.commit(edit, current=current)
            except InvalidDbStateError as e:
                # Removed (or marked) under the commit; a lone create of ours on the emptied root was
                # taken back by the manifest store (destroy seed 1880, DESTROY-7): end the pass, and
                # GC for good when no manifest is left.
                self.finished = await self.manifests.read_latest() is None
                raise _DestroyedUnderPass(str(e)) from None
            if (committed.written and self.options.boundary_files_enabled
                    and await manifest_create_outlived(self.manifests, committed.stored.id)):
                await self._take_back(self.manifests.key(committed.stored.id), f"manifest {committed.stored.id}")
        return committed

    # ------------------------------------------------------------------------------------------
    # Steps 1-3: the latest manifest, soft destroy, expired checkpoints
    # ------------------------------------------------------------------------------------------

    async def _prepare(self, tally: "GcTally") -> StoredManifest | None:
        """RFC 000 steps 1-3; the latest manifest after them, or None: nothing more to do (no
        database, or it was just removed)."""
        self._latest_hint_ms = self.runtime.now_ms()  # before the read: see snapshot()
        latest = await self.manifests.read_latest()
        if latest is None:
            self.runtime.event("gc_no_database")
            self.finished = True
            return None
        if ready_to_destroy(latest, self.runtime.now_ms(), self.db_delete_grace_s):
            manifest_opts = self.options.manifest_options
            if manifest_opts is None or manifest_opts.dry_run:
                self.runtime.event("gc_would_destroy", manifest=latest.id)
                return None
            count = await destroy_database(self.store, self.runtime, latest, self.locator,
                                           lambda key: self._delete(key, "destroy", None))
            tally.set(db_destroyed=True, destroyed_objects=count)
            self.finished = True
            return None
        if latest.manifest.destroyed_at_s:
            # Destroyed, not yet ready (grace, an active checkpoint) or hard-destroyed under us:
            # write nothing -- no checkpoint expiry, no boundary, no detach. A write landing
            # after a destroyer's listing would outlive the database (DESTROY-4); step 5 alone
            # removes it.
            self.runtime.event("gc_skip", directory="*", reason="database destroyed, waiting for step 5")
            return None
        return await self._expire_checkpoints(tally, latest)

    async def _destroyed(self) -> bool:
        """The database is destroyed (marked) or gone: a vanished boundary file is its destroyer's
        doing, not a stale process's."""
        latest = await self.manifests.read_latest()
        return latest is None or bool(latest.manifest.destroyed_at_s)

    async def _expire_checkpoints(self, tally: "GcTally", latest: StoredManifest) -> StoredManifest:
        """Remove every expired checkpoint in one manifest update (CAS; on a lost race the change
        is computed again from the fresh manifest, which may have refreshed or added some)."""
        expired = await self._commit(ExpireCheckpoints(), current=latest)
        stored, removed = expired.stored, expired.result
        for c in removed:
            self.runtime.probe(probes.GC_CHECKPOINT_EXPIRED)
            self.runtime.event("checkpoint_expired", id=str(c.id), manifest_id=c.manifest_id, manifest=stored.id)
        tally.add("checkpoints_expired", len(removed))
        return stored

    async def snapshot(self, *, fresh: bool = False) -> Snapshot:
        """The latest manifest and the manifests its active checkpoints pin (RFC 000's M). The
        manifest the pass started from is reused unless ``fresh`` (a newer one only adds
        checkpoints on newer manifests, which the passes never delete, see
        :meth:`_collect_manifests`).

        A checkpoint counts as expired only if it had expired when the manifest was read (the
        clock right before the read), not by now: a refresh that landed after the read is not in
        it, and a checkpoint the read saw active may have been refreshed since (GC-2, gc seed
        3741: the pass's manifest was its own ExpireCheckpoints commit, whose reply stalled 16 s;
        judged by the clock 16 s later, a reader's checkpoint on manifest 6 looked expired and
        manifest 6 went, though the reader had refreshed it in time)."""
        last_missing: ObjectNotFoundError | None = None
        hint, self._latest_hint = (None if fresh else self._latest_hint), None
        for _ in range(_SNAPSHOT_ATTEMPTS):
            if hint is not None:
                latest, read_ms = hint, self._latest_hint_ms
            else:
                read_ms = self.runtime.now_ms()
                latest = await self.manifests.read_latest()
            hint = None
            if latest is None:
                raise PinnedManifestMissingError("the database has no manifest any more")
            judged_ms = self.runtime.now_ms() if switches.GC_JUDGES_EXPIRY_NOW in self.runtime.bugs else read_ms  # catalogued bug
            active = active_checkpoints(latest.manifest, judged_ms // 1000)
            active = () if switches.GC_IGNORES_CHECKPOINTS in self.runtime.bugs else active  # catalogued bug (sim/scenarios/catalogue.py)
            pinned: dict[int, StoredManifest] = {}
            try:
                for cp in active:
                    if cp.manifest_id == latest.id:
                        pinned[cp.manifest_id] = latest
                    elif cp.manifest_id not in pinned:
                        cached = self._pinned_cache.get(cp.manifest_id)
                        if cached is None:
                            cached = await self.manifests.read(cp.manifest_id)
                        pinned[cp.manifest_id] = cached
            except ObjectNotFoundError as e:
                last_missing = e
                continue
            self._pinned_cache = {i: p for i, p in pinned.items() if i != latest.id}
            return Snapshot(latest, active, tuple(pinned[i] for i in sorted(pinned)))
        raise PinnedManifestMissingError(f"a checkpointed manifest could not be read: {last_missing}")

    # ------------------------------------------------------------------------------------------
    # Deleting
    # ------------------------------------------------------------------------------------------

    async def _delete(self, key: str, kind: str, opts: GarbageCollectorDirectoryOptions | None,
                      tally: "GcTally | None" = None, counter: str | None = None, **fields: object) -> None:
        """Delete ``key`` (or, in a dry run, only report it). The ``gc_delete`` event comes before
        the request: the trace shows the intent even if the process dies mid-request."""
        if opts is not None and opts.dry_run:
            self.runtime.event("gc_would_delete", path=key, what=kind, **fields)
            if tally is not None:
                tally.add("dry_run_candidates")
            return
        self.runtime.event("gc_delete", path=key, what=kind, **fields)
        await retry_transient(self.runtime, lambda: self.store.delete(key), what=f"delete {key}")
        if tally is not None and counter is not None:
            tally.add(counter)

    # ------------------------------------------------------------------------------------------
    # Step 4: the directories
    # ------------------------------------------------------------------------------------------

    async def _collect_sequenced(self, ns: SequencedStore, opts: GarbageCollectorDirectoryOptions,
                                 tally: "GcTally", counter: str, keep: frozenset[int], below: int) -> None:
        """RFC 004 "Garbage Collection": advance the boundary, then delete files at or behind it
        that are older than ``min_age``, not the latest, not in ``keep`` and below ``below``."""
        listing = await list_namespace(ns)
        if len(listing) < 2:
            return
        now_ms = self.runtime.now_ms()
        newest = listing[-1][0]
        # DESTROY-7: a boundary create and its look (and take-back) go together; a stop of GC in
        # between would leave the file on a database removed meanwhile (destroy seed 192: the
        # take-back's delete cancelled on the wire). Shielded: a stop waits for them.
        with trio.CancelScope(shield=self._shield_creates()):
            boundary, moved, created = await settle_boundary(ns, listing, now_ms, opts,
                                                             enabled=self.options.boundary_files_enabled)
            if moved:
                tally.add("boundary_advances")
            if created and await boundary_create_outlived(self.manifests):
                await self._take_back(ns.boundary_key, ns.boundary_key)
        for file_id, meta in listing:
            if file_id >= newest or file_id >= below or file_id > boundary:
                continue
            if not older_than(meta, now_ms, opts.min_age):
                continue
            if file_id in keep:
                self.runtime.probe(probes.GC_MANIFEST_KEPT_CHECKPOINT)
                continue
            _check(file_id < newest, f"{ns.namespace} {file_id} is the latest (SEQMETA-3)")
            _check(file_id <= boundary, f"{ns.namespace} {file_id} is above the boundary {boundary} (BOUNDARY-1)")
            _check(file_id not in keep, f"{ns.namespace} {file_id} is pinned by a checkpoint (GC-2)")
            await self._delete(ns.key(file_id), ns.namespace, opts, tally, counter, id=file_id, boundary=boundary)

    async def _collect_manifests(self, tally: "GcTally") -> None:
        """checkpoints-gc.md step 6. Only ids below the latest manifest that was read are
        candidates: a checkpoint added after that read pins a newer manifest (``V+1``), or one
        its source pinned, which the read already saw as active."""
        opts = self.options.manifest_options
        assert opts is not None
        snap = await self.snapshot()
        keep = frozenset(c.manifest_id for c in snap.active)
        await self._collect_sequenced(self.manifests, opts, tally, "manifests_deleted", keep, below=snap.latest.id)

    async def _collect_compactions(self, tally: "GcTally") -> None:
        """RFC 002: every ``.compactions`` file but the latest, older than ``min_age``."""
        opts = self.options.compactions_options
        assert opts is not None
        await self._collect_sequenced(self.compactions, opts, tally, "compactions_deleted", frozenset(), below=2**64)

    async def _collect_wal(self, tally: "GcTally") -> None:
        opts = self.options.wal_options
        assert opts is not None
        await self._collect_wal_objects(opts, tally, fences=False)

    async def _collect_wal_fences(self, tally: "GcTally") -> None:
        opts = self.options.wal_fence_options
        assert opts is not None
        await self._collect_wal_objects(opts, tally, fences=True)

    async def _collect_wal_objects(self, opts: GarbageCollectorDirectoryOptions, tally: "GcTally", *,
                                   fences: bool) -> None:
        """checkpoints-gc.md step 7 for data WAL objects, or for 0-byte fences (their own
        options, dry-run by default: a fence deleted under a writer paused longer than
        ``min_age`` lets it write again). The newest WAL object is never deleted: it holds the
        next id's place (a fence, or the last write a new writer must fence above)."""
        snap = await self.snapshot()
        latest = snap.latest.manifest
        pinned = [p.manifest for p in snap.pinned]
        metas = await retry_transient(self.runtime, lambda: self.store.list(WAL_DIR), what=f"list {WAL_DIR}")
        listing = sorted(((parse_id(m.key, WAL_DIR, WAL_SUFFIX), m) for m in metas), key=lambda f: f[0] or 0)
        listing = [(i, m) for i, m in listing if i is not None]
        if not listing:
            return
        newest = listing[-1][0]
        now_ms = self.runtime.now_ms()
        for wal_id, meta in listing:
            if wal_id == newest or (meta.size_bytes == 0) != fences:
                continue
            if wal_kept(wal_id, latest, ()) or not older_than(meta, now_ms, opts.min_age):
                continue  # not yet in L0 (the writer replays it), or too young
            if wal_kept(wal_id, latest, pinned):
                self.runtime.probe(probes.GC_WAL_KEPT_CHECKPOINT)
                continue
            _check(wal_id < newest, f"wal {wal_id} is the newest WAL object")
            _check(wal_id <= latest.replay_after_wal_id, f"wal {wal_id} is above replay_after_wal_id")
            _check(not wal_kept(wal_id, latest, pinned), f"wal {wal_id} is pinned by a checkpoint (READ-2)")
            await self._delete(wal_key(wal_id), "wal_fence" if fences else "wal", opts, tally,
                               "wal_fences_deleted" if fences else "wal_deleted", id=wal_id)

    async def _collect_ssts(self, tally: "GcTally") -> None:
        """checkpoints-gc.md step 8. ``.compactions`` is read *before* the manifests: a
        compaction that commits in between then has its outputs in the manifest read after;
        read the other way round, its outputs could be in neither (RFC 002 issue #604)."""
        opts = self.options.compacted_options
        assert opts is not None
        stored_compactions = await self.compactions.read_latest()
        compactions = stored_compactions.compactions if stored_compactions is not None else None
        snap = await self.snapshot(fresh=True)
        referenced: set[ULID] = set()
        for m in snap.manifests:
            referenced |= manifest_sst_ids(m)
        in_flight = in_flight_sst_ids(compactions, snap.manifests)
        cutoff_ms = sst_ulid_cutoff_ms(snap.latest.manifest, compactions)
        if switches.GC_IGNORES_INFLIGHT_COMPACTION in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py): min_age alone
            in_flight, cutoff_ms = set(), 2**63
        metas = await retry_transient(self.runtime, lambda: self.store.list(COMPACTED_DIR), what=f"list {COMPACTED_DIR}")
        now_ms = self.runtime.now_ms()
        too_young = _bug_never_too_young if switches.GC_NO_MIN_AGE in self.runtime.bugs else _too_young
        for meta in metas:
            sst_id = _parse_sst_ulid(meta.key)
            if sst_id is None or sst_id in referenced:
                continue
            if sst_id in in_flight:
                self.runtime.probe(probes.GC_SST_KEPT_IN_FLIGHT)
                continue
            if too_young(sst_id, meta, cutoff_ms, now_ms, opts.min_age):
                if sst_id.milliseconds >= cutoff_ms:
                    self.runtime.probe(probes.GC_SST_KEPT_ULID_CUTOFF)
                continue
            _check(sst_id not in referenced, f"SST {sst_id} is referenced (GC-1)")
            _check(sst_id not in in_flight, f"SST {sst_id} belongs to an in-flight compaction (GC-3)")
            await self._delete(sst_key(sst_id), "sst", opts, tally, "ssts_deleted", id=str(sst_id))

    async def _detach_clones(self, tally: "GcTally") -> None:
        """RFC 000 "Detach the clone if possible": an external database none of whose SSTs the
        latest manifest or any checkpointed manifest references releases its final checkpoint
        on the parent, then leaves our manifest (CAS; re-checked on the fresh manifest)."""
        snap = await self.snapshot()
        if not snap.latest.manifest.initialized:
            # An unfinished clone or union (clone.md step 5, projection-union.md C6): its
            # creator is about to make the final checkpoints of these entries; detaching one now
            # would leak that checkpoint on the parent and leave the creator unable to resume.
            return

        def same(a: ExternalDb, b: ExternalDb) -> bool:
            return a.path == b.path and a.source_checkpoint_id == b.source_checkpoint_id

        # Every manifest a reader may still read: the latest and each one an active checkpoint pins.
        readable = snap.manifests
        if switches.GC_DETACH_LATEST_ONLY in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
            readable = (snap.latest.manifest,)
        for db in snap.latest.manifest.external_dbs:
            if any(e.sst_ids for m in readable for e in m.external_dbs if same(e, db)):
                if not db.sst_ids:  # the latest references none: only a pinned manifest keeps it
                    self.runtime.probe(probes.GC_DETACH_KEPT_CHECKPOINT)
                continue
            await release_parent_checkpoint(self.locator, self.runtime, db)
            edit = DetachExternalDb(db.path, db.source_checkpoint_id)
            detached = (await self._commit(edit)).result
            if detached:
                tally.add("clones_detached")
                self.runtime.probe(probes.GC_CLONE_DETACHED)
                self.runtime.event("clone_detached", path=db.path, source_checkpoint=str(db.source_checkpoint_id))


class GcTally:
    """The mutable counts of one pass, frozen into :class:`GcStats` at its end."""

    def __init__(self) -> None:
        self._counts: collections.Counter[str] = collections.Counter()
        self._flags: dict[str, object] = {}

    def add(self, name: str, n: int = 1) -> None:
        self._counts[name] += n

    def set(self, **values: object) -> None:
        self._flags.update(values)

    def freeze(self) -> GcStats:
        if not self._flags and not any(self._counts.values()):
            return _NO_WORK
        return GcStats(**dict(self._counts), **self._flags)  # type: ignore[arg-type]


#: The stats of a pass that did nothing (the one value; a GC polling a quiet database makes
#: thousands of such passes), and its fields in the ``gc_pass`` event's order.
_NO_WORK = GcStats()
_NO_WORK_FIELDS = _NO_WORK.as_dict()


async def run_gc(store: ObjectStore, runtime: Runtime, options: GarbageCollectorOptions | None = None,
                 once: bool = False, *, db_delete_grace_s: float = DEFAULT_DB_DELETE_GRACE_S) -> GcStats:
    """Collect the database at ``store``: one pass (``once``) or until cancelled, the database
    is removed, or it has no manifest (the admin API's and ``slatedb run-gc [--once]``'s entry
    point). Returns the stats of the pass, or the totals of every pass."""
    gc = GarbageCollector(store, runtime, options, db_delete_grace_s=db_delete_grace_s)
    try:
        if once:
            return await gc.run_once()
        await gc.run()
        return gc.totals
    finally:
        await gc.locator.aclose()
