"""SST codec benchmark: ``python -m slatedb.bench.format`` (``./just bench-format``).

Workload of shared/reference/baseline.md so that figures line up with the official wheel's:
100k rows, keys ``b"key%010d" % i``, values 100 random bytes drawn in key order from
``random.Random(20240601)``; point lookups on 20,000 random existing keys against one SST whose
blocks are all cached (the steady state of a warm Db), plus misses inside and beyond the range.
"""

from __future__ import annotations

import argparse
import random
import time

import trio

from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import SstWriter
from slatedb.format.types import CompressionFormat
from slatedb.row import Row, RowKind

N_ROWS = 100_000
N_GETS = 20_000
SEED = 20240601


class _MemStore:
    """In-process store with the reader's interface, so the figures measure the codec only."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    async def get(self, key, byte_range=None):
        data = self.objects[key]
        return _Result(data if byte_range is None else data[byte_range[0] : byte_range[1]])

    async def head(self, key):
        return _Meta(len(self.objects[key]))


class _Result:
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class _Meta:
    __slots__ = ("size_bytes",)

    def __init__(self, size: int) -> None:
        self.size_bytes = size


def workload_rows(n: int = N_ROWS) -> list[Row]:
    rnd = random.Random(SEED)
    return [Row(b"key%010d" % i, i + 1, RowKind.VALUE, rnd.randbytes(100), None, 1_700_000_000_000) for i in range(n)]


async def _bench(compression: CompressionFormat) -> None:
    rows = workload_rows()
    raw_bytes = sum(len(r.key) + len(r.value) for r in rows)

    t0 = time.perf_counter()
    writer = SstWriter(SstOptions(compression=compression))
    for row in rows:
        writer.add(row)
    enc = writer.finish()
    build_s = time.perf_counter() - t0
    print(f"SST build           : {N_ROWS / build_s:12,.0f} rows/s  {raw_bytes / build_s / 1e6:8.1f} MB/s of key+value, "
          f"{len(enc.data) / build_s / 1e6:.1f} MB/s of SST "
          f"(object {len(enc.data) / 1e6:.1f} MB, {len(enc.block_meta)} blocks, {compression.name})")

    store = _MemStore({"bench.sst": enc.data})
    cache: dict = {}
    reader = await SstReader.open(store, "bench.sst", block_cache=cache, cache_id=1)

    t0 = time.perf_counter()
    n = 0
    async for batch in reader.scan_blocks():
        n += len(batch)
    scan_cold_s = time.perf_counter() - t0
    assert n == N_ROWS
    print(f"iteration (decode)  : {N_ROWS / scan_cold_s:12,.0f} rows/s  (blocks fetched and decoded)")

    t0 = time.perf_counter()
    n = 0
    async for row in reader.scan():
        n += 1
    scan_s = time.perf_counter() - t0
    assert n == N_ROWS
    print(f"iteration (cached)  : {N_ROWS / scan_s:12,.0f} rows/s  (row at a time, blocks cached)")

    rnd = random.Random(SEED + 1)
    idx = [rnd.randrange(N_ROWS) for _ in range(N_GETS)]
    keys = [b"key%010d" % i for i in idx]
    t0 = time.perf_counter()
    for key, i in zip(keys, idx):
        row = await reader.get(key)
        assert row is not None and row.seq == i + 1
    get_s = time.perf_counter() - t0
    print(f"get, existing keys  : {N_GETS / get_s:12,.0f} /s      (blocks cached)")

    missing = [b"key%010d~" % i for i in idx]
    t0 = time.perf_counter()
    for key in missing:
        assert await reader.get(key) is None
    miss_s = time.perf_counter() - t0
    print(f"get, missing inside : {N_GETS / miss_s:12,.0f} /s      (bloom filter)")

    beyond = [b"key%010d" % (N_ROWS + i) for i in idx]
    t0 = time.perf_counter()
    for key in beyond:
        assert await reader.get(key) is None
    beyond_s = time.perf_counter() - t0
    print(f"get, beyond last key: {N_GETS / beyond_s:12,.0f} /s")

    uncached = await SstReader.open(store, "bench.sst")
    t0 = time.perf_counter()
    for key in keys[:5000]:
        assert await uncached.get(key) is not None
    unc_s = time.perf_counter() - t0
    print(f"get, no block cache : {5000 / unc_s:12,.0f} /s      (in-memory store; restart-point seek)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench-format", description=__doc__.splitlines()[0])
    parser.add_argument("--compression", default="none", choices=[c.name.lower() for c in CompressionFormat])
    args = parser.parse_args(argv)
    trio.run(_bench, CompressionFormat[args.compression.upper()])


if __name__ == "__main__":
    main()
