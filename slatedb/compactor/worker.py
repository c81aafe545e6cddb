"""A compaction worker of the official coordinator/worker protocol (spec/protocols/compaction.md,
worker steps W1-W6).

W1 **Claim**: poll ``.compactions`` (every ``worker.compactions_poll_interval``, jittered in
   [0.5, 1.5]x); claim up to ``worker.max_concurrent_compactions`` Scheduled jobs with no worker,
   one CAS each: Running, our worker id (a ULID), heartbeat now.
W2 **Check after the claim**: read the manifest; release the job (back to Scheduled) when its
   sources no longer match.
W3 **Plan**: a job with recorded ranges keeps them (resume); else ranges are cut at anchor keys
   (:mod:`slatedb.compactor.subcompactions`, ``worker.max_subcompactions``).
W4 **Run** every range at once through the merge (:class:`RangeRunner`: in process from the
   readers W3 opened, so each input's footer and index is read once per job (COMPACT-8), or one
   Spark task per range), a range with outputs restarting after its last output's last ``(key, seq)``.
W5 **Heartbeat** every ``worker.heartbeat_interval`` (and after each output, so that progress is
   never older than one output SST): re-read; a job gone or owned by another worker id is
   stopped; else write the heartbeat and the progress (``ctx``) by CAS. The heartbeat is the only
   writer of progress.
W6 **Finish**: re-read; if the job is gone or not ours the result is dropped (its outputs are
   garbage, collected by GC after ``min_age``); else write Compacted with every range's outputs
   concatenated in range order. On shutdown, owned jobs are released to Scheduled.

A job whose run fails with :class:`CompactionFailed` (a merge operator that raises, MERGE-7: the
same inputs fail the same way) is released and not claimed again by this worker for a backoff
that doubles per failure (:meth:`Worker.retry_in_s`, from twice the poll interval up to
:data:`MAX_FAILED_BACKOFF_S`); the typed error is reported once at ERROR
(``compaction_worker_failed``), its repeats at DEBUG (``compaction_worker_failed_again``), and
kept in :attr:`Worker.failing`. A worker started afresh (the operator fixed) claims it at once.

Workers never change ``compactor_epoch`` (they keep the file's).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol, Sequence

import attrs
import trio
from ulid import ULID

from slatedb.config import CompactorOptions, Settings
from slatedb.merge_operator import merge_operator_of
from slatedb.errors import ObjectNotFoundError, sole_exception
from slatedb.format.sst import SstOptions, sst_options_of
from slatedb.format.types import (
    CompactedSsTable,
    Compaction,
    CompactionStatus,
    ManifestV2,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatedb.manifest.compaction import CompactionSpec, validate_spec
from slatedb.manifest.edits import committed_already
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime, probes, switches

import slatedb.compactor.lifecycle as lc
from .executor import CompactionFailed, Executor, InputReaders, Job, expiry_clock_ms, is_bottom
from .scheduler import sst_size_bytes
from .store import CompactionsStore
from .subcompactions import plan_ranges

S = CompactionStatus

#: The longest wait before a worker claims again a job whose run failed (5 minutes).
MAX_FAILED_BACKOFF_S = 300.0


@attrs.frozen
class FailedJob:
    """A job this worker ran and saw fail: the typed error, how often, and when it may claim it again."""

    error: CompactionFailed
    failures: int
    retry_at_s: float

#: ``on_output(range_index, outputs_of_that_range_so_far)``
OnOutput = Callable[[int, tuple[CompactedSsTable, ...]], Awaitable[None]]


@attrs.frozen
class RangeTask:
    """One subcompaction to run: the job fixed at the claim, the range, its recorded outputs.
    ``readers``: the input SSTs the worker opened to plan the job, for ranges merged in this
    process (a Spark task opens its own)."""

    index: int
    job: Job
    readers: InputReaders | None = attrs.field(default=None, eq=False, repr=False)


class RangeRunner(Protocol):
    async def run_ranges(self, tasks: Sequence[RangeTask], on_output: OnOutput) -> list[tuple[CompactedSsTable, ...]]:
        """Run every range; return each range's outputs (all of them, recorded ones first)."""


class LocalRanges:
    """Ranges merged in this process, all at once (as Spark runs them), from the input SSTs
    opened to plan the job (W4)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def run_ranges(self, tasks: Sequence[RangeTask], on_output: OnOutput) -> list[tuple[CompactedSsTable, ...]]:
        results: dict[int, tuple[CompactedSsTable, ...]] = {}

        async def one(t: RangeTask) -> None:
            async def cb(outputs: tuple[CompactedSsTable, ...]) -> None:
                await on_output(t.index, outputs)
            results[t.index] = await self.executor.run(t.job, cb, t.readers)

        try:
            async with trio.open_nursery() as nursery:
                for t in tasks:
                    nursery.start_soon(one, t)
        except BaseExceptionGroup as group:
            error = sole_exception(group)
            while isinstance(error, BaseExceptionGroup):  # several ranges failed at once: the first
                error = error.exceptions[0]
            raise error from None
        return [results[t.index] for t in tasks]


def output_options(settings: Settings) -> tuple[SstOptions, int]:
    """SST options and cut size of compaction outputs (``compactor_options.worker``)."""
    options = settings.compactor_options or CompactorOptions()
    worker = options.worker
    sst_options = sst_options_of(settings, min_filter_keys=worker.min_filter_keys)
    if worker.compression_codec is not None:
        sst_options = attrs.evolve(sst_options, compression=sst_options_of(
            attrs.evolve(settings, compression_codec=worker.compression_codec)).compression)
    return sst_options, worker.max_sst_size


class Worker:
    """Claims and runs Scheduled compactions. ``await step()`` claims what it can and returns the
    claimed ids (run them with :meth:`run_job`); ``await run()`` polls until cancelled."""

    def __init__(self, store: ObjectStore, runtime: Runtime, settings: Settings | None = None, *,
                 worker_id: str | None = None, runner: RangeRunner | None = None,
                 merge_operator: Any = None) -> None:
        self.store = store
        self.runtime = runtime
        self.settings = settings or Settings()
        options = self.settings.compactor_options or CompactorOptions()
        self.options = options.worker
        self.worker_id = worker_id if worker_id is not None else str(runtime.new_ulid())
        lc.parse_worker_id(self.worker_id, "worker id")
        self.cstore = CompactionsStore(store, runtime)
        self.manifests = ManifestStore(store, runtime)
        # Folds merge operands (spec/protocols/merge.md MERGE-5); None keeps them unmerged (MERGE-6).
        self.executor = Executor(store, runtime, merge_operator_of(merge_operator))
        self.runner: RangeRunner = runner or LocalRanges(self.executor)
        self.sst_options, self.max_sst_size_bytes = output_options(self.settings)
        self.owned: dict[ULID, trio.CancelScope | None] = {}
        self._lock = trio.Lock()  # one .compactions write of this worker at a time
        self.stats = {"claimed": 0, "released": 0, "compacted": 0, "dropped": 0, "failed_runs": 0, "output_ssts": 0,
                      "bytes_written": 0}
        #: Jobs whose run failed (MERGE-7), by id: not claimed again before their ``retry_at_s``.
        self.failing: dict[ULID, FailedJob] = {}

    # -- W1 ---------------------------------------------------------------------------------------

    async def step(self) -> list[ULID]:
        """Claim up to capacity Scheduled jobs with no worker (one CAS each)."""
        cur = await self.cstore.read_latest()
        if cur is None:
            return []
        free = [c.id for c in cur.compactions.recent_compactions
                if c.status is S.SCHEDULED and (c.worker is None or c.worker.worker_id is None)
                and c.id not in self.owned]
        if self.failing:
            self._forget_failures({c.id for c in cur.compactions.recent_compactions})
            now_s = self.runtime.monotonic_s()
            free = [cid for cid in free if cid not in self.failing or self.failing[cid].retry_at_s <= now_s]
        claimed = []
        for cid in free[:max(0, self.options.max_concurrent_compactions - len(self.owned))]:
            await trio.lowlevel.checkpoint_if_cancelled()  # no new claim once shutting down
            try:
                # Shielded: a shutdown waits for the claim's CAS (one metadata write), so that it
                # knows whether the claim landed and release_all releases it. Cancelled in flight,
                # a claim that landed stayed Running under a worker that is gone until
                # worker_heartbeat_timeout, blocking its sources (every later L0 compaction).
                with trio.CancelScope(shield=True):
                    async with self._lock:
                        claim = _bug_claim_unchecked if switches.CLAIM_UNCHECKED in self.runtime.bugs else lc.claim  # catalogued bug
                        await self.cstore.update(lambda v, cid=cid: claim(v, cid, self.worker_id, self.runtime.now_ms()))
            except lc.NotOwnerError:
                self.runtime.probe(probes.COMPACTOR_CLAIM_LOST)
                continue
            self.owned[cid] = None
            self.stats["claimed"] += 1
            self.runtime.event("compaction_claimed", id=str(cid), worker=self.worker_id)
            claimed.append(cid)
        return claimed

    def retry_in_s(self, failures: int) -> float:
        """How long a job whose run failed ``failures`` times waits before this worker claims it
        again: twice the poll interval, doubling per failure, at most :data:`MAX_FAILED_BACKOFF_S`."""
        return min(MAX_FAILED_BACKOFF_S, self.options.compactions_poll_interval * 2.0 ** min(failures, 40))

    def _forget_failures(self, present: set[ULID]) -> None:
        for cid in [cid for cid in self.failing if cid not in present]:
            del self.failing[cid]  # completed, failed or dropped by the coordinator: nothing to wait for

    def _failed(self, cid: ULID, error: CompactionFailed) -> None:
        """Record a failed run of ``cid`` (its backoff) and report it: once at ERROR, then at DEBUG."""
        before = self.failing.get(cid)
        failures = 1 if before is None else before.failures + 1
        retry_in_s = self.retry_in_s(failures)
        self.failing[cid] = FailedJob(error, failures, self.runtime.monotonic_s() + retry_in_s)
        fields = {"id": str(cid), "worker": self.worker_id, "error": f"{type(error).__name__}: {error}",
                  "failures": failures, "retry_in_s": retry_in_s}
        if before is None or str(before.error) != str(error):
            self.runtime.event("compaction_worker_failed", **fields)
        else:
            self.runtime.event("compaction_worker_failed_again", **fields)

    def poll_wait_s(self) -> float:
        """W1: the wait before the next poll of ``.compactions``, ``compactions_poll_interval``
        jittered in [0.5, 1.5)x by one draw of the runtime's random stream (workers started
        together spread their polls; none polls more often than every half interval)."""
        return self.options.compactions_poll_interval * (0.5 + self.runtime.rng.random())

    async def run(self) -> None:
        """Poll and run jobs until cancelled; on the way out, release owned jobs."""
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    for cid in await self.step():
                        nursery.start_soon(self.run_job, cid)
                    await self.runtime.sleep(self.poll_wait_s())
        finally:
            with trio.CancelScope(shield=True):
                await self.release_all()

    async def release_all(self) -> None:
        for cid in list(self.owned):
            await self._release(cid, "shutdown")

    async def _release(self, cid: ULID, why: str) -> None:
        try:
            async with self._lock:
                await self.cstore.update(lambda v: lc.release(v, cid, self.worker_id))
            self.stats["released"] += 1
            self.runtime.event("compaction_released", id=str(cid), worker=self.worker_id, why=why)
        except lc.NotOwnerError:
            pass
        self.owned.pop(cid, None)

    # -- W2..W6 -----------------------------------------------------------------------------------

    async def run_job(self, cid: ULID) -> bool:
        """Run one claimed job to Compacted; False when released or dropped."""
        scope = trio.CancelScope()
        self.owned[cid] = scope
        try:
            with scope:
                return await self._run(cid)
            self.stats["dropped"] += 1  # a heartbeat found the job gone or taken over
            self.runtime.event("compaction_result_dropped", id=str(cid), worker=self.worker_id, why="heartbeat")
            return False
        finally:
            # Cancelled from outside (a shutdown): still ours, so that release_all releases it,
            # whether it runs before this task ends or after (COMPACT-11).
            if trio.current_effective_deadline() != float("-inf"):
                self.owned.pop(cid, None)

    async def _run(self, cid: ULID) -> bool:
        """The heartbeat runs from the claim on (planning reads every input's index, which may
        take longer than the timeout); it carries the progress once the ranges are planned."""
        box: list[Callable[[], TieredCompactionContext] | None] = [None]
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeats, cid, lambda: box[0]() if box[0] is not None else None)
                done = await self._run_claimed(cid, box)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise sole_exception(group) from None
        return done

    async def _run_claimed(self, cid: ULID, box: list) -> bool:
        cur = await self.cstore.read_latest()
        c = lc.find(cur.compactions, cid) if cur is not None else None
        if c is None or c.status is not S.RUNNING or c.worker is None or c.worker.worker_id != self.worker_id:
            return False
        latest = await self.manifests.read_latest()
        assert latest is not None
        manifest = latest.manifest
        if not isinstance(c.spec, TieredCompactionSpec):
            await self._release(cid, "not a tiered compaction")
            return False
        spec = CompactionSpec.from_format(c.spec)
        reason = validate_spec(spec, manifest) or committed_already(manifest, lc.outputs_in_order(c))
        if reason is not None:  # W2: the sources changed since the claim
            await self._release(cid, reason)
            return False
        ctx = c.ctx
        readers: InputReaders = {}  # planning opens every input; the ranges merge from the same readers
        if ctx is None or not ctx.subcompactions:
            retention = ctx.retention_min_seq if ctx is not None else manifest.recent_snapshot_min_seq
            ranges = plan_ranges(await self.executor.plan_inputs(spec, manifest, readers),
                                 self.options.max_subcompactions)
            ctx = lc.with_ranges(None, ranges, retention)
            # A job recorded before subcompactions (one output list) resumes as one range.
            if c.output_ssts and not (c.ctx and c.ctx.subcompactions):
                ctx = TieredCompactionContext((Subcompaction(lc.FULL_RANGE, c.output_ssts),), retention)
        else:
            self.runtime.probe(probes.COMPACTOR_RESUMED_RANGES)
            if switches.RESUME_REPLANS_RANGES in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                ranges = plan_ranges(await self.executor.plan_inputs(spec, manifest, readers),
                                     self.options.max_subcompactions)
                ctx = _bug_replanned(ctx, ranges)
        progress = [list(sub.output_ssts) for sub in ctx.subcompactions]
        clock = _bug_own_clock if switches.EXPIRY_OWN_CLOCK in self.runtime.bugs else _db_clock
        now_ms = clock(self.runtime, manifest)  # the database's clock, not ours (COMPACT-12)
        tasks = []
        for i, sub in enumerate(ctx.subcompactions):
            lo, hi = lc.range_lo_hi(sub.range)
            if switches.SUBRANGES_OVERLAP in self.runtime.bugs and i + 1 < len(ctx.subcompactions):
                hi = lc.range_lo_hi(ctx.subcompactions[i + 1].range)[1]  # catalogued bug: runs into the next range
            tasks.append(RangeTask(i, Job(
                compaction_id=cid, spec=spec, manifest=manifest, retention_min_seq=ctx.retention_min_seq,
                bottom=is_bottom(manifest, spec), now_ms=now_ms, max_sst_size_bytes=self.max_sst_size_bytes,
                sst_options=self.sst_options, resume_outputs=sub.output_ssts, key_lo=lo, key_hi=hi,
                cut_after_any_row=self.options.cut_after_any_row), readers))

        def current_ctx() -> TieredCompactionContext:
            return attrs.evolve(ctx, subcompactions=tuple(
                attrs.evolve(sub, output_ssts=tuple(progress[i])) for i, sub in enumerate(ctx.subcompactions)))

        async def on_output(i: int, outputs: tuple[CompactedSsTable, ...]) -> None:
            progress[i] = list(outputs)
            self.stats["output_ssts"] += 1
            self.stats["bytes_written"] += sst_size_bytes(outputs[-1].info)
            await self._heartbeat(cid, current_ctx())

        await self._heartbeat(cid, current_ctx())  # the ranges are recorded before any output
        box[0] = current_ctx
        try:
            if switches.COMMIT_UNFINISHED_RANGES in self.runtime.bugs and len(tasks) > 1:  # catalogued bug
                results = await self.runner.run_ranges(tasks[:1], on_output) + [
                    tuple(progress[t.index]) for t in tasks[1:]]
            else:
                results = await self.runner.run_ranges(tasks, on_output)
        except (CompactionFailed, ObjectNotFoundError, NotImplementedError) as e:
            self.stats["failed_runs"] += 1
            if isinstance(e, CompactionFailed):
                self._failed(cid, e)
            else:
                self.runtime.event("compaction_worker_failed", id=str(cid), worker=self.worker_id,
                                   error=f"{type(e).__name__}: {e}")
            await self._release(cid, f"{type(e).__name__}: {e}")
            return False
        for i, outs in enumerate(results):
            progress[i] = list(outs)
        final = current_ctx()
        try:
            async with self._lock:
                if switches.WORKER_FINISH_UNCHECKED in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                    await self.cstore.update(lambda v: _bug_finish_unchecked(v, cid, self.worker_id,
                                                                             self.runtime.now_ms(), final))
                elif switches.OUTPUTS_IN_ID_ORDER in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                    await self.cstore.update(lambda v: _bug_finish_id_order(v, cid, self.worker_id,
                                                                            self.runtime.now_ms(), final))
                else:
                    await self.cstore.update(lambda v: lc.finish(v, cid, self.worker_id, self.runtime.now_ms(), final))
        except lc.NotOwnerError as e:
            self.stats["dropped"] += 1
            self.runtime.probe(probes.COMPACTOR_RESULT_DROPPED)
            self.runtime.event("compaction_result_dropped", id=str(cid), worker=self.worker_id, why=str(e))
            return False
        self.stats["compacted"] += 1
        self.runtime.event("compaction_state", id=str(cid), status="Compacted", worker=self.worker_id,
                           outputs=[str(o.id) for o in lc.outputs_in_order(attrs.evolve(c, ctx=final))])
        return True

    async def _heartbeats(self, cid: ULID, ctx_now: Callable[[], TieredCompactionContext | None]) -> None:
        while True:
            await self.runtime.sleep(self.options.heartbeat_interval)
            try:
                await self._heartbeat(cid, ctx_now())
            except lc.NotOwnerError:
                return  # released by this worker meanwhile

    async def _heartbeat(self, cid: ULID, ctx: TieredCompactionContext | None) -> None:
        """W5: write heartbeat and progress if the job is still ours, else stop the job."""
        try:
            async with self._lock:
                if switches.HEARTBEAT_NO_OWNER_CHECK in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                    await self.cstore.update(lambda v: _bug_heartbeat_any(v, cid, self.worker_id,
                                                                          self.runtime.now_ms(), ctx))
                else:
                    await self.cstore.update(lambda v: lc.heartbeat(v, cid, self.worker_id, self.runtime.now_ms(), ctx))
        except lc.NotOwnerError as e:
            self.runtime.event("compaction_lost", id=str(cid), worker=self.worker_id, why=str(e))
            scope = self.owned.get(cid)
            if scope is None:
                raise
            self.runtime.probe(probes.COMPACTOR_JOB_LOST)
            scope.cancel()
            await trio.lowlevel.checkpoint()  # raises Cancelled: the job's scope ends it


def _db_clock(_runtime: Runtime, manifest) -> int:
    """The time a job judges TTL expiry by: the database's (COMPACT-12, :func:`expiry_clock_ms`)."""
    return expiry_clock_ms(manifest)


def _bug_own_clock(runtime: Runtime, _manifest) -> int:
    """Catalogued bug ``expiry-own-clock`` (sim/scenarios/catalogue.py): expiry judged by the
    worker's own clock; one running ahead of the writer's purges rows the writer still reads."""
    return runtime.now_ms()


def _bug_heartbeat_any(v, cid, worker_id, now_ms, ctx):
    """Catalogued bug ``heartbeat-no-owner-check``: the heartbeat writes progress into the job
    whoever owns it now (a reclaimed worker overwrites the new owner's claim and progress)."""
    c = lc.find(v, cid)
    if c is None or c.status in lc.TERMINAL or c.status is S.COMPACTED:
        raise lc.NotOwnerError(f"compaction {cid} is gone")
    return lc.replace(v, attrs.evolve(c, status=S.RUNNING, worker=WorkerSpec(worker_id, now_ms), ctx=ctx,
                                      output_ssts=lc.outputs_in_order(attrs.evolve(c, ctx=ctx))))


def _bug_finish_unchecked(v, cid, worker_id, now_ms, ctx):
    """Catalogued bug ``worker-finish-unchecked``: a worker finishes a job without checking it
    still owns it (a reclaimed worker's late output replaces the new owner's)."""
    c = lc.find(v, cid)
    if c is None or c.status in lc.TERMINAL or c.status is S.COMPACTED:
        raise lc.NotOwnerError(f"compaction {cid} is gone")
    c = attrs.evolve(c, status=S.RUNNING, worker=WorkerSpec(worker_id, now_ms))
    return lc.finish(lc.replace(v, c), cid, worker_id, now_ms, ctx)


def _bug_claim_unchecked(v, cid, worker_id, now_ms):
    """Catalogued bug ``claim-unchecked``: the claim does not re-check, on the file it writes
    over, that the job is still Scheduled and free: a worker that lost the claim race takes the
    job from the worker that won it."""
    c = lc.find(v, cid)
    if c is None or c.status not in (S.SCHEDULED, S.RUNNING):
        raise lc.NotOwnerError(f"compaction {cid} is gone")
    return lc.replace(v, attrs.evolve(c, status=S.RUNNING, worker=WorkerSpec(worker_id, now_ms)))


def _bug_finish_id_order(v, cid, worker_id, now_ms, ctx):
    """Catalogued bug ``outputs-in-id-order``: the Compacted result lists every range's outputs
    by SST id (the order they were written) instead of in range order: with the ranges of a job
    running at once, the sorted run's SSTs are out of key order."""
    done = lc.finish(v, cid, worker_id, now_ms, ctx)
    c = lc.find(done, cid)
    return lc.replace(done, attrs.evolve(c, output_ssts=tuple(sorted(c.output_ssts, key=lambda o: o.id.bytes))))


def _bug_replanned(ctx, ranges):
    """Catalogued bug ``resume-replans-ranges``: a worker taking over a job with recorded ranges
    plans its own (its ``max_subcompactions``) and keeps range i's recorded outputs as the
    progress of its new range i."""
    subs = ctx.subcompactions
    return attrs.evolve(ctx, subcompactions=tuple(
        Subcompaction(r, subs[i].output_ssts if i < len(subs) else ()) for i, r in enumerate(ranges)))
