"""The WAL flusher sleeps while nothing is buffered (writer.md step 8): an idle database does not
wake every ``flush_interval`` to find an empty buffer, and the first write after a quiet spell is
still in a WAL object ``flush_interval`` later with nobody waiting for it.

On the simulator's virtual clock, so "how often did it wake" is counted, not timed.
"""

from __future__ import annotations

import trio

from slatedb import aio
from slatedb.db import flushers
from slatedb.objstore.memory import MemoryBucket, MemoryStore

SETTINGS = {"flush_interval": "100ms", "compactor_options": None}


def _run(monkeypatch, body):
    from sim.world.runtime import SimRuntime, run_deterministic
    from sim.world.trace import Trace

    calls: list[float] = []
    original = flushers.Flushers.flush_wal

    async def counted(self, *, freeze: bool = False) -> None:
        calls.append(trio.current_time())
        await original(self, freeze=freeze)

    monkeypatch.setattr(flushers.Flushers, "flush_wal", counted)

    async def main():
        rt = SimRuntime("writer", 1, Trace(trio.current_time))
        store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://idle")
        async with aio.Db.open("memory://idle", SETTINGS, store=store, runtime=rt) as db:
            return await body(db, store, calls)

    return run_deterministic(main, seed=1)


def test_an_idle_database_does_not_wake_its_flusher_every_interval(monkeypatch) -> None:
    async def body(db, store, calls):
        await trio.sleep(600.0)  # ten minutes of nothing: 6,000 intervals
        return len(calls)

    assert _run(monkeypatch, body) <= 2


def test_the_first_write_after_a_quiet_spell_is_flushed_one_interval_later(monkeypatch) -> None:
    async def body(db, store, calls):
        await trio.sleep(60.0)
        before = len(calls)
        await db.put(b"k", b"v")  # nobody waits for durability
        written_at = trio.current_time()
        await trio.sleep(0.05)
        assert db.core.durable_seq == 0, "flushed before flush_interval passed"
        await trio.sleep(0.1)
        assert db.core.durable_seq >= 1, "not flushed one flush_interval after the write"
        wal = [m.key for m in store.list_now("wal/") if m.size_bytes > 0]
        await trio.sleep(60.0)  # quiet again: the flusher sleeps again
        return before, len(calls), written_at, wal

    before, after, _at, wal = _run(monkeypatch, body)
    assert before <= 2 and after - before <= 3 and len(wal) == 1
