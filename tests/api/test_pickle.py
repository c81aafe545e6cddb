"""A database handle given to another process or copied: a ``TypeError`` naming the handle and
what to do, not "cannot pickle '_thread.lock' object" (slatedb/api/unpicklable.py)."""

from __future__ import annotations

import asyncio
import copy
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import slatedb
import slatedb.aio as aio


def _rows(db) -> int:
    return 0


def _refused(handle, name: str) -> None:
    for attempt in (lambda: pickle.dumps(handle), lambda: copy.copy(handle)):
        with pytest.raises(TypeError, match=f"cannot pickle a slatedb {name}: it is a handle on a database open"):
            attempt()


def test_sync_handles_refuse_pickling_by_name(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v", durable=True)
        _refused(db, "Db")
        with db.snapshot() as snap:
            _refused(snap, "Snapshot")
        with slatedb.DbReader.open(url) as reader:
            _refused(reader, "DbReader")
        with ProcessPoolExecutor(1) as pool:  # what a service author tries first
            with pytest.raises(TypeError, match="open it there"):
                pool.submit(_rows, db).result(timeout=120)
        assert db.get(b"k") == b"v"  # the handle still works


def test_aio_handles_refuse_pickling_by_name(tmp_path) -> None:
    async def main():
        async with aio.Db.open(f"memory://pickle-{tmp_path.name}") as db:
            _refused(db, "Db")
            await db.put(b"k", b"v")
            assert await db.get(b"k") == b"v"
    asyncio.run(main())
