"""Spark benchmark (``./just bench-spark``): the data source against one ``slatedb.Db``.

The baseline workload (``key%010d`` keys, 100-byte random values from the same generator as
``slatedb.bench.db``), in one run, side by side:

* **Db**: one ``slatedb.Db`` puts every row in write batches of 100 (then closes: everything
  flushed), and scans the database once in batches of 1000.
* **Spark, 1 and 2 executor cores** (``local[1]``, ``local[2]``; a session each, its start-up
  not timed; best of ``--repeat`` runs): a bulk load of the same rows from a cached DataFrame
  (``slatedb.spark.bulk_load``, into a fresh database), the same rows by the union route
  (``slatedb.spark.load_sharded``: a shard database per range partition, united into a new
  database), and a read of the Db's database
  (``spark.read.format("slatedb")`` written to Spark's ``noop`` sink, so every row and column
  crosses from the Python tasks into the JVM).

Printed: rows/s per phase and engine, and the ratios Spark / Db and 2 cores / 1 core. The
reader's partitions are cut at SST boundaries, so the Db writes SSTs of ``--sst-kib`` (not one
large L0) for the read to have more than one split.

    python -m slatedb.bench.spark [--n 100000] [--sst-kib 1024] [--repeat 2] [--tmpdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import slatedb
import slatedb.spark

from .db_workload_ours import SCAN_BATCH, WRITE_BATCH, workload


def _db_phase(url: str, keys: list[bytes], values: list[bytes], sst_bytes: int) -> tuple[float, float]:
    settings = {"l0_sst_size_bytes": sst_bytes, "l0_max_ssts": 1 << 16, "compactor_options": None}
    t0 = time.perf_counter()
    with slatedb.Db.open(url, settings=settings) as db:
        for i in range(0, len(keys), WRITE_BATCH):
            b = slatedb.WriteBatch()
            for k, v in zip(keys[i:i + WRITE_BATCH], values[i:i + WRITE_BATCH]):
                b.put(k, v)
            db.write(b)
        db.flush(wal=False)
    put_s = time.perf_counter() - t0
    with slatedb.Db.open(url, settings=settings) as db:
        t0 = time.perf_counter()
        n = 0
        it = db.scan()
        while True:
            got = it.next_batch(SCAN_BATCH)
            if not got:
                break
            n += len(got)
        scan_s = time.perf_counter() - t0
    assert n == len(keys), (n, len(keys))
    return len(keys) / put_s, n / scan_s


def _spark_phase(master: str, read_url: str, load_url: str, keys: list[bytes], values: list[bytes],
                 split_bytes: int, repeat: int) -> tuple[float, float, float, float]:
    import pyarrow as pa

    from sim.campaign.spark_engine import spark_session

    start = time.perf_counter()
    with spark_session(master, app_name="bench-spark") as spark:
        started = time.perf_counter() - start
        slatedb.spark.register(spark)
        spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
        table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
        df = spark.createDataFrame(table.to_pandas()).cache()
        assert df.count() == len(keys)
        load_s = read_s = sharded_s = float("inf")
        parts = spark.sparkContext.defaultParallelism * 2
        for i in range(repeat):  # best of: the first run also warms the Python workers up
            t0 = time.perf_counter()
            slatedb.spark.bulk_load(df, load_url, mode="overwrite", partitions=parts)
            load_s = min(load_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            slatedb.spark.load_sharded(df, f"{load_url}-sharded-{i}", partitions=parts)  # a new database each time
            sharded_s = min(sharded_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            spark.read.format("slatedb").options(url=read_url, split_size_bytes=str(split_bytes)).load() \
                .write.format("noop").mode("overwrite").save()
            read_s = min(read_s, time.perf_counter() - t0)
        df.unpersist()
        check = spark.read.format("slatedb").option("url", load_url).load().count()
        sharded = spark.read.format("slatedb").option("url", f"{load_url}-sharded-0").load().count()
    assert check == sharded == len(keys), (check, sharded, len(keys))
    return len(keys) / load_s, len(keys) / read_s, started, len(keys) / sharded_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-spark", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows (default 100000, the baseline workload)")
    ap.add_argument("--sst-kib", type=int, default=1024, help="SST size of the Db's database (KiB)")
    ap.add_argument("--repeat", type=int, default=2, help="Spark runs per phase, best taken (default 2)")
    ap.add_argument("--tmpdir", default=None)
    args = ap.parse_args(argv)
    w = workload(args.n)
    keys, values = w["keys"], w["values"]
    root = tempfile.mkdtemp(prefix="bench-spark-", dir=args.tmpdir)
    try:
        db_url = f"file://{root}/db"
        put_rps, scan_rps = _db_phase(db_url, keys, values, args.sst_kib * 1024)
        total_bytes = sum(len(k) + len(v) for k, v in zip(keys, values))
        split = max(1, total_bytes // 8)
        results = {}
        for cores in (1, 2):
            results[cores] = _spark_phase(f"local[{cores}]", db_url, f"file://{root}/load{cores}", keys, values, split,
                                           max(1, args.repeat))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"rows {args.n:,}  (keys key%010d, 100-byte values; Spark session start-up not timed)")
    print(f"{'phase':<34}{'Db':>12}{'Spark 1 core':>15}{'Spark 2 cores':>15}{'1c/Db':>8}{'2c/Db':>8}{'2c/1c':>8}")
    for name, idx, db_rps in (("bulk load vs puts in batches of 100", 0, put_rps),
                              ("sharded load vs puts", 3, put_rps), ("read vs scan", 1, scan_rps)):
        one, two = results[1][idx], results[2][idx]
        print(f"{name + ' (rows/s)':<34}{db_rps:>12,.0f}{one:>15,.0f}{two:>15,.0f}"
              f"{one / db_rps:>8.2f}{two / db_rps:>8.2f}{two / one:>8.2f}")
    print(f"session start-up (s): {results[1][2]:.1f} (1 core), {results[2][2]:.1f} (2 cores); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
