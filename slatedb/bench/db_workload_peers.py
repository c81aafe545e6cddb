"""Child of ``python -m slatedb.bench.db``: the baseline workload against an embedded C-backed
engine a Python user would weigh us against: LevelDB (``plyvel``), RocksDB (``rocksdict``) or
LMDB (``lmdb``), one per process (``--engine``). Runs in the peers' venv
(:mod:`slatedb.bench.peers_venv`) with ``python -I``; the workload is the sqlite3 child's
(imported from this directory, which holds no package of ours on the path).

Each engine with its default settings on a local directory, used the way its documentation
shows: puts and gets one call each, write batches (``WriteBatch`` / one LMDB write transaction
per batch), a forward iterator over the whole database (batches of 1000: ``islice`` over the
iterator, none has a batch call). Durable puts: ``sync=True`` writes (LMDB: one write transaction
with ``sync=True``, its default, per put). LMDB writes in transactions, so like sqlite3 the put
phase is one write transaction committed (and timed) at its end, and each get phase reads in one
read transaction. Prints one line ``__RESULT__{json}``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from db_workload_sqlite import SCAN_BATCH, WRITE_BATCH, max_rss_mb, workload  # noqa: E402


class Plyvel:
    def __init__(self, path: str) -> None:
        import plyvel

        self.version = f"plyvel {plyvel.__version__} (LevelDB {plyvel.__leveldb_version__})"
        self.db = plyvel.DB(path, create_if_missing=True)
        self.get = self.db.get
        self.put = self.db.put

    def put_durable(self, k: bytes, v: bytes) -> None:
        self.db.put(k, v, sync=True)

    def batch(self, pairs) -> None:
        with self.db.write_batch() as wb:
            for k, v in pairs:
                wb.put(k, v)

    def scan(self):
        return self.db.iterator()

    def close(self) -> None:
        self.db.close()


class RocksDict:
    def __init__(self, path: str) -> None:
        import rocksdict

        self.rd = rocksdict
        self.version = "rocksdict " + getattr(rocksdict, "__version__", "0.3.29")
        self.db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
        self.get = self.db.get
        self.put = self.db.put
        self.sync = rocksdict.WriteOptions()
        self.sync.sync = True

    def put_durable(self, k: bytes, v: bytes) -> None:
        self.db.put(k, v, self.sync)

    def batch(self, pairs) -> None:
        wb = self.rd.WriteBatch(raw_mode=True)
        for k, v in pairs:
            wb.put(k, v)
        self.db.write(wb)

    def scan(self):
        return self.db.items()

    def close(self) -> None:
        self.db.close()


class Lmdb:
    def __init__(self, path: str) -> None:
        import lmdb

        self.version = "lmdb " + lmdb.__version__ + " (LMDB " + ".".join(map(str, lmdb.version())) + ")"
        self.env = lmdb.open(path, map_size=1 << 36)  # sparse; sync=True by default
        self.txn = None

    def begin(self, write: bool) -> None:
        self.txn = self.env.begin(write=write)
        self.get = self.txn.get
        self.put = self.txn.put

    def end(self) -> None:
        self.txn.commit()
        self.txn = None

    def put_durable(self, k: bytes, v: bytes) -> None:
        with self.env.begin(write=True) as txn:
            txn.put(k, v)

    def batch(self, pairs) -> None:
        with self.env.begin(write=True) as txn:
            for k, v in pairs:
                txn.put(k, v)

    def scan(self):
        self._scan_txn = self.env.begin()
        return self._scan_txn.cursor().iternext()

    def close(self) -> None:
        self.env.close()


ENGINES = {"plyvel": Plyvel, "rocksdict": RocksDict, "lmdb": Lmdb}


def _begin(db, write: bool) -> None:
    if isinstance(db, Lmdb):
        db.begin(write)


def _end(db) -> None:
    if isinstance(db, Lmdb):
        db.end()


def scan_digest(db) -> tuple[int, str]:
    digest, rows = hashlib.sha256(), 0
    for k, v in db.scan():
        digest.update(k)
        digest.update(v)
        rows += 1
    return rows, digest.hexdigest()


def run(engine: str, n: int, root: str) -> dict:
    w = workload(n)
    keys, values = w["keys"], w["values"]
    r: dict = {}
    checks: dict = {"expected_digest": w["digest"]}
    make = ENGINES[engine]
    path = os.path.join(root, "db")

    db = make(path)
    t0 = time.perf_counter()
    _begin(db, True)
    put = db.put
    for k, v in zip(keys, values):
        put(k, v)
    _end(db)
    r["put_one"] = n / (time.perf_counter() - t0)

    _begin(db, False)
    t0 = time.perf_counter()
    get = db.get
    hits = sum(1 for k in w["existing"] if get(k) is not None)
    r["get_existing_memtable"] = len(w["existing"]) / (time.perf_counter() - t0)
    _end(db)
    checks["hits_existing_memtable"] = hits

    t0 = time.perf_counter()
    c0 = time.process_time()  # every thread of the process: the engine's own included
    db.close()
    r["close_cpu_ms"] = (time.process_time() - c0) * 1e3
    r["close_ms"] = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    db = make(path)
    r["reopen_ms"] = (time.perf_counter() - t0) * 1e3

    for phase, probe in (("get_existing", "existing"), ("get_missing_in", "missing_in"), ("get_beyond", "beyond")):
        _begin(db, False)
        get = db.get
        t0 = time.perf_counter()
        hits = 0
        for k in w[probe]:
            if get(k) is not None:
                hits += 1
        r[phase] = len(w[probe]) / (time.perf_counter() - t0)
        _end(db)
        checks["hits_" + probe] = hits
    _begin(db, False)
    checks["get_values_ok"] = all(db.get(k) == values[int(k[3:])] for k in w["existing"][:200])
    _end(db)

    t0 = time.perf_counter()
    rows = 0
    for _ in db.scan():
        rows += 1
    r["scan_one"] = rows / (time.perf_counter() - t0)
    checks["scan_one_rows"] = rows

    t0 = time.perf_counter()
    it = db.scan()
    rows = 0
    while True:
        batch = list(itertools.islice(it, SCAN_BATCH))
        if not batch:
            break
        rows += len(batch)
    del it
    r["scan_batch"] = rows / (time.perf_counter() - t0)
    checks["scan_batch_rows"] = rows
    checks["rows"], checks["digest"] = scan_digest(db)

    lat = []
    t0 = time.perf_counter()
    for k, v in zip(keys, w["durable_values"]):
        t1 = time.perf_counter()
        db.put_durable(k, v)
        lat.append(time.perf_counter() - t1)
    r["durable_put"] = len(lat) / (time.perf_counter() - t0)
    r["durable_p50_ms"] = statistics.median(lat) * 1e3
    _begin(db, False)
    checks["durable_ok"] = db.get(keys[0]) == w["durable_values"][0]
    _end(db)
    db.close()

    db = make(os.path.join(root, "db-batch"))
    t0 = time.perf_counter()
    for i in range(0, n, WRITE_BATCH):
        db.batch(zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]))
    r["put_batch"] = n / (time.perf_counter() - t0)
    checks["batch_rows"], checks["batch_digest"] = scan_digest(db)
    db.close()

    r["max_rss_mb"] = max_rss_mb()
    return {"engine": engine, "version": db.version, "n": n, "phases": r, "checks": checks,
            "python": sys.version.split()[0], "affinity": sorted(os.sched_getaffinity(0))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=sorted(ENGINES), required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--tmpdir", default=None, help="parent of this run's temp directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"bench-{args.engine}-", dir=args.tmpdir) as root:
        result = run(args.engine, args.n, root)
    print("__RESULT__" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
