"""Random gets on a reopened database, timed in CPU per get (issue 23 items 3 and 6).

``python -m slatedb.bench.cold_gets build DIR --n 1000000`` loads N keys (the scale curve's rows:
``key%010d``, 100-byte values of ``random.Random(20240601)``, write batches of 100) into a local
directory with the default settings and closes it. ``python -m slatedb.bench.cold_gets run DIR --n
1000000`` then reopens it (compactor off unless ``--compactor``: the database is not changed, so
two versions of the package can read the same one in turn) ``--runs`` times and times, on the
calling thread (``time.thread_time``: CPU, so other processes' load moves it little):

* ``hit``: 20,000 gets of random existing keys, each run a fresh open (cold cache);
* ``miss``: 20,000 gets of absent keys between existing ones, right after;
* ``hot``: (``--hot``) 20,000 gets drawn from 2,000 random existing keys on a fresh open: blocks
  that lookups come back to (about ten times each).

It prints each run and the medians in microseconds of CPU per get, and the wall-clock rates.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import slatedb

GETS = 20_000


def build(path: str, n: int) -> None:
    rng = random.Random(20240601)
    t0 = time.perf_counter()
    db = slatedb.Db.open("file://" + path)
    for start in range(0, n, 100):
        batch = slatedb.WriteBatch()
        for i in range(start, min(n, start + 100)):
            batch.put(b"key%010d" % i, rng.randbytes(100))
        db.write(batch)
    db.close()
    print(f"loaded {n:,} keys into {path} in {time.perf_counter() - t0:.1f} s")


def _timed(db: slatedb.Db, keys: list[bytes], found: bool) -> tuple[float, float]:
    """(CPU us per get, gets per wall second); exits on a wrong answer."""
    get = db.get
    w0, c0 = time.perf_counter(), time.thread_time()
    for k in keys:
        if (get(k) is not None) is not found:
            raise SystemExit(f"wrong data: {k!r} {'missing' if found else 'found'}")
    c, w = time.thread_time() - c0, time.perf_counter() - w0
    return c / len(keys) * 1e6, len(keys) / w


def run(path: str, n: int, runs: int, compactor: bool, hot: bool) -> None:
    settings: dict = {} if compactor else {"compactor_options": None}
    phases: dict[str, list[tuple[float, float]]] = {"hit": [], "miss": []}
    if hot:
        phases["hot"] = []
    for r in range(runs):
        rng = random.Random(20240602 + r)
        todo = {"hit": ([b"key%010d" % rng.randrange(n) for _ in range(GETS)], True),
                "miss": ([b"key%010d~" % rng.randrange(n) for _ in range(GETS)], False)}
        with slatedb.Db.open("file://" + path, settings) as db:
            view = db._core.read_state.view
            for name in ("hit", "miss"):
                phases[name].append(_timed(db, *todo[name]))
        if hot:
            keys = [b"key%010d" % rng.randrange(n) for _ in range(GETS // 10)]
            with slatedb.Db.open("file://" + path, settings) as db:
                phases["hot"].append(_timed(db, [rng.choice(keys) for _ in range(GETS)], True))
        print(f"run {r + 1}/{runs} (L0 SSTs {len(view.l0)}, sorted runs {len(view.runs)}): " + ", ".join(
            f"{name} {v[-1][0]:.1f} us CPU ({v[-1][1] / 1e3:.1f}k/s wall)" for name, v in phases.items()), flush=True)
    print("median: " + ", ".join(
        f"{name} {statistics.median(c for c, _ in v):.1f} us CPU/get "
        f"({statistics.median(w for _, w in v) / 1e3:.1f}k gets/s wall)" for name, v in phases.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m slatedb.bench.cold_gets", description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("build", "run"))
    ap.add_argument("path", help="the database directory")
    ap.add_argument("--n", type=int, default=1_000_000, help="keys (default 1,000,000)")
    ap.add_argument("--runs", type=int, default=5, help="reopens to time (default 5)")
    ap.add_argument("--compactor", action="store_true", help="reopen with the in-process compactor on")
    ap.add_argument("--hot", action="store_true", help="also time gets of 2,000 hot keys")
    args = ap.parse_args(argv)
    if args.mode == "build":
        build(args.path, args.n)
    else:
        run(args.path, args.n, args.runs, args.compactor, args.hot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
