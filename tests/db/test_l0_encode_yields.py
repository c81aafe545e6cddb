"""The L0 flusher encodes a frozen memtable in slices, yielding to the engine's loop between them
(``flushers.L0_ENCODE_CHUNK_ROWS``): a full 64 MiB memtable takes seconds to encode in Python,
and WAL flushes (so durable writes) must go on meanwhile. Before, the encode ran in one piece on
the loop, and the scale curve saw no WAL object written for the whole ~20 s of a 1M-key load's
first L0 flush. On the simulator's loop: durable writes arrive while a large memtable is being
encoded, and a WAL object is written before that encode ends."""

from __future__ import annotations

import trio

from slatedb import aio
from slatedb.db import flushers
from slatedb.objstore.memory import MemoryBucket, MemoryStore

SETTINGS = {"flush_interval": "10ms", "compactor_options": None, "l0_sst_size_bytes": 64 * 1024}


def test_wal_flushes_go_on_while_an_l0_sst_is_encoded(monkeypatch) -> None:
    from sim.world.runtime import SimRuntime, run_deterministic
    from sim.world.trace import Trace

    monkeypatch.setattr(flushers, "L0_ENCODE_CHUNK_ROWS", 16)
    events: list[str] = []
    real_add_sorted = flushers.SstWriter.add_sorted
    real_write_wal = flushers.Flushers._write_wal
    real_encode = flushers.Flushers._encode_l0

    async def encode_l0(self, entry):
        events.append("start")
        try:
            return await real_encode(self, entry)
        finally:
            events.append("end")

    def add_sorted(self, rows, *kept) -> None:  # the L0 flusher's bulk encoder: one event per row
        events.extend(["encode"] * len(rows))
        real_add_sorted(self, rows, *kept)

    async def write_wal(self, rows, *keep) -> None:
        events.append("wal")
        await real_write_wal(self, rows, *keep)

    monkeypatch.setattr(flushers.SstWriter, "add_sorted", add_sorted)
    monkeypatch.setattr(flushers.Flushers, "_write_wal", write_wal)
    monkeypatch.setattr(flushers.Flushers, "_encode_l0", encode_l0)

    async def main():
        rt = SimRuntime("writer", 1, Trace(trio.current_time))
        store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://l0")
        async with aio.Db.open("memory://l0", SETTINGS, store=store, runtime=rt) as db:
            i = 0
            while db.core.stats["l0_ssts"] == 0:  # keep writing until the first L0 SST landed
                # every 8th put waits for durability: it kicks the WAL flusher (no clock needed)
                await db.put(b"key%08d" % i, b"v" * 100, durable=i % 8 == 7)
                i += 1
            return i

    written = run_deterministic(main, seed=1)
    first = events[events.index("start") + 1 : events.index("end")]  # the first L0 SST's encode
    assert written > 400 and first.count("encode") > 400  # one memtable of several hundred rows
    assert "wal" in first, "no WAL flush while the L0 SST was encoded"
