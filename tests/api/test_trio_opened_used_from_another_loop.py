"""An ``aio.Db`` opened under trio (its engine on that trio loop) used from an event loop of
another thread -- asyncio or a second trio run, say a worker thread of the program
(``trio.to_thread.run_sync``) running asyncio code. Found by trying it: a call that needed the
engine (a block read, a scan past the memtable, a flush, a durable put, close) raised a raw
``RuntimeError: must be called from async context`` under asyncio, and under another trio loop
ran the engine's I/O on that foreign loop. Now such a call hops to the engine's loop, as the
calls of a database opened under asyncio hop to its runtime thread
(tests/api/test_aio_across_loops.py)."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio

NO_CACHE = {"block_cache_size_bytes": 0, "flush_interval": "1h"}


async def _use(db) -> tuple:
    await db.put(b"x", b"y", durable=True)  # waits on the engine's WAL flush
    got = await db.get(b"k01234")  # a block read
    rows = [k async for k, _ in db.scan()]
    await db.flush()
    await db.flush(wal=False)
    return got, len(rows)


@pytest.mark.parametrize("form", ["async_with", "awaited"])
@pytest.mark.parametrize("other", ["asyncio", "trio"])
def test_a_trio_opened_db_serves_another_threads_loop_and_closes_from_there(tmp_path, form, other) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"l0_sst_size_bytes": 8192}) as db:
        for i in range(3000):
            db.put(b"k%05d" % i, b"v" * 50)

    def from_another_thread(db) -> tuple:
        async def use_and_close() -> tuple:
            got = await _use(db)
            await db.close()  # the engine's loop closes it; the block's exit then finds it closed
            return got

        return asyncio.run(use_and_close()) if other == "asyncio" else trio.run(use_and_close)

    async def main() -> tuple:
        if form == "async_with":
            async with aio.Db.open(url, NO_CACHE) as db:
                return await trio.to_thread.run_sync(from_another_thread, db)
        db = await aio.Db.open(url, NO_CACHE)
        return await trio.to_thread.run_sync(from_another_thread, db)

    assert trio.run(main) == (b"v" * 50, 3001)
    with slatedb.Db.open(url) as db:
        assert db.get(b"x") == b"y"
