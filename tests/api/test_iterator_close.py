"""A scan iterator can be closed early: ``it.close()``, ``with db.scan() as it:`` (sync), and
``await it.close()`` / ``it.close()`` / ``async with db.scan() as it:`` / ``contextlib.aclosing``
(async). A closed iterator yields no more rows (a ``for`` over it ends, ``next_batch`` gives
``[]``), ``seek`` raises ``ClosedError``, and it lets go of what it held: its read state and its
hold on the database, so a ``Db`` dropped without ``close()`` is closed for you once the scans
taken from it are closed (docs/db.md). Before: "AttributeError: 'DbIterator' object has no
attribute 'close'"; an iterator stopped early held its database's engine until it was garbage."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError

SETTINGS = {"flush_interval": "1h", "l0_sst_size_bytes": 4096, "max_unflushed_bytes": 1 << 20}


def _fill(db: slatedb.Db, n: int = 600) -> None:
    for i in range(n):
        db.put(b"k%04d" % i, b"v" * 20)


@pytest.mark.parametrize("layers", ["memtable", "ssts"])
def test_sync_close_stops_the_scan(tmp_path, layers: str) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", settings=SETTINGS) as db:
        _fill(db)
        if layers == "ssts":
            db.flush(wal=False)  # several sources: the merge path, not the memtable generator
        it = db.scan()
        assert next(it) == (b"k0000", b"v" * 20)
        it.close()
        it.close()  # idempotent
        assert it.next_batch(10) == []
        with pytest.raises(StopIteration):
            next(it)
        with pytest.raises(ClosedError, match="closed"):
            it.seek(b"k0100")
        seen = []
        for k, _ in db.scan():  # a for loop over an iterator closed in its body ends
            seen.append(k)
            if len(seen) == 3:
                break
        it = db.scan()
        taken = []
        for k, _ in it:
            taken.append(k)
            if len(taken) == 300:
                it.close()
        assert len(taken) == 300
        with db.scan(b"k0100") as it:
            assert next(it)[0] == b"k0100"
        assert it.next_batch(5) == []
        with contextlib.closing(db.scan_prefix(b"k05")) as it:
            assert len(it.next_batch(1000)) == 100


def test_a_closed_iterator_lets_a_dropped_db_close(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, settings=SETTINGS)
    db.put(b"a", b"1")  # not durable: only a close (a flush) keeps it
    it = db.scan()
    assert next(it) == (b"a", b"1")
    it.close()
    del db
    gc.collect()
    # The dropped Db is closed for you now that the closed iterator no longer holds it: the open
    # below waits for that close, which flushed the row. Held open, the iterator kept the
    # engine alive, the open fenced it, and the row was lost.
    with slatedb.Db.open(url, settings=SETTINGS) as again:
        assert again.get(b"a") == b"1"
    assert it.next_batch(1) == []


async def _async_close(url: str) -> list:
    out = []
    async with aio.Db.open(url, settings=SETTINGS) as db:
        for i in range(600):
            await db.put(b"k%04d" % i, b"v")
        await db.flush(wal=False)
        await db.put(b"k0000", b"w")  # a memtable and SSTs: the merge path
        it = db.scan()
        out.append(await it.__anext__())
        await it.close()
        it.close()  # plain call too, idempotent
        out.append(await it.next_batch(3))
        with pytest.raises(ClosedError):
            await it.seek(b"k0001")
        it = db.scan()
        n = 0
        async for _ in it:
            n += 1
            if n == 10:
                it.close()
        out.append(n)
        async with db.scan(b"k0500") as it:
            out.append((await it.__anext__())[0])
        out.append(await it.next_batch(1))
        with db.scan(b"k0500") as it:
            out.append(len(await it.next_batch(1000)))
        out.append(await it.next_batch(1))
        async with contextlib.aclosing(db.scan()) as it:
            out.append(len(await it.next_batch(2)))
        out.append(await it.next_batch(1))
        with db.snapshot() as snap:
            it = snap.scan()
            await it.next_batch(1)
            it.close()
            out.append(await it.next_batch(1))
    return out


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_async_close_stops_the_scan(tmp_path, loop: str) -> None:
    url = f"file://{tmp_path}"
    got = asyncio.run(_async_close(url)) if loop == "asyncio" else trio.run(_async_close, url)
    assert got == [(b"k0000", b"w"), [], 10, b"k0500", [], 100, [], 2, [], []]


def test_reader_iterator_closes(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1")
    with slatedb.DbReader.open(url) as reader:
        with reader.scan() as it:
            assert next(it) == (b"a", b"1")
        assert it.next_batch(1) == []
