"""Issue 22 item 1: one async API under asyncio and trio. Every test here runs twice
(``[trio]`` and ``[asyncio]``, ``tests/anyloop.py``)."""

from __future__ import annotations

import pytest

import slatedb.aio as aio
from slatedb import ClosedError, FencedError, InvalidArgumentError, ReadOnlyError, WriteBatch
from slatedb.api.portal import RuntimeThread
from tests.anyloop import running, sleep

pytestmark = pytest.mark.anyloop

SMALL = {"l0_sst_size_bytes": 4096, "flush_interval": "10ms", "min_filter_keys": 10,
         "compactor_options": None, "garbage_collector_options": None}


async def test_round_trip_with_async_with(tmp_path, async_lib) -> None:
    assert running() == async_lib
    url = f"file://{tmp_path}"
    async with aio.Db.open(url, SMALL) as db:
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
    async with aio.Db.open(url, SMALL) as db:
        it = db.scan()
        first = await it.next_batch(100)
        rest = await it.next_batch(1000)
        assert len(first) == 100 and len(rest) == 399 and await it.next_batch(10) == []
        assert await db.get(b"k499") == b"v499"  # from an SST block (I/O through the host)
    with pytest.raises(ClosedError):
        await db.get(b"k499")


async def test_awaited_open_and_close(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = await aio.Db.open(url, SMALL)
    await db.put(b"a", b"1")
    await db.close()
    await db.close()  # idempotent
    with pytest.raises(ClosedError):
        await db.put(b"b", b"2")
    db = await aio.Db.open(url, SMALL)
    try:
        assert await db.get(b"a") == b"1"  # close flushed it
    finally:
        await db.close()
    r = await aio.DbReader.open(url)
    try:
        assert await r.get(b"a") == b"1"
        assert [kv async for kv in r.scan()] == [(b"a", b"1")]
        with pytest.raises(ReadOnlyError):
            await r.put(b"x", b"y")
    finally:
        await r.close()
    async with aio.DbReader.open(url) as r:
        assert await r.scan().next_batch(5) == [(b"a", b"1")]


async def test_an_exception_in_the_block_stops_without_flushing(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with pytest.raises(KeyError):
        async with aio.Db.open(url, {"flush_interval": "1h"}) as db:
            await db.put(b"durable", b"1")
            await db.flush()
            await db.put(b"buffered", b"2")
            raise KeyError("boom")
    async with aio.Db.open(url) as db:
        assert await db.get(b"durable") == b"1"
        assert await db.get(b"buffered") is None


async def test_fenced_writer_fails_pending_waits(tmp_path) -> None:
    url = f"file://{tmp_path}"
    async with aio.Db.open(url, {"flush_interval": "1h", "manifest_poll_interval": "1h"}) as old:
        pending = await old.put(b"k", b"v")
        async with aio.Db.open(url) as new:
            with pytest.raises(FencedError):
                await old.flush()
            with pytest.raises(FencedError):
                await pending.wait_durable()
            with pytest.raises(FencedError):
                await old.put(b"k2", b"v")
            assert await new.get(b"k") is None


async def test_durable_write_waits_for_the_flush_interval(tmp_path) -> None:
    async with aio.Db.open(f"file://{tmp_path}", {"flush_interval": "50ms"}) as db:
        h = await db.put(b"k", b"v")
        assert not h.durable
        await h.wait_durable()
        assert h.durable
        await sleep(0.01)


async def test_hot_path_makes_no_loop_hop(tmp_path, monkeypatch) -> None:
    """Writes and memtable reads never reach the host (no call into the engine's loop)."""
    async with aio.Db.open(f"file://{tmp_path}", {"flush_interval": "1h"}) as db:
        calls = []
        host = db._host
        real = type(host).acall

        async def counting(self, fn, *args):
            calls.append(fn.__name__)
            return await real(self, fn, *args)

        monkeypatch.setattr(type(host), "acall", counting)
        for i in range(200):
            await db.put(b"k%03d" % i, b"v")
        for i in range(200):
            assert await db.get(b"k%03d" % i) == b"v"
        assert len([kv async for kv in db.scan()]) == 200
        assert calls == []
        await db.flush()
        assert calls == ["flush_wal"]
    if running() == "asyncio":
        assert isinstance(host, RuntimeThread)


async def test_bad_arguments_raise_at_the_call(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="create must be"):
        aio.Db.open(f"file://{tmp_path}", create="sometimes")  # before anything is awaited
    with pytest.raises(InvalidArgumentError, match="no_such_setting"):
        aio.Db.open(f"file://{tmp_path}", {"no_such_setting": 1})
    opening = aio.Db.open(f"file://{tmp_path}")
    async with opening as db:
        with pytest.raises(InvalidArgumentError, match="already entered"):
            async with opening:
                pass
        await db.put(b"k", b"v")


def test_open_outside_an_event_loop_names_the_problem(tmp_path) -> None:
    import asyncio

    opening = aio.Db.open(f"file://{tmp_path}")
    with pytest.raises(InvalidArgumentError, match="trio or asyncio event loop"):
        opening.__await__().send(None)
    del asyncio
