"""Child of ``python -m slatedb.bench.db``: the baseline workload against the OFFICIAL wheel.

Run with the official venv's python in isolated mode (``.cache/official-venv/bin/python -I
db_workload_official.py --n 100000``), so this file must not import our package: the workload
(keys, values, key selections) is duplicated from ``db_workload_ours.py`` and the two must stay
byte-identical in what they generate (the driver compares the data digests they report).

Prints one line ``__RESULT__{json}`` with the phase figures; see docs/benchmarks.md.
One asyncio event loop for the whole process; every phase timed with ``time.perf_counter``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time

import slatedb.uniffi as u

# --- the workload (keep identical in db_workload_ours.py / db_workload_sqlite.py) -------------
SEED = 20240601  # values: random.Random(SEED).randbytes(100), drawn in key order
SELECT_SEED = 20240602  # which keys the get phases look up
VALUE_LEN = 100
WRITE_BATCH = 100
SCAN_BATCH = 1000
N_DURABLE = 30
DURABLE_WRITERS, DURABLE_EACH = 16, 32  # 16 concurrent durable writers, 32 puts each


def workload(n: int) -> dict:
    rng = random.Random(SEED)
    keys = [b"key%010d" % i for i in range(n)]
    values = [rng.randbytes(VALUE_LEN) for _ in range(n)]
    durable_values = [rng.randbytes(VALUE_LEN) for _ in range(N_DURABLE)]  # overwrite keys[0:N_DURABLE]
    n_gets = max(1, n // 5)  # 20,000 at n = 100,000
    sel = random.Random(SELECT_SEED)
    existing = [keys[sel.randrange(n)] for _ in range(n_gets)]
    missing_in = [b"key%010d~" % sel.randrange(n) for _ in range(n_gets)]
    beyond = [b"key%010d" % (n + j) for j in range(n_gets)]
    digest = hashlib.sha256()
    for k, v in zip(keys, values):
        digest.update(k)
        digest.update(v)
    return dict(keys=keys, values=values, durable_values=durable_values, existing=existing,
                missing_in=missing_in, beyond=beyond, digest=digest.hexdigest())


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# --- the official engine ------------------------------------------------------------------------
FULL_RANGE = dict(start=None, start_inclusive=False, end=None, end_inclusive=False)


async def open_db(root: str, path: str):
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    return await u.DbBuilder(path, store).build()


async def scan_digest(db) -> tuple[int, str]:
    """Untimed: rows and sha256 of the whole DB, in key order."""
    it = await db.scan(u.KeyRange(**FULL_RANGE))
    digest, rows = hashlib.sha256(), 0
    while True:
        batch = await it.next_batch(SCAN_BATCH)
        if not batch:
            return rows, digest.hexdigest()
        for kv in batch:
            digest.update(bytes(kv.key))
            digest.update(bytes(kv.value))
        rows += len(batch)


async def run(n: int, root: str) -> dict:
    w = workload(n)
    keys, values = w["keys"], w["values"]
    r: dict = {}
    checks: dict = {"expected_digest": w["digest"]}

    # (1) put, one call each, into a fresh DB
    db = await open_db(root, "db")
    t0 = time.perf_counter()
    for k, v in zip(keys, values):
        await db.put(k, v)
    r["put_one"] = n / (time.perf_counter() - t0)

    # extra: get existing keys while they are still in the memtable
    t0 = time.perf_counter()
    hits = 0
    for k in w["existing"]:
        if await db.get(k) is not None:
            hits += 1
    r["get_existing_memtable"] = len(w["existing"]) / (time.perf_counter() - t0)
    checks["hits_existing_memtable"] = hits

    # (9) close after loading n keys
    t0 = time.perf_counter()
    c0 = time.process_time()  # every thread of the process: the engine's own included
    await db.shutdown()
    r["close_cpu_ms"] = (time.process_time() - c0) * 1e3
    r["close_ms"] = (time.perf_counter() - t0) * 1e3

    # (10) reopen (object store handle + DbBuilder.build)
    t0 = time.perf_counter()
    db = await open_db(root, "db")
    r["reopen_ms"] = (time.perf_counter() - t0) * 1e3

    # (3) (4) (5) gets on the reopened DB
    for phase, probe in (("get_existing", "existing"), ("get_missing_in", "missing_in"), ("get_beyond", "beyond")):
        t0 = time.perf_counter()
        hits = 0
        for k in w[probe]:
            if await db.get(k) is not None:
                hits += 1
        r[phase] = len(w[probe]) / (time.perf_counter() - t0)
        checks["hits_" + probe] = hits
    sample = w["existing"][:200]
    checks["get_values_ok"] = all([await db.get(k) == values[int(k[3:])] for k in sample])

    # (6) full scan, one row per iterator step
    t0 = time.perf_counter()
    it = await db.scan(u.KeyRange(**FULL_RANGE))
    rows = 0
    while await it.next() is not None:
        rows += 1
    r["scan_one"] = rows / (time.perf_counter() - t0)
    checks["scan_one_rows"] = rows

    # (7) full scan, batches of 1000
    t0 = time.perf_counter()
    it = await db.scan(u.KeyRange(**FULL_RANGE))
    rows = 0
    while True:
        batch = await it.next_batch(SCAN_BATCH)
        if not batch:
            break
        rows += len(batch)
    r["scan_batch"] = rows / (time.perf_counter() - t0)
    checks["scan_batch_rows"] = rows
    checks["rows"], checks["digest"] = await scan_digest(db)

    # (8) durable put, one at a time (overwrites keys[0:N_DURABLE])
    lat = []
    t0 = time.perf_counter()
    for k, v in zip(keys, w["durable_values"]):
        t1 = time.perf_counter()
        handle = await db.put(k, v)
        await handle.await_durable()
        lat.append(time.perf_counter() - t1)
    r["durable_put"] = len(lat) / (time.perf_counter() - t0)
    r["durable_p50_ms"] = statistics.median(lat) * 1e3
    checks["durable_ok"] = await db.get(keys[0]) == w["durable_values"][0]

    # (8b) durable puts from 16 concurrent writers (asyncio tasks: the binding is asyncio-only)
    async def writer(t: int) -> None:
        for j in range(DURABLE_EACH):
            handle = await db.put(keys[(t * DURABLE_EACH + j) % n], w["durable_values"][j % N_DURABLE])
            await handle.await_durable()

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(t) for t in range(DURABLE_WRITERS)))
    r["durable_put_16"] = DURABLE_WRITERS * DURABLE_EACH / (time.perf_counter() - t0)
    await db.shutdown()

    # (2) put in write batches of 100, into a second fresh DB
    db = await open_db(root, "db-batch")
    t0 = time.perf_counter()
    for i in range(0, n, WRITE_BATCH):
        batch = u.WriteBatch()
        for k, v in zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]):
            batch.put(k, v)
        await db.write(batch)
    r["put_batch"] = n / (time.perf_counter() - t0)
    checks["batch_rows"], checks["batch_digest"] = await scan_digest(db)
    await db.shutdown()

    # (11) max RSS of this process
    r["max_rss_mb"] = max_rss_mb()
    return {"engine": "official", "version": "slatedb " + getattr(u, "__version__", "0.17.0"),
            "n": n, "phases": r, "checks": checks, "python": sys.version.split()[0],
            "affinity": sorted(os.sched_getaffinity(0))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--tmpdir", default=None, help="parent of this run's temp directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-official-", dir=args.tmpdir) as root:
        result = asyncio.run(run(args.n, root))
    print("__RESULT__" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
