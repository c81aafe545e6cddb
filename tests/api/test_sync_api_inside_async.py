"""The synchronous API called from inside an async program: a library that uses ``slatedb.Db``
and is called from a trio or asyncio task. Each call blocks the caller's loop while it runs (as
any blocking call does); the engine runs on its own thread, so nothing waits on the caller's
loop and every call completes.

Found by trying it: under asyncio every call worked, but under trio ``flush()``, ``close()``
and ``abort()`` raised a bare ``RuntimeError`` ("this is a blocking function; call it from a
thread", ``trio.from_thread.run`` refusing any trio thread), so such a database could not be
closed there and its memtable never reached L0."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
from slatedb.errors import ClosedError

SETTINGS = {"flush_interval": "10ms", "l0_sst_size_bytes": 4096}


def _session(url: str) -> dict:
    """Every kind of call of the sync API; what each gave."""
    out = {}
    db = slatedb.Db.open(url, SETTINGS)
    for i in range(300):
        db.put(b"k%04d" % i, b"v%d" % i)
    out["durable"] = db.put(b"durable", b"1", durable=True).durable
    db.flush()
    db.flush(wal=False)
    out["get"] = db.get(b"k0007")
    out["scan"] = sum(1 for _ in db.scan())
    with db.snapshot() as snap:
        out["snapshot"] = snap.get(b"k0299")
    db.close()
    with pytest.raises(ClosedError):
        db.put(b"late", b"x")
    db = slatedb.Db.open(url, SETTINGS)
    out["reopened"] = (db.get(b"k0000"), db.get(b"durable"), sum(1 for _ in db.scan()))
    db.put(b"lost", b"unflushed")
    db.abort()
    reader = slatedb.DbReader.open(url)
    out["reader"] = reader.get(b"k0001")
    reader.close()
    return out


WANT = {"durable": True, "get": b"v7", "scan": 301, "snapshot": b"v299",
        "reopened": (b"v0", b"1", 301), "reader": b"v1"}


def test_the_sync_api_inside_a_trio_task(tmp_path) -> None:
    async def main() -> dict:
        return _session(f"file://{tmp_path}/db")

    assert trio.run(main) == WANT


def test_the_sync_api_inside_an_asyncio_task(tmp_path) -> None:
    async def main() -> dict:
        return _session(f"file://{tmp_path}/db")

    assert asyncio.run(main()) == WANT


def test_a_trio_task_calling_a_closed_database_gets_closed_error(tmp_path) -> None:
    async def main() -> None:
        db = slatedb.Db.open(f"file://{tmp_path}/db", SETTINGS)
        db.close()
        db.close()  # idempotent
        with pytest.raises(ClosedError):
            db.flush()

    trio.run(main)
