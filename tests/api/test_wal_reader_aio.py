"""``slatedb.aio.WalReader``: the WAL reader (change data capture) under asyncio and trio, the
same rows as the sync ``WalReader``; ``async for`` over ``changes(follow=True)`` waits for the
live tail without blocking the loop, and ends when the iterating task is cancelled (a single
step cancelled by a timeout ends nothing). Before: no async form ("sync API only" in
docs/api.md)."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError, InvalidArgumentError

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None}


def _written(url: str) -> list[tuple]:
    with slatedb.Db.open(url, S) as db:
        db.put(b"a", b"1")
        db.flush()
        db.delete(b"a")
        db.put(b"b", b"2")
        db.flush()
    with slatedb.WalReader.open(url) as w:
        return [(r.kind, r.key, r.value, r.seq, r.wal_id) for r in w.changes()]


async def _reads(url: str, expected: list[tuple]) -> None:
    async with aio.WalReader.open(url) as w:
        rows = [(r.kind, r.key, r.value, r.seq, r.wal_id) async for r in w.changes()]
        assert rows == expected
        ids = await w.wal_ids()
        assert await w.last_wal_id() == ids[-1] == rows[-1][4]
        assert [r.seq for r in await w.read(rows[-1][4])] == [2, 3]
        assert await w.read(ids[-1] + 1) is None
        assert [r.seq async for r in w.changes(start_id=rows[-1][4])] == [2, 3]
        with pytest.raises(InvalidArgumentError, match="start_id"):
            w.changes(start_id=0)  # at the call, before any await
        with pytest.raises(InvalidArgumentError, match="poll_interval_s"):
            w.changes(follow=True, poll_interval_s=0)
    with pytest.raises(ClosedError):
        await w.wal_ids()
    w = await aio.WalReader.open(url)
    async with w:
        assert [r.seq async for r in w.changes()] == [1, 2, 3]


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_the_async_reader_gives_the_sync_readers_rows(tmp_path, loop: str) -> None:
    url = f"file://{tmp_path}"
    expected = _written(url)
    assert [e[3] for e in expected] == [1, 2, 3]
    asyncio.run(_reads(url, expected)) if loop == "asyncio" else trio.run(_reads, url, expected)


def test_follow_under_asyncio_waits_for_the_tail_without_blocking_the_loop(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, S)
    db.put(b"k0", b"v")
    db.flush()

    async def main():
        got: list[bytes] = []
        ticks = 0

        async def consume():
            async with aio.WalReader.open(url) as w:
                async for row in w.changes(follow=True, poll_interval_s=0.02):
                    got.append(row.key)

        async def ticker():  # the loop keeps running while the reader waits for WAL objects
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task, tick = asyncio.create_task(consume()), asyncio.create_task(ticker())
        while not got:
            await asyncio.sleep(0.01)
        before = ticks
        await asyncio.sleep(0.3)  # the reader polls for WAL 2 meanwhile: the loop keeps turning
        assert got == [b"k0"] and ticks > before + 5
        for i in (1, 2):
            await asyncio.to_thread(db.put, b"k%d" % i, b"v", durable=True)
        for _ in range(3000):
            if len(got) == 3:
                break
            await asyncio.sleep(0.01)
        task.cancel()  # the only way a following iteration ends
        with pytest.raises(asyncio.CancelledError):
            await task
        tick.cancel()
        assert got == [b"k0", b"k1", b"k2"]
    asyncio.run(main())
    db.close()


def test_follow_under_trio_ends_with_its_cancel_scope(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, S)
    db.put(b"k0", b"v")
    db.flush()

    async def main():
        got: list[bytes] = []
        async with aio.WalReader.open(url) as w:
            with trio.move_on_after(60) as scope:
                async with trio.open_nursery() as nursery:
                    async def write():
                        await trio.to_thread.run_sync(lambda: db.put(b"k1", b"v", durable=True))
                    nursery.start_soon(write)
                    async for row in w.changes(follow=True, poll_interval_s=0.02):
                        got.append(row.key)
                        if len(got) == 2:
                            break
            assert not scope.cancelled_caught
        assert got == [b"k0", b"k1"]
    trio.run(main)
    db.close()


def test_a_step_cancelled_by_a_timeout_loses_no_row_and_ends_nothing(tmp_path) -> None:
    """Found by a CDC consumer that waits for the next row with a timeout (a heartbeat):
    ``changes()`` was an async generator, so the first ``asyncio.wait_for(anext(it), t)`` that
    timed out closed it, and every later step raised ``StopAsyncIteration`` -- a followed
    stream that looked finished. Now a cancelled step leaves the position as it was."""
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, S)
    db.put(b"k0", b"v")
    db.flush()

    async def main():
        async with aio.WalReader.open(url) as w:
            it = w.changes(follow=True, poll_interval_s=0.01)
            got = [(await asyncio.wait_for(it.__anext__(), 60)).key]
            for _ in range(3):  # the tail: each step times out
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(it.__anext__(), 0.05)
            for k in (b"k1", b"k2"):
                await asyncio.to_thread(db.put, k, b"v", durable=True)
                got.append((await asyncio.wait_for(it.__anext__(), 60)).key)
            await it.aclose()  # as an async generator's: the iteration ends
            with pytest.raises(StopAsyncIteration):
                await it.__anext__()
        return got

    assert asyncio.run(main()) == [b"k0", b"k1", b"k2"]
    db.close()
