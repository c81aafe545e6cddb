"""Child of ``python -m slatedb.bench.db --scale``: one engine, one database of N keys.

Run in a fresh process per (engine, size): ``python -m slatedb.bench.db_workload_scale --engine
ours --n 1000000`` for ours; the official wheel and the C-backed peers run this same file with
their venv's python and ``-I`` (``--engine official|plyvel|rocksdict|lmdb``), sqlite3 with ours'
python and ``-I``. So this file imports only the standard library at the top; each engine's
module is imported by its adapter. One file for every engine keeps the workload shape identical.

The workload is the main benchmark's (``db_workload_ours.py``), streamed: key ``i`` is
``b"key%010d" % i``, value ``i`` the ``i``-th ``random.Random(20240601).randbytes(100)``, so at
N = 100,000 the data digest is the main benchmark's. The rows are generated in chunks of
100,000 outside the timed loops (the process never holds more than one chunk; peak RSS measures
the engine, not the workload), and written in write batches of 100.

Phases: load (N keys in batches of 100 into a fresh database; sqlite3 commits once at the end,
timed), close (timed), reopen (timed; our rows are then in SSTs), hit gets (``--gets`` random
existing keys, ``random.Random(20240602)``, every value checked), miss gets (as many absent keys
``b"key%010d~"`` between existing ones), a full scan in batches of 1000 (timed, rows counted),
then an untimed digest scan. Peak RSS is ``ru_maxrss`` at the end. Prints ``__RESULT__{json}``.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import itertools
import json
import os
import random
import resource
import sys
import tempfile
import time

SEED = 20240601  # values: random.Random(SEED).randbytes(100), drawn in key order
SELECT_SEED = 20240602  # which keys the get phases look up
VALUE_LEN = 100
WRITE_BATCH = 100
SCAN_BATCH = 1000
CHUNK = 100_000  # rows generated at a time, untimed
MiB = 1 << 20


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def chunks(n: int):
    """(start, keys, values) for consecutive chunks of the workload, in key order."""
    rng = random.Random(SEED)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        yield start, [b"key%010d" % i for i in range(start, stop)], [rng.randbytes(VALUE_LEN) for _ in range(start, stop)]


def probes(n: int, n_gets: int) -> tuple[list[int], list[bytes]]:
    """Indices of the hit gets and the miss keys (absent, between existing keys)."""
    sel = random.Random(SELECT_SEED)
    hit_idx = [sel.randrange(n) for _ in range(n_gets)]
    miss = [b"key%010d~" % sel.randrange(n) for _ in range(n_gets)]
    return hit_idx, miss


# --- engines: each loads batches, gets a list of keys, scans in batches, closes ----------------


class Ours:
    def __init__(self, path: str) -> None:
        import slatedb

        self.slatedb = slatedb
        self.version = "slatedb-py" + (f" {slatedb.__version__}" if getattr(slatedb, "__version__", None) else "")
        self.db = slatedb.Db.open("file://" + path)
        self.stats = {"max_unflushed_mb": 0.0, "max_l0_ssts": 0, "max_imm_memtables": 0}

    def settings(self) -> dict:
        s = self.db._core.settings
        d = s.to_dict()
        keep = ("flush_interval", "l0_sst_size_bytes", "max_unflushed_bytes", "l0_max_ssts", "block_cache_size_bytes",
                "block_size_bytes", "filter_bits_per_key", "compactor_options")
        return {k: d.get(k) for k in keep}

    def load(self, keys: list[bytes], values: list[bytes]) -> None:
        WriteBatch, write = self.slatedb.WriteBatch, self.db.write
        for i in range(0, len(keys), WRITE_BATCH):
            batch = WriteBatch()
            for k, v in zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]):
                batch.put(k, v)
            write(batch)

    def observe(self) -> None:
        """Untimed, between chunks: how far the flushers and the compactor are behind."""
        w = self.db._core._w
        st = self.stats
        st["max_unflushed_mb"] = max(st["max_unflushed_mb"], w.unflushed_bytes / MiB)
        st["max_l0_ssts"] = max(st["max_l0_ssts"], len(w.read_state.view.l0))
        st["max_imm_memtables"] = max(st["max_imm_memtables"], len(w.imms))

    def shape(self) -> dict:
        view = self.db._core._w.read_state.view
        return {"l0_ssts": len(view.l0), "sorted_runs": len(view.runs),
                "ssts": len(view.l0) + sum(len(r.ssts) for r in view.runs)}

    def finish_load(self) -> None:
        pass

    def get_many(self, keys: list[bytes]) -> list:
        get = self.db.get
        return [get(k) for k in keys]

    def scan_batches(self):
        it = self.db.scan()
        while True:
            batch = it.next_batch(SCAN_BATCH)
            if not batch:
                return
            yield batch

    def close(self) -> None:
        self.db.close()


_LOOP = None


class Official:
    """The official wheel through its asyncio API: each phase is one coroutine on one loop."""

    def __init__(self, path: str) -> None:
        import asyncio

        import slatedb.uniffi as u

        self.u = u
        global _LOOP
        if _LOOP is None:  # one event loop for the whole process (the wheel's futures bind to it)
            _LOOP = asyncio.new_event_loop()
        self.loop = _LOOP
        self.version = "slatedb " + getattr(u, "__version__", "0.17.0")
        root, name = os.path.split(path)

        async def build():
            store = u.ObjectStoreBuilder.from_url("file://" + root).build()
            return await u.DbBuilder(name, store).build()

        self.db = self.loop.run_until_complete(build())

    def load(self, keys, values) -> None:
        u, db = self.u, self.db

        async def go():
            for i in range(0, len(keys), WRITE_BATCH):
                batch = u.WriteBatch()
                for k, v in zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]):
                    batch.put(k, v)
                await db.write(batch)

        self.loop.run_until_complete(go())

    def finish_load(self) -> None:
        pass

    def get_many(self, keys) -> list:
        db = self.db

        async def go():
            out = []
            for k in keys:
                v = await db.get(k)
                out.append(None if v is None else bytes(v))
            return out

        return self.loop.run_until_complete(go())

    def scan_batches(self):
        u, db, loop = self.u, self.db, self.loop
        it = loop.run_until_complete(db.scan(u.KeyRange(start=None, start_inclusive=False, end=None,
                                                        end_inclusive=False)))
        while True:
            batch = loop.run_until_complete(it.next_batch(SCAN_BATCH))
            if not batch:
                return
            yield [(bytes(kv.key), bytes(kv.value)) for kv in batch]

    def close(self) -> None:
        self.loop.run_until_complete(self.db.shutdown())


class Sqlite:
    PUT = "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)"
    GET = "SELECT v FROM kv WHERE k = ?"

    def __init__(self, path: str) -> None:
        import sqlite3

        self.version = "sqlite " + sqlite3.sqlite_version
        self.conn = sqlite3.connect(path + ".sqlite")
        self.conn.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
        self.conn.commit()
        self.conn.execute("SELECT 1 FROM kv LIMIT 1").fetchone()  # connect() is lazy: force the open

    def load(self, keys, values) -> None:
        for i in range(0, len(keys), WRITE_BATCH):
            self.conn.executemany(self.PUT, zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]))

    def finish_load(self) -> None:
        self.conn.commit()  # one transaction for the whole load, committed (and timed) at its end

    def get_many(self, keys) -> list:
        ex, q, out = self.conn.execute, self.GET, []
        for k in keys:
            row = ex(q, (k,)).fetchone()
            out.append(None if row is None else row[0])
        return out

    def scan_batches(self):
        cur = self.conn.execute("SELECT k, v FROM kv ORDER BY k")
        while True:
            batch = cur.fetchmany(SCAN_BATCH)
            if not batch:
                return
            yield batch

    def close(self) -> None:
        self.conn.close()


class Peer:
    """plyvel, rocksdict, lmdb: the adapters of db_workload_peers.py (default settings)."""

    def __init__(self, engine: str, path: str) -> None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import db_workload_peers as p

        self.p = p
        self.db = p.ENGINES[engine](path)
        self.version = self.db.version
        self.lmdb = isinstance(self.db, p.Lmdb)

    def load(self, keys, values) -> None:
        batch = self.db.batch
        for i in range(0, len(keys), WRITE_BATCH):
            batch(zip(keys[i : i + WRITE_BATCH], values[i : i + WRITE_BATCH]))

    def finish_load(self) -> None:
        pass

    def get_many(self, keys) -> list:
        if self.lmdb:
            self.db.begin(False)
        get = self.db.get
        out = [get(k) for k in keys]
        if self.lmdb:
            self.db.end()
        return out

    def scan_batches(self):
        it = self.db.scan()
        while True:
            batch = list(itertools.islice(it, SCAN_BATCH))
            if not batch:
                return
            yield batch

    def close(self) -> None:
        self.db.close()


def make(engine: str, path: str):
    if engine == "ours":
        return Ours(path)
    if engine == "official":
        return Official(path)
    if engine == "sqlite3":
        return Sqlite(path)
    return Peer(engine, path)


ENGINE_NAMES = ("ours", "official", "sqlite3", "plyvel", "rocksdict", "lmdb")


# --- the run -------------------------------------------------------------------------------------


def run(engine: str, n: int, n_gets: int, root: str) -> dict:
    path = os.path.join(root, "db")
    hit_idx, miss = probes(n, n_gets)
    order = sorted(set(hit_idx))
    want: dict[int, bytes] = {}
    digest = hashlib.sha256()
    r: dict = {}
    checks: dict = {}
    base_rss = rss_mb()  # the interpreter, before the engine is imported

    db = make(engine, path)
    r["open_rss_mb"] = current_rss_mb()
    load_s = 0.0
    for start, keys, values in chunks(n):
        for i in order[bisect.bisect_left(order, start) : bisect.bisect_left(order, start + len(keys))]:
            want[i] = values[i - start]
        for k, v in zip(keys, values):
            digest.update(k)
            digest.update(v)
        t0 = time.perf_counter()
        db.load(keys, values)
        load_s += time.perf_counter() - t0
        del keys, values
        if hasattr(db, "observe"):
            db.observe()
    t0 = time.perf_counter()
    db.finish_load()
    load_s += time.perf_counter() - t0
    r["put"] = n / load_s
    r["load_s"] = load_s
    r["load_rss_mb"] = rss_mb()
    checks["expected_digest"] = digest.hexdigest()
    if isinstance(db, Ours):
        r["engine_stats"] = dict(db.stats, **db.shape(), settings=db.settings())

    t0 = time.perf_counter()
    db.close()
    r["close_s"] = time.perf_counter() - t0
    r["put_close"] = n / (load_s + r["close_s"])  # ours: the close writes the memtables to L0

    t0 = time.perf_counter()
    db = make(engine, path)
    r["reopen_ms"] = (time.perf_counter() - t0) * 1e3
    if isinstance(db, Ours):
        r["engine_stats"]["at_reopen"] = db.shape()

    hit_keys = [b"key%010d" % i for i in hit_idx]
    t0 = time.perf_counter()
    got = db.get_many(hit_keys)
    r["get_hit"] = len(hit_keys) / (time.perf_counter() - t0)
    checks["hit_values_ok"] = sum(1 for i, v in zip(hit_idx, got) if v == want[i])
    del got

    t0 = time.perf_counter()
    got = db.get_many(miss)
    r["get_miss"] = len(miss) / (time.perf_counter() - t0)
    checks["miss_found"] = sum(1 for v in got if v is not None)
    del got

    t0 = time.perf_counter()
    rows = 0
    for batch in db.scan_batches():
        rows += len(batch)
    r["scan"] = rows / (time.perf_counter() - t0)
    checks["scan_rows"] = rows

    digest, rows = hashlib.sha256(), 0  # untimed: what the database holds, in key order
    for batch in db.scan_batches():
        for k, v in batch:
            digest.update(k)
            digest.update(v)
        rows += len(batch)
    checks["rows"], checks["digest"] = rows, digest.hexdigest()
    if isinstance(db, Ours):
        r["engine_stats"]["at_end"] = db.shape()
    db.close()

    r["base_rss_mb"] = base_rss
    r["peak_rss_mb"] = rss_mb()
    return {"engine": engine, "version": db.version, "n": n, "n_gets": n_gets, "phases": r, "checks": checks,
            "python": sys.version.split()[0], "affinity": sorted(os.sched_getaffinity(0))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=ENGINE_NAMES, required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--gets", type=int, default=20_000)
    ap.add_argument("--tmpdir", default=None, help="parent of this run's temp directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"bench-scale-{args.engine}-", dir=args.tmpdir) as root:
        result = run(args.engine, args.n, min(args.gets, args.n), root)
    print("__RESULT__" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
