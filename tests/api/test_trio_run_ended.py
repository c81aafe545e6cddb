"""A ``slatedb.aio.Db`` opened by an awaited open inside ``trio.run`` runs its engine in a system
task of that run, which trio cancels as the run returns: the database stops there. Found: every
later call (another ``trio.run``, ``asyncio.run``) said only "the database was aborted". It now
says why (the trio run that opened it ended without closing it) and what to do."""

from __future__ import annotations

import asyncio

import pytest
import trio

from slatedb import aio
from slatedb.errors import ClosedError

WHY = "the trio run that opened it .* ended without closing it"


def test_a_database_left_open_when_its_trio_run_ended_says_why_later_calls_fail() -> None:
    async def opener() -> aio.Db:
        db = await aio.Db.open("memory://trio-run-ended")
        await db.put(b"a", b"1")
        return db

    db = trio.run(opener)
    with pytest.raises(ClosedError, match=WHY) as info:
        trio.run(db.get, b"a")
    assert "await db.close()" in str(info.value) and "asyncio" in str(info.value)
    with pytest.raises(ClosedError, match=WHY):
        asyncio.run(db.put(b"b", b"2"))


def test_an_explicit_abort_still_says_aborted() -> None:
    async def main() -> None:
        db = await aio.Db.open("memory://trio-run-aborted")
        await db._host.aabort()
        with pytest.raises(ClosedError, match="^the database was aborted$"):
            await db.get(b"a")

    trio.run(main)
