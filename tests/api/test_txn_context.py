"""A transaction as a context manager: ``with db.begin() as txn:`` and, alike,
``async with await db.begin() as txn:`` (asyncio and trio) commit when the block ends normally
and roll back when it raises. Found by trying the async form: ``AsyncTransaction`` had no
``__aenter__`` although the sync one is a context manager."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio


def test_sync_block_commits_or_rolls_back() -> None:
    with slatedb.Db.open("memory://txn-ctx-sync") as db:
        with db.begin() as txn:
            txn.put(b"a", b"1")
        with pytest.raises(ValueError):
            with db.begin() as txn:
                txn.put(b"b", b"1")
                raise ValueError("boom")
        with db.begin() as txn:
            txn.put(b"c", b"1")
            txn.rollback()  # ended in the block: the exit leaves it
        assert (db.get(b"a"), db.get(b"b"), db.get(b"c")) == (b"1", None, None)


async def _async_block(url: str) -> tuple:
    async with aio.Db.open(url) as db:
        async with await db.begin() as txn:
            await txn.put(b"a", b"1")
        with pytest.raises(ValueError):
            async with await db.begin(slatedb.IsolationLevel.SERIALIZABLE_SNAPSHOT) as txn:
                await txn.put(b"b", b"1")
                raise ValueError("boom")
        async with await db.begin() as txn:
            await txn.put(b"c", b"1")
            await txn.commit(durable=True)  # ended in the block: the exit leaves it
        first, second = await db.begin(), await db.begin()
        await first.put(b"x", b"1")
        await second.put(b"x", b"2")
        async with first:
            pass
        with pytest.raises(slatedb.TransactionConflictError):
            async with second:
                pass
        return await db.get(b"a"), await db.get(b"b"), await db.get(b"c"), await db.get(b"x")


def test_async_block_commits_or_rolls_back_under_asyncio_and_trio() -> None:
    want = (b"1", None, b"1", b"1")
    assert asyncio.run(_async_block("memory://txn-ctx-asyncio")) == want
    assert trio.run(_async_block, "memory://txn-ctx-trio") == want
