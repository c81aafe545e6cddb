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
from slatedb.spark.compaction import SparkRanges, run_spark_compactor

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
