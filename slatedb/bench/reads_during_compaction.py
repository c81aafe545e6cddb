"""Random hit gets while the in-process compactor merges L0 (issue 23 item 6).

``python -m slatedb.bench.reads_during_compaction --n 1000000`` loads N keys (the scale curve's
rows, batches of 100) into a local directory with the compactor off and small L0 SSTs, so that
the database reopens with many L0 SSTs; then, on a fresh copy each, it reopens the database with
the compactor on (it starts a full L0 compaction at once) and with it off, and runs random gets
of existing keys for ``--seconds``, printing the rate of each second and the medians. The ratio
``on / off`` is what foreground reads keep while compaction work runs on the engine's loop.
``--cache-mib`` sets the block cache (default 64 MiB): a cache under four times the L0 SST size
turns point-lookup read-ahead off, as the 64 MiB SSTs of a 10M-key load do with the default
cache. Each mode also prints how many gets crossed to the engine's loop (on a local directory a
cold get reads on the caller's thread; one that crosses queues behind the compaction).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

import slatedb

MiB = 1 << 20


def load(path: str, n: int, l0_bytes: int) -> float:
    t0 = time.perf_counter()
    rng = random.Random(20240601)
    with slatedb.Db.open("file://" + path, {"compactor_options": None, "l0_sst_size_bytes": l0_bytes}) as db:
        for start in range(0, n, 100):
            batch = slatedb.WriteBatch()
            for i in range(start, min(n, start + 100)):
                batch.put(b"key%010d" % i, rng.randbytes(100))
            db.write(batch)
    return time.perf_counter() - t0


def gets(path: str, n: int, seconds: float, compactor: bool, cache_mib: float | None) -> list[float]:
    settings: dict = {} if compactor else {"compactor_options": None}
    if cache_mib is not None:
        settings["block_cache_size_bytes"] = int(cache_mib * MiB)
    rng = random.Random(20240602)
    rates: list[float] = []
    with slatedb.Db.open("file://" + path, settings) as db:
        core = db._core
        portal = db._portal
        crossed = 0

        def counting(fn, *args):
            nonlocal crossed
            crossed += 1
            return portal(fn, *args)

        db._portal = counting  # type: ignore[assignment]
        l0_at_open = len(core.read_state.view.l0)
        end = time.perf_counter() + seconds
        window, count = time.perf_counter(), 0
        while True:
            key = b"key%010d" % rng.randrange(n)
            if db.get(key) is None:
                raise SystemExit(f"wrong data: {key!r} missing")
            count += 1
            now = time.perf_counter()
            if now - window >= 1.0:
                rates.append(count / (now - window))
                view = core.read_state.view
                print(f"  compactor {'on ' if compactor else 'off'} {rates[-1]:9.0f} gets/s  "
                      f"l0={len(view.l0)} runs={len(view.runs)}", flush=True)
                window, count = now, 0
                if now >= end:
                    break
        db._portal = portal
        print(f"  (L0 SSTs at open: {l0_at_open}; gets that crossed to the engine's loop: {crossed})")
    return rates


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m slatedb.bench.reads_during_compaction",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="keys (default 1,000,000)")
    ap.add_argument("--l0-mib", type=int, default=16, help="L0 SST size while loading (default 16 MiB)")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds of gets per mode (default 30)")
    ap.add_argument("--cache-mib", type=float, help="block cache size while reading (default: the setting's 64 MiB)")
    ap.add_argument("--tmpdir", help="parent of the temp directory")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-reads-compaction-", dir=args.tmpdir) as root:
        src = os.path.join(root, "src")
        print(f"loading {args.n:,} keys ({args.l0_mib} MiB L0 SSTs, compactor off) ...", flush=True)
        print(f"  loaded in {load(src, args.n, args.l0_mib * MiB):.1f} s")
        medians = {}
        for compactor in (True, False):
            dst = os.path.join(root, "run")
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst)
            medians[compactor] = statistics.median(gets(dst, args.n, args.seconds, compactor, args.cache_mib))
    on, off = medians[True], medians[False]
    print(f"random hit gets, median of 1-second windows: compactor running {on:,.0f}/s, "
          f"compactor off {off:,.0f}/s, ratio {on / off:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
