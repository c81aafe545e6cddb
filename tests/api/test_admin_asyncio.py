"""``slatedb.admin``, ``create_clone_url`` and ``destroy_url`` awaited from asyncio (a FastAPI or
aiohttp service): they run on a trio loop of a worker thread (slatedb/runtime/anyloop.py) and
answer as under trio, typed errors included; cancelling the awaiting task stops a long-running
call (``run_gc`` without ``once``). Before: ``RuntimeError: must be called from async context``."""

from __future__ import annotations

import asyncio
import threading

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.checkpoint import CheckpointOptions
from slatedb.clone import create_clone_url
from slatedb.destroy import destroy_url
from slatedb.errors import InvalidArgumentError, NotFoundError
from slatedb.objstore.url import resolve_store


def test_admin_calls_from_asyncio_answer_as_under_trio(tmp_path) -> None:
    parent, clone = f"file://{tmp_path}/prod", f"file://{tmp_path}/staging"
    with slatedb.Db.open(parent) as db:
        db.put(b"k", b"v", durable=True)

    async def main():
        store = resolve_store(parent)
        try:
            cp = await admin.create_checkpoint(store, CheckpointOptions(lifetime_s=600, name="svc"))
            assert [c.id for c in await admin.list_checkpoints(store, name="svc")] == [cp.id]
            latest = await admin.read_manifest(store)
            assert latest.id >= cp.manifest_id
            with pytest.raises(NotFoundError):
                await admin.read_manifest(store, 10**6)
            with pytest.raises(InvalidArgumentError):
                await admin.run_gc(store, {"no_such_setting": 1})
            stats = await admin.run_gc(store, once=True)
            assert stats.db_destroyed is False
            await admin.delete_checkpoint(store, cp.id)
        finally:
            await asyncio.to_thread(trio.run, store.aclose)
        await create_clone_url(clone, parent)
        await destroy_url(clone, soft=False)
    asyncio.run(main())
    with slatedb.Db.open(parent) as db:
        assert db.get(b"k") == b"v"


def test_cancelling_the_task_stops_a_running_gc(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v", durable=True)
    before = set(threading.enumerate())

    async def main():
        store = resolve_store(url)
        task = asyncio.create_task(admin.run_gc(store, {"garbage_collector_options": {
            "manifest_options": {"interval": "50ms", "min_age": "1h"}}}))
        await asyncio.sleep(0.5)
        assert not task.done()  # runs until cancelled
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 60)
    asyncio.run(main())
    left = [t for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not left, left  # the trio loop of the call ended with it
