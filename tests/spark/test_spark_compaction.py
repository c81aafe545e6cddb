"""Distributed compaction on Spark (issue 24 item 4): the driver coordinates, each subcompaction
range is a Spark task. One test (one Spark session, a few small jobs): the committed sorted run
equals, row for row and version for version, the in-process compaction of the same database;
a task that fails after writing an output is retried and the failed attempt's output is never
committed (GC collects it); a driver that dies mid-job leaves progress the next coordinator
resumes after reclaiming the stale claim."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.compactor import Compactor, full_spec, submit_compaction
from slatedb.compactor.worker import Worker
from slatedb.config import Settings
from slatedb.format.types import CompactionStatus
from slatedb.lsm.view import sst_key
from slatedb.format.sst_reader import SstReader
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime
from slatedb.spark.compaction import SparkRanges, _run_range, run_spark_compactor

pytestmark = pytest.mark.xdist_group("spark")

WRITER = {"l0_sst_size_bytes": 4096, "compactor_options": None, "l0_max_ssts": 1000, "min_filter_keys": 1}


def _settings(timeout: str = "30s", subs: int = 4) -> Settings:
    return Settings.from_dict({"min_filter_keys": 1, "compactor_options": {
        "poll_interval": "50ms", "commit_compacted_interval": "50ms", "worker_heartbeat_timeout": timeout,
        "scheduler_options": {"min_compaction_sources": "100", "max_compaction_sources": "100"},
        "worker": {"max_sst_size": 4096, "max_subcompactions": subs, "heartbeat_interval": "200ms",
                   "compactions_poll_interval": "50ms"}}})


def _fill(root: Path) -> dict[bytes, bytes]:
    expected: dict[bytes, bytes] = {}
    with slatedb.Db.open(f"file://{root}", settings=WRITER) as db:
        for r in range(2):
            for i in range(600):
                k, v = b"k%05d" % i, b"v%d-%d" % (r, i) + b"." * 30
                db.put(k, v)
                expected[k] = v
        for i in range(0, 600, 13):
            db.delete(b"k%05d" % i)
            expected.pop(b"k%05d" % i)
    return expected


async def _submit_full(url: str) -> None:
    store = resolve_store(url)
    try:
        from slatedb.manifest.store import ManifestStore
        rt = ProductionRuntime("admin")
        m = (await ManifestStore(store, rt).read_latest()).manifest
        await submit_compaction(store, rt, full_spec(m))
    finally:
        await store.aclose()


def _run_rows(url: str) -> list[tuple]:
    async def main():
        store = resolve_store(url)
        try:
            from slatedb.manifest.store import ManifestStore
            m = (await ManifestStore(store, ProductionRuntime("t")).read_latest()).manifest
            out = []
            for run in m.compacted:
                for v in run.ssts:
                    reader = await SstReader.open(store, sst_key(v.sst_id))
                    out += [(run.id, r.key, r.seq, int(r.kind), r.value) async for r in reader.scan()]
            return m, out
        finally:
            await store.aclose()

    return trio.run(main)


def _scan(url: str) -> dict[bytes, bytes]:
    with slatedb.Db.open(url, settings=WRITER) as db:
        return dict(db.scan(None, None))


def test_spark_workers_compact_exactly_like_one_process_through_retries_and_a_driver_crash(spark, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    expected = _fill(base)
    local, distributed, crashed = tmp_path / "local", tmp_path / "spark", tmp_path / "crashed"
    for d in (local, distributed, crashed):
        shutil.copytree(base, d)
    shutil.rmtree(base)

    # The reference: the in-process engine (coordinator + local worker, one range).
    trio.run(_submit_full, f"file://{local}")
    c = trio.run(lambda: admin.run_compactor(resolve_store(f"file://{local}"), _settings(subs=1), once=True))
    assert c.stats["completed"] == 1
    want_m, want = _run_rows(f"file://{local}")

    # Spark: four ranges, range 1's first attempt fails after writing one output (retried).
    fail_dir = tmp_path / "fail"
    fail_dir.mkdir()
    (fail_dir / "fail-1").write_text("once")
    url = f"file://{distributed}"
    trio.run(_submit_full, url)
    c = trio.run(lambda: run_spark_compactor(spark, url, _settings(),
                                             runner=SparkRanges(spark, url, fail_dir=str(fail_dir))))
    assert not (fail_dir / "fail-1").exists(), "the injected task failure did not happen"
    assert c.stats["completed"] == 1 and c.worker.runner.tasks_run >= 3, (c.stats, c.worker.runner.tasks_run)
    got_m, got = _run_rows(url)
    assert [r[1:] for r in got] == [r[1:] for r in want], "Spark compaction differs from the in-process one"
    assert len(got_m.compacted) == 1 and len(got_m.compacted[0].ssts) > 4
    assert _scan(url) == expected
    # The failed attempt's output is garbage: on disk, never referenced (GC's to collect).
    referenced = {str(v.sst_id) for r in got_m.compacted for v in r.ssts}
    on_disk = {p.stem for p in (distributed / "compacted").glob("*.sst")}
    assert on_disk - referenced, "the failed attempt left no output"

    # A driver that dies after some ranges were recorded: no release (a crash), the next
    # coordinator reclaims the stale claim and resumes only what is missing.
    curl = f"file://{crashed}"
    trio.run(_submit_full, curl)

    async def doomed():
        store = resolve_store(curl)
        rt = ProductionRuntime("doomed")
        comp = Compactor(store, rt, _settings(), runner=SparkRanges(spark, curl))

        async def no_release() -> None:
            return None
        comp.worker.release_all = no_release  # type: ignore[method-assign]
        recorded = trio.Event()
        inner = comp.worker._heartbeat

        async def heartbeat(cid, ctx):
            await inner(cid, ctx)
            if ctx is not None and sum(1 for s in ctx.subcompactions if s.output_ssts) >= 2:
                recorded.set()
        comp.worker._heartbeat = heartbeat  # type: ignore[method-assign]
        async with trio.open_nursery() as n:
            n.start_soon(comp.run_until_idle)
            await recorded.wait()
            n.cancel_scope.cancel()  # the crash
        await store.aclose()

    trio.run(doomed)
    _, jobs = trio.run(lambda: _latest_compactions(curl))
    (job,) = [j for j in jobs.recent_compactions if j.status is CompactionStatus.RUNNING]
    assert sum(1 for s in job.ctx.subcompactions if s.output_ssts) >= 2
    c2 = trio.run(lambda: run_spark_compactor(spark, curl, _settings(timeout="1s")))
    assert c2.stats["completed"] == 1 and c2.stats["reclaimed"] == 1, c2.stats
    _, got2 = _run_rows(curl)
    assert [r[1:] for r in got2] == [r[1:] for r in want]
    assert _scan(curl) == expected
    assert isinstance(c2.worker, Worker)


async def _latest_compactions(url: str):
    from slatedb.compactor.store import CompactionsStore
    store = resolve_store(url)
    try:
        cur = await CompactionsStore(store, ProductionRuntime("t")).read_latest()
        return cur.id, cur.compactions
    finally:
        await store.aclose()


class _Speculative(SparkRanges):
    """Every range runs as two concurrent attempts in one Spark job (what speculation does); the
    driver takes one attempt's result back and the other attempt's outputs are never reported."""

    def __init__(self, spark, url):
        super().__init__(spark, url)
        self.losers: list = []

    def _submit(self, task):
        url = self.url
        rdd = self.spark.sparkContext.parallelize([(task.index, task.job), (task.index, task.job)], 2)
        (a, b) = rdd.map(lambda t: _run_range(url, None, t[0], t[1])).collect()
        self.tasks_run += 1
        self.losers.extend(b[1])
        return a[1]


def _referenced(m) -> set[str]:
    return {str(v.sst_id) for r in m.compacted for v in r.ssts} | {str(v.sst_id) for v in m.l0}


def _collect_garbage(url: str, expected: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """A newer L0 and a newer compaction (so GC's ULID cutoff passes every earlier output), then
    one GC pass with min_age 0; returns the model with the new rows."""
    with slatedb.Db.open(url, settings=WRITER) as db:
        for i in range(5):
            db.put(b"z%d" % i, b"later")
            expected[b"z%d" % i] = b"later"
    trio.run(_submit_full, url)
    c = trio.run(lambda: admin.run_compactor(resolve_store(url), _settings(subs=1), once=True))
    assert c.stats["completed"] == 1, c.stats
    gc = Settings.from_dict({"garbage_collector_options": {"compacted_options": {"min_age": "0s"}}})
    trio.run(lambda: admin.run_gc(resolve_store(url), gc, True))
    return expected


def test_lost_executors_speculative_attempts_and_a_crash_between_the_two_commits_are_safe(spark, tmp_path):
    """Issue 24 item 4, the remaining failures: (1) a task's Python worker process dies after
    writing an output (an executor lost mid-task; ``os._exit``): Spark runs the range again and
    the dead attempt's output is never committed; (2) every range runs as two concurrent attempts
    (speculation): one attempt's outputs are committed, the other's never, and both cases' stray
    outputs are collected by GC; (3) the driver dies between the manifest commit and the
    ``.compactions`` write: the next coordinator finds the Compacted job's outputs in the manifest
    and records it Completed (COMPACT-10; its sources are gone) and commits nothing twice. Rows equal the in-process compaction throughout."""
    base = tmp_path / "base"
    base.mkdir()
    expected = _fill(base)
    local, lost, spec, crash = (tmp_path / n for n in ("local", "lost", "spec", "crash"))
    for d in (local, lost, spec, crash):
        shutil.copytree(base, d)
    shutil.rmtree(base)
    trio.run(_submit_full, f"file://{local}")
    trio.run(lambda: admin.run_compactor(resolve_store(f"file://{local}"), _settings(subs=1), once=True))
    _, want = _run_rows(f"file://{local}")

    # (1) a lost executor: range 2's worker process exits after its first output
    fail_dir = tmp_path / "fail"
    fail_dir.mkdir()
    (fail_dir / "fail-2").write_text("exit")
    url = f"file://{lost}"
    inputs = {p.stem for p in (lost / "compacted").glob("*.sst")}
    trio.run(_submit_full, url)
    c = trio.run(lambda: run_spark_compactor(spark, url, _settings(),
                                             runner=SparkRanges(spark, url, fail_dir=str(fail_dir))))
    assert not (fail_dir / "fail-2").exists(), "the injected worker exit did not happen"
    assert c.stats["completed"] == 1, c.stats
    m, got = _run_rows(url)
    assert [r[1:] for r in got] == [r[1:] for r in want]
    strays = {p.stem for p in (lost / "compacted").glob("*.sst")} - _referenced(m) - inputs
    assert strays, "the lost attempt left no output"
    lost_expected = _collect_garbage(url, dict(expected))
    assert not strays & {p.stem for p in (lost / "compacted").glob("*.sst")}, "GC kept the lost attempt's output"
    assert _scan(url) == lost_expected

    # (2) speculative attempts
    url = f"file://{spec}"
    trio.run(_submit_full, url)
    runner = _Speculative(spark, url)
    c = trio.run(lambda: run_spark_compactor(spark, url, _settings(), runner=runner))
    assert c.stats["completed"] == 1, c.stats
    m, got = _run_rows(url)
    assert [r[1:] for r in got] == [r[1:] for r in want]
    losers = {str(o.id) for o in runner.losers}
    assert losers and not losers & _referenced(m), "a speculative loser's output was committed"
    assert losers <= {p.stem for p in (spec / "compacted").glob("*.sst")}
    spec_expected = _collect_garbage(url, dict(expected))
    assert not losers & {p.stem for p in (spec / "compacted").glob("*.sst")}, "GC kept a loser's output"
    assert _scan(url) == spec_expected

    # (3) the driver dies between the manifest commit and the .compactions write
    url = f"file://{crash}"
    trio.run(_submit_full, url)

    async def dies_after_the_manifest():
        store = resolve_store(url)
        comp = Compactor(store, ProductionRuntime("doomed"), _settings(), runner=SparkRanges(spark, url))

        async def no_release() -> None:
            return None
        comp.worker.release_all = no_release  # type: ignore[method-assign]
        inner = comp.manifests.commit
        with trio.CancelScope() as scope:
            async def commit(edit, **kw):
                got = await inner(edit, **kw)
                if type(edit).__name__ == "ApplyCompaction":
                    scope.cancel()  # the crash: nothing after the manifest write runs
                    await trio.sleep(0)
                return got
            comp.manifests.commit = commit  # type: ignore[method-assign]
            await comp.run_until_idle()
        await store.aclose()
        return scope.cancelled_caught

    assert trio.run(dies_after_the_manifest)
    committed, got = _run_rows(url)
    assert not committed.l0 and [r[1:] for r in got] == [r[1:] for r in want]
    _, jobs = trio.run(lambda: _latest_compactions(url))
    assert [j.status for j in jobs.recent_compactions] == [CompactionStatus.COMPACTED]
    c = trio.run(lambda: run_spark_compactor(spark, url, _settings()))
    assert c.stats["failed"] == 0 and c.stats["completed"] == 1, c.stats
    after, got = _run_rows(url)
    assert after.compacted == committed.compacted and [r[1:] for r in got] == [r[1:] for r in want]
    _, jobs = trio.run(lambda: _latest_compactions(url))
    assert [j.status for j in jobs.recent_compactions] == [CompactionStatus.COMPLETED]
    assert _scan(url) == expected


def test_a_range_whose_task_fails_on_every_attempt_raises_a_typed_error_naming_it(spark, tmp_path):
    """Found killing SeaweedFS under ``slatedb.spark.run_compactor``: once a range's task had
    failed on every attempt (its store calls gave up), the call raised pyspark's
    ``PythonException`` with the slatedb error somewhere in a long text. It raises
    ``SparkTaskError`` (a ``SlateDBError``) naming the compaction, the range and the task's own
    error; nothing is committed. Here the tasks are given a store that holds no SSTs."""
    from slatedb.errors import SlateDBError
    from slatedb.spark.compaction import SparkTaskError

    db = tmp_path / "db"
    _fill(db)
    empty = tmp_path / "empty"
    empty.mkdir()
    url = f"file://{db}"
    trio.run(_submit_full, url)
    before, rows_before = _run_rows(url)
    with pytest.raises(SparkTaskError) as info:
        trio.run(lambda: run_spark_compactor(spark, url, _settings(subs=1),
                                             runner=SparkRanges(spark, f"file://{empty}")))
    assert isinstance(info.value, SlateDBError)
    text = str(info.value)
    assert "range 0" in text and "ObjectNotFoundError" in text, text
    after, rows_after = _run_rows(url)
    assert (after.compacted, rows_after) == (before.compacted, rows_before)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "local-cluster[2,1,1024]",
                                    "spark://127.0.0.1:7077", "yarn", "k8s://https://h:443", "mesos://h:5050"])
def test_spark_master_urls_spark_accepts_pass_the_check(master) -> None:
    from slatedb.spark.compaction import check_spark_master

    assert check_spark_master(master) == master
