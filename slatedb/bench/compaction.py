"""Compaction benchmark: merge throughput and write amplification (``./just bench-compaction``).

1. **Merge throughput.** The baseline workload (``key%010d`` keys, 100-byte random values, the
   same generator as ``slatedb.bench.db``) is loaded into exactly 8 L0 SSTs with the compactor
   off; then one full compaction of the 8 runs through the real compactor (``.compactions``
   bookkeeping, output SSTs of ``max_sst_size``, manifest commit). Printed: input MB/s and
   rows/s, median of ``--runs``.
2. **Write amplification.** A sustained write run (keys overwritten at random, so compaction
   has versions to drop) with the in-process compactor at its default scheduler options:
   ``(bytes of L0 SSTs + bytes of compaction outputs) / bytes of keys and values written``.

Both use a local directory under ``--tmpdir`` (default: the system temp dir).

    python -m slatedb.bench.compaction [--n 100000] [--runs 3] [--wa-n 200000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

import trio

import slatedb
from slatedb.compactor import Compactor, full_spec, submit_compaction
from slatedb.config import Settings
from slatedb.manifest.store import ManifestStore
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime

from .db_workload_ours import workload

ROW_OVERHEAD_BYTES = 8 + 1 + 8  # seq, flags, create_ts per row in the SST (for the input MB/s)


def load_eight_l0(root: str, n: int) -> int:
    """Load the baseline workload as exactly 8 L0 SSTs (a flush after each eighth); return the
    bytes of keys and values."""
    w = workload(n)
    pairs = list(zip(w["keys"], w["values"]))
    settings = {"compactor_options": None, "l0_sst_size_bytes": 1 << 30, "max_unflushed_bytes": 2 << 30, "l0_max_ssts": 64}
    with slatedb.Db.open(f"file://{root}", settings=settings) as db:
        for part in range(8):
            for k, v in pairs[part * n // 8:(part + 1) * n // 8]:
                db.put(k, v)
            db.flush(wal=False)
    return sum(len(k) + len(v) for k, v in pairs)


async def _full_compaction(root: str) -> tuple[float, int, int]:
    store = resolve_store(f"file://{root}")
    rt = ProductionRuntime("bench-compactor")
    try:
        latest = await ManifestStore(store, rt).read_latest()
        assert latest is not None
        n_l0 = len(latest.manifest.l0)
        settings = Settings.from_dict({"compactor_options": {"scheduler_options": {
            "min_compaction_sources": "1000", "max_compaction_sources": "1000"}}})
        c = Compactor(store, rt, settings)
        await c.start()
        await submit_compaction(store, rt, full_spec(latest.manifest))  # type: ignore[arg-type]
        t0 = time.perf_counter()
        await c.run_until_idle()
        elapsed = time.perf_counter() - t0
        assert c.stats["completed"] == 1, c.stats
        return elapsed, n_l0, c.stats["bytes_written"]
    finally:
        await store.aclose()


def merge_throughput(n: int, runs: int, tmpdir: str | None) -> dict:
    times = []
    n_l0 = 0
    raw = 0
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="slatedb-bench-compaction-", dir=tmpdir)
        try:
            raw = load_eight_l0(root, n)
            elapsed, n_l0, _ = trio.run(_full_compaction, root)
            times.append(elapsed)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    s = statistics.median(times)
    return {"l0_ssts": n_l0, "rows": n, "input_mb": raw / 1e6, "seconds": s,
            "mb_per_s": (raw + n * ROW_OVERHEAD_BYTES) / 1e6 / s, "rows_per_s": n / s}


class _Counting:
    """Counts bytes put under ``compacted/`` (L0 SSTs and compaction outputs)."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.compacted_bytes = 0

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def put(self, key, data, *args, **kw):
        if key.startswith("compacted/"):
            self.compacted_bytes += len(data)
        return await self._inner.put(key, data, *args, **kw)


def write_amplification(n: int, tmpdir: str | None) -> dict:
    root = tempfile.mkdtemp(prefix="slatedb-bench-wa-", dir=tmpdir)
    try:
        store = _Counting(resolve_store(f"file://{root}"))
        rng = random.Random(7)
        settings = {"l0_sst_size_bytes": 256 * 1024, "compactor_options": {"poll_interval": "100ms"},
                    "flush_interval": "50ms"}
        user = 0
        t0 = time.perf_counter()
        with slatedb.Db.open(f"file://{root}", settings=settings, store=store) as db:
            keyspace = max(1, n // 2)
            for i in range(n):
                k = b"key%010d" % rng.randrange(keyspace)
                v = rng.randbytes(100)
                db.put(k, v)
                user += len(k) + len(v)
            compactor = db._core.compactor
        elapsed = time.perf_counter() - t0
        stats = compactor.stats if compactor is not None else {}
        return {"writes": n, "user_mb": user / 1e6, "sst_mb": store.compacted_bytes / 1e6,
                "write_amplification": store.compacted_bytes / user, "compactions": stats.get("completed", 0),
                "seconds": elapsed}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _timed_compaction(url: str, settings: Settings, runner=None) -> tuple[float, float]:
    """(seconds of the whole job from submission to Completed, seconds of the driver's commit)."""
    store = resolve_store(url)
    rt = ProductionRuntime("bench-compactor")
    try:
        latest = await ManifestStore(store, rt).read_latest()
        c = Compactor(store, rt, settings, runner=runner)
        commit_s = [0.0]
        inner = c._commit

        async def timed_commit(job):
            t = time.perf_counter()
            await inner(job)
            commit_s[0] += time.perf_counter() - t
        c._commit = timed_commit  # type: ignore[method-assign]
        await c.start()
        await submit_compaction(store, rt, full_spec(latest.manifest))  # type: ignore[union-attr]
        t0 = time.perf_counter()
        await c.run_until_idle()
        elapsed = time.perf_counter() - t0
        assert c.stats["completed"] == 1, c.stats
        return elapsed, commit_s[0]
    finally:
        await store.aclose()


def spark_figures(n: int, tmpdir: str | None) -> None:
    """Merge MB/s of one full compaction of 8 L0 SSTs: in process (one range) and on Spark with
    1 and 2 executor cores (4 ranges), in one run on one input; a projection of N workers."""
    from slatedb.spark.compaction import SparkRanges, spark_session_for

    base = tempfile.mkdtemp(prefix="slatedb-bench-spark-compaction-", dir=tmpdir)
    try:
        os.makedirs(os.path.join(base, "input"))
        raw = load_eight_l0(os.path.join(base, "input"), n)
        mb = (raw + n * ROW_OVERHEAD_BYTES) / 1e6

        def settings(subs: int) -> Settings:
            return Settings.from_dict({"compactor_options": {
                "poll_interval": "50ms", "commit_compacted_interval": "50ms",
                "scheduler_options": {"min_compaction_sources": "1000", "max_compaction_sources": "1000"},
                "worker": {"max_subcompactions": subs, "compactions_poll_interval": "50ms"}}})

        def copy(name: str) -> str:
            d = os.path.join(base, name)
            shutil.copytree(os.path.join(base, "input"), d)
            return f"file://{d}"

        rows = []
        t, commit = trio.run(_timed_compaction, copy("local"), settings(1))
        rows.append(("in-process (1 range)", t, commit))
        timings = {}
        for cores in (1, 2):
            with spark_session_for(f"local[{cores}]") as spark:
                url = copy(f"spark{cores}")
                spark.sparkContext.parallelize([0], 1).count()  # warm the Python workers
                runner = SparkRanges(spark, url)
                t, commit = trio.run(lambda: _timed_compaction(url, settings(4), runner))
                rows.append((f"spark local[{cores}] (4 ranges)", t, commit))
                timings[cores] = runner.timings
        print(f"distributed compaction: 8 L0 SSTs, {n:,} rows, {mb:.1f} MB merged, one input, one run")
        for name, t, commit in rows:
            print(f"  {name:<26} {t:6.2f} s  {mb / t:7.1f} MB/s  (driver commit {commit:.2f} s)")
        for (name, t, commit), (cores, ts) in zip(rows[1:], timings.items()):  # where the time goes
            inside = sum(ts)
            print(f"  local[{cores}]: {len(ts)} ranges, {inside:.2f} s inside the tasks (store + merge, longest "
                  f"{max(ts, default=0):.2f} s; in-process merge {rows[0][1]:.2f} s); "
                  f"{max(0.0, t - inside / cores):.2f} s of the {t:.2f} s outside them (Spark scheduling and "
                  f"shipping, the coordinator's polls and heartbeats, commit {commit:.2f} s)")
        one = rows[1]
        per_worker = mb / max(1e-9, one[1] - one[2])  # one executor's merge MB/s, commit excluded
        for workers in (6, 32):
            t = mb / (per_worker * workers) + one[2]
            print(f"  projected {workers:>2} workers         {t:6.2f} s  {mb / t:7.1f} MB/s  "
                  f"(= {per_worker:.1f} MB/s x {workers}, plus the driver commit {one[2]:.2f} s)")
        print(f"  ratios: spark local[2] / local[1] = {rows[1][1] / rows[2][1]:.2f}x; "
              f"in-process / spark local[1] = {rows[1][1] / rows[0][1]:.2f}x (time)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench-compaction", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows in the 8 L0 SSTs (default 100,000)")
    ap.add_argument("--runs", type=int, default=3, help="merge runs; the median is printed (default 3)")
    ap.add_argument("--wa-n", type=int, default=200_000, help="writes of the write-amplification run")
    ap.add_argument("--tmpdir", default=None)
    ap.add_argument("--engine", choices=("local", "spark"), default="local",
                    help="spark: the same full compaction in process, then on Spark with 1 and 2 executor cores "
                         "(4 subcompaction ranges), side by side, with a projection to 6 and 32 workers")
    ns = ap.parse_args(argv)
    if ns.engine == "spark":
        spark_figures(ns.n, ns.tmpdir)
        return
    m = merge_throughput(ns.n, ns.runs, ns.tmpdir)
    print(f"merge: {m['l0_ssts']} L0 SSTs, {m['rows']:,} rows, {m['input_mb']:.1f} MB of keys+values")
    print(f"  full compaction  {m['seconds']:.2f} s   {m['mb_per_s']:.1f} MB/s   {m['rows_per_s']:,.0f} rows/s"
          f"   (median of {ns.runs})")
    w = write_amplification(ns.wa_n, ns.tmpdir)
    print(f"write amplification: {w['writes']:,} random overwrites ({w['user_mb']:.1f} MB of keys+values), "
          f"{w['compactions']} compactions")
    print(f"  SST bytes written {w['sst_mb']:.1f} MB   write amplification {w['write_amplification']:.2f}x"
          f"   ({w['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
