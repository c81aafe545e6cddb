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
    settings = {"compactor_options": None, "l0_sst_size_bytes": 1 << 30, "l0_max_ssts": 64}
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench-compaction", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows in the 8 L0 SSTs (default 100,000)")
    ap.add_argument("--runs", type=int, default=3, help="merge runs; the median is printed (default 3)")
    ap.add_argument("--wa-n", type=int, default=200_000, help="writes of the write-amplification run")
    ap.add_argument("--tmpdir", default=None)
    ns = ap.parse_args(argv)
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
