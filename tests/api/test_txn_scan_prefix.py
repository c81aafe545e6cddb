"""``txn.scan_prefix(prefix, reverse=)`` in a transaction, sync and async (asyncio and trio), as
``Db``, snapshots and readers offer it and as the official ``DbTransaction.scan_prefix`` does
(docs/api.md: a transaction has the database's read calls). Found by trying it: the
transaction had only ``scan``, so ``txn.scan_prefix(b"user:")`` was an AttributeError. The rows
are the snapshot's with the transaction's own writes applied; under SERIALIZABLE_SNAPSHOT the
prefix's range is checked for phantoms at commit, as a ``scan`` of it is."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb import IsolationLevel, TransactionConflictError


def _fill(db) -> None:
    for k in (b"a", b"u:1", b"u:2", b"u:3", b"v", b"\xff\xff"):
        db.put(k, b"db")


def test_sync_scan_prefix_sees_own_writes_and_checks_the_prefix_for_phantoms() -> None:
    with slatedb.Db.open("memory://txn-scan-prefix-sync") as db:
        _fill(db)
        txn = db.begin(IsolationLevel.SERIALIZABLE_SNAPSHOT)
        txn.put(b"u:4", b"txn")
        txn.delete(b"u:2")
        txn.put(b"w", b"outside")
        assert txn.scan_prefix(b"u:") == [(b"u:1", b"db"), (b"u:3", b"db"), (b"u:4", b"txn")]
        assert [k for k, _ in txn.scan_prefix(b"u:", reverse=True)] == [b"u:4", b"u:3", b"u:1"]
        assert txn.scan_prefix(b"\xff") == [(b"\xff\xff", b"db")]
        assert [k for k, _ in txn.scan_prefix(b"")] == [b"a", b"u:1", b"u:3", b"u:4", b"v", b"w", b"\xff\xff"]
        with pytest.raises(slatedb.InvalidArgumentError):
            txn.scan_prefix("u:")  # type: ignore[arg-type]
        db.put(b"u:9", b"phantom")
        with pytest.raises(TransactionConflictError):
            txn.commit()


@pytest.mark.parametrize("run", ["asyncio", "trio"])
def test_async_scan_prefix(run) -> None:
    async def main() -> None:
        async with aio.Db.open(f"memory://txn-scan-prefix-{run}") as db:
            for k in (b"a", b"u:1", b"u:2"):
                await db.put(k, b"db")
            txn = await db.begin()
            await txn.put(b"u:0", b"txn")
            assert await txn.scan_prefix(b"u:") == [(b"u:0", b"txn"), (b"u:1", b"db"), (b"u:2", b"db")]
            assert [k for k, _ in await txn.scan_prefix(b"u:", reverse=True)] == [b"u:2", b"u:1", b"u:0"]
            await txn.commit()

    asyncio.run(main()) if run == "asyncio" else trio.run(main)


@pytest.mark.parametrize("run", ["sync", "asyncio", "trio"])
def test_scan_prefix_takes_its_arguments_as_the_databases_does(run) -> None:
    """The prefix by position or by name, ``reverse`` by name only, as ``Db.scan_prefix`` takes
    them (``db.scan_prefix(b"u:", True)`` is a TypeError). `sim mutate` seed 25: the async
    transaction's ``*`` made ``/`` took the prefix by position only and ``reverse`` by position."""
    import inspect

    for cls in (slatedb.Db, aio.Db, slatedb.Transaction, aio.AsyncTransaction):
        params = inspect.signature(cls.scan_prefix).parameters
        assert params["prefix"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, cls
        assert params["reverse"].kind is inspect.Parameter.KEYWORD_ONLY, cls
    if run == "sync":
        with slatedb.Db.open("memory://txn-scan-prefix-args") as db:
            _fill(db)
            with pytest.raises(TypeError):
                db.scan_prefix(b"u:", True)  # type: ignore[misc]
            txn = db.begin()
            assert txn.scan_prefix(prefix=b"u:", reverse=True) == [(b"u:3", b"db"), (b"u:2", b"db"), (b"u:1", b"db")]
            with pytest.raises(TypeError):
                txn.scan_prefix(b"u:", True)  # type: ignore[misc]
            txn.rollback()
        return

    async def main() -> None:
        async with aio.Db.open(f"memory://txn-scan-prefix-args-{run}") as db:
            for k in (b"a", b"u:1", b"u:2"):
                await db.put(k, b"db")
            txn = await db.begin()
            assert await txn.scan_prefix(prefix=b"u:", reverse=True) == [(b"u:2", b"db"), (b"u:1", b"db")]
            with pytest.raises(TypeError):
                await txn.scan_prefix(b"u:", True)  # type: ignore[misc]
            await txn.rollback()

    asyncio.run(main()) if run == "asyncio" else trio.run(main)
