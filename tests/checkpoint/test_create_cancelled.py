"""An ``aio.Db.create_checkpoint()`` the caller gives up on leaves no checkpoint behind.

Found cancelling it with ``asyncio.wait_for`` at 0.2..8 ms: of 51 cancelled calls, 25 had added
their checkpoint anyway -- without a lifetime, and with an id the caller never learned: each
pinned its manifest and SSTs against GC for good (/root/s16/user/ckpt_cancel.py; after: 0 of
55). Under asyncio the call runs on the engine's thread and its manifest commit is shielded, so
it completed and its result was dropped. Now the call and its caller agree, under a lock, on
who deletes a checkpoint made for a caller that gave up: the call itself when it ends after the
caller gave up (tested here, deterministically), else the caller (the call ended unseen).
"""

from __future__ import annotations

import asyncio
import threading

import trio

import slatedb
from slatedb import admin, aio
from slatedb.objstore import resolve_store
from slatedb.objstore.base import OVERWRITE

from tests.reader.test_open_cancelled import CancelAfterManifestPut


class CancelCallerAfterManifestPut(CancelAfterManifestPut):
    """Once armed: after a manifest put lands, cancel the caller's asyncio task and hold the
    put until the caller has seen its CancelledError."""

    def __init__(self, inner) -> None:
        super().__init__(inner, trio.CancelScope())
        self.armed = False
        self.task = None
        self.loop = None
        self.caller_gone = threading.Event()

    async def put(self, key, data, mode=OVERWRITE):
        meta = await self.inner.put(key, data, mode)
        if self.armed and key.startswith("manifest/") and not self.fired:
            self.fired = True
            self.loop.call_soon_threadsafe(self.task.cancel)
            await trio.to_thread.run_sync(self.caller_gone.wait)
        return meta


def _user_checkpoints(url: str) -> list:
    return [c for c in trio.run(admin.list_checkpoints, resolve_store(url)) if c.metadata is None]


def test_a_create_checkpoint_given_up_during_its_commit_deletes_what_it_added(tmp_path) -> None:
    url = f"file://{tmp_path}"
    wrapped = CancelCallerAfterManifestPut(resolve_store(url))

    async def main() -> None:
        db = await aio.Db.open(url, {"compactor_options": None}, store=wrapped)
        await db.put(b"k", b"v", durable=True)
        wrapped.loop = asyncio.get_running_loop()
        wrapped.task = asyncio.ensure_future(db.create_checkpoint(slatedb.CheckpointScope.DURABLE))
        wrapped.armed = True
        try:
            await wrapped.task
            raise AssertionError("the call should have been cancelled")
        except asyncio.CancelledError:
            pass
        wrapped.caller_gone.set()
        for _ in range(600):  # the call deletes its checkpoint on the engine's thread, then ends
            if not await asyncio.to_thread(_user_checkpoints, url):
                break
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(_user_checkpoints, url) == []
        made = await db.create_checkpoint()  # the database goes on
        assert [c.id for c in await asyncio.to_thread(_user_checkpoints, url)] == [made.id]
        await db.close()

    asyncio.run(main())
    assert wrapped.fired
    with slatedb.DbReader.open(url) as reader:
        assert reader.get(b"k") == b"v"


def test_an_admin_create_checkpoint_cancelled_during_its_commit_leaves_no_checkpoint(tmp_path) -> None:
    """``admin.create_checkpoint`` (no lifetime by default) cancelled right after its manifest
    put landed: before, the checkpoint stayed, never expiring, its id unknown to anyone; now the
    call lets the commit end, deletes the checkpoint and raises the cancellation."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")

    async def main() -> None:
        with trio.CancelScope() as scope:
            await admin.create_checkpoint(CancelAfterManifestPut(resolve_store(url), scope))
            raise AssertionError("the call should have been cancelled")
        assert scope.cancelled_caught

    trio.run(main)
    assert _user_checkpoints(url) == []
    made = trio.run(admin.create_checkpoint, resolve_store(url))  # and the database goes on
    assert [c.id for c in _user_checkpoints(url)] == [made.id]


def test_an_admin_create_checkpoint_given_up_under_asyncio_leaves_no_checkpoint(tmp_path) -> None:
    """The same under asyncio (``asyncio.wait_for`` at a few ms, the call on its own trio
    thread): no cancelled call leaves a checkpoint behind; the ones that finished are kept."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
    store = resolve_store(url)

    async def main() -> list:
        kept = []
        for i in range(24):
            try:
                kept.append((await asyncio.wait_for(admin.create_checkpoint(store), 0.001 * (1 + i % 8))).id)
            except asyncio.TimeoutError:
                pass
        return kept

    kept = asyncio.run(main())
    assert sorted(c.id for c in _user_checkpoints(url)) == sorted(kept)
