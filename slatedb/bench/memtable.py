"""Memtable micro-benchmark: ``python -m slatedb.bench.memtable``.

Workload of shared/reference/baseline.md: 100k rows, keys ``b"key%010d" % i``, values 100
random bytes drawn in key order from ``random.Random(20240601)``. Measures

* puts/s into a :class:`~slatedb.memtable.Memtable` (the Row built per put is included: that is
  what ``Db.put`` will pay), and the bare ``Memtable.put`` with prebuilt rows;
* gets/s of 20,000 random existing keys (``Memtable.get`` + :func:`~slatedb.merge.resolve_row`);
* rows/s of a full scan through ``merge_rows`` + ``visible`` over one source.

Best of ``--repeat`` runs (default 3). Runs in one process; pin it (``taskset -c 0``) to compare
with the official wheel's figures.
"""

from __future__ import annotations

import argparse
import random
import time

from slatedb.batch import validate_key, validate_value
from slatedb.memtable import Memtable
from slatedb.merge import merge_rows, resolve_row, visible
from slatedb.row import Row, RowKind

N_ROWS = 100_000
N_GETS = 20_000
SEED = 20240601
NOW_MS = 1_700_000_000_000


def workload(n: int = N_ROWS) -> list[tuple[bytes, bytes]]:
    rng = random.Random(SEED)
    return [(b"key%010d" % i, rng.randbytes(100)) for i in range(n)]


def bench_puts(kvs: list[tuple[bytes, bytes]]) -> tuple[float, Memtable]:
    """Validate + build the Row + insert, as ``Db.put`` would."""
    m = Memtable()
    put = m.put
    value_kind = RowKind.VALUE
    t0 = time.perf_counter()
    seq = 0
    for key, value in kvs:
        seq += 1
        put(Row(validate_key(key), seq, value_kind, validate_value(value), None, NOW_MS))
    dt = time.perf_counter() - t0
    return len(kvs) / dt, m


def bench_bare_puts(rows: list[Row]) -> float:
    m = Memtable()
    put = m.put
    t0 = time.perf_counter()
    for row in rows:
        put(row)
    return len(rows) / (time.perf_counter() - t0)


def bench_gets(m: Memtable, keys: list[bytes]) -> float:
    get = m.get
    t0 = time.perf_counter()
    found = 0
    for key in keys:
        if resolve_row(get(key), NOW_MS) is not None:
            found += 1
    dt = time.perf_counter() - t0
    assert found == len(keys), (found, len(keys))
    return len(keys) / dt


def bench_scan(m: Memtable) -> float:
    t0 = time.perf_counter()
    n = 0
    for _ in visible(merge_rows([m.iter_range()]), now_ms=NOW_MS):
        n += 1
    dt = time.perf_counter() - t0
    assert n == len(m), (n, len(m))
    return n / dt


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=N_ROWS)
    parser.add_argument("--gets", type=int, default=N_GETS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    kvs = workload(args.rows)
    rows = [Row(k, i + 1, RowKind.VALUE, v, None, NOW_MS) for i, (k, v) in enumerate(kvs)]
    get_keys = [kvs[i][0] for i in random.Random(SEED + 1).choices(range(len(kvs)), k=args.gets)]

    puts = bare = gets = scan = 0.0
    for _ in range(args.repeat):
        p, m = bench_puts(kvs)
        puts = max(puts, p)
        bare = max(bare, bench_bare_puts(rows))
        gets = max(gets, bench_gets(m, get_keys))
        scan = max(scan, bench_scan(m))
    print(f"memtable benchmark: {args.rows:,} rows, {args.gets:,} gets, best of {args.repeat}")
    print(f"  put (validate + Row + Memtable.put): {puts:>12,.0f} /s  ({1e6 / puts:.2f} us)")
    print(f"  Memtable.put, prebuilt rows        : {bare:>12,.0f} /s  ({1e6 / bare:.2f} us)")
    print(f"  get, existing keys                 : {gets:>12,.0f} /s  ({1e6 / gets:.2f} us)")
    print(f"  full scan, merge_rows + visible    : {scan:>12,.0f} rows/s")


if __name__ == "__main__":
    main()
