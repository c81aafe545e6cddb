"""Child of ``python -m slatedb.bench.db``: the baseline workload against stdlib ``sqlite3``.

A reference column only (an embedded B-tree on local disk, not an object-store LSM). Run with
``python -I`` in a fresh process; it imports only the standard library, the workload being
duplicated from ``db_workload_ours.py``.

Default settings of Python's ``sqlite3`` (rollback journal, ``synchronous=FULL``, implicit
transactions). Table ``kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID``. Each non-durable put
phase is one transaction committed at the end of the phase (commit timed); a durable put is one
INSERT and one commit. Prints one line ``__RESULT__{json}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time

# --- the workload (keep identical in db_workload_ours.py / db_workload_official.py) -----------
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


# --- sqlite3 ---------------------------------------------------------------------------------------
PUT = "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)"
GET = "SELECT v FROM kv WHERE k = ?"
SCAN = "SELECT k, v FROM kv ORDER BY k"


def open_db(root: str, name: str) -> sqlite3.Connection:
    conn = sqlite3.connect(os.path.join(root, name + ".sqlite"))
    conn.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
    conn.commit()
    return conn


def scan_digest(conn) -> tuple[int, str]:
    digest, rows = hashlib.sha256(), 0
    for k, v in conn.execute(SCAN):
        digest.update(k)
        digest.update(v)
        rows += 1
    return rows, digest.hexdigest()


def get(conn, k):
    row = conn.execute(GET, (k,)).fetchone()
    return None if row is None else row[0]


def run(n: int, root: str) -> dict:
    w = workload(n)
    keys, values = w["keys"], w["values"]
    r: dict = {}
    checks: dict = {"expected_digest": w["digest"]}

    # (1) put, one call each (one transaction, committed at the end)
    conn = open_db(root, "db")
    t0 = time.perf_counter()
    for k, v in zip(keys, values):
        conn.execute(PUT, (k, v))
    conn.commit()
    r["put_one"] = n / (time.perf_counter() - t0)

    t0 = time.perf_counter()
    hits = 0
    for k in w["existing"]:
        if get(conn, k) is not None:
            hits += 1
    r["get_existing_memtable"] = len(w["existing"]) / (time.perf_counter() - t0)
    checks["hits_existing_memtable"] = hits

    t0 = time.perf_counter()
    c0 = time.process_time()  # every thread of the process: the engine's own included
    conn.close()
    r["close_cpu_ms"] = (time.process_time() - c0) * 1e3
    r["close_ms"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    conn = sqlite3.connect(os.path.join(root, "db.sqlite"))
    conn.execute("SELECT 1 FROM kv LIMIT 1").fetchone()  # connect() is lazy: force the open
    r["reopen_ms"] = (time.perf_counter() - t0) * 1e3

    for phase, probe in (("get_existing", "existing"), ("get_missing_in", "missing_in"), ("get_beyond", "beyond")):
        t0 = time.perf_counter()
        hits = 0
        for k in w[probe]:
            if get(conn, k) is not None:
                hits += 1
        r[phase] = len(w[probe]) / (time.perf_counter() - t0)
        checks["hits_" + probe] = hits
    sample = w["existing"][:200]
    checks["get_values_ok"] = all(get(conn, k) == values[int(k[3:])] for k in sample)

    t0 = time.perf_counter()
    rows = 0
    for _ in conn.execute(SCAN):
        rows += 1
    r["scan_one"] = rows / (time.perf_counter() - t0)
    checks["scan_one_rows"] = rows

    t0 = time.perf_counter()
    cur = conn.execute(SCAN)
    rows = 0
    while True:
        batch = cur.fetchmany(SCAN_BATCH)
        if not batch:
            break
        rows += len(batch)
    r["scan_batch"] = rows / (time.perf_counter() - t0)
    checks["scan_batch_rows"] = rows
    checks["rows"], checks["digest"] = scan_digest(conn)

    lat = []
    t0 = time.perf_counter()
    for k, v in zip(keys, w["durable_values"]):
        t1 = time.perf_counter()
        conn.execute(PUT, (k, v))
        conn.commit()
        lat.append(time.perf_counter() - t1)
    r["durable_put"] = len(lat) / (time.perf_counter() - t0)
    r["durable_p50_ms"] = statistics.median(lat) * 1e3
    checks["durable_ok"] = get(conn, keys[0]) == w["durable_values"][0]
    conn.close()

    # (2) put in batches of 100 (executemany), into a second fresh DB, one commit at the end
    conn = open_db(root, "db-batch")
    t0 = time.perf_counter()
    for i in range(0, n, WRITE_BATCH):
        conn.executemany(PUT, zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]))
    conn.commit()
    r["put_batch"] = n / (time.perf_counter() - t0)
    checks["batch_rows"], checks["batch_digest"] = scan_digest(conn)
    conn.close()

    r["max_rss_mb"] = max_rss_mb()
    return {"engine": "sqlite3", "version": "sqlite " + sqlite3.sqlite_version, "n": n, "phases": r,
            "checks": checks, "python": sys.version.split()[0], "affinity": sorted(os.sched_getaffinity(0))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--tmpdir", default=None, help="parent of this run's temp directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-", dir=args.tmpdir) as root:
        result = run(args.n, root)
    print("__RESULT__" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
