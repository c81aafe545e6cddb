"""The compactor process: compaction end to end, fencing on two files (CFENCE-*), the lifecycle
in ``.compactions`` (COMPACT-*), resume after a crash at every output SST, external submissions."""

from __future__ import annotations

import json

import attrs
import pytest
import trio

from slatedb.compactor import Compactor, CompactorEpochError, full_spec, submit_compaction
from slatedb.compactor.compactor import FAILED_REASONS_DIR, failed_reason_key
from slatedb.compactor.scheduler import sst_size_bytes
from slatedb.compactor.spec import CompactionSpec, L0Source, RunSource
from slatedb.compactor.store import CompactionsStore, compactions_key
from slatedb.errors import FencedError
from slatedb.format.compactions import encode_compactions
from slatedb.format.layout import sst_key
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import CompactionsV1, CompactionStatus
from slatedb.manifest.store import ManifestStore, manifest_key
from slatedb.runtime import probes

from .helpers import (
    RecordingRuntime,
    clone_store,
    compactor_settings,
    filled_store,
    latest_compactions,
    latest_manifest,
    read_all,
)

S = CompactionStatus


def compact(store, settings=None, rt=None) -> Compactor:
    c = Compactor(store, rt or RecordingRuntime(), settings or compactor_settings())

    async def main():
        await c.run_until_idle()

    trio.run(main)
    return c


def test_compaction_drains_l0_into_sorted_runs_and_keeps_every_row() -> None:
    store, expected = filled_store()
    assert len(latest_manifest(store)[1].l0) >= 8
    c = compact(store, compactor_settings(max_sst_size=8192))
    _, m = latest_manifest(store)
    assert len(m.l0) < 2 and m.compacted, "L0 was not drained"
    assert (c.stats["completed"] >= 2 and c.stats["failed"] == 0 and c.stats["resumed"] == 0
            and c.stats["reclaimed"] == 0), c.stats
    assert m.compactor_epoch == c.epoch
    assert any(len(r.ssts) > 1 for r in m.compacted), "max_sst_size did not split the output"
    referenced = {v.sst_id for r in m.compacted for v in r.ssts} | {v.sst_id for v in m.l0}
    assert {s.id for s in m.ssts} == referenced
    assert read_all(store) == expected
    # Every compaction ended Completed; only the most recent finished one is kept (RFC 002).
    _, cs = latest_compactions(store)
    assert [c.status for c in cs.recent_compactions] == [S.COMPLETED]
    # Every job was the compactor's own scheduler's: none is reported adopted from another process.
    assert probes.COMPACTOR_EXTERNAL_ADOPTED not in c.runtime.probes


def test_the_commit_pins_the_previous_manifest_with_an_expiring_checkpoint() -> None:
    store, _ = filled_store(n_keys=200, rounds=2, deletes=0)
    compact(store)
    mid, m = latest_manifest(store)
    pins = [cp for cp in m.checkpoints if cp.metadata is None]
    assert pins and all(0 < cp.checkpoint_expire_time_s - cp.checkpoint_create_time_s <= 900 for cp in pins)
    assert all(cp.manifest_id < mid for cp in pins)


# ---------------------------------------------------------------------------------------------
# Fencing (RFC 002 "On startup…")
# ---------------------------------------------------------------------------------------------


def test_a_second_compactor_fences_the_first_on_both_files() -> None:
    store, expected = filled_store(n_keys=300)
    events: list = []
    c1 = Compactor(store, RecordingRuntime("c1", events), compactor_settings())
    c2 = Compactor(store, RecordingRuntime("c2", events), compactor_settings())

    async def main():
        e1 = await c1.start()
        e2 = await c2.start()
        assert e2 == e1 + 1
        with pytest.raises(FencedError):
            await c1.run_until_idle()
        await c2.run_until_idle()

    trio.run(main)
    commits = [(who, f) for who, kind, f in events if kind == "compaction_commit"]
    assert commits and {who for who, _ in commits} == {"c2"}, "CFENCE: the fenced compactor committed"
    assert latest_manifest(store)[1].compactor_epoch == c2.epoch
    assert latest_compactions(store)[1].compactor_epoch == c2.epoch
    assert read_all(store) == expected


class _GatedStore:
    """Wraps a store; holds every put under ``compacted/`` by ``holder`` until released."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.first_output = trio.Event()
        self.release = trio.Event()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def put(self, key, data, mode=None, **kw):
        if key.startswith("compacted/"):
            self.first_output.set()
            await self.release.wait()
        return await (self._inner.put(key, data, mode, **kw) if mode is not None else self._inner.put(key, data, **kw))


def test_a_compactor_fenced_mid_compaction_never_commits_its_output() -> None:
    """Two compactors started on one database never both commit: c1 is mid-compaction when
    c2 takes over and compacts everything; c1's finish finds a newer epoch and gives up."""
    store, expected = filled_store(n_keys=300)
    gated = _GatedStore(store)
    events: list = []
    c1 = Compactor(gated, RecordingRuntime("c1", events), compactor_settings())
    c2 = Compactor(store, RecordingRuntime("c2", events), compactor_settings())
    outcome = {}

    async def run_c1():
        try:
            await c1.run_until_idle()
            outcome["c1"] = "finished"
        except* FencedError:
            outcome["c1"] = "fenced"

    async def main():
        async with trio.open_nursery() as n:
            n.start_soon(run_c1)
            await gated.first_output.wait()
            await c2.run_until_idle()
            gated.release.set()

    trio.run(main)
    assert outcome["c1"] == "fenced"
    assert {who for who, kind, _ in events if kind == "compaction_commit"} == {"c2"}
    _, m = latest_manifest(store)
    c1_outputs = {o for who, kind, f in events if kind == "compaction_output" and who == "c1" for o in [f["sst"]]}
    in_manifest = {str(s.id) for s in m.ssts}
    assert not c1_outputs & in_manifest
    assert read_all(store) == expected


def _write_manifest_after(store, transform) -> None:
    mid, m = latest_manifest(store)
    store.put_now(manifest_key(mid + 1), encode_manifest(transform(m)))


def test_startup_outcomes_of_a_lost_race() -> None:
    store, _ = filled_store(n_keys=100, rounds=1, deletes=0)
    # A newer compactor epoch already in the manifest when ours lands second: fenced.
    ms = ManifestStore(store, RecordingRuntime())

    class RacingManifests(ManifestStore):
        raced = False

        async def try_write(self, manifest_id, manifest, **kw):
            if not self.raced:
                self.raced = True
                _write_manifest_after(store, lambda m: attrs.evolve(m, compactor_epoch=m.compactor_epoch + 5))
            return await super().try_write(manifest_id, manifest, **kw)

    c = Compactor(store, RecordingRuntime(), compactor_settings())
    c.manifests = RacingManifests(store, c.runtime)
    with pytest.raises(FencedError):
        trio.run(c.start)
    # A writer's L0 flush (older compactor epoch) in the way: retry at the next id, same epoch.
    c = Compactor(store, RecordingRuntime(), compactor_settings())
    before = latest_manifest(store)[1].compactor_epoch

    class WriterInTheWay(ManifestStore):
        raced = False

        async def try_write(self, manifest_id, manifest, **kw):
            if not self.raced:
                self.raced = True
                _write_manifest_after(store, lambda m: attrs.evolve(m, last_l0_seq=m.last_l0_seq + 1))
            return await super().try_write(manifest_id, manifest, **kw)

    c.manifests = WriterInTheWay(store, c.runtime)
    assert trio.run(c.start) == before + 1
    del ms


def test_compactions_file_outcomes_at_startup() -> None:
    store, _ = filled_store(n_keys=100, rounds=1, deletes=0)
    epoch = latest_manifest(store)[1].compactor_epoch + 1
    # A .compactions file already carrying a higher epoch: fenced.
    store.put_now(compactions_key(1), encode_compactions(CompactionsV1(epoch + 3, ())))
    with pytest.raises(FencedError):
        trio.run(Compactor(store, RecordingRuntime(), compactor_settings()).start)
    # Our own epoch in .compactions before we wrote it: epochs went backwards (CFENCE-3).
    store2, _ = filled_store(n_keys=100, rounds=1, deletes=0)
    epoch2 = latest_manifest(store2)[1].compactor_epoch + 1
    store2.put_now(compactions_key(1), encode_compactions(CompactionsV1(epoch2, ())))
    with pytest.raises(CompactorEpochError):
        trio.run(Compactor(store2, RecordingRuntime(), compactor_settings()).start)



def test_a_write_racing_the_startup_compactions_bump_is_retried_at_the_next_id() -> None:
    """CFENCE-3 step 2: the startup's ``.compactions`` write (our epoch) loses its create to
    another process's write of the same id (here an admin submission, which writes an older
    epoch): the compactor reads the new latest file and writes our epoch after it, keeping the
    submission. Giving up on the conflict would leave ``.compactions`` at the older epoch."""
    store, _ = filled_store(n_keys=100, rounds=1, deletes=0)
    admin = RecordingRuntime("admin")

    class SubmitDuringStart(CompactionsStore):
        raced = False

        async def try_write(self, compactions_id, compactions):
            if not self.raced:
                self.raced = True
                await submit_compaction(store, admin, full_spec(latest_manifest(store)[1]))
            return await super().try_write(compactions_id, compactions)

    rt = RecordingRuntime("c")
    c = Compactor(store, rt, compactor_settings(min_sources=100))
    c.cstore = SubmitDuringStart(store, rt)
    epoch = trio.run(c.start)
    assert c.cstore.raced
    file_id, cs = latest_compactions(store)
    assert (file_id, cs.compactor_epoch) == (2, epoch)
    assert [j.status for j in cs.recent_compactions] == [S.SUBMITTED]


# ---------------------------------------------------------------------------------------------
# Resume (RFC 002 "Resuming Partial Compactions"), and the crash window of "On job complete…"
# ---------------------------------------------------------------------------------------------


def _final_rows(store) -> list:
    from slatedb.lsm.view import sst_key
    from slatedb.format.sst_reader import SstReader

    _, m = latest_manifest(store)

    async def rows():
        out = []
        for run in m.compacted:
            for v in run.ssts:
                reader = await SstReader.open(store, sst_key(v.sst_id))
                out.append((run.id, [r async for r in reader.scan()]))
        return out

    return trio.run(rows)


def _recorded_outputs(store) -> int:
    _, cs = latest_compactions(store)
    return max((len(c.output_ssts) for c in cs.recent_compactions if c.status is S.RUNNING), default=0)


def _crash_after_outputs(store, k: int) -> None:
    """Run a full compaction; the process dies right after a heartbeat recorded its k-th output
    SST (its ranges run at once, so one heartbeat may record the outputs of several)."""
    rt = RecordingRuntime("doomed")
    c = Compactor(store, rt, compactor_settings(min_sources=100, max_sst_size=4096))

    async def main():
        await c.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        with trio.CancelScope() as scope:
            def event(kind, **f):
                rt.events.append((rt.name, kind, f))
                if kind == "commit" and f.get("ns") == "compactions" and _recorded_outputs(store) >= k:
                    scope.cancel()  # the crash: nothing after this await runs
            rt.event = event  # type: ignore[method-assign]
            await c.run_until_idle()

    trio.run(main)


def test_a_crash_after_each_output_sst_resumes_to_exactly_the_uninterrupted_result() -> None:
    base, expected = filled_store(n_keys=400, rounds=2)
    reference = clone_store(base)
    _crash_after_outputs(reference, 10**9)  # never crashes: the uninterrupted run
    want = _final_rows(reference)
    (run,) = latest_manifest(reference)[1].compacted
    n_outputs = len(run.ssts)
    assert n_outputs >= 4, n_outputs
    for k in range(1, n_outputs):
        store = clone_store(base)
        _crash_after_outputs(store, k)
        _, cs = latest_compactions(store)
        (job,) = [c for c in cs.recent_compactions if c.status is S.RUNNING]
        assert k <= len(job.output_ssts) <= n_outputs, (k, len(job.output_ssts))
        rt = RecordingRuntime("restarted")
        c = compact(store, compactor_settings(min_sources=100, max_sst_size=4096), rt)
        assert any(kind == "compaction_resume" for _, kind, _ in rt.events), k
        assert c.stats["resumed"] == 1 and c.stats["completed"] == 1, c.stats
        assert _final_rows(store) == want, f"resumed after output {k} differs"
        assert read_all(store) == expected


def test_a_crash_between_the_manifest_and_compactions_writes_ends_failed_not_twice() -> None:
    """COMPACT-3: on restart the job is Running again, its inputs are gone from the manifest,
    so validation fails it; the manifest is not committed a second time."""
    store, expected = filled_store(n_keys=200, rounds=2)
    compact(store)
    mid, m = latest_manifest(store)
    cid, cs = latest_compactions(store)
    (done,) = cs.recent_compactions
    # The state as the crash left it: the manifest committed, .compactions still says Running.
    store.put_now(compactions_key(cid + 1), encode_compactions(
        attrs.evolve(cs, recent_compactions=(attrs.evolve(done, status=S.RUNNING),))))
    rt = RecordingRuntime("restarted")
    compact(store, rt=rt)
    assert not [f for _, kind, f in rt.events if kind == "compaction_commit" and f["id"] == str(done.id)]
    _, cs2 = latest_compactions(store)
    assert [c.status for c in cs2.recent_compactions if c.id == done.id] in ([S.FAILED], [])
    assert [f for _, kind, f in rt.events if kind == "compaction_state" and f["status"] == "Failed"]
    assert latest_manifest(store)[1].compacted == m.compacted
    assert read_all(store) == expected


def test_a_compacted_job_whose_commit_landed_before_a_stop_ends_completed(caplog) -> None:
    """COMPACT-10: the coordinator's manifest commit lands, then it stops before ``.compactions``
    says Completed (a writer's close stopping its compactor, a crash, a takeover). The next
    coordinator finds the job Compacted with its outputs already the database's sorted run: it
    records it Completed, writes no manifest and no failure reason, and logs no WARNING. (Before,
    the commit validated the sources first; they are gone, replaced by the job's own run, so the
    job ended Failed with ``compaction_invalid ... source L0:x is not in the database`` on every
    such restart: 8 in 150 open/close cycles of a writer with a 10 ms poll interval.)"""
    from slatedb.manifest.edits import ApplyCompaction
    from slatedb.runtime.production import ProductionRuntime

    class Logged(RecordingRuntime):  # the events, and the production log lines they make
        def event(self, kind, **fields):
            super().event(kind, **fields)
            ProductionRuntime.event(self, kind, **fields)

    store, expected = filled_store(n_keys=200, rounds=2)
    l0_before = {v.id for v in latest_manifest(store)[1].l0}

    async def stops_after_the_manifest_commit() -> bool:
        c = Compactor(store, RecordingRuntime("first"), compactor_settings())
        inner = c.manifests.commit
        with trio.CancelScope() as scope:
            async def commit(edit, **kw):
                got = await inner(edit, **kw)
                if isinstance(edit, ApplyCompaction):
                    scope.cancel()  # the stop: nothing after the manifest write runs
                    await trio.sleep(0)
                return got
            c.manifests.commit = commit  # type: ignore[method-assign]
            await c.run_until_idle()
        return scope.cancelled_caught

    assert trio.run(stops_after_the_manifest_commit)
    mid, m = latest_manifest(store)
    _, cs = latest_compactions(store)
    (job,) = [j for j in cs.recent_compactions if j.status is S.COMPACTED]
    outputs = [o.id for o in job.output_ssts]
    sources = set(CompactionSpec.from_format(job.spec).l0_view_ids)
    assert outputs and sources <= l0_before and not sources & {v.id for v in m.l0}
    assert [[v.sst_id for v in r.ssts] for r in m.compacted] == [outputs]  # the commit landed

    rt = Logged("restarted")
    caplog.set_level("INFO", logger="slatedb")
    second = compact(store, compactor_settings(min_sources=100), rt)  # it proposes nothing new
    assert second.stats["completed"] == 1 and second.stats["failed"] == 0, second.stats
    states = [f for _, kind, f in rt.events if kind == "compaction_state" and f["id"] == str(job.id)]
    assert states == [{"id": str(job.id), "status": "Completed", "already": True}]
    assert not [f for _, kind, f in rt.events if kind in ("compaction_invalid", "compaction_commit")]
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    assert not store.list_now(FAILED_REASONS_DIR)  # no failure reason recorded
    _, cs2 = latest_compactions(store)
    assert [(j.id, j.status) for j in cs2.recent_compactions] == [(job.id, S.COMPLETED)]
    mid2, m2 = latest_manifest(store)
    assert mid2 == mid + 1  # its startup manifest only: the commit is not written again
    assert m2.l0 == m.l0 and m2.compacted == m.compacted and m2.ssts == m.ssts
    assert read_all(store) == expected


def _tombstones_only(store, keys: range, flushes: int) -> None:
    """``keys`` deleted in ``flushes`` L0 SSTs (a writer that never compacts)."""
    import slatedb

    from .helpers import WRITER

    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        for f in range(flushes):
            for i in keys[f::flushes]:
                db.delete(b"k%05d" % i)
            db.flush()


def _empty_job_store(kind: str):
    """A database whose next compaction drops every row it reads (a job with no output SST):
    ``l0``: tombstones only, in L0 SSTs and no sorted run below (the L0-only job is the bottom);
    ``runs``: puts compacted into run 0, all deleted and compacted into run 1 (tombstones kept:
    not the bottom), then an external ``[SR:1, SR:0] -> 0`` submitted (it is)."""
    from .helpers import memory_store

    if kind == "l0":
        store = memory_store()
        _tombstones_only(store, range(900), 3)
        return store, {}, compactor_settings()
    store, _ = filled_store(n_keys=200, rounds=1, deletes=0)
    compact(store, compactor_settings())
    _tombstones_only(store, range(200), 3)
    m = latest_manifest(store)[1]
    assert m.l0 and [r.id for r in m.compacted] == [0], m
    only = compactor_settings(min_sources=100)  # the scheduler proposes nothing: only what is submitted
    trio.run(submit_compaction, store, RecordingRuntime("admin"), CompactionSpec(tuple(L0Source(v.id) for v in m.l0), 1))
    compact(store, only)
    m = latest_manifest(store)[1]
    assert not m.l0 and [r.id for r in m.compacted] == [1, 0], m
    trio.run(submit_compaction, store, RecordingRuntime("admin"), CompactionSpec((RunSource(1), RunSource(0)), 0))
    return store, {}, only


@pytest.mark.parametrize("kind", ["l0", "runs"])
def test_an_empty_job_whose_commit_landed_before_a_stop_ends_completed(kind) -> None:
    """COMPACT-10 for a job with no output (every row it read dropped: tombstones and expired
    rows at the bottom). Its commit only removes its sources; it lands, then the coordinator
    stops before ``.compactions`` says Completed. The next coordinator must recognise the commit
    without outputs to look for: every source gone, its destination not a run, and (with L0
    sources) ``last_compacted_l0_sst_view_id`` at its newest L0 view. It is recorded Completed,
    no manifest written, no failure reason. (Before, it ended Failed: ``source ... is not in the
    database``.)"""
    from slatedb.manifest.edits import ApplyCompaction

    store, expected, settings = _empty_job_store(kind)

    async def stops_after_the_manifest_commit() -> bool:
        c = Compactor(store, RecordingRuntime("first"), settings)
        inner = c.manifests.commit
        with trio.CancelScope() as scope:
            async def commit(edit, **kw):
                got = await inner(edit, **kw)
                if isinstance(edit, ApplyCompaction):
                    scope.cancel()  # the stop: nothing after the manifest write runs
                    await trio.sleep(0)
                return got
            c.manifests.commit = commit  # type: ignore[method-assign]
            await c.run_until_idle()
        return scope.cancelled_caught

    before = latest_manifest(store)[1]
    assert trio.run(stops_after_the_manifest_commit)
    mid, m = latest_manifest(store)
    _, cs = latest_compactions(store)
    (job,) = [j for j in cs.recent_compactions if j.status is S.COMPACTED]
    spec = CompactionSpec.from_format(job.spec)
    assert not job.output_ssts  # the empty job
    assert bool(spec.l0_view_ids) == (kind == "l0") and bool(spec.run_ids) == (kind == "runs")
    assert not m.compacted and not {v.id for v in m.l0} & set(spec.l0_view_ids)  # the commit landed
    assert m.compacted != before.compacted or m.l0 != before.l0

    rt = RecordingRuntime("restarted")
    second = compact(store, compactor_settings(min_sources=100), rt)
    assert second.stats["completed"] == 1 and second.stats["failed"] == 0, second.stats
    states = [f for _, kind_, f in rt.events if kind_ == "compaction_state" and f["id"] == str(job.id)]
    assert states == [{"id": str(job.id), "status": "Completed", "already": True}]
    assert not [f for _, kind_, f in rt.events if kind_ in ("compaction_invalid", "compaction_commit")]
    assert not store.list_now(FAILED_REASONS_DIR)
    _, cs2 = latest_compactions(store)
    assert [(j.id, j.status) for j in cs2.recent_compactions] == [(job.id, S.COMPLETED)]
    mid2, m2 = latest_manifest(store)
    assert mid2 == mid + 1  # its startup manifest only
    assert m2.l0 == m.l0 and m2.compacted == m.compacted and m2.ssts == m.ssts
    assert read_all(store) == expected


# ---------------------------------------------------------------------------------------------
# External submissions (RFC 002 "Persisting External Compactions")
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("db_codec", "worker_codec", "written"), [
    (None, "Zstd", "ZSTD"),  # the worker's codec where the database has none
    ("Lz4", None, "LZ4"),  # none of its own: the database's
    ("Lz4", "Zstd", "ZSTD"),  # both: the worker's
    (None, None, "NONE"),
])
def test_outputs_are_compressed_with_the_workers_codec_else_the_databases(db_codec, worker_codec, written) -> None:
    """``compactor_options.worker.compression_codec`` sets the codec of compaction outputs; unset,
    they take the database's ``compression_codec`` (``output_options``). `sim mutate` seed 25:
    the test inverted (``is None``) wrote the outputs with the database's codec when the worker
    had one, and uncompressed when it had none; no check read an output's codec."""
    from slatedb.format.sst import decode_layout
    from slatedb.format.types import CompressionFormat

    store, expected = filled_store(n_keys=200, rounds=2, deletes=10)
    base = compactor_settings(max_sst_size=8192, compression_codec=db_codec)
    settings = attrs.evolve(base, compactor_options=attrs.evolve(
        base.compactor_options, worker=attrs.evolve(base.compactor_options.worker, compression_codec=worker_codec)))
    compact(store, settings)
    _, m = latest_manifest(store)
    outputs = [v.sst_id for r in m.compacted for v in r.ssts]
    assert outputs and not m.l0
    formats = {decode_layout(bytes(store.get_now(sst_key(i)).data), sst_key(i)).info.compression_format for i in outputs}
    assert formats == {CompressionFormat[written]}
    assert read_all(store) == expected


def test_an_external_full_compaction_runs_and_an_invalid_one_fails_with_its_reason() -> None:
    store, expected = filled_store(n_keys=200, rounds=2)
    rt = RecordingRuntime("admin")
    manifest = latest_manifest(store)[1]

    async def submit():
        good = await submit_compaction(store, rt, full_spec(manifest))
        bad = await submit_compaction(store, rt, CompactionSpec((RunSource(77),), 77))
        return good, bad

    good, bad = trio.run(submit)
    _, cs = latest_compactions(store)
    assert [c.status for c in cs.recent_compactions] == [S.SUBMITTED, S.SUBMITTED]
    c = Compactor(store, RecordingRuntime(), compactor_settings(min_sources=100))  # the scheduler proposes nothing
    assert trio.run(c.run_until_idle) == 2  # the compactions that finished in this run: one each way
    _, m = latest_manifest(store)
    assert not m.l0 and [r.id for r in m.compacted] == [0]
    # Both submissions were another process's: each adopted once (scheduled or failed).
    assert c.runtime.probes.count(probes.COMPACTOR_EXTERNAL_ADOPTED) == 2
    assert read_all(store) == expected
    reason = json.loads(store.get_now(failed_reason_key(bad.id)).data)
    assert "SR:77" in reason["reason"] and "not in the database" in reason["reason"]
    assert c.stats["completed"] == 1 and c.stats["failed"] == 1
    assert c.stats["output_ssts"] == len(m.compacted[0].ssts)
    outputs = {v.sst_id for v in m.compacted[0].ssts}
    assert c.stats["bytes_written"] == sum(sst_size_bytes(s.info) for s in m.ssts if s.id in outputs) > 0
    # The engine's metrics count the committed compaction and its outputs' data, filters and
    # indexes: each object up to its index's end, short of the stats and the info block that
    # follow (`sim mutate` seed 22: the sum made index_offset >> index_len survived, no check
    # read the metric).
    infos = [s.info for s in m.ssts if s.id in outputs]
    assert all(i.filter_offset + i.filter_len <= i.index_offset < i.stats_offset for i in infos)
    assert c.runtime.metrics.counters["compactions"] == 1
    assert 0 < c.runtime.metrics.counters["compaction_bytes"] == sum(i.index_offset + i.index_len for i in infos) < sum(
        len(store.get_now(sst_key(i)).data) for i in outputs)
    # A later run counts only its own: one more invalid submission, with one of each finished
    # before (`sim mutate` seed 22: the count before taken as completed | failed survived).
    trio.run(submit_compaction, store, rt, CompactionSpec((RunSource(78),), 78))
    assert trio.run(c.run_until_idle) == 1
    assert c.stats["completed"] == 1 and c.stats["failed"] == 2


def test_a_coordinator_without_a_local_worker_reports_no_output() -> None:
    """``Compactor.stats`` has ``output_ssts`` and ``bytes_written`` also when the outputs are
    written by other processes' workers (``local_worker=False``): 0, it wrote none."""
    store, _ = filled_store(n_keys=50, rounds=1)
    c = Compactor(store, RecordingRuntime("coordinator"), local_worker=False)
    assert c.worker is None
    assert c.stats["output_ssts"] == 0 and c.stats["bytes_written"] == 0


def test_a_submission_racing_the_compactor_is_adopted_not_lost() -> None:
    store, _ = filled_store(n_keys=200, rounds=1, deletes=0)
    admin = RecordingRuntime("admin")

    class SubmitDuringWrite(CompactionsStore):
        done = False

        async def try_write(self, compactions_id, compactions):
            if not self.done and compactions_id > 1:
                self.done = True
                await submit_compaction(store, admin, full_spec(latest_manifest(store)[1]))
            return await super().try_write(compactions_id, compactions)

    rt = RecordingRuntime("c")
    c = Compactor(store, rt, compactor_settings(min_sources=2))
    c.cstore = SubmitDuringWrite(store, rt)
    trio.run(c.run_until_idle)
    submitted = [f["id"] for _, kind, f in admin.events if kind == "compaction_submitted"]
    states = {(f["id"], f["status"]) for _, kind, f in rt.events if kind == "compaction_state"}
    assert submitted and any(s[0] == submitted[0] and s[1] in ("Completed", "Failed") for s in states)


def test_a_restarted_compaction_into_its_own_source_run_already_committed_is_failed_before_running() -> None:
    """COMPACT-3 where validation alone cannot tell: a full compaction of a lone sorted run writes
    into that run's id, so after a crash between the manifest and ``.compactions`` writes its
    source (the new run 0) is still there. Its outputs being in the manifest is what fails it, at
    startup, before any output is written again."""
    store, expected = filled_store(n_keys=200, rounds=2)
    compact(store)  # L0 -> run 0
    _, m0 = latest_manifest(store)
    assert not m0.l0 and [r.id for r in m0.compacted] == [0]
    rt0 = RecordingRuntime("admin")
    trio.run(lambda: submit_compaction(store, rt0, full_spec(m0)))  # SR:0 -> 0
    compact(store, compactor_settings(min_sources=100))
    mid, m = latest_manifest(store)
    cid, cs = latest_compactions(store)
    (done,) = [c for c in cs.recent_compactions if c.status is S.COMPLETED]
    store.put_now(compactions_key(cid + 1), encode_compactions(
        attrs.evolve(cs, recent_compactions=(attrs.evolve(done, status=S.RUNNING),))))
    rt = RecordingRuntime("restarted")
    compact(store, compactor_settings(min_sources=100), rt)
    assert not [kind for _, kind, f in rt.events if kind in ("compaction_resume", "compaction_output")]
    assert [f for _, kind, f in rt.events if kind == "compaction_state" and f["status"] == "Failed"]
    assert latest_manifest(store)[1].compacted == m.compacted
    assert read_all(store) == expected


def test_the_scheduler_is_offered_only_the_capacity_that_active_jobs_leave() -> None:
    """3c: new jobs are proposed for ``max_concurrent_compactions`` minus the jobs already
    active (Submitted, Scheduled, Running, Compacted), here an external submission."""
    store, _ = filled_store(n_keys=200, rounds=2, deletes=0)
    rt = RecordingRuntime()
    c = Compactor(store, rt, compactor_settings(compactor_options={
        "poll_interval": "50ms", "commit_compacted_interval": "20ms", "max_concurrent_compactions": 3,
        "scheduler_options": {"min_compaction_sources": "2", "max_compaction_sources": "8"}}))
    offered = []
    propose = c.scheduler.propose

    def recording(manifest, active, capacity):
        offered.append((len(active), capacity))
        return propose(manifest, active, capacity)

    c.scheduler.propose = recording

    async def main():
        await c.start()
        await submit_compaction(store, rt, full_spec(latest_manifest(store)[1]))
        await c.run_until_idle()

    trio.run(main)
    assert offered and all(n + cap == 3 for n, cap in offered), offered
    assert any(n for n, _ in offered), offered  # an offer made while the submission was active


def test_the_merge_yields_to_the_loop_once_per_chunk_of_rows_not_per_row(monkeypatch) -> None:
    """The merge shares the engine's loop with the writer: it yields every ``CHUNK_ROWS`` input
    rows (short CPU slices), and not at every row (a checkpoint per row is a scheduler round trip
    per row: the merge's own cost several times over)."""
    import sys

    from slatedb.compactor import executor

    yields = []
    real = trio.lowlevel.checkpoint

    async def counting() -> None:
        if sys._getframe(1).f_code.co_filename == executor.__file__:
            yields.append(1)
        await real()

    monkeypatch.setattr(trio.lowlevel, "checkpoint", counting)
    store, expected = filled_store(n_keys=600, rounds=3, deletes=40)  # about 1,840 rows in
    compact(store, compactor_settings(max_sst_size=8192))
    assert read_all(store) == expected
    assert len(yields) <= 2, len(yields)  # at most one per 2,048 rows in, per job


def test_run_compactor_once_drops_its_startup_pin_and_keeps_its_commit_pins() -> None:
    """compaction.md step 1, writer.md CKPT-5: the claim's pin only made the startup manifest's bytes
    unique; ``run-compactor --once`` drops it at its clean stop, so a database with nothing to
    compact is left with no checkpoint (a hard destroy need not wait 15 minutes). A commit's pin
    of the manifest it replaced stays, as the official engine's does."""
    from slatedb import admin

    store, _ = filled_store(n_keys=50, rounds=1, deletes=0)  # one L0 SST: nothing to compact
    c = trio.run(lambda: admin.run_compactor(store, compactor_settings(), once=True))
    assert c.epoch == 1 and c.startup_pin_id is None
    assert latest_manifest(store)[1].checkpoints == ()

    store, _ = filled_store(n_keys=50, rounds=3, deletes=0)  # three L0 SSTs: one compaction
    trio.run(lambda: admin.run_compactor(store, compactor_settings(), once=True))
    m = latest_manifest(store)[1]
    assert len(m.compacted) == 1 and len(m.checkpoints) == 1, m.checkpoints


def test_run_compactor_once_ends_beside_a_writer_that_keeps_flushing() -> None:
    """``run-compactor --once`` compacts what L0 held when it started and ends, leaving the L0
    SSTs flushed since for the next run. Before, every tick found new L0 SSTs from the writer
    and scheduled another job, so a ``--once`` run (a cron job) never ended while a writer wrote."""
    import threading

    import slatedb
    from slatedb import admin

    from slatedb.objstore.memory import MemoryStore

    from .helpers import WRITER

    store, _ = filled_store(n_keys=200, rounds=4, deletes=0)
    start_l0 = {v.id for v in latest_manifest(store)[1].l0}
    stop, flushed, failed = threading.Event(), [], []

    def keep_flushing() -> None:
        try:
            with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
                i = 0
                while not stop.is_set():
                    for _ in range(20):
                        db.put(b"n%07d" % i, b"x" * 40)
                        i += 1
                    db.flush(wal=False)  # a new L0 SST every few milliseconds
                    flushed.append(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            failed.append(e)

    # The compactor's view of the same bucket, its output SSTs slow to upload: each job outlasts
    # several of the writer's flushes, so every tick finds new L0 SSTs (the loaded machine on
    # which the endless run was seen; fast jobs let the old loop find L0 short of two SSTs).
    slow_outputs = MemoryStore(store._bucket, store._clock_ms, url=store.url)
    real_put = slow_outputs.put

    async def slow_put(key, data, *args, **kwargs):
        if key.startswith("compacted/"):
            await trio.sleep(0.05)
        return await real_put(key, data, *args, **kwargs)

    slow_outputs.put = slow_put
    writer = threading.Thread(target=keep_flushing)
    writer.start()
    ended = []

    async def once() -> None:
        with trio.move_on_after(120):  # bounds on the hang this test is about, not timings
            while len(flushed) < 3 and not failed:
                await trio.sleep(0.01)  # the writer is flushing before the compactor starts
            ended.append(await admin.run_compactor(slow_outputs, compactor_settings(), once=True))

    try:
        trio.run(once)
    finally:
        stop.set()
        writer.join(60)
    assert not failed, failed
    assert ended, "run_compactor(once=True) was still compacting new L0 SSTs after 120 s"
    assert not start_l0 & {v.id for v in latest_manifest(store)[1].l0}, "the L0 it started with is compacted"
    assert ended[0].stats["completed"] >= 1
