"""An ``await aio.Db.open(...)`` the caller gives up on (a timeout, a cancelled task) leaves no
engine behind.

Found by cancelling opens with ``asyncio.wait_for``: the open went on in its thread after the
caller's ``TimeoutError``, and each one became a live writer nobody held (40 tries left ~30
``slatedb-runtime`` threads running); one of them, finishing its open after the caller's next
open succeeded, fenced that database (``FencedError`` at its close). Under trio the awaited open
went on the same way as a system task. Now the open is cancelled where it is and an engine that
got open meanwhile is stopped without flushing, before the cancellation reaches the caller."""

from __future__ import annotations

import asyncio
import threading

import trio

import slatedb
import slatedb.aio as aio

TIMEOUTS_S = [0.0002, 0.001, 0.003, 0.01, 0.03]


def _runtime_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "slatedb-runtime" and t.is_alive()]


def _seed(url: str) -> None:
    with slatedb.Db.open(url) as db:  # something to replay, so that an open takes a while
        for i in range(3000):
            db.put(b"k%05d" % i, b"v" * 100)


def test_asyncio_cancelled_opens_leave_no_writer_behind(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    _seed(url)

    async def main() -> dict:
        seen = {"cancelled": 0, "opened": 0}
        for i in range(25):
            try:
                db = await asyncio.wait_for(aio.Db.open(url), TIMEOUTS_S[i % len(TIMEOUTS_S)])
            except asyncio.TimeoutError:
                seen["cancelled"] += 1
                assert _runtime_threads() == [], f"try {i}: an engine outlived its cancelled open"
                continue
            seen["opened"] += 1
            await db.put(b"try", b"%d" % i, durable=True)
            await db.close()  # FencedError here if a cancelled open had gone on
        async with aio.Db.open(url) as db:
            await db.put(b"last", b"1", durable=True)
            seen["k1"] = await db.get(b"k00001")
        assert _runtime_threads() == []
        return seen

    seen = asyncio.run(main())
    assert seen["cancelled"] > 0 and seen["k1"] == b"v" * 100, seen


def _system_tasks() -> int:
    return len(trio.lowlevel.current_root_task().child_nurseries[0].child_tasks)


def test_trio_cancelled_awaited_opens_leave_no_engine_behind(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    _seed(url)

    async def main() -> int:
        baseline = _system_tasks()
        cancelled = 0
        for i in range(25):
            with trio.move_on_after(TIMEOUTS_S[i % len(TIMEOUTS_S)]) as scope:
                db = await aio.Db.open(url)
            if scope.cancelled_caught:
                cancelled += 1
                assert _system_tasks() == baseline, f"try {i}: an engine outlived its cancelled open"
                continue
            await db.put(b"try", b"%d" % i, durable=True)
            await db.close()
        db = await aio.Db.open(url)
        await db.put(b"last", b"1", durable=True)
        assert await db.get(b"k00001") == b"v" * 100
        await db.close()
        assert _system_tasks() == baseline
        return cancelled

    assert trio.run(main) > 0


def test_an_interrupted_sync_open_is_stopped_before_the_interrupt_goes_on(tmp_path) -> None:
    """``Db.open`` interrupted while it opens (``KeyboardInterrupt`` in ``RuntimeThread.start``)
    stops its open the same way (:meth:`StartingThread.stop`, what the interrupt handler calls)."""
    from slatedb.api.portal import StartingThread
    from slatedb.config import Settings
    from slatedb.db.core import DbCore

    url = f"file://{tmp_path}/db"
    _seed(url)
    for _ in range(5):
        starting = StartingThread("slatedb-runtime", lambda st, rt: DbCore.open(st, Settings(), rt), url,
                                  store=None, store_options=None, runtime=None, closed_message="the database is closed")
        starting.stop()
        assert _runtime_threads() == []
    with slatedb.Db.open(url) as db:
        assert db.get(b"k02999") == b"v" * 100
