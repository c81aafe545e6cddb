"""A small memtable's L0 flush adds its rows one at a time (``flushers.L0_BULK_MIN_ROWS``): the
bulk encoder's fixed numpy cost (about 440 us for 10 rows) exceeds the row-at-a-time builder's
(about 110 us) below some hundreds of rows, and the simulator's memtables are mostly a few dozen
rows. The SST is the one the bulk encoder makes, byte for byte; a memtable of L0_BULK_MIN_ROWS
rows or more still takes the bulk path."""

from __future__ import annotations

import trio

from slatedb import aio
from slatedb.db import flushers
from slatedb.format.sst_writer import SstWriter
from slatedb.objstore.memory import MemoryBucket, MemoryStore

SETTINGS = {"flush_interval": "10ms", "compactor_options": None, "min_filter_keys": 4}


def _flushes(n_keys: int) -> list[tuple]:
    """Flush one memtable of ``n_keys`` puts (and a delete); per L0 encode: its rows, the SST
    made, the bulk encoder's calls during it, the SST options."""
    from sim.world.runtime import SimRuntime, run_deterministic
    from sim.world.trace import Trace

    seen: list[tuple] = []
    real_encode = flushers.Flushers._encode_l0
    real_add_sorted = SstWriter.add_sorted
    calls = [0]

    def add_sorted(self, rows, *kept) -> None:
        calls[0] += 1
        real_add_sorted(self, rows, *kept)

    async def encode_l0(self, entry):
        before = calls[0]
        rows, _ = entry.mem.sorted_rows_and_order()
        sst = await real_encode(self, entry)
        seen.append((list(rows), sst, calls[0] - before, self.sst_options))
        return sst

    async def main() -> None:
        rt = SimRuntime("writer", 1, Trace(trio.current_time))
        store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://small")
        async with aio.Db.open("memory://small", SETTINGS, store=store, runtime=rt) as db:
            for i in range(n_keys):
                await db.put(b"key%04d" % (i * 7 % n_keys), b"value-%d" % i * (1 + i % 5))
            await db.delete(b"key0001")
            await db.flush(wal=False)

    SstWriter.add_sorted = add_sorted  # type: ignore[method-assign]
    flushers.Flushers._encode_l0 = encode_l0  # type: ignore[method-assign]
    try:
        run_deterministic(main, seed=3)
    finally:
        SstWriter.add_sorted = real_add_sorted  # type: ignore[method-assign]
        flushers.Flushers._encode_l0 = real_encode  # type: ignore[method-assign]
    return seen


def _bulk(rows: list, options) -> object:
    w = SstWriter(options)
    w.add_sorted(list(rows))
    return w.finish()


def test_a_small_flush_adds_rows_one_at_a_time_and_makes_the_bulk_encoders_sst() -> None:
    seen = _flushes(flushers.L0_BULK_MIN_ROWS - 4)
    assert seen, "no L0 flush"
    for rows, sst, bulk_calls, options in seen:
        assert 0 < len(rows) < flushers.L0_BULK_MIN_ROWS
        assert bulk_calls == 0, "a small memtable went through the bulk encoder"
        expected = _bulk(rows, options)
        assert (sst.data, sst.info, sst.index_keys, sst.block_offsets, sst.num_rows) == (
            expected.data, expected.info, expected.index_keys, expected.block_offsets, expected.num_rows)


def test_a_flush_of_bulk_min_rows_or_more_takes_the_bulk_path() -> None:
    seen = _flushes(flushers.L0_BULK_MIN_ROWS + 8)
    assert any(len(rows) >= flushers.L0_BULK_MIN_ROWS and bulk_calls > 0 for rows, _sst, bulk_calls, _o in seen)
