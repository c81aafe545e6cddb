"""A transaction's ``commit()`` once its database is closed raises ``ClosedError``, whether it
wrote anything or not (as any call after ``close()``; docs/db.md "Errors"). Found by trying it as
a user: a transaction that wrote nothing returned None from ``commit()`` on a closed database, so
a read-only SERIALIZABLE_SNAPSHOT transaction "committed" with nothing checked. The official
binding returns None there; ``slatedb.uniffi`` keeps that (its own test below)."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio
import slatedb.uniffi as u


@pytest.mark.parametrize("level", list(slatedb.IsolationLevel))
def test_sync_commit_after_close_raises_closed(level: slatedb.IsolationLevel) -> None:
    db = slatedb.Db.open(f"memory://txn-commit-closed-{level.name}")
    db.put(b"a", b"1")
    empty, read_only, wrote = db.begin(level), db.begin(level), db.begin(level)
    assert read_only.get(b"a") == b"1"
    wrote.put(b"b", b"2")
    db.close()
    for txn in (empty, read_only, wrote):
        with pytest.raises(slatedb.ClosedError):
            txn.commit()
        with pytest.raises(slatedb.TransactionClosedError):  # finished either way
            txn.commit()


async def _async_commits(url: str) -> list[str]:
    db = await aio.Db.open(url)
    await db.put(b"a", b"1")
    empty, read_only = await db.begin(), await db.begin(slatedb.IsolationLevel.SERIALIZABLE_SNAPSHOT)
    await read_only.get(b"a")
    await db.close()
    out = []
    for txn in (empty, read_only):
        try:
            await txn.commit()
            out.append("returned")
        except slatedb.ClosedError:
            out.append("closed")
    return out


def test_async_commit_after_close_raises_closed_under_asyncio_and_trio() -> None:
    assert asyncio.run(_async_commits("memory://txn-commit-closed-asyncio")) == ["closed", "closed"]
    assert trio.run(_async_commits, "memory://txn-commit-closed-trio") == ["closed", "closed"]


def test_uniffi_empty_commit_after_shutdown_returns_none_as_the_official() -> None:
    async def main() -> tuple:
        store = u.ObjectStoreBuilder.from_url("memory://txn-commit-closed-uniffi").build()
        db = await u.DbBuilder("db", store).build()
        empty, wrote = await db.begin(u.IsolationLevel.SNAPSHOT), await db.begin(u.IsolationLevel.SNAPSHOT)
        await wrote.put(b"x", b"1")
        await db.shutdown()
        got = await empty.commit()
        try:
            await wrote.commit()
            other = "returned"
        except u.Error.Closed:
            other = "Error.Closed"
        return got, other

    assert asyncio.run(main()) == (None, "Error.Closed")
