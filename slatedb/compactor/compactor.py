"""The coordinator of the official compaction protocol, with one local worker (RFC 002, 003;
the official 0.17 coordinator/worker protocol). Steps (spec/protocols/compaction.md):

1. **Fence, manifest first.** Read the latest manifest, take ``E = compactor_epoch + 1`` and
   commit it. If the id was taken, re-read: a compactor epoch ``>= E`` means another compactor
   started after us, so we are fenced; otherwise retry with the same ``E``.
2. **Fence, then ``.compactions``.** Read the latest ``.compactions``: an epoch ``> E`` fences
   us, ``== E`` is impossible (panic); write ``E`` with every Scheduled job back to Submitted
   (revalidated), Running jobs left alone (their workers may be alive), trimmed.
3. **Tick** every ``poll_interval`` (every ``commit_compacted_interval`` while jobs are
   active), reading ``.compactions`` first, then the manifest (a newer epoch fences us):
   a. **reclaim** Running jobs whose heartbeat is older than ``worker_heartbeat_timeout`` (or
      with no worker) to Scheduled, keeping their progress;
   b. **commit** each Compacted job: the manifest first (sources replaced by the output run,
      revalidated; outputs must obey the ULID rule), then ``.compactions`` Completed; a job
      that no longer applies ends Failed (``.compactions`` only);
   c. **schedule**: the scheduler proposes specs, recorded Submitted (job ids never older than
      the newest existing one);
   d. **validate** Submitted jobs: Scheduled with ``ctx.retention_min_seq`` fixed, or Failed
      with the reason in ``compactions/failed/<id>.json``; a Scheduled job whose sources
      changed goes back to Submitted and fails there.
4. **Work**: the local :class:`~slatedb.compactor.worker.Worker` claims Scheduled jobs (or
   other workers do: ``slatedb run-compactor --engine spark``, or any official worker).

Every write is a compare-and-set of the latest file (:meth:`CompactionsStore.update`): the
transition is applied again to a newer file after a lost race, so a worker's claim, heartbeat
or result written meanwhile is never overwritten.

Events for the simulator: ``compactor_started(epoch)``, ``compactor_fenced``,
``compaction_state(id, status)``, ``compaction_commit(id, manifest)``, ``compaction_reclaimed``,
plus the store's ``create``/``commit`` events with ``epoch``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable

import attrs
import trio
from ulid import ULID

from slatedb.config import CompactorOptions, Settings
from slatedb.errors import (
    FencedError,
    InvalidArgumentError,
    ObjectVersionBehindBoundaryError,
    SlateDBError,
    sole_exception,
)
from slatedb.format.types import (
    Compaction,
    CompactionsV1,
    CompactionStatus,
    TieredCompactionContext,
    TieredCompactionSpec,
)
from slatedb.format.layout import FAILED_REASONS_DIR, failed_reason_key  # noqa: F401 (re-exported)
from slatedb.manifest.compaction import CompactionSpec, validate_spec
from slatedb.manifest.edit import CompactorFence
from slatedb.manifest.edits import ApplyCompaction, ClaimCompactorEpoch, apply_compaction, committed_already  # noqa: F401
from slatedb.manifest.segments import refuse_segments
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import OVERWRITE, ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import Runtime, probes, switches

import slatedb.compactor.lifecycle as lc
from .lifecycle import ACTIVE, TERMINAL
from .scheduler import CompactionScheduler, SizeTieredOptions, SizeTieredScheduler
from .store import CompactionsConflict, CompactionsStore, StoredCompactions
from .worker import RangeRunner, Worker

S = CompactionStatus


class CompactorEpochError(SlateDBError):
    """A ``.compactions`` file carries our own epoch at startup, or an older one after it:
    compactor epochs went backwards (CFENCE-3). Never expected; the compactor stops."""




class Compactor:
    """The coordinator and (unless ``local_worker=False``) one local worker. ``await start()``
    fences; ``await run()`` polls until cancelled or fenced; ``await run_until_idle()`` compacts
    until nothing is left to do (tests, CLI)."""

    def __init__(
        self,
        store: ObjectStore,
        runtime: Runtime,
        settings: Settings | None = None,
        *,
        scheduler: CompactionScheduler | None = None,
        on_commit: Callable[[StoredManifest], None] | None = None,
        local_worker: bool = True,
        runner: RangeRunner | None = None,
        merge_operator: Any = None,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.settings = settings or Settings()
        self.options: CompactorOptions = self.settings.compactor_options or CompactorOptions()
        self.scheduler = scheduler or SizeTieredScheduler(SizeTieredOptions.from_map(self.options.scheduler_options))
        self.manifests = ManifestStore(store, runtime)
        self.cstore = CompactionsStore(store, runtime)
        self.worker: Worker | None = Worker(store, runtime, self.settings, runner=runner,
                                                      merge_operator=merge_operator) if local_worker else None
        self.max_concurrent = self.options.max_concurrent_compactions
        self.timeout_ms = int(self.options.worker_heartbeat_timeout * 1000)
        self.on_commit = on_commit
        self.epoch: int | None = None
        self.fenced = False
        self._manifest: StoredManifest | None = None
        self._file: StoredCompactions | None = None
        self._lock = trio.Lock()
        self._wakeup = trio.Event()
        self._worker_wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._mine: set[ULID] = set()  # jobs this coordinator's scheduler proposed
        self._scheduling = True  # False: a ``--once`` run that left newer L0 SSTs (run_until_idle)
        self._stats = {"completed": 0, "failed": 0, "resumed": 0, "reclaimed": 0}
        #: The checkpoint ``ClaimCompactorEpoch`` wrote, once it landed: it makes the startup
        #: manifest's bytes ours alone and is needed only while that commit could be retried.
        #: Whoever stops this compactor cleanly drops it (the in-process writer's close,
        #: writer.md step 12, CKPT-5; ``run-compactor --once``, :func:`slatedb.admin.run_compactor`).
        self.startup_pin_id: uuid.UUID | None = None
        #: The checkpoint the claim carries, from before its commit: a stop that interrupts the
        #: commit may find it landed, ``startup_pin_id`` not yet set (:func:`slatedb.admin.run_compactor`).
        self.claim_pin_id: uuid.UUID | None = None

    @property
    def stats(self) -> dict:
        """Coordinator counts plus the local worker's (``output_ssts``, ``bytes_written``, ...)."""
        out = dict(self._stats)
        if self.worker is not None:
            out.update(self.worker.stats)
        out.setdefault("output_ssts", 0)
        out.setdefault("bytes_written", 0)
        return out

    # ------------------------------------------------------------------------------------------
    # Startup: fencing on both files
    # ------------------------------------------------------------------------------------------

    async def start(self) -> int:
        """Fence older compactors (steps 1 and 2); return our epoch."""
        latest = await self.manifests.read_latest()
        if latest is None:
            raise InvalidArgumentError("no database here: the compactor needs an existing manifest")
        refuse_segments(latest.manifest, self.store.url, "run a compactor")
        epoch = latest.manifest.compactor_epoch + 1
        # The startup manifest carries a fresh checkpoint (pinning the manifest it replaces, like
        # a commit's pin) so that its bytes are ours alone (ClaimCompactorEpoch, CFENCE-3).
        claim = ClaimCompactorEpoch(epoch, self.runtime.new_uuid(), self.options.checkpoint_lifetime)
        self.claim_pin_id = claim.pin_id
        try:
            self._manifest = (await self.manifests.commit(claim, current=latest)).stored
        except FencedError as e:
            raise self._fence(str(e)) from None
        self.epoch = epoch
        self.startup_pin_id = claim.pin_id
        while True:
            cur = await self.cstore.read_latest()
            base = cur.compactions if cur is not None else CompactionsV1(0, ())
            if base.compactor_epoch > epoch:
                raise self._fence(f"compactor epoch {epoch} lost to {base.compactor_epoch} (.compactions)")
            if base.compactor_epoch == epoch:
                raise CompactorEpochError(f".compactions {cur.id if cur else 0} already carries our epoch {epoch}")
            if cur is not None:
                lc.check_compactions(base, self.cstore.key(cur.id))
            if switches.COMPACTOR_NO_SECOND_BUMP in self.runtime.bugs:  # catalogued bug: manifest only
                self._file = cur
                break
            try:
                self._file = await self.cstore.try_write((cur.id if cur else 0) + 1, lc.coordinator_start(base, epoch))
                break
            except (CompactionsConflict, ObjectVersionBehindBoundaryError):
                continue
        if self._file is not None:
            self._stats["resumed"] += sum(1 for c in self._file.compactions.recent_compactions
                                          if c.status in ACTIVE and lc.outputs_in_order(c))
        self.runtime.event("compactor_started", epoch=epoch, pin=str(claim.pin_id))
        return epoch

    async def _read_manifest(self) -> StoredManifest:
        return await self.manifests.read_latest_required()

    def _fence(self, why: str) -> FencedError:
        self.fenced = True
        self.runtime.probe(probes.COMPACTOR_FENCED)
        self.runtime.event("compactor_fenced", epoch=self.epoch, why=why)
        return FencedError(why)

    def _check_epoch(self, value: CompactionsV1, file_id: int | str) -> None:
        e = value.compactor_epoch
        if e > self.epoch:  # type: ignore[operator]
            raise self._fence(f"compactor epoch {self.epoch} fenced by {e} (.compactions {file_id})")
        if e < self.epoch and switches.COMPACTOR_NO_SECOND_BUMP not in self.runtime.bugs:  # type: ignore[operator]
            self.runtime.event("panic", what="compactor epoch went backwards", found=e, ours=self.epoch)
            raise CompactorEpochError(f".compactions {file_id} has epoch {e} below ours {self.epoch}")

    async def _update(self, fn: lc.Transition) -> StoredCompactions | None:
        """A coordinator write: ``fn`` on the latest file, after the epoch check; our epoch."""
        def guarded(v: CompactionsV1) -> CompactionsV1 | None:
            self._check_epoch(v, "latest")
            new = fn(v)
            if new is None or switches.COMPACTOR_NO_SECOND_BUMP in self.runtime.bugs:
                return new
            return attrs.evolve(new, compactor_epoch=self.epoch)
        self._file = await self.cstore.update(guarded)
        return self._file

    # ------------------------------------------------------------------------------------------
    # The loop
    # ------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Start (if not yet), then poll until cancelled. Returns when fenced."""
        if self.epoch is None:
            try:
                await self.start()
            except FencedError:
                return
        fenced = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.worker is not None:
                    nursery.start_soon(self._worker_loop)
                while True:
                    await self.tick()
                    busy = any(c.status in ACTIVE for c in self._jobs())
                    interval = self.options.commit_compacted_interval if busy else self.options.poll_interval
                    await self.runtime.wait_event(self._wakeup, interval)
                    self._wakeup = trio.Event()
        except* FencedError:
            fenced = True  # a newer compactor took over: stop quietly
        finally:
            self._nursery = None
        assert fenced

    async def _worker_loop(self) -> None:
        """The local worker: claim after each tick (woken), and at its own jittered interval."""
        assert self.worker is not None and self._nursery is not None
        w = self.worker
        try:
            while True:
                for cid in await w.step():
                    self._nursery.start_soon(self._run_job, cid)
                await self.runtime.wait_event(self._worker_wakeup, w.poll_wait_s())
                self._worker_wakeup = trio.Event()
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await w.release_all()
                except SlateDBError:
                    pass

    async def _run_job(self, cid: ULID) -> None:
        assert self.worker is not None
        try:
            await self.worker.run_job(cid)
        finally:
            self._wakeup.set()

    def wake(self) -> None:
        """Poll now rather than at the next interval (the in-process writer calls this after
        committing an L0 SST)."""
        self._wakeup.set()

    def _jobs(self) -> tuple[Compaction, ...]:
        return self._file.compactions.recent_compactions if self._file is not None else ()

    async def run_until_idle(self, *, leave_new_l0: bool = False) -> int:
        """Compact until no job is active and the scheduler proposes nothing; return how many
        compactions finished (Completed or Failed). For tests and ``slatedb run-compactor --once``.

        ``leave_new_l0`` (``--once``): compact what the database held at the first tick; once
        every L0 SST it saw then has left L0 while newer ones arrived (a writer goes on
        flushing), schedule nothing more and end when the jobs running end. Without it a steady
        writer always gives the scheduler more to do, and a ``--once`` run never ended."""
        if self.epoch is None:
            await self.start()
        done_before = self._stats["completed"] + self._stats["failed"]
        self._worker_wakeup = trio.Event()
        seen_l0: set | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                while True:
                    await self.tick()
                    if leave_new_l0 and self._scheduling:
                        l0 = {v.id for v in self._manifest.manifest.l0}
                        if seen_l0 is None:
                            seen_l0 = l0
                        elif not (seen_l0 & l0) and l0 - seen_l0:
                            self._scheduling = False  # what was there is compacted; the rest is new
                            self.runtime.event("compactor_left_new_l0", l0=len(l0))
                    if self.worker is not None:
                        for cid in await self.worker.step():
                            nursery.start_soon(self._run_job, cid)
                    if not any(c.status in ACTIVE for c in self._jobs()):
                        break
                    await self.runtime.wait_event(self._wakeup, self.options.commit_compacted_interval)
                    self._wakeup = trio.Event()
        except BaseExceptionGroup as group:
            raise sole_exception(group) from None
        finally:
            self._nursery = None
            self._scheduling = True
        return self._stats["completed"] + self._stats["failed"] - done_before

    async def tick(self) -> None:
        """One coordinator tick (step 3)."""
        assert self.epoch is not None
        async with self._lock:
            cur = await self.cstore.read_latest()
            if cur is not None:
                self._check_epoch(cur.compactions, cur.id)
                lc.check_compactions(cur.compactions, self.cstore.key(cur.id))
            self._file = cur
            latest = await self._read_manifest()
            if latest.manifest.compactor_epoch > self.epoch:
                raise self._fence(f"compactor epoch {self.epoch} fenced by {latest.manifest.compactor_epoch} (manifest)")
            self._manifest = latest
            await self._reclaim()
            for c in [c for c in self._jobs() if c.status is S.COMPACTED]:
                await self._commit(c)
            if self._scheduling:
                await self._schedule()
            await self._validate()
        self._worker_wakeup.set()

    # -- 3a ---------------------------------------------------------------------------------------

    async def _reclaim(self) -> None:
        now_ms = self.runtime.now_ms()
        stale = lc.reclaim(self._file.compactions, now_ms, self.timeout_ms)[1] if self._file is not None else []
        if not stale:
            return
        reclaimed: list[ULID] = []

        def fn(v: CompactionsV1) -> CompactionsV1 | None:
            new, ids = lc.reclaim(v, now_ms, self.timeout_ms)
            reclaimed[:] = ids
            return new if ids else None

        await self._update(fn)
        for cid in reclaimed:
            self._stats["reclaimed"] += 1
            self.runtime.probe(probes.COMPACTOR_RECLAIMED)
            self.runtime.event("compaction_reclaimed", id=str(cid))
            self.runtime.event("compaction_state", id=str(cid), status="Scheduled", reclaimed=True)

    # -- 3b ---------------------------------------------------------------------------------------

    async def _commit(self, c: Compaction) -> None:
        """Manifest first, ``.compactions`` second (COMPACT-2). A job whose outputs the manifest
        already holds (its commit landed, then its coordinator stopped before ``.compactions``
        said so) is recorded Completed without a manifest write (COMPACT-10)."""
        spec = CompactionSpec.from_format(c.spec)  # type: ignore[arg-type]
        outputs = c.output_ssts
        stale = [o for o in outputs if o.id.milliseconds < c.id.milliseconds]
        invalid: str | None = None
        if stale:
            invalid = f"invalid clock tick: output {stale[0].id} is older than its job {c.id}"
        else:
            edit = ApplyCompaction(
                None if switches.COMPACTOR_NO_COMMIT_FENCE in self.runtime.bugs else CompactorFence(self.epoch),  # catalogued bug
                spec, outputs, pin_id=self.runtime.new_uuid(), pin_lifetime_s=self.options.checkpoint_lifetime,
                revalidate=switches.COMPACTION_NO_REVALIDATE not in self.runtime.bugs,  # catalogued bug (sim/scenarios/catalogue.py)
                committed_first=switches.COMPACTION_RECOMMIT_FAILS not in self.runtime.bugs,  # catalogued bug
                empty_recognised=switches.EMPTY_RECOMMIT_FAILS not in self.runtime.bugs,  # catalogued bug
            )
            try:
                committed = await self.manifests.commit(edit, current=self._manifest)
            except FencedError as e:
                raise self._fence(str(e)) from None
            invalid = committed.result.invalid  # COMPACT-3: inputs changed
        if invalid:
            await self._record_reason(c.id, f"at commit: {invalid}")
            await self._update(lambda v: lc.set_status(v, c.id, S.FAILED))
            self._stats["failed"] += 1
            self.runtime.event("compaction_state", id=str(c.id), status="Failed")
            return
        stored = committed.stored
        self._manifest = stored
        if committed.result.already:  # COMPACT-10: committed before a restart; its run is the database's
            self.runtime.probe(probes.COMPACTOR_RECOMMIT_COMPLETED)
            if not outputs:  # an empty job: recognised by its sources gone (empty_commit_landed)
                self.runtime.probe(probes.COMPACTOR_RECOMMIT_EMPTY)
            await self._update(lambda v: lc.set_status(v, c.id, S.COMPLETED))
            self._stats["completed"] += 1
            self.runtime.event("compaction_state", id=str(c.id), status="Completed", already=True)
            return
        self.runtime.event("compaction_commit", id=str(c.id), manifest=stored.id, outputs=[str(o.id) for o in outputs])
        if self.runtime.metrics is not None:
            self.runtime.metrics.inc("compactions")
            self.runtime.metrics.inc("compaction_bytes", sum(o.info.index_offset + o.info.index_len for o in outputs))
        await self._update(lambda v: lc.set_status(v, c.id, S.COMPLETED))
        self._stats["completed"] += 1
        self.runtime.event("compaction_state", id=str(c.id), status="Completed")
        if self.on_commit is not None:
            self.on_commit(stored)

    # -- 3c ---------------------------------------------------------------------------------------

    async def _schedule(self) -> None:
        manifest = self._manifest.manifest  # type: ignore[union-attr]
        jobs = self._jobs()
        active = [CompactionSpec.from_format(c.spec) for c in jobs
                  if c.status in ACTIVE and isinstance(c.spec, TieredCompactionSpec)]
        capacity = self.max_concurrent - sum(1 for c in jobs if c.status in ACTIVE)
        if capacity <= 0:
            return
        specs = self.scheduler.propose(manifest, active, capacity)
        if not specs:
            return
        new = [Compaction(id=self.runtime.new_ulid(), spec=spec.to_format(), status=S.SUBMITTED) for spec in specs]

        def fn(v: CompactionsV1) -> CompactionsV1:
            floor = max((c.id.milliseconds for c in v.recent_compactions), default=0)
            for i, c in enumerate(new):  # ULID rule: no job id older than the newest existing one
                if c.id.milliseconds < floor:
                    new[i] = attrs.evolve(c, id=lc.ulid_not_before(self.runtime, floor))
                floor = max(floor, new[i].id.milliseconds)
            return attrs.evolve(v, recent_compactions=v.recent_compactions + tuple(new))

        await self._update(fn)
        self._mine |= {c.id for c in new}
        for c, spec in zip(new, specs):
            self.runtime.event("compaction_state", id=str(c.id), status="Submitted", spec=spec.render())

    # -- 3d ---------------------------------------------------------------------------------------

    def _decide(self, jobs: tuple[Compaction, ...]) -> tuple[dict[ULID, str], list[ULID], list[ULID]]:
        """(reasons of the Submitted jobs that fail, Submitted jobs to schedule, Scheduled jobs
        whose sources changed)."""
        manifest = self._manifest.manifest  # type: ignore[union-attr]
        busy = [CompactionSpec.from_format(c.spec) for c in jobs
                if c.status in (S.SCHEDULED, S.RUNNING, S.COMPACTED) and isinstance(c.spec, TieredCompactionSpec)]
        n_busy = sum(1 for c in jobs if c.status in (S.SCHEDULED, S.RUNNING, S.COMPACTED))
        fail: dict[ULID, str] = {}
        go: list[ULID] = []
        unschedule: list[ULID] = []
        for c in jobs:
            if c.status is S.SCHEDULED and isinstance(c.spec, TieredCompactionSpec):
                spec = CompactionSpec.from_format(c.spec)
                if validate_spec(spec, manifest) or committed_already(manifest, lc.outputs_in_order(c)):
                    unschedule.append(c.id)
        for c in jobs:
            if c.status is not S.SUBMITTED:
                continue
            if not isinstance(c.spec, TieredCompactionSpec):
                fail[c.id] = "segment drain compactions are not supported"
                continue
            spec = CompactionSpec.from_format(c.spec)
            reason = (validate_spec(spec, manifest, busy) or self.scheduler.validate(manifest, spec)
                      or committed_already(manifest, lc.outputs_in_order(c)))
            if c.ctx is not None and switches.COMPACTION_NO_REVALIDATE in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                reason = None
            if reason is not None:
                fail[c.id] = reason
            elif n_busy + len(go) < self.max_concurrent:
                go.append(c.id)
                busy.append(spec)
        return fail, go, unschedule

    async def _validate(self) -> None:
        fail, go, unschedule = self._decide(self._jobs())
        if not (fail or go or unschedule):
            return
        for cid, reason in fail.items():
            await self._record_reason(cid, reason)
        retention = self._manifest.manifest.recent_snapshot_min_seq  # type: ignore[union-attr]
        done: dict[ULID, S] = {}

        def fn(v: CompactionsV1) -> CompactionsV1 | None:
            done.clear()
            changed = False
            for c in v.recent_compactions:
                if c.id in unschedule and c.status is S.SCHEDULED:
                    v = lc.set_status(v, c.id, S.SUBMITTED, worker=None)
                    changed = True
            for c in v.recent_compactions:
                if c.status is not S.SUBMITTED:
                    continue
                if c.id in fail:
                    v, done[c.id] = lc.set_status(v, c.id, S.FAILED), S.FAILED
                elif c.id in go:
                    ctx = c.ctx if c.ctx is not None else TieredCompactionContext((), retention)
                    v, done[c.id] = lc.set_status(v, c.id, S.SCHEDULED, ctx=ctx), S.SCHEDULED
            return v if (done or changed) else None

        await self._update(fn)
        for cid, st in done.items():
            if cid not in self._mine:  # submitted by another process (admin, another engine)
                self.runtime.probe(probes.COMPACTOR_EXTERNAL_ADOPTED)
            if st is S.FAILED:
                self._stats["failed"] += 1
            self.runtime.event("compaction_state", id=str(cid), status=st.name.title())
        if unschedule:
            self._wakeup.set()  # their validation fails them at the next tick

    async def _record_reason(self, compaction_id: ULID, reason: str) -> None:
        """Failed compactions keep their reason next to the job state (the format has no field
        for it): ``compactions/failed/<id>.json``."""
        self.runtime.probe(probes.COMPACTOR_INVALID)
        self.runtime.event("compaction_invalid", id=str(compaction_id), reason=reason)
        body = json.dumps({"id": str(compaction_id), "reason": reason}).encode()
        key = failed_reason_key(compaction_id)
        await retry_transient(self.runtime, lambda: self.store.put(key, body, OVERWRITE), what=f"put {key}")
