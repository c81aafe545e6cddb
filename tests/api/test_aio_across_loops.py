"""An ``aio.Db`` opened under asyncio (its engine on a runtime thread of its own) used from
another loop later: a second ``asyncio.run``, or a trio run. Found by trying it: under trio every
call raised a bare ``RuntimeError`` ("no running event loop": the host awaited an asyncio future);
now the call waits on a worker thread of the trio loop."""

from __future__ import annotations

import asyncio

import trio

import slatedb.aio as aio


def test_an_asyncio_opened_db_serves_a_later_asyncio_loop_and_a_trio_run(tmp_path) -> None:
    url = f"file://{tmp_path}/db"

    async def open_it():
        return await aio.Db.open(url, {"l0_sst_size_bytes": 4096})

    db = asyncio.run(open_it())

    async def use(tag: bytes) -> tuple:
        for i in range(200):
            await db.put(b"%s%03d" % (tag, i), b"v")
        await db.flush()
        await db.flush(wal=False)  # a call that runs on the engine's loop
        rows = [k async for k, _ in db.scan(tag, tag + b"\xff")]
        return await db.get(tag + b"007"), len(rows)

    assert asyncio.run(use(b"a")) == (b"v", 200)
    assert trio.run(use, b"t") == (b"v", 200)

    async def close() -> None:
        await db.close()

    trio.run(close)

    async def reopen() -> int:
        async with aio.Db.open(url) as again:
            return len([k async for k, _ in again.scan()])

    assert asyncio.run(reopen()) == 400
