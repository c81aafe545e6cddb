"""The official coordinator/worker lifecycle (spec/protocols/compaction.md, COMPACT-1/5/6/7):
pure transitions, bad input refused with a typed error naming the object, zombie workers
dropped, reclaim with progress kept, subcompactions equal to one merge, ULID rules."""

from __future__ import annotations

import attrs
import pytest
import trio
from ulid import ULID

from slatedb.compactor import Compactor, full_spec, submit_compaction
from slatedb.compactor import lifecycle as lc
from slatedb.compactor.spec import CompactionSpec
from slatedb.compactor.store import CompactionsStore, compactions_key
from slatedb.compactor.subcompactions import InputSst, plan_boundaries, plan_ranges, target_bytes
from slatedb.compactor.worker import Worker
from slatedb.errors import CorruptionError
from slatedb.format.layout import sst_key
from slatedb.format.compactions import encode_compactions
from slatedb.manifest.store import ManifestStore
from slatedb.format.types import (
    CompactedSsTable,
    Compaction,
    CompactionsV1,
    CompactionStatus,
    SsTableInfo,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    WorkerSpec,
)

from .helpers import RecordingRuntime, clone_store, compactor_settings, filled_store, latest_compactions, latest_manifest, read_all
from .test_compactor import _final_rows, compact

S = CompactionStatus
W1, W2 = str(ULID.from_timestamp(1000)), str(ULID.from_timestamp(2000))


def _job(status=S.SUBMITTED, worker=None, ctx=None, ms=1000) -> Compaction:
    return Compaction(ULID.from_bytes(ms.to_bytes(6, "big") + bytes(10)), TieredCompactionSpec(sorted_runs=(0,), destination=0), status,
                      worker=worker, ctx=ctx)


def _file(*jobs) -> CompactionsV1:
    return CompactionsV1(3, tuple(jobs))


def test_the_whole_lifecycle_and_only_its_transitions() -> None:
    j = _job()
    v = _file(j)
    v = lc.set_status(v, j.id, S.SCHEDULED, ctx=TieredCompactionContext((), 7))
    v = lc.claim(v, j.id, W1, 5000)
    assert lc.find(v, j.id).worker == WorkerSpec(W1, 5000)
    ctx = TieredCompactionContext((Subcompaction(lc.FULL_RANGE, ()),), 7)
    v = lc.heartbeat(v, j.id, W1, 6000, ctx)
    v = lc.finish(v, j.id, W1, 7000, ctx)
    assert lc.find(v, j.id).status is S.COMPACTED and lc.find(v, j.id).ctx is None
    v = lc.set_status(v, j.id, S.COMPLETED)
    assert v.compactor_epoch == 3 and [c.status for c in v.recent_compactions] == [S.COMPLETED]
    with pytest.raises(lc.LifecycleError):
        lc.set_status(v, j.id, S.SUBMITTED)  # terminal is final
    with pytest.raises(lc.LifecycleError):
        lc.set_status(_file(_job()), _job().id, S.COMPLETED)  # Submitted -> Completed skips the commit


def test_a_reclaimed_workers_heartbeat_and_result_are_dropped_and_the_new_owner_wins() -> None:
    """COMPACT-5: every write of a worker re-checks its worker id."""
    j = _job(S.SCHEDULED)
    v = lc.claim(_file(j), j.id, W1, 1000)
    with pytest.raises(lc.NotOwnerError):
        lc.claim(v, j.id, W2, 1000)  # no double claim
    v, reclaimed = lc.reclaim(v, now_ms=1000 + 30_001, timeout_ms=30_000)
    assert reclaimed == [j.id] and lc.find(v, j.id).status is S.SCHEDULED and lc.find(v, j.id).worker is None
    v = lc.claim(v, j.id, W2, 40_000)
    ctx = TieredCompactionContext((Subcompaction(lc.FULL_RANGE, ()),), 0)
    for zombie in (lambda: lc.heartbeat(v, j.id, W1, 41_000, ctx), lambda: lc.finish(v, j.id, W1, 41_000, ctx),
                   lambda: lc.release(v, j.id, W1)):
        with pytest.raises(lc.NotOwnerError):
            zombie()
    assert lc.find(lc.finish(v, j.id, W2, 42_000, ctx), j.id).status is S.COMPACTED
    # A fresh heartbeat is not reclaimed; a Running job with no worker is.
    assert lc.reclaim(v, now_ms=40_000 + 29_000, timeout_ms=30_000)[1] == []
    assert lc.reclaim(_file(_job(S.RUNNING)), 0, 30_000)[1] == [_job().id]


def test_reclaim_keeps_the_recorded_progress() -> None:
    out = CompactedSsTable(ULID.from_timestamp(1500), SsTableInfo(first_entry=b"a", last_entry=b"c"))
    ctx = TieredCompactionContext((Subcompaction(lc.make_range(None, b"m"), (out,)),
                                   Subcompaction(lc.make_range(b"m", None), ())), 5)
    j = _job(S.RUNNING, WorkerSpec(W1, 0), ctx)
    v, _ = lc.reclaim(_file(j), 60_000, 30_000)
    assert lc.find(v, j.id).ctx == ctx


def test_coordinator_start_unschedules_and_leaves_running_jobs_alone() -> None:
    a, b = _job(S.SCHEDULED, ms=1000), _job(S.RUNNING, WorkerSpec(W1, 5), ms=2000)
    v = lc.coordinator_start(_file(a, b), 9)
    assert v.compactor_epoch == 9
    assert [(c.status, c.worker) for c in v.recent_compactions] == [(S.SUBMITTED, None), (S.RUNNING, WorkerSpec(W1, 5))]


# -- bad input -------------------------------------------------------------------------------


def test_a_worker_id_that_is_not_a_ulid_is_refused_naming_the_file() -> None:
    v = _file(_job(S.RUNNING, WorkerSpec("worker-7", 0)))
    with pytest.raises(CorruptionError, match=r"compactions/00000000000000000004.compactions.*not a ULID"):
        lc.check_compactions(v, "compactions/00000000000000000004.compactions")
    with pytest.raises(CorruptionError):
        Worker.__init__(Worker.__new__(Worker), None, RecordingRuntime(), worker_id="not-a-ulid")  # type: ignore[arg-type]


@pytest.mark.parametrize("ranges, outputs", [
    ([(None, b"m"), (b"k", None)], {}),                    # overlapping (COMPACT-6)
    ([(None, b"m"), (b"n", None)], {}),                    # a gap
    ([(None, b"m")], {}),                                  # does not reach +inf
    ([(None, b"m"), (b"m", None)], {0: (b"a", b"q")}),     # an output outside its range
])
def test_subcompaction_ranges_that_do_not_tile_or_hold_their_outputs_are_refused(ranges, outputs) -> None:
    subs = []
    for i, (lo, hi) in enumerate(ranges):
        outs = ()
        if i in outputs:
            first, last = outputs[i]
            outs = (CompactedSsTable(ULID.from_timestamp(1000), SsTableInfo(first_entry=first, last_entry=last)),)
        subs.append(Subcompaction(lc.make_range(lo, hi), outs))
    job = _job(S.RUNNING, WorkerSpec(W1, 0), TieredCompactionContext(tuple(subs), 0))
    with pytest.raises(CorruptionError, match=f"the.compactions.*compaction {job.id} subcompaction"):
        lc.check_compactions(_file(job), "the.compactions")


@pytest.mark.parametrize("status", [S.SUBMITTED, S.SCHEDULED, S.COMPACTED, S.COMPLETED, S.FAILED])
def test_a_job_not_running_is_owned_by_no_worker_even_the_one_it_names(status) -> None:
    """W2/W3: a heartbeat, finish or release is the owner's only while the job is Running: a
    job reclaimed, finished or failed that still names our worker is not ours any more."""
    job = _job(status, WorkerSpec(W1, 0))
    for step in (lambda v: lc.heartbeat(v, job.id, W1, 5_000), lambda v: lc.release(v, job.id, W1)):
        with pytest.raises(lc.NotOwnerError, match=f"is {status.name} owned by {W1}"):
            step(_file(job))


def test_a_subcompaction_range_whose_end_is_included_is_refused() -> None:
    """Each range ends at an excluded bound (the next one starts there, included): a range
    ``(-inf, m]`` followed by ``[m, +inf)`` would give key ``m`` to both."""
    from slatedb.format.types import BoundType, BytesBound, BytesRange

    first = BytesRange(BytesBound(None, BoundType.UNBOUNDED), BytesBound(b"m", BoundType.INCLUDED))
    subs = (Subcompaction(first, ()), Subcompaction(lc.make_range(b"m", None), ()))
    job = _job(S.RUNNING, WorkerSpec(W1, 0), TieredCompactionContext(subs, 0))
    with pytest.raises(CorruptionError, match=f"compaction {job.id} subcompaction 0: range end b'm' is not an excluded"):
        lc.check_compactions(_file(job), "the.compactions")


def test_a_compactions_file_with_an_unknown_state_or_bad_worker_is_a_typed_error_and_nothing_is_committed() -> None:
    store, expected = filled_store(n_keys=100, rounds=1, deletes=0)
    before = latest_manifest(store)
    # Two encodings differing only in the status byte (1 vs 5) locate it; 9 is no state.
    data = bytearray(encode_compactions(_file(_job(S.RUNNING))))
    bad = _file(_job(S.SCHEDULED))
    data_bad = bytearray(encode_compactions(bad))
    diffs = [i for i, (x, y) in enumerate(zip(data, data_bad)) if x != y]
    assert len(diffs) == 1 and data_bad[diffs[0]] == 5
    data_bad[diffs[0]] = 9  # no such state
    store.put_now(compactions_key(1), bytes(data_bad))
    with pytest.raises(CorruptionError, match="compactions/00000000000000000001.compactions"):
        trio.run(Compactor(store, RecordingRuntime(), compactor_settings()).start)
    store2, _ = filled_store(n_keys=100, rounds=1, deletes=0)
    store2.put_now(compactions_key(1), encode_compactions(CompactionsV1(0, (_job(S.RUNNING, WorkerSpec("w7", 0)),))))
    with pytest.raises(CorruptionError, match="not a ULID"):
        trio.run(Compactor(store2, RecordingRuntime(), compactor_settings()).start)
    assert latest_manifest(store2)[1].compacted == before[1].compacted == ()
    del expected


# -- subcompactions --------------------------------------------------------------------------


def test_range_target_is_the_larger_of_the_even_share_and_the_largest_input() -> None:
    small = [InputSst(100, (b"a", b"b", b"c", b"d")) for _ in range(8)]
    assert target_bytes(small, 4) == 200
    assert len(plan_ranges(small, 4)) == 4
    big = [InputSst(1000, tuple(b"k%03d" % i for i in range(100)))] + small
    assert target_bytes(big, 4) == 1000
    assert len(plan_boundaries(big, 4)) <= 1
    assert plan_ranges(small, 1) == (lc.FULL_RANGE,)
    cuts = plan_boundaries([InputSst(100, tuple(b"k%03d" % i for i in range(128)))] * 8, 12)
    assert cuts == sorted(set(cuts)) and 1 <= len(cuts) <= 11


def _settings(**worker):
    s = compactor_settings(min_sources=100, max_sst_size=4096)
    return attrs.evolve(s, compactor_options=attrs.evolve(
        s.compactor_options, worker=attrs.evolve(s.compactor_options.worker, **worker)))


def _full(store, settings, rt=None):
    rt = rt or RecordingRuntime()

    async def main():
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        c = Compactor(store, rt, settings)
        await c.run_until_idle()
        return c

    return trio.run(main)


def test_a_job_split_into_subcompactions_commits_exactly_the_single_process_result() -> None:
    base, expected = filled_store(n_keys=400, rounds=2)
    one, four = clone_store(base), clone_store(base)
    _full(one, _settings(max_subcompactions=1))
    rt = RecordingRuntime()
    c = _full(four, _settings(max_subcompactions=4), rt)
    assert c.stats["completed"] == 1
    rows_one = [r for _, rows in _final_rows(one) for r in rows]
    rows_four = [r for _, rows in _final_rows(four) for r in rows]
    assert [(r.key, r.seq, r.kind, r.value) for r in rows_four] == [(r.key, r.seq, r.kind, r.value) for r in rows_one]
    assert read_all(four) == expected
    # The job really ran as several ranges: the heartbeat recorded them.
    files = sorted(m.key for m in four.list_now("compactions/") if m.key.endswith(".compactions"))
    from slatedb.format.compactions import decode_compactions
    n_ranges = max(len(c.ctx.subcompactions) for k in files for c in decode_compactions(four.get_now(k).data, k).recent_compactions
                   if c.ctx is not None)
    assert n_ranges >= 3, n_ranges


def test_a_job_split_into_ranges_opens_each_input_once_and_merges_its_ranges_at_once() -> None:
    """W3/W4, COMPACT-8: the input SSTs opened to plan the ranges are the ones every range
    merges from (one HEAD and one footer/index read per input SST for the whole job, not one
    per range), and the ranges of a job run at once. Before, each range opened every input again
    and the local worker ran them one after the other: a job cost its planning plus a full set of
    opens per range, in sequence (gc seed 390: an L0 backlog drained too slowly after the heal)."""
    store, expected = filled_store(n_keys=400, rounds=2)
    inputs = {sst_key(v.sst_id) for v in latest_manifest(store)[1].l0}

    class Watched:
        """Counts the HEADs of input SSTs; the first output SST's PUT waits (a few seconds at
        most) until another range has begun writing too: ranges run one after the other never
        get there."""

        def __init__(self, inner):
            self.inner, self.heads, self.writers, self.alone = inner, {}, 0, False
            self.second_writer = trio.Event()

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def head(self, key):
            self.heads[key] = self.heads.get(key, 0) + 1
            return await self.inner.head(key)

        async def put(self, key, data, *args, **kw):
            if key.startswith("compacted/") and key not in inputs:
                self.writers += 1
                if self.writers >= 2:
                    self.second_writer.set()
                with trio.move_on_after(5) as waited:
                    await self.second_writer.wait()
                self.alone |= waited.cancelled_caught
            return await self.inner.put(key, data, *args, **kw)

    watched = Watched(store)
    rt = RecordingRuntime()

    async def main():
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        c = Compactor(watched, rt, _settings(max_subcompactions=4))
        await c.run_until_idle()
        return c

    c = trio.run(main)
    assert c.stats["completed"] == 1 and read_all(store) == expected
    assert max(len(cc.ctx.subcompactions) for cc in _all_jobs(store) if cc.ctx is not None) >= 3
    assert {k: n for k, n in watched.heads.items() if k in inputs} == {k: 1 for k in inputs}, watched.heads
    assert not watched.alone, "the ranges ran one after the other"


def _all_jobs(store):
    from slatedb.format.compactions import decode_compactions
    files = sorted(m.key for m in store.list_now("compactions/") if m.key.endswith(".compactions"))
    return [c for k in files for c in decode_compactions(store.get_now(k).data, k).recent_compactions]


def test_a_worker_that_lost_its_job_mid_run_never_gets_its_result_committed() -> None:
    """A zombie worker (stalled past the heartbeat timeout, reclaimed, the job given to another
    worker that finished it) wakes up and finishes: its result is dropped (COMPACT-5)."""
    store, expected = filled_store(n_keys=300, rounds=2)
    settings = _settings(max_subcompactions=2)
    events: list = []
    rt_c, rt_a, rt_b = RecordingRuntime("coord", events), RecordingRuntime("wa", events), RecordingRuntime("wb", events)

    class Stall:
        def __init__(self, inner):
            self.inner, self.gate, self.hit = inner, trio.Event(), trio.Event()

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def put(self, key, data, mode=None, **kw):
            # Frozen from its first output on: its heartbeats wait too, so the job goes stale
            # whatever the timer's phase (the test was flaky under load: a timer heartbeat just
            # before the tick kept the job fresh and B found nothing to claim).
            if (key.startswith("compacted/") or (self.hit.is_set() and key.startswith("compactions/"))) \
                    and not self.gate.is_set():
                self.hit.set()
                await self.gate.wait()
            return await self.inner.put(key, data, mode, **kw) if mode is not None else await self.inner.put(key, data, **kw)

    stalled = Stall(store)
    wa = Worker(stalled, rt_a, settings)
    wb = Worker(store, rt_b, settings)
    coord = Compactor(store, rt_c, settings, local_worker=False)
    coord.timeout_ms = 50

    async def main():
        await coord.start()
        await submit_compaction(store, rt_c, full_spec(latest_manifest(store)[1]))
        await coord.tick()  # Submitted -> Scheduled
        (cid,) = await wa.step()
        async with trio.open_nursery() as n:
            result = {}

            async def run_a():
                result["a"] = await wa.run_job(cid)
            n.start_soon(run_a)
            await stalled.hit.wait()
            await trio.sleep(0.1)
            await coord.tick()  # A's heartbeat is stale: reclaimed
            assert await wb.step() == [cid]
            assert await wb.run_job(cid)
            stalled.gate.set()  # the zombie wakes up and finishes
        await coord.tick()  # commits B's result
        return cid, result["a"]

    cid, a_won = trio.run(main)
    assert a_won is False and wa.stats["dropped"] == 1 and coord.stats["reclaimed"] == 1, coord.stats
    commits = [f for _, k, f in events if k == "compaction_commit"]
    b_outputs = {f["sst"] for who, k, f in events if k == "compaction_output" and who == "wb"}
    a_outputs = {f["sst"] for who, k, f in events if k == "compaction_output" and who == "wa"}
    assert len(commits) == 1 and set(commits[0]["outputs"]) <= b_outputs | a_outputs
    _, m = latest_manifest(store)
    committed = {str(v.sst_id) for r in m.compacted for v in r.ssts}
    late = a_outputs - b_outputs
    assert not late & committed, "a reclaimed worker's late output was committed"
    assert read_all(store) == expected
    _, cs = latest_compactions(store)
    assert [c.status for c in cs.recent_compactions if c.id == cid] == [S.COMPLETED]


def test_job_and_output_ids_obey_the_ulid_rules_with_a_clock_behind() -> None:
    """COMPACT-7: a coordinator whose clock is behind the newest job id still mints job ids not
    older than it, and outputs not older than their job."""
    store, expected = filled_store(n_keys=200, rounds=2)
    future_ms = latest_manifest(store)[1].l0[0].id.milliseconds + 3_600_000
    rt = RecordingRuntime()

    class Behind(RecordingRuntime):
        pass

    # A job from the future (another process's clock) already in the file.
    f = _job(S.COMPLETED, ms=future_ms)
    store.put_now(compactions_key(1), encode_compactions(CompactionsV1(0, (f,))))
    c = compact(store, rt=rt)
    assert c.stats["completed"] >= 1
    _, cs = latest_compactions(store)
    for job in cs.recent_compactions:
        assert job.id.milliseconds >= future_ms
        assert all(o.id.milliseconds >= job.id.milliseconds for o in job.output_ssts)
    assert read_all(store) == expected
    del Behind


def test_the_coordinator_fails_a_compacted_job_with_outputs_older_than_its_job() -> None:
    store, expected = filled_store(n_keys=200, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        job = await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        w = Worker(store, rt, settings)
        (cid,) = await w.step()
        assert await w.run_job(cid)
        cs = CompactionsStore(store, rt)
        cur = await cs.read_latest()
        done = lc.find(cur.compactions, cid)
        old = tuple(attrs.evolve(o, id=ULID.from_timestamp(job.id.milliseconds - 1000)) for o in done.output_ssts)
        await cs.try_write(cur.id + 1, lc.replace(cur.compactions, attrs.evolve(done, output_ssts=old)))
        await coord.tick()
        return cid

    cid = trio.run(main)
    _, cs = latest_compactions(store)
    assert [c.status for c in cs.recent_compactions if c.id == cid] == [S.FAILED]
    assert not latest_manifest(store)[1].compacted
    assert read_all(store) == expected



class _DrawsRuntime(RecordingRuntime):
    """A runtime whose random stream answers the given draws in turn."""

    def __init__(self, *draws: float) -> None:
        super().__init__()
        self._draws = list(draws)

    @property
    def rng(self):
        return self

    def random(self) -> float:
        return self._draws.pop(0)


def test_a_worker_polls_at_its_interval_jittered_between_half_and_one_and_a_half_times() -> None:
    """W1: every wait before a poll of ``.compactions`` (the worker's own loop and the
    compactor's local worker) is the interval times 0.5 + one draw in [0, 1): never under half
    the interval (a worker must not hammer the store), always under 1.5x."""
    rt = _DrawsRuntime(0.0, 0.5, 0.999999)
    w = Worker(filled_store(1), rt, _settings())
    interval = w.options.compactions_poll_interval
    assert [w.poll_wait_s() / interval for _ in range(3)] == pytest.approx([0.5, 1.0, 1.499999])


@pytest.mark.parametrize("worker", [None, WorkerSpec(None, 0), WorkerSpec(W2, 0)], ids=["no-worker", "no-worker-id", "owned"])
def test_a_worker_claims_a_scheduled_job_only_when_no_worker_id_holds_it_and_counts_its_release(worker) -> None:
    """W1: a Scheduled job is free when it carries no worker, or a worker record without an id
    (a ``.compactions`` another writer encoded); one naming a worker is not (a claim of it would
    take over another worker's job). A released job is Scheduled with no worker again, and the
    release is counted in the worker's stats (the compactor's ``stats``)."""
    store, _expected = filled_store(n_keys=50, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        cs = CompactionsStore(store, rt)
        cur = await cs.read_latest()
        (job,) = [c for c in cur.compactions.recent_compactions if c.status is S.SCHEDULED]
        await cs.try_write(cur.id + 1, lc.replace(cur.compactions, attrs.evolve(job, worker=worker)))
        w = Worker(store, rt, settings)
        claimed = await w.step()
        if worker is not None and worker.worker_id is not None:
            assert claimed == []
            return
        assert claimed == [job.id] and w.stats["claimed"] == 1
        await w.release_all()
        assert w.stats["released"] == 1 and not w.owned
        again = lc.find((await cs.read_latest()).compactions, job.id)
        assert again.status is S.SCHEDULED and again.worker is None

    trio.run(main)


@pytest.mark.parametrize("when", ["claim-in-flight", "job-cancelled-first"])
def test_a_shutdown_releases_the_job_whatever_it_interrupts(when) -> None:
    """W6 (shutdown releases owned jobs), COMPACT-11: a worker stopped (its writer closed) while
    (a) its claim's CAS is in flight -- the claim lands, the shutdown's cancellation arrives
    before the worker recorded the job as its own -- or (b) while running a job whose task
    finishes cancelling before the worker's ``release_all`` runs, still releases the job:
    Scheduled with no worker. Before, the job stayed Running under a worker that no longer
    existed until ``worker_heartbeat_timeout`` (30 s) passed with a coordinator running; an
    L0-only job then blocks every later L0 compaction (they must include the oldest L0): a
    database opened and closed 80 times in 12 s (a put, a reader, a WAL reader each) ended with
    80 L0 SSTs and no sorted run."""
    store, _expected = filled_store(n_keys=50, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        cs = CompactionsStore(store, rt)
        (job,) = [c for c in (await cs.read_latest()).compactions.recent_compactions if c.status is S.SCHEDULED]
        w = Worker(store, rt, settings)
        with trio.CancelScope() as shutdown:
            if when == "claim-in-flight":
                update = w.cstore.update

                async def claim_then_stop(fn):
                    got = await update(fn)  # the claim lands ...
                    shutdown.cancel()  # ... and the shutdown arrives before its reply is used
                    await trio.sleep(0)
                    return got
                w.cstore.update = claim_then_stop  # type: ignore[method-assign]
                await w.step()
            else:
                assert await w.step() == [job.id]
                started = trio.Event()
                merge = w.runner.run_ranges

                async def blocks(*args, **kw):
                    started.set()
                    await trio.sleep_forever()
                    return await merge(*args, **kw)
                w.runner.run_ranges = blocks  # type: ignore[method-assign]
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(w.run_job, job.id)
                    await started.wait()
                    shutdown.cancel()  # the job's task ends first; release_all runs after it
        assert shutdown.cancel_called
        running = lc.find((await cs.read_latest()).compactions, job.id)
        assert running.status is S.RUNNING and running.worker.worker_id == w.worker_id
        w.cstore.update = CompactionsStore.update.__get__(w.cstore)  # type: ignore[method-assign]
        await w.release_all()  # the worker loop's shielded finally
        again = lc.find((await cs.read_latest()).compactions, job.id)
        assert (again.status, again.worker) == (S.SCHEDULED, None)
        assert w.stats["released"] == 1 and not w.owned

    trio.run(main)


def test_a_job_recorded_with_one_output_list_resumes_as_one_range_from_those_outputs() -> None:
    """A Running job recorded before subcompactions -- its outputs in the job's own
    ``output_ssts``, no ranges in its context (an older engine's, or the official one's) -- is
    resumed as one range over the whole key space that continues after those outputs, not
    planned afresh into ranges that would drop them (`sim mutate` seed 21: the test of that
    case inverted, so such a job was re-planned from scratch, survived)."""
    store, _expected = filled_store(n_keys=200, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100, compactor_options={
        "poll_interval": "50ms", "worker_heartbeat_timeout": "3s",
        "worker": {"max_subcompactions": 4, "heartbeat_interval": "200ms", "compactions_poll_interval": "50ms"}})

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        manifest = latest_manifest(store)[1]
        await submit_compaction(store, rt, full_spec(manifest))
        await coord.tick()
        w = Worker(store, rt, settings)
        (cid,) = await w.step()
        cs = CompactionsStore(store, rt)
        cur = await cs.read_latest()
        job = lc.find(cur.compactions, cid)
        assert job.ctx is None or not job.ctx.subcompactions
        # One output written before the job was interrupted (an L0 SST's table under a new id).
        table = next(t for t in manifest.ssts if t.id == manifest.l0[0].sst_id)
        legacy = (CompactedSsTable(ULID.from_timestamp(job.id.milliseconds + 1), table.info,
                                   format_version=table.format_version),)
        await cs.try_write(cur.id + 1, lc.replace(cur.compactions, attrs.evolve(job, output_ssts=legacy)))
        planned = []

        async def stop_at_the_plan(tasks, on_output):
            planned.extend(tasks)
            raise NotImplementedError("stopped once planned")
        w.runner.run_ranges = stop_at_the_plan  # type: ignore[method-assign]
        assert await w.run_job(cid) is False  # (released: the fake runner raised)
        assert [(t.index, t.job.key_lo, t.job.key_hi, t.job.resume_outputs) for t in planned] == [
            (0, None, None, legacy)]

    trio.run(main)


@pytest.mark.parametrize("kind", ["segment-drain", "sources-gone"])
def test_a_worker_releases_a_job_it_cannot_run_and_says_it_did_not_run_it(kind) -> None:
    """W2: a job of a kind this worker does not run (a segment drain, another engine's), or whose
    sources are no longer in the manifest (they changed since the claim), is released for
    another try, and ``run_job`` answers False (not compacted)."""
    from slatedb.format.types import DrainSegmentSpec

    store, _expected = filled_store(n_keys=50, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        cs = CompactionsStore(store, rt)
        cur = await cs.read_latest()
        (job,) = [c for c in cur.compactions.recent_compactions if c.status is S.SCHEDULED]
        spec = (DrainSegmentSpec(b"seg") if kind == "segment-drain"
                else attrs.evolve(job.spec, l0_view_ids=(*job.spec.l0_view_ids, ULID.from_timestamp(7))))
        await cs.try_write(cur.id + 1, lc.replace(cur.compactions, attrs.evolve(job, spec=spec)))
        w = Worker(store, rt, settings)
        assert await w.step() == [job.id]
        assert await w.run_job(job.id) is False
        assert w.stats["released"] == 1 and w.stats["compacted"] == 0
        again = lc.find((await cs.read_latest()).compactions, job.id)
        assert again.status is S.SCHEDULED and again.worker is None

    trio.run(main)


@pytest.mark.parametrize("then", ["gone", "failed", "taken-over"])
def test_a_claimed_job_gone_or_no_longer_running_under_this_worker_is_not_run(then) -> None:
    """W2: between the claim and the run's first read of ``.compactions`` the job left the file,
    was failed while still naming this worker, or was reclaimed and claimed by another: the
    worker runs nothing (no output written, nothing dropped or released: it is not its job) and
    ``run_job`` answers False (`sim mutate` seed 24: the check with ``and`` for its first ``or``
    survived -- it raised on a job gone and ran a failed one)."""
    store, _expected = filled_store(n_keys=50, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        w = Worker(store, rt, settings)
        (cid,) = await w.step()
        cs = CompactionsStore(store, rt)
        cur = await cs.read_latest()
        job = lc.find(cur.compactions, cid)
        assert job.status is S.RUNNING and job.worker.worker_id == w.worker_id
        if then == "gone":
            after = attrs.evolve(cur.compactions, recent_compactions=tuple(
                c for c in cur.compactions.recent_compactions if c.id != cid))
        elif then == "failed":
            after = lc.replace(cur.compactions, attrs.evolve(job, status=S.FAILED))
        else:
            after = lc.replace(cur.compactions, attrs.evolve(job, worker=WorkerSpec(W2, rt.now_ms())))
        await cs.try_write(cur.id + 1, after)
        ssts = {m.key for m in store.list_now("compacted/")}
        assert await w.run_job(cid) is False
        assert {m.key for m in store.list_now("compacted/")} == ssts  # nothing was run
        assert (w.stats["compacted"], w.stats["dropped"], w.stats["released"], w.stats["output_ssts"]) == (0, 0, 0, 0)
        assert (await cs.read_latest()).compactions == after

    trio.run(main)


def test_a_result_whose_finish_finds_the_job_taken_over_is_dropped_and_counted_once(monkeypatch) -> None:
    """W3: the finish's CAS finds the job no longer ours (reclaimed between the last heartbeat
    and the finish): the result is dropped -- ``run_job`` answers False, counted once as dropped,
    never as compacted."""
    store, _expected = filled_store(n_keys=50, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    def taken_over(value, cid, worker_id, now_ms, final):
        raise lc.NotOwnerError(f"compaction {cid} is Running owned by another worker")

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        w = Worker(store, rt, settings)
        (cid,) = await w.step()
        monkeypatch.setattr(lc, "finish", taken_over)
        assert await w.run_job(cid) is False
        assert (w.stats["dropped"], w.stats["compacted"]) == (1, 0), w.stats

    trio.run(main)


def test_a_worker_claims_only_up_to_its_free_concurrency() -> None:
    """W1: a worker running ``len(owned)`` jobs claims at most ``max_concurrent_compactions``
    minus those, however many jobs are free."""
    store, _expected = filled_store(n_keys=50, rounds=2)
    rt = RecordingRuntime()
    settings = compactor_settings(min_sources=100)

    async def main():
        coord = Compactor(store, rt, settings, local_worker=False)
        await coord.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await coord.tick()
        cs = CompactionsStore(store, rt)
        cur = await cs.read_latest()
        (job,) = [c for c in cur.compactions.recent_compactions if c.status is S.SCHEDULED]
        more = tuple(attrs.evolve(job, id=ULID.from_timestamp(job.id.milliseconds + i)) for i in (1, 2, 3))
        await cs.try_write(cur.id + 1, attrs.evolve(cur.compactions,
                                                     recent_compactions=cur.compactions.recent_compactions + more))
        full = Worker(store, rt, settings)
        limit = full.options.max_concurrent_compactions
        for i in range(limit):  # every slot busy: nothing more is claimed
            full.owned[ULID.from_timestamp(10 + i)] = trio.CancelScope()
        assert await full.step() == []
        w = Worker(store, rt, settings)
        for i in range(limit - 1):  # all but one slot busy with jobs of its own
            w.owned[ULID.from_timestamp(10 + i)] = trio.CancelScope()
        claimed = await w.step()
        assert len(claimed) == 1, (limit, claimed)

    trio.run(main)


# -- the coordinator's tick, step by step ------------------------------------------------------


class CountingStore:
    """``inner``, counting the requests made to it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.requests: list[tuple[str, str]] = []

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name in ("get", "put", "list", "delete", "head") and callable(attr):
            async def counted(*args, **kwargs):
                self.requests.append((name, str(args[0]) if args else ""))
                return await attr(*args, **kwargs)
            return counted
        return attr


def test_the_scheduler_s_proposals_are_submitted_with_their_specs_then_scheduled() -> None:
    """Step 3c: each job the scheduler proposes is appended ``Submitted`` (one
    ``compaction_state`` event with its spec), then scheduled by the same tick's validation."""
    store, _ = filled_store(n_keys=50, rounds=3)
    rt = RecordingRuntime("coordinator")
    coord = Compactor(store, rt, compactor_settings(min_sources=2), local_worker=False)

    async def main():
        await coord.start()
        await coord.tick()

    trio.run(main)
    _, cs = latest_compactions(store)
    jobs = [c for c in cs.recent_compactions if c.status is S.SCHEDULED]
    assert jobs
    states = [(f["id"], f["status"], f.get("spec")) for _, kind, f in rt.events if kind == "compaction_state"]
    assert states == ([(str(c.id), "Submitted", CompactionSpec.from_format(c.spec).render()) for c in jobs]
                      + [(str(c.id), "Scheduled", None) for c in jobs])


def test_a_tick_with_no_stale_job_makes_no_reclaim_request() -> None:
    """Step 3a reads the tick's ``.compactions`` for stale Running jobs: with none, it writes
    nothing and reads nothing more."""
    store, _ = filled_store(n_keys=50, rounds=1)
    counting = CountingStore(store)
    coord = Compactor(counting, RecordingRuntime("coordinator"), compactor_settings(min_sources=100),
                      local_worker=False)

    async def main():
        await coord.start()
        await submit_compaction(store, RecordingRuntime("admin"), full_spec(latest_manifest(store)[1]))
        await coord.tick()  # Submitted -> Scheduled: a job, not Running, so not stale
        coord._file = await coord.cstore.read_latest()
        counting.requests.clear()
        await coord._reclaim()

    trio.run(main)
    assert counting.requests == []


def test_unscheduling_a_job_whose_sources_changed_wakes_the_coordinator() -> None:
    """A Scheduled job whose sources left the manifest goes back to Submitted, and the coordinator
    is woken to fail it at once (not a poll interval later); a tick that only schedules does not
    wake it."""
    store, _ = filled_store(n_keys=50, rounds=2)
    coord = Compactor(store, RecordingRuntime("coordinator"), compactor_settings(min_sources=100),
                      local_worker=False)

    async def main():
        await coord.start()
        await submit_compaction(store, RecordingRuntime("admin"), full_spec(latest_manifest(store)[1]))
        await coord.tick()  # Submitted -> Scheduled
        assert not coord._wakeup.is_set()
        mid, m = latest_manifest(store)
        ms = ManifestStore(store, RecordingRuntime("other"))
        await ms.try_write(mid + 1, attrs.evolve(m, l0=m.l0[1:]))  # one of its L0 sources is gone
        await coord.tick()
        return await coord.cstore.read_latest()

    latest = trio.run(main)
    assert coord._wakeup.is_set()
    assert [c.status for c in latest.compactions.recent_compactions] == [S.SUBMITTED]


def test_a_job_is_scheduled_with_the_retention_it_was_validated_at_and_keeps_it_when_scheduled_again() -> None:
    """Step 3b: scheduling a Submitted job without a context records one, empty, holding the
    ``recent_snapshot_min_seq`` of the manifest it was validated against (the worker's
    retention); a job that comes back to Submitted with its context (a restarted coordinator
    unschedules it) keeps that context, not the later manifest's floor."""
    store, _ = filled_store(n_keys=50, rounds=2)

    async def set_floor(seq: int) -> None:
        mid, m = latest_manifest(store)
        await ManifestStore(store, RecordingRuntime("other")).try_write(mid + 1, attrs.evolve(m, recent_snapshot_min_seq=seq))

    def scheduled(cs: CompactionsV1) -> list:
        return [(c.status, c.ctx) for c in cs.recent_compactions]

    async def main():
        await set_floor(7)
        first = Compactor(store, RecordingRuntime("coordinator"), compactor_settings(min_sources=100), local_worker=False)
        await first.start()
        await submit_compaction(store, RecordingRuntime("admin"), full_spec(latest_manifest(store)[1]))
        await first.tick()
        before = (await first.cstore.read_latest()).compactions
        await set_floor(9)
        again = Compactor(store, RecordingRuntime("restarted"), compactor_settings(min_sources=100), local_worker=False)
        await again.start()
        restarted = (await again.cstore.read_latest()).compactions
        await again.tick()
        return before, restarted, (await again.cstore.read_latest()).compactions

    before, restarted, after = trio.run(main)
    recorded = TieredCompactionContext((), 7)
    assert scheduled(before) == [(S.SCHEDULED, recorded)]
    assert scheduled(restarted) == [(S.SUBMITTED, recorded)]
    assert scheduled(after) == [(S.SCHEDULED, recorded)]


def test_an_output_with_no_first_or_last_key_is_passed_over_and_the_outputs_after_it_are_still_checked() -> None:
    """``check_subcompactions``: an output SST whose info has no first or last entry (nothing to
    place) is skipped, not the end of the check: an output after it that lies outside its range
    is still refused."""
    empty = CompactedSsTable(ULID.from_timestamp(1000), SsTableInfo(first_entry=None, last_entry=None))
    outside = CompactedSsTable(ULID.from_timestamp(1001), SsTableInfo(first_entry=b"a", last_entry=b"q"))
    subs = (Subcompaction(lc.make_range(None, b"m"), (empty, outside)), Subcompaction(lc.make_range(b"m", None), ()))
    job = _job(S.RUNNING, WorkerSpec(W1, 0), TieredCompactionContext(subs, 0))
    with pytest.raises(CorruptionError, match=f"compaction {job.id} subcompaction 0: output {outside.id}"):
        lc.check_compactions(_file(job), "the.compactions")
    ok = (Subcompaction(lc.make_range(None, b"m"), (empty,)), Subcompaction(lc.make_range(b"m", None), ()))
    lc.check_compactions(_file(_job(S.RUNNING, WorkerSpec(W1, 0), TieredCompactionContext(ok, 0))), "the.compactions")


def test_stored_compactions_find_returns_the_job_with_that_id_or_none() -> None:
    """``StoredCompactions.find`` (admin's compaction lookup): each job by an equal id (a fresh
    ULID object, not the one stored), in whatever order the file lists them; None for an unknown id."""
    from slatedb.compactor.store import StoredCompactions

    jobs = [_job(ms=ms) for ms in (2000, 3000, 1000)]
    stored = StoredCompactions(7, _file(*jobs))
    for job in jobs:
        assert stored.find(ULID.from_bytes(job.id.bytes)) is job
    assert stored.find(ULID.from_timestamp(4000)) is None


def test_sample_takes_evenly_spaced_anchors_when_there_are_more_keys_than_the_limit() -> None:
    """``subcompactions.sample``: up to ``limit`` first keys as they are (empty ones dropped); more
    than that, ``limit`` keys at evenly spaced (fractional) steps, the first key included."""
    from slatedb.compactor.subcompactions import sample

    keys = [b"k%02d" % i for i in range(10)]
    assert sample([b"", *keys[:4]], limit=4) == tuple(keys[:4])
    assert sample(keys, limit=4) == (b"k00", b"k02", b"k05", b"k07")  # step 2.5
    assert sample(keys, limit=3) == (b"k00", b"k03", b"k06")


def test_a_submitted_segment_drain_is_failed_and_the_jobs_after_it_are_still_decided() -> None:
    """``Compactor._decide``: a Submitted segment-drain compaction (not supported) fails with its
    reason, and the Submitted jobs listed after it are still decided (scheduled here)."""
    from slatedb.compactor.compactor import Compactor
    from slatedb.format.types import DrainSegmentSpec

    store, _ = filled_store(n_keys=100, rounds=1, deletes=0)
    c = Compactor(store, RecordingRuntime(), compactor_settings())
    trio.run(c.start)
    l0 = latest_manifest(store)[1].l0
    drain = Compaction(ULID.from_timestamp(1000), DrainSegmentSpec(segment=b"s"), S.SUBMITTED)
    tiered = Compaction(ULID.from_timestamp(2000), TieredCompactionSpec(l0_view_ids=tuple(v.id for v in l0),
                                                                        destination=0), S.SUBMITTED)
    fail, go, unschedule = c._decide((drain, tiered))
    assert fail == {drain.id: "segment drain compactions are not supported"}
    assert go == [tiered.id] and unschedule == []
