"""``db = await aio.Db.open(url)`` then ``async with db:`` (the shape of ``with db:`` for
``slatedb.Db``, and of ``aiosqlite``): leaving the block closes the database, flushing what was
written; on an exception it stops without flushing, as ``async with aio.Db.open(url)`` does.
Before: "TypeError: 'Db' object does not support the asynchronous context manager protocol"."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError


async def _round(url: str) -> None:
    db = await aio.Db.open(url)
    async with db as same:
        assert same is db
        await db.put(b"k", b"v")  # not durable: the close flushes it
    with pytest.raises(ClosedError):
        await db.get(b"k")
    reader = await aio.DbReader.open(url)
    async with reader:
        assert await reader.get(b"k") == b"v"
    with pytest.raises(ClosedError):
        await reader.get(b"k")
    db = await aio.Db.open(url)
    with pytest.raises(KeyError):
        async with db:
            await db.put(b"k2", b"v2")
            raise KeyError("the block failed")
    with pytest.raises(ClosedError):
        await db.get(b"k")


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_async_with_an_opened_db_and_reader(tmp_path, loop: str) -> None:
    url = f"file://{tmp_path}"
    asyncio.run(_round(url)) if loop == "asyncio" else trio.run(_round, url)
    with slatedb.Db.open(url) as db:
        assert db.get(b"k") == b"v"
