"""Durable writes from asyncio tasks (issue 23 item 2, writer.md step 8, DUR-3): each waits on a
future of its own loop, registered with the writer (``WritePath.add_asyncio_durable_waiter``) and
resolved by the WAL flush that makes its row durable, one ``call_soon_threadsafe`` a loop and
flush; before, each waiter ran a task on the engine's loop (two thread hand-offs a put: 16 tasks
doing durable puts were 2-3x slower than 16 threads). The group-commit semantics are the
threads' (``test_group_commit.py``, whose gated store these tests share): no timing assertions.
"""

from __future__ import annotations

import asyncio

import pytest

import slatedb.aio as aio
from slatedb.errors import FencedError

from .test_group_commit import HOUR, JOIN_S, GatedStore


def _open(store: GatedStore) -> aio.Db:
    return aio.Db.open("memory://group-commit", HOUR, store=store)


def _run(store: GatedStore, main) -> None:
    """``main(db)`` on a database open on ``store`` under asyncio, the gate opened whatever
    happens (a failing assertion must not leave the engine's stop waiting at the gate)."""
    async def guarded() -> None:
        async with _open(store) as db:
            try:
                await main(db)
            finally:
                store.gate.set()

    asyncio.run(guarded())


async def _started(store: GatedStore) -> None:
    assert await asyncio.to_thread(store.started.acquire, True, JOIN_S), "no WAL flush started"


async def _until(cond, what: str) -> None:
    """Wait (at most about 30 s: a hang guard) until ``cond()``."""
    for _ in range(30_000):
        if cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never: {what}")


def _count_engine_calls(db: aio.Db) -> list:
    calls: list = []
    real = db._host.acall

    async def counting(fn, *args):
        calls.append(getattr(fn, "__name__", fn))
        return await real(fn, *args)

    db._host.acall = counting
    return calls


def test_an_asyncio_durable_put_returns_only_after_its_wal_object_landed_without_an_engine_task() -> None:
    store = GatedStore()

    async def main(db: aio.Db) -> None:
        calls = _count_engine_calls(db)
        store.gate.clear()
        task = asyncio.create_task(db.put(b"k", b"v", durable=True))
        await _started(store)
        await asyncio.sleep(0.05)
        assert not task.done() and store.landed == []  # its WAL object has not landed: it waits
        assert len(db._core._aio_durable_waiters) == 1
        store.gate.set()
        handle = await asyncio.wait_for(task, JOIN_S)
        assert handle.durable and store.landed == store.wal_objects() and len(store.landed) == 1
        assert db._core._aio_durable_waiters == [] and calls == []  # no call on the engine's loop

    _run(store, main)


def test_asyncio_waiters_arriving_during_a_flush_share_the_next_one() -> None:
    store = GatedStore()

    async def main(db: aio.Db) -> None:
        store.gate.clear()
        first = asyncio.create_task(db.put(b"first", b"1", durable=True))
        await _started(store)  # flush 1 (row 1) is in flight, held at the gate
        others = [asyncio.create_task(db.put(b"k%d" % i, b"2", durable=True)) for i in range(7)]
        while db._core.last_seq < 8:
            await asyncio.sleep(0.001)
        assert not any(t.done() for t in [first, *others])
        store.gate.set()
        seqs = [h.seq for h in await asyncio.wait_for(asyncio.gather(first, *others), JOIN_S)]
        assert sorted(seqs) == list(range(1, 9))
        assert len(store.landed) == 2, store.landed  # the one in flight, and one shared by the 7

    _run(store, main)


def test_a_cancelled_asyncio_durable_wait_is_dropped_and_the_others_complete() -> None:
    store = GatedStore()

    async def main(db: aio.Db) -> None:
        store.gate.clear()
        doomed = asyncio.create_task(db.put(b"a", b"1", durable=True))
        kept = asyncio.create_task(db.put(b"b", b"2", durable=True))
        await _started(store)
        await _until(lambda: len(db._core._aio_durable_waiters) == 2, "both waits registered with the writer")
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        store.gate.set()
        handle = await asyncio.wait_for(kept, JOIN_S)
        assert handle.durable and db._core._aio_durable_waiters == []
        assert await db.get(b"a") == b"1"  # the write itself stands: only the wait was cancelled

    _run(store, main)


def test_an_asyncio_durable_wait_on_a_writer_that_fails_raises_its_error() -> None:
    store = GatedStore()

    async def main() -> None:
        db = await _open(store)
        try:
            await fenced(db)
        finally:
            store.gate.set()
        await db.close()

    async def fenced(db: aio.Db) -> None:
        store.gate.clear()
        task = asyncio.create_task(db.put(b"k", b"v", durable=True))
        await _started(store)
        await _until(lambda: db._core._aio_durable_waiters, "the wait registered with the writer")

        async def fence() -> None:
            db._core._fail(FencedError("fenced by a newer writer (test)"))

        await db._host.acall(fence)
        with pytest.raises(FencedError, match="newer writer"):
            await asyncio.wait_for(task, JOIN_S)

    asyncio.run(main())


def test_an_asyncio_durable_wait_on_an_aborted_database_raises_at_once_without_a_kick(tmp_path) -> None:
    """As ``test_durable_wait_stopped.py``'s trio case: a database stopped without flushing (its
    ``async with`` block raised) makes a later wait raise ``ClosedError`` at once, registering no
    waiter and kicking no flush."""
    from slatedb.errors import ClosedError

    async def main() -> list:
        handle = None
        with pytest.raises(KeyError):
            async with aio.Db.open(f"file://{tmp_path}", settings={"flush_interval": "1h"}) as db:
                handle = await db.put(b"k", b"v")
                raise KeyError("the block failed: the engine stops without flushing")
        kicks: list = []
        db._core._kick_flush = lambda: kicks.append(1)
        with pytest.raises(ClosedError):
            await asyncio.wait_for(handle.wait_durable(), JOIN_S)
        assert db._core._aio_durable_waiters == []
        return kicks

    assert asyncio.run(main()) == []
