"""``await snap.close()`` on a ``slatedb.aio`` snapshot releases it, as ``await db.close()``
closes the database (and a plain ``snap.close()`` still does). Before: the async snapshot's
``close`` was the sync one: "TypeError: object NoneType can't be used in 'await' expression",
raised after the release, so an async service's ``finally: await snap.close()`` failed."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb.aio as aio
from slatedb.errors import ClosedError


async def _close_forms(url: str) -> None:
    async with aio.Db.open(url) as db:
        await db.put(b"k", b"v")
        snap = db.snapshot()
        assert await snap.get(b"k") == b"v"
        await snap.close()
        with pytest.raises(ClosedError, match="released"):
            await snap.get(b"k")
        await snap.close()  # idempotent
        other = db.snapshot()
        other.close()  # a plain call releases too
        with pytest.raises(ClosedError):
            await other.get(b"k")


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_await_snapshot_close(loop: str) -> None:
    url = f"memory://aio-snap-close-{loop}"
    asyncio.run(_close_forms(url)) if loop == "asyncio" else trio.run(_close_forms, url)
