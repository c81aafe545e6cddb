"""A durability wait on a database that stopped (aborted, failed, fenced) raises at once, and
kicks no WAL flush first. Before, ``wait_durable_sync`` (and the async ``wait_durable``) asked
the flusher of the stopped database for a flush (``_want_durable``: ``_kick_flush``, a wake-up
scheduled on its loop) and only then looked whether the database was closed."""

from __future__ import annotations

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError

SLOW_WAL = {"flush_interval": "1h"}  # nothing becomes durable on its own during the test


def _count_kicks(core) -> list:
    kicks: list = []
    real = core._kick_flush
    core._kick_flush = lambda: (kicks.append(1), real())[1]
    return kicks


def test_sync_wait_on_an_aborted_database_raises_without_a_kick(tmp_path) -> None:
    db = slatedb.Db.open(f"file://{tmp_path}", settings=SLOW_WAL)
    handle = db.put(b"k", b"v")
    db._portal.abort()  # stops without flushing: seq never durable
    kicks = _count_kicks(db._core)
    with pytest.raises(ClosedError, match="aborted"):
        handle.wait_durable()
    with pytest.raises(ClosedError):
        handle.wait_durable(timeout_s=5)
    assert kicks == []


def test_async_wait_on_an_aborted_database_raises_without_a_kick(tmp_path) -> None:
    async def main() -> list:
        handle = None
        with pytest.raises(KeyError):
            async with aio.Db.open(f"file://{tmp_path}", settings=SLOW_WAL) as db:
                handle = await db.put(b"k", b"v")
                raise KeyError("the block failed: the engine stops without flushing")
        kicks = _count_kicks(db._core)
        with pytest.raises(ClosedError):
            await handle.wait_durable()
        with pytest.raises(ClosedError, match="aborted"):
            await db._core.wait_durable(handle.seq)  # the engine's own wait (trio: this loop)
        return kicks

    assert trio.run(main) == []
