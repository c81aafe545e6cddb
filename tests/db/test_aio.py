"""The async API runs on a simulated store and clock (trio). Its behaviour under trio and asyncio is
tested in tests/aio/."""

from __future__ import annotations

import trio

import slatedb.aio as aio
SMALL = {"l0_sst_size_bytes": 4096, "flush_interval": "10ms", "min_filter_keys": 10}


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
