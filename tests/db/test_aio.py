"""The trio API has the same shape as the sync one, and runs on a simulated store and clock."""

from __future__ import annotations

import pytest
import trio

import slatedb.aio as aio
from slatedb import ClosedError, FencedError, InvalidArgumentError, ReadOnlyError, WriteBatch

from .helpers import memory_store

SMALL = {"l0_sst_size_bytes": 4096, "flush_interval": "10ms", "min_filter_keys": 10}


async def test_async_api_round_trip() -> None:
    store = memory_store()
    async with aio.Db.open("memory://t", SMALL, store=store) as db:
        for i in range(500):
            await db.put(b"k%03d" % i, b"v%d" % i)
        batch = WriteBatch()
        batch.delete(b"k000")
        batch.put(b"k001", b"batched")
        h = await db.write(batch, durable=True)
        assert h.durable and h.seq == 502
        assert await db.get(b"k000") is None and await db.get(b"k001") == b"batched"
        snap = db.snapshot()
        await db.put(b"k002", b"after")
        assert await snap.get(b"k002") == b"v2" and await db.get(b"k002") == b"after"
        with pytest.raises(ReadOnlyError):
            await snap.put(b"x", b"y")
        snap.release()
        rows = [kv async for kv in db.scan()]
        assert len(rows) == 499 and rows[0] == (b"k001", b"batched")
        assert [k async for k, _ in db.scan_prefix(b"k49", reverse=True)] == [b"k49%d" % i for i in range(9, -1, -1)]
        with pytest.raises(InvalidArgumentError):
            await db.put(b"", b"v")
        await db.flush(wal=False)
        assert db.stats["l0_ssts"] >= 2
    async with aio.Db.open("memory://t", store=store) as db:
        assert len(await db.scan().next_batch(1000)) == 499
        assert await db.get(b"k499") == b"v499"
    with pytest.raises(ClosedError):
        await db.get(b"k499")


async def test_async_fenced_writer_fails_pending_waits() -> None:
    store = memory_store()
    async with aio.Db.open("memory://t", {"flush_interval": "1h", "manifest_poll_interval": "1h"}, store=store) as old:
        pending = await old.put(b"k", b"v")
        async with aio.Db.open("memory://t", store=store) as new:
            with pytest.raises(FencedError):
                await old.flush()
            with pytest.raises(FencedError):
                await pending.wait_durable()
            with pytest.raises(FencedError):
                await old.put(b"k2", b"v")
            assert await new.get(b"k") is None


def test_db_runs_deterministically_on_the_simulator() -> None:
    """Same seed, same trace: the Db on a faulty simulated store under a virtual clock."""
    from sim.world.store import SimObjectStore, StoreFaults
    from sim.world.runtime import SimRuntime, derive_rng, run_deterministic
    from sim.world.trace import Trace
    from slatedb.objstore.memory import MemoryBucket, MemoryStore

    def run(seed: int) -> tuple[str, int]:
        async def main() -> tuple[str, int]:
            trace = Trace(trio.current_time)
            rt = SimRuntime("writer", seed, trace)
            faults = StoreFaults(transient_rate=0.05, ambiguous_rate=0.05)
            inner = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://sim")
            store = SimObjectStore(inner, derive_rng(seed, "store"), trace, process="writer", faults=faults)
            acked = 0
            async with aio.Db.open("memory://sim", SMALL, store=store, runtime=rt) as db:
                for i in range(300):
                    h = await db.put(b"k%04d" % i, b"v" * 30, durable=(i % 50 == 49))
                    acked = max(acked, h.seq if h.durable else 0)
            async with aio.Db.open("memory://sim", SMALL, store=store, runtime=SimRuntime("writer2", seed, trace)) as db:
                assert len([kv async for kv in db.scan()]) == 300
            return trace.digest(), len(trace)

        return run_deterministic(main, seed=seed)

    a, b, c = run(7), run(7), run(8)
    assert a == b and a != c and a[1] > 100
