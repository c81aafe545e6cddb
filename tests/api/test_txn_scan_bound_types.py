"""A transaction's ``scan(start, end)`` takes the bound types ``db.scan`` takes (bytes, bytearray,
memoryview, None) and keeps its own copy of them. Before: a ``memoryview`` bound raised a bare
``TypeError`` ("'>=' not supported between instances of 'bytes' and 'memoryview'") from the
overlay of the transaction's writes, and a ``bytearray`` bound was kept as the scanned range of
a SERIALIZABLE_SNAPSHOT transaction: changing it after the scan moved the range the commit
checks for phantoms, so a conflicting write into the range really scanned went unseen."""

from __future__ import annotations

import asyncio

import pytest

import slatedb
import slatedb.aio as aio

SER = slatedb.IsolationLevel.SERIALIZABLE_SNAPSHOT


def test_sync_scan_takes_memoryview_and_bytearray_bounds() -> None:
    with slatedb.Db.open("memory://txn-bound-types") as db:
        for k in (b"a", b"b", b"c"):
            db.put(k, b"1")
        with db.begin() as txn:
            txn.put(b"bb", b"2")
            want = [(b"b", b"1"), (b"bb", b"2")]
            assert txn.scan(memoryview(b"b"), memoryview(b"c")) == want
            assert txn.scan(bytearray(b"b"), bytearray(b"c")) == want
            with pytest.raises(slatedb.InvalidArgumentError):
                txn.scan("b")


def test_a_bound_changed_after_the_scan_does_not_move_the_checked_range() -> None:
    with slatedb.Db.open("memory://txn-bound-copy") as db:
        db.put(b"a", b"1")
        txn = db.begin(SER)
        start = bytearray(b"a")
        assert txn.scan(start, b"c") == [(b"a", b"1")]
        start[:] = b"z"  # the caller reuses its buffer
        db.put(b"b", b"phantom")  # into [a, c), which the transaction read
        txn.put(b"x", b"1")
        with pytest.raises(slatedb.TransactionConflictError):
            txn.commit()


def test_async_scan_takes_a_memoryview_bound() -> None:
    async def main() -> list:
        async with aio.Db.open("memory://txn-bound-aio") as db:
            await db.put(b"a", b"1")
            txn = await db.begin()
            await txn.put(b"ab", b"2")
            rows = await txn.scan(memoryview(b"a"), memoryview(b"b"))
            await txn.rollback()
            return rows

    assert asyncio.run(main()) == [(b"a", b"1"), (b"ab", b"2")]
