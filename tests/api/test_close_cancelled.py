"""An async ``close()`` given up on (``trio.move_on_after``, ``asyncio.wait_for``) does not
drop the writes it was flushing: a later ``close()`` (or leaving the ``async with`` block
normally) finishes the flush, and the reopened database has every row.

Found by cancelling closes under trio: the first ``close()``, cancelled in its flush, marked the
engine closed and dropped its memtables; the second ``close()`` returned quietly, as if it had
flushed, and the reopened database had none of the 3,000 rows written before (under asyncio
the close went on on the runtime thread and kept them).
"""

from __future__ import annotations

import asyncio

import pytest
import sniffio
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError

#: Nothing reaches the WAL or L0 before the close: it has everything to flush.
SETTINGS = {"flush_interval": "1h", "compactor_options": None}
N = 3000


async def _cancelled_close(db: aio.Db) -> bool:
    """``db.close()`` cancelled at its first suspension; True when it was cancelled there."""
    if sniffio.current_async_library() == "trio":
        with trio.move_on_after(0) as scope:
            await db.close()
        return scope.cancelled_caught
    task = asyncio.ensure_future(db.close())
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True
    return False


async def _fill(db: aio.Db) -> None:
    for i in range(N):
        await db.put(b"k%05d" % i, b"v" * 100)


def _rows(url: str) -> int:
    with slatedb.Db.open(url) as db:
        return sum(1 for _ in db.scan())


@pytest.mark.anyloop
async def test_a_close_after_a_cancelled_close_flushes(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    db = await aio.Db.open(url, SETTINGS)
    await _fill(db)
    await _cancelled_close(db)
    await db.close()
    with pytest.raises(ClosedError):
        await db.put(b"late", b"1")
    assert _rows(url) == N


async def test_a_block_left_normally_after_a_cancelled_close_flushes(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    async with aio.Db.open(url, SETTINGS) as db:
        await _fill(db)
        assert await _cancelled_close(db)
    assert _rows(url) == N


async def test_two_closes_at_once_flush_once_and_both_return(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    db = await aio.Db.open(url, SETTINGS)
    await _fill(db)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(db.close)
        nursery.start_soon(db.close)
    assert _rows(url) == N
