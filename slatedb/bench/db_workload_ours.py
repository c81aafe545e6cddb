"""Child of ``python -m slatedb.bench.db``: the baseline workload against OUR ``slatedb.Db``.

Run as ``python -m slatedb.bench.db_workload_ours --n 100000`` in a fresh process (the driver pins
it to one CPU). Synchronous API, default settings, local directory object store (``file://`` URL)
in a temp dir. The workload (keys, values, key selections) is duplicated in
``db_workload_official.py``, which cannot import our package; the driver compares the data digests
the two report.

Prints one line ``__RESULT__{json}`` with the phase figures; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time

# --- the workload (keep identical in db_workload_official.py / db_workload_sqlite.py) ---------
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


# --- our engine -----------------------------------------------------------------------------------


#: ``--fsync off`` (the bench's engine ``ours-nosync``) opens every DB with ``?fsync=false``.
URL_QUERY = ""


def open_db(root: str, path: str):
    import slatedb

    directory = os.path.join(root, path)
    os.makedirs(directory, exist_ok=True)
    return slatedb.Db.open("file://" + directory + URL_QUERY)


def scan_digest(db) -> tuple[int, str]:
    """Untimed: rows and sha256 of the whole DB, in key order."""
    it = db.scan()
    digest, rows = hashlib.sha256(), 0
    while True:
        batch = it.next_batch(SCAN_BATCH)
        if not batch:
            return rows, digest.hexdigest()
        for k, v in batch:
            digest.update(k)
            digest.update(v)
        rows += len(batch)


def run(n: int, root: str) -> dict:
    import slatedb

    w = workload(n)
    keys, values = w["keys"], w["values"]
    r: dict = {}
    checks: dict = {"expected_digest": w["digest"]}

    # (1) put, one call each, into a fresh DB
    db = open_db(root, "db")
    t0 = time.perf_counter()
    for k, v in zip(keys, values):
        db.put(k, v)
    r["put_one"] = n / (time.perf_counter() - t0)

    # extra: get existing keys while they are still in the memtable
    t0 = time.perf_counter()
    hits = 0
    for k in w["existing"]:
        if db.get(k) is not None:
            hits += 1
    r["get_existing_memtable"] = len(w["existing"]) / (time.perf_counter() - t0)
    checks["hits_existing_memtable"] = hits

    # (9) close after loading n keys
    t0 = time.perf_counter()
    c0 = time.process_time()  # every thread of the process: the engine's own included
    db.close()
    r["close_cpu_ms"] = (time.process_time() - c0) * 1e3
    r["close_ms"] = (time.perf_counter() - t0) * 1e3

    # (10) reopen
    t0 = time.perf_counter()
    db = open_db(root, "db")
    r["reopen_ms"] = (time.perf_counter() - t0) * 1e3

    # (3) (4) (5) gets on the reopened DB
    for phase, probe in (("get_existing", "existing"), ("get_missing_in", "missing_in"), ("get_beyond", "beyond")):
        t0 = time.perf_counter()
        hits = 0
        for k in w[probe]:
            if db.get(k) is not None:
                hits += 1
        r[phase] = len(w[probe]) / (time.perf_counter() - t0)
        checks["hits_" + probe] = hits
    sample = w["existing"][:200]
    checks["get_values_ok"] = all(db.get(k) == values[int(k[3:])] for k in sample)

    # (6) full scan, one row per iterator step
    t0 = time.perf_counter()
    rows = 0
    for _ in db.scan():
        rows += 1
    r["scan_one"] = rows / (time.perf_counter() - t0)
    checks["scan_one_rows"] = rows

    # (7) full scan, batches of 1000
    t0 = time.perf_counter()
    it = db.scan()
    rows = 0
    while True:
        batch = it.next_batch(SCAN_BATCH)
        if not batch:
            break
        rows += len(batch)
    r["scan_batch"] = rows / (time.perf_counter() - t0)
    checks["scan_batch_rows"] = rows
    checks["rows"], checks["digest"] = scan_digest(db)

    # (8) durable put, one at a time (overwrites keys[0:N_DURABLE])
    lat = []
    t0 = time.perf_counter()
    for k, v in zip(keys, w["durable_values"]):
        t1 = time.perf_counter()
        db.put(k, v, durable=True)
        lat.append(time.perf_counter() - t1)
    r["durable_put"] = len(lat) / (time.perf_counter() - t0)
    r["durable_p50_ms"] = statistics.median(lat) * 1e3
    checks["durable_ok"] = db.get(keys[0]) == w["durable_values"][0]

    # (8b) durable puts from 16 concurrent writers (threads; group commit shares WAL objects)
    import threading

    def writer(t: int) -> None:
        for j in range(DURABLE_EACH):
            db.put(keys[(t * DURABLE_EACH + j) % n], w["durable_values"][j % N_DURABLE], durable=True)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(DURABLE_WRITERS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r["durable_put_16"] = DURABLE_WRITERS * DURABLE_EACH / (time.perf_counter() - t0)
    db.close()

    # (2) put in write batches of 100, into a second fresh DB
    db = open_db(root, "db-batch")
    t0 = time.perf_counter()
    for i in range(0, n, WRITE_BATCH):
        batch = slatedb.WriteBatch()
        for k, v in zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]):
            batch.put(k, v)
        db.write(batch)
    r["put_batch"] = n / (time.perf_counter() - t0)
    checks["batch_rows"], checks["batch_digest"] = scan_digest(db)
    db.close()

    # (11) max RSS of this process
    r["max_rss_mb"] = max_rss_mb()
    version = getattr(slatedb, "__version__", None)
    return {"engine": "ours", "version": "slatedb-py" + (f" {version}" if version else "")
            + (" (fsync=false)" if URL_QUERY else ""),
            "n": n, "phases": r, "checks": checks, "python": sys.version.split()[0],
            "affinity": sorted(os.sched_getaffinity(0))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--tmpdir", default=None, help="parent of this run's temp directory")
    ap.add_argument("--fsync", choices=("on", "off"), default="on",
                    help="the local store's fsync setting (off: file:///dir?fsync=false, spec/objstore.md STORE-8)")
    args = ap.parse_args()
    global URL_QUERY
    URL_QUERY = "?fsync=false" if args.fsync == "off" else ""
    with tempfile.TemporaryDirectory(prefix="bench-ours-", dir=args.tmpdir) as root:
        result = run(args.n, root)
    print("__RESULT__" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
