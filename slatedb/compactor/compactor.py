"""The compactor process: fencing, the poll loop, persisted job state, commit (RFC 002, 003).

Steps (spec/protocols/compaction.md):

1. **Fence, manifest first.** Read the latest manifest, take ``E = compactor_epoch + 1`` and
   commit it. If the id was taken, re-read: a compactor epoch ``>= E`` means another compactor
   started after us, so we are fenced; otherwise retry with the same ``E``.
2. **Fence, then ``.compactions``.** Read the latest ``.compactions``: an epoch ``> E`` fences
   us, ``== E`` is impossible (someone wrote our epoch: panic); write ``E`` with every
   ``Running`` compaction flipped back to ``Submitted`` (kept outputs: it will resume).
3. **Poll** every ``poll_interval``: refresh ``.compactions`` (adopting externally submitted
   ``Submitted`` entries), then the manifest (a newer compactor epoch fences us).
4. **Schedule**: the scheduler proposes specs; they are recorded as ``Submitted``.
5. **Start**: each ``Submitted`` compaction, up to ``max_concurrent_compactions`` running, is
   validated against the manifest (invalid: ``Failed``, reason recorded); valid ones become
   ``Running`` with their ``retention_min_seq`` fixed in ``ctx``.
6. **Progress**: after each output SST, ``.compactions`` records the outputs so far.
7. **Finish**: commit the manifest (inputs replaced by the output run, re-validated against
   the latest manifest: inputs gone means ``Failed``), *then* record ``Completed`` and trim
   finished entries to the most recent one.

Every ``.compactions`` write that loses the create race re-reads the latest file: a higher
epoch fences us, a lower one is a broken invariant (panic), our own epoch means someone
appended a submission: adopt it and retry.

Events for the simulator: ``compactor_started(epoch)``, ``compactor_fenced``,
``compaction_state(id, status)``, ``compaction_commit(id, manifest)``, plus the store's
``create``/``commit`` events with ``epoch``.
"""

from __future__ import annotations

import json
from typing import Callable

import attrs
import trio
from ulid import ULID

from slatedb.config import CompactorOptions, Settings
from slatedb.errors import (
    FencedError,
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectVersionBehindBoundaryError,
    SlateDBError,
    sole_exception,
)
from slatedb.format.types import (
    CompactedSsTable,
    Compaction,
    CompactionsV1,
    CompactionStatus,
    ManifestV2,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    BytesBound,
    BytesRange,
    BoundType,
)
from slatedb.format.layout import FAILED_REASONS_DIR, failed_reason_key  # noqa: F401 (re-exported)
from slatedb.format.sst import sst_options_of
from slatedb.manifest.compaction import CompactionSpec, validate_spec
from slatedb.manifest.edit import CompactorFence
from slatedb.manifest.edits import ApplyCompaction, ClaimCompactorEpoch, apply_compaction, committed_already
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import OVERWRITE, ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import Runtime, probes, switches

from .executor import CompactionFailed, Executor, Job, is_bottom
from .scheduler import CompactionScheduler, SizeTieredOptions, SizeTieredScheduler, sst_size_bytes
from .store import TERMINAL, CompactionsConflict, CompactionsStore, StoredCompactions

S = CompactionStatus
ACTIVE = frozenset({S.SUBMITTED, S.RUNNING})

_FULL_RANGE = BytesRange(BytesBound(None, BoundType.UNBOUNDED), BytesBound(None, BoundType.UNBOUNDED))


class CompactorEpochError(SlateDBError):
    """A ``.compactions`` file carries our own epoch at startup, or an older one after it:
    compactor epochs went backwards (CFENCE-3). Never expected; the compactor stops."""


class Compactor:
    """One compactor. ``await start()`` fences; ``await run()`` polls until cancelled or
    fenced; ``await run_until_idle()`` compacts until nothing is left to do (tests, CLI)."""

    def __init__(
        self,
        store: ObjectStore,
        runtime: Runtime,
        settings: Settings | None = None,
        *,
        scheduler: CompactionScheduler | None = None,
        on_commit: Callable[[StoredManifest], None] | None = None,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.settings = settings or Settings()
        self.options: CompactorOptions = self.settings.compactor_options or CompactorOptions()
        self.scheduler = scheduler or SizeTieredScheduler(SizeTieredOptions.from_map(self.options.scheduler_options))
        self.manifests = ManifestStore(store, runtime)
        self.cstore = CompactionsStore(store, runtime)
        self.executor = Executor(store, runtime)
        worker = self.options.worker
        self.sst_options = sst_options_of(self.settings, min_filter_keys=worker.min_filter_keys)
        if worker.compression_codec is not None:
            self.sst_options = attrs.evolve(self.sst_options, compression=sst_options_of(
                attrs.evolve(self.settings, compression_codec=worker.compression_codec)).compression)
        self.max_sst_size_bytes = worker.max_sst_size
        self.max_concurrent = self.options.max_concurrent_compactions
        self.on_commit = on_commit
        self.epoch: int | None = None
        self.fenced = False
        self._manifest: StoredManifest | None = None
        self._cid = 0  # id of the last .compactions file we read or wrote
        self._state: dict[ULID, Compaction] = {}
        self._running: dict[ULID, trio.CancelScope] = {}
        self._lock = trio.Lock()
        self._wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.stats = {"completed": 0, "failed": 0, "resumed": 0, "output_ssts": 0, "bytes_written": 0}

    # ------------------------------------------------------------------------------------------
    # Startup: fencing on both files
    # ------------------------------------------------------------------------------------------

    async def start(self) -> int:
        """Fence older compactors (steps 1 and 2); return our epoch."""
        latest = await self.manifests.read_latest()
        if latest is None:
            raise InvalidArgumentError("no database here: the compactor needs an existing manifest")
        epoch = latest.manifest.compactor_epoch + 1
        # The startup manifest carries a fresh checkpoint (pinning the manifest it replaces, like
        # a commit's pin) so that its bytes are ours alone (ClaimCompactorEpoch, CFENCE-3).
        claim = ClaimCompactorEpoch(epoch, self.runtime.new_uuid(), self.options.checkpoint_lifetime)
        try:
            self._manifest = (await self.manifests.commit(claim, current=latest)).stored
        except FencedError as e:
            raise self._fence(str(e)) from None
        self.epoch = epoch
        bump = self._bug_keep_compactions if switches.COMPACTOR_NO_SECOND_BUMP in self.runtime.bugs else self._bump_compactions
        while True:
            cur = await self.cstore.read_latest()
            base = cur.compactions if cur is not None else CompactionsV1(0, ())
            if base.compactor_epoch > epoch:
                raise self._fence(f"compactor epoch {epoch} lost to {base.compactor_epoch} (.compactions)")
            if base.compactor_epoch == epoch:
                raise CompactorEpochError(f".compactions {cur.id if cur else 0} already carries our epoch {epoch}")
            for c in base.recent_compactions:
                if c.status is S.RUNNING:  # interrupted: resume it from its outputs
                    c = attrs.evolve(c, status=S.SUBMITTED)
                self._state[c.id] = c
            try:
                self._cid = await bump(cur, epoch)
                break
            except (CompactionsConflict, ObjectVersionBehindBoundaryError):
                self._state.clear()
        self.stats["resumed"] += sum(1 for c in self._state.values() if c.status is S.SUBMITTED and c.output_ssts)
        self.runtime.event("compactor_started", epoch=epoch)
        return epoch

    async def _bump_compactions(self, cur: StoredCompactions | None, epoch: int) -> int:
        """Step 2: write the next ``.compactions`` with our epoch and the adopted state; its id."""
        stored = await self.cstore.try_write((cur.id if cur else 0) + 1, CompactionsV1(epoch, tuple(self._state.values())))
        return stored.id

    async def _bug_keep_compactions(self, cur: StoredCompactions | None, epoch: int) -> int:
        """Catalogued bug ``compactor-no-second-bump`` (sim/scenarios/catalogue.py): the epoch is bumped in the
        manifest only; ``.compactions`` keeps the older compactor's epoch."""
        return cur.id if cur is not None else 0

    async def _read_manifest(self) -> StoredManifest:
        latest = await self.manifests.read_latest()
        assert latest is not None
        return latest

    def _fence(self, why: str) -> FencedError:
        self.fenced = True
        self.runtime.probe(probes.COMPACTOR_FENCED)
        self.runtime.event("compactor_fenced", epoch=self.epoch, why=why)
        return FencedError(why)

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
                while True:
                    await self.tick()
                    await self.runtime.wait_event(self._wakeup, self.options.poll_interval)
                    self._wakeup = trio.Event()
        except* FencedError:
            fenced = True  # a newer compactor took over: stop quietly
        finally:
            self._nursery = None
        assert fenced

    def wake(self) -> None:
        """Poll now rather than at the next interval (the in-process writer calls this after
        committing an L0 SST)."""
        self._wakeup.set()

    async def run_until_idle(self) -> int:
        """Compact until the scheduler proposes nothing and nothing runs; return how many
        compactions completed. For tests and ``slatedb run-compactor --once``."""
        if self.epoch is None:
            await self.start()
        done_before = self.stats["completed"] + self.stats["failed"]
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                while True:
                    await self.tick()
                    if not self._running:
                        break
                    await self._wakeup.wait()
                    self._wakeup = trio.Event()
        except BaseExceptionGroup as group:
            raise sole_exception(group) from None
        finally:
            self._nursery = None
        return self.stats["completed"] + self.stats["failed"] - done_before

    async def tick(self) -> None:
        """One poll: refresh both files, schedule, start what can start."""
        assert self.epoch is not None and self._nursery is not None
        async with self._lock:
            await self._refresh()
            manifest = self._manifest.manifest  # type: ignore[union-attr]
            active = [CompactionSpec.from_format(c.spec) for c in self._state.values()
                      if c.status in ACTIVE and isinstance(c.spec, TieredCompactionSpec)]
            capacity = self.max_concurrent - sum(1 for c in self._state.values() if c.status in ACTIVE)
            changed = False
            if capacity > 0:
                for spec in self.scheduler.propose(manifest, active, capacity):
                    c = Compaction(id=self.runtime.new_ulid(), spec=spec.to_format(), status=S.SUBMITTED)
                    self._state[c.id] = c
                    self.runtime.event("compaction_state", id=str(c.id), status="Submitted", spec=spec.render())
                    changed = True
            if changed:
                await self._write_compactions()
            await self._start_submitted()

    async def _refresh(self) -> None:
        cur = await self.cstore.read_latest()
        if cur is not None and cur.id != self._cid:
            self._check_epoch(cur)
            self._adopt_submissions(cur)
            self._cid = max(self._cid, cur.id)
        latest = await self._read_manifest()
        if latest.manifest.compactor_epoch > self.epoch:  # type: ignore[operator]
            raise self._fence(f"compactor epoch {self.epoch} fenced by {latest.manifest.compactor_epoch} (manifest)")
        self._manifest = latest

    def _check_epoch(self, cur: StoredCompactions) -> None:
        e = cur.compactions.compactor_epoch
        if e > self.epoch:  # type: ignore[operator]
            raise self._fence(f"compactor epoch {self.epoch} fenced by {e} (.compactions)")
        if e < self.epoch and switches.COMPACTOR_NO_SECOND_BUMP not in self.runtime.bugs:  # type: ignore[operator]
            self.runtime.event("panic", what="compactor epoch went backwards", found=e, ours=self.epoch)
            raise CompactorEpochError(f".compactions {cur.id} has epoch {e} below ours {self.epoch}")

    def _adopt_submissions(self, cur: StoredCompactions) -> None:
        for c in cur.compactions.recent_compactions:
            if c.status is S.SUBMITTED and c.id not in self._state:
                self._state[c.id] = c
                self.runtime.probe(probes.COMPACTOR_EXTERNAL_ADOPTED)
                self.runtime.event("compaction_state", id=str(c.id), status="Submitted", external=True)

    async def _write_compactions(self) -> None:
        """Write our state as the next ``.compactions`` (lock held); see the module docstring."""
        while True:
            new = CompactionsV1(self.epoch, tuple(self._state.values()))  # type: ignore[arg-type]
            try:
                stored = await self.cstore.try_write(self._cid + 1, new)
                self._cid = stored.id
                return
            except (CompactionsConflict, ObjectVersionBehindBoundaryError):
                cur = await self.cstore.read_latest()
                assert cur is not None
                self._check_epoch(cur)
                self._adopt_submissions(cur)
                self._cid = cur.id

    def _set(self, c: Compaction, **changes) -> Compaction:
        new = attrs.evolve(c, **changes)
        assert c.status not in TERMINAL, f"COMPACT-1: {c.id} is already {c.status.name}"
        if new.status in TERMINAL:
            del self._state[c.id]  # re-inserted last: _trim keeps the most recently finished
        self._state[c.id] = new
        if new.status != c.status:
            self.runtime.event("compaction_state", id=str(c.id), status=new.status.name.title())
        return new

    # ------------------------------------------------------------------------------------------
    # Starting compactions
    # ------------------------------------------------------------------------------------------

    async def _start_submitted(self) -> None:
        manifest = self._manifest.manifest  # type: ignore[union-attr]
        changed = False
        to_run: list[Compaction] = []
        for c in list(self._state.values()):
            if c.status is not S.SUBMITTED:
                continue
            if len(self._running) + len(to_run) >= self.max_concurrent:
                break
            if not isinstance(c.spec, TieredCompactionSpec):
                reason = "segment drain compactions are not supported"
            else:
                spec = CompactionSpec.from_format(c.spec)
                busy = [CompactionSpec.from_format(self._state[i].spec) for i in self._running]
                busy += [CompactionSpec.from_format(r.spec) for r in to_run]
                reason = (validate_spec(spec, manifest, busy) or self.scheduler.validate(manifest, spec)
                          or committed_already(manifest, c.output_ssts))
                if c.ctx is not None and switches.COMPACTION_NO_REVALIDATE in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                    reason = None
            if reason is not None:
                await self._record_reason(c.id, reason)
                self._set(c, status=S.FAILED)
                self.stats["failed"] += 1
                changed = True
                continue
            ctx = c.ctx if c.ctx is not None else TieredCompactionContext(
                (Subcompaction(_FULL_RANGE, c.output_ssts),), manifest.recent_snapshot_min_seq)
            to_run.append(self._set(c, status=S.RUNNING, ctx=ctx))
            changed = True
        if changed:
            self._trim()
            await self._write_compactions()
        for c in to_run:
            scope = trio.CancelScope()
            self._running[c.id] = scope
            self._nursery.start_soon(self._execute, c.id, scope, manifest)  # type: ignore[union-attr]

    async def _record_reason(self, compaction_id: ULID, reason: str) -> None:
        """Failed compactions keep their reason next to the job state (the format has no field
        for it): ``compactions/failed/<id>.json``."""
        self.runtime.probe(probes.COMPACTOR_INVALID)
        self.runtime.event("compaction_invalid", id=str(compaction_id), reason=reason)
        body = json.dumps({"id": str(compaction_id), "reason": reason}).encode()
        key = failed_reason_key(compaction_id)
        await retry_transient(self.runtime, lambda: self.store.put(key, body, OVERWRITE), what=f"put {key}")

    # ------------------------------------------------------------------------------------------
    # Executing one compaction
    # ------------------------------------------------------------------------------------------

    async def _execute(self, compaction_id: ULID, scope: trio.CancelScope, manifest: ManifestV2) -> None:
        try:
            with scope:
                c = self._state[compaction_id]
                spec = CompactionSpec.from_format(c.spec)  # type: ignore[arg-type]
                assert c.ctx is not None
                job = Job(
                    compaction_id=compaction_id,
                    spec=spec,
                    manifest=manifest,
                    retention_min_seq=c.ctx.retention_min_seq,
                    bottom=is_bottom(manifest, spec),
                    now_ms=self.runtime.now_ms(),
                    max_sst_size_bytes=self.max_sst_size_bytes,
                    sst_options=self.sst_options,
                    resume_outputs=c.output_ssts,
                )

                async def progress(outputs: tuple[CompactedSsTable, ...]) -> None:
                    self.stats["output_ssts"] += 1
                    self.stats["bytes_written"] += sst_size_bytes(outputs[-1].info)
                    async with self._lock:
                        cur = self._state[compaction_id]
                        self._set(cur, output_ssts=outputs, ctx=attrs.evolve(
                            cur.ctx, subcompactions=(Subcompaction(_FULL_RANGE, outputs),)))
                        await self._write_compactions()

                try:
                    outputs = await self.executor.run(job, progress)
                    await self._finish(compaction_id, spec, outputs)
                except (CompactionFailed, ObjectNotFoundError, NotImplementedError) as e:
                    async with self._lock:
                        await self._record_reason(compaction_id, f"{type(e).__name__}: {e}")
                        self._set(self._state[compaction_id], status=S.FAILED)
                        self.stats["failed"] += 1
                        self._trim()
                        await self._write_compactions()
        finally:
            self._running.pop(compaction_id, None)
            self._wakeup.set()

    async def _finish(self, compaction_id: ULID, spec: CompactionSpec, outputs: tuple[CompactedSsTable, ...]) -> None:
        """Manifest first, ``.compactions`` second (COMPACT-2)."""
        async with self._lock:
            epoch = self.epoch
            edit = ApplyCompaction(
                None if switches.COMPACTOR_NO_COMMIT_FENCE in self.runtime.bugs else CompactorFence(epoch),  # catalogued bug
                spec, outputs, pin_id=self.runtime.new_uuid(), pin_lifetime_s=self.options.checkpoint_lifetime,
                revalidate=switches.COMPACTION_NO_REVALIDATE not in self.runtime.bugs,  # catalogued bug (sim/scenarios/catalogue.py)
            )
            try:
                committed = await self.manifests.commit(edit, current=self._manifest)
            except FencedError as e:
                raise self._fence(str(e)) from None
            stored, invalid = committed.stored, committed.result  # COMPACT-3: inputs changed (e.g. committed before a crash)
            if invalid:
                await self._record_reason(compaction_id, f"at commit: {invalid}")
                self._set(self._state[compaction_id], status=S.FAILED)
                self.stats["failed"] += 1
            else:
                self._manifest = stored
                self.runtime.event("compaction_commit", id=str(compaction_id), manifest=stored.id,
                                   outputs=[str(o.id) for o in outputs])
                if self.runtime.metrics is not None:
                    self.runtime.metrics.inc("compactions")
                    self.runtime.metrics.inc("compaction_bytes", sum(o.info.index_offset + o.info.index_len for o in outputs))
                self._set(self._state[compaction_id], status=S.COMPLETED, output_ssts=outputs)
                self.stats["completed"] += 1
            self._trim()
            await self._write_compactions()
        if not invalid and self.on_commit is not None:
            self.on_commit(stored)

    def _trim(self) -> None:
        """Keep every active compaction and the most recently finished one (RFC 002, for GC)."""
        finished = [cid for cid, c in self._state.items() if c.status in TERMINAL]
        for cid in finished[:-1]:
            del self._state[cid]



