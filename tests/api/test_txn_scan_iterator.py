"""An async transaction's ``scan`` / ``scan_prefix`` return an async iterator shaped like
``aio.Db.scan``'s (``async for``, ``next_batch``, ``seek``, ``close``, ``async with``), still
awaitable to a list as before. Found writing a service: ``async for k, v in txn.scan()`` -- the
form ``db.scan()`` takes -- raised ``TypeError: 'async for' requires an object with __aiter__
method, got coroutine``; the transaction's scan was a coroutine returning a list."""

from __future__ import annotations

import pytest

import slatedb.aio as aio
from slatedb import (
    ClosedError,
    InvalidArgumentError,
    IsolationLevel,
    SeekKeyOutOfRangeError,
    TransactionClosedError,
    TransactionConflictError,
)

pytestmark = pytest.mark.anyloop


async def _db(name: str):
    db = await aio.Db.open(f"memory://txn-scan-iter-{name}")
    for k in (b"a", b"b", b"c", b"d"):
        await db.put(k, b"db")
    return db


async def test_async_for_over_a_transaction_scan_as_over_a_db_scan(async_lib) -> None:
    db = await _db(f"for-{async_lib}")
    try:
        txn = await db.begin()
        await txn.put(b"bb", b"txn")
        await txn.delete(b"c")
        got = [kv async for kv in txn.scan(b"b")]
        assert got == [(b"b", b"db"), (b"bb", b"txn"), (b"d", b"db")]
        assert [kv async for kv in db.scan(b"b")] == [(b"b", b"db"), (b"c", b"db"), (b"d", b"db")]
        assert [k async for k, _ in txn.scan_prefix(b"b", reverse=True)] == [b"bb", b"b"]
        assert await txn.scan(b"a", b"c") == [(b"a", b"db"), (b"b", b"db"), (b"bb", b"txn")]  # awaited: a list
        async with txn.scan() as it:
            assert await it.next_batch(2) == [(b"a", b"db"), (b"b", b"db")]
            assert await it.next_batch(0) == []
            await it.seek(b"a")  # back, as a Db iterator seeks back
            assert await it.__anext__() == (b"a", b"db")
            await it.seek(b"bc")
            assert await it.next_batch(10) == [(b"d", b"db")]
            assert await it.next_batch(10) == []
        assert await it.next_batch(1) == []  # closed: no more rows
        with pytest.raises(ClosedError):
            await it.seek(b"a")
        rit = txn.scan(reverse=True)
        await rit.seek(b"bc")
        assert await rit.next_batch(2) == [(b"bb", b"txn"), (b"b", b"db")]
        it = txn.scan(b"b", b"c")
        with pytest.raises(SeekKeyOutOfRangeError):
            await it.seek(b"c")
        assert [kv async for kv in it] == [(b"b", b"db"), (b"bb", b"txn")]  # unchanged by the refused seek
        await txn.commit()
    finally:
        await db.close()


async def test_bad_arguments_raise_at_the_call_and_rows_are_those_of_the_call(async_lib) -> None:
    db = await _db(f"args-{async_lib}")
    try:
        txn = await db.begin(IsolationLevel.SERIALIZABLE_SNAPSHOT)
        with pytest.raises(InvalidArgumentError):
            txn.scan(b"c", b"a")  # no await: raised at the call, as db.scan(b"c", b"a")
        with pytest.raises(InvalidArgumentError):
            txn.scan(reverse="yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            txn.scan_prefix("a")  # type: ignore[arg-type]
        it = txn.scan()
        await txn.put(b"z", b"later")  # after the call: not in the rows (a Db scan's rows are the call's)
        assert [k async for k, _ in it] == [b"a", b"b", b"c", b"d"]
        assert [k async for k, _ in txn.scan(b"y")] == [b"z"]
        await db.put(b"bz", b"phantom")  # in a range the transaction scanned
        with pytest.raises(TransactionConflictError):
            await txn.commit()
        with pytest.raises(TransactionClosedError):
            txn.scan()
        late = await db.begin()
        pending = late.scan()
        await late.rollback()
        with pytest.raises(TransactionClosedError):
            await pending.next_batch(1)
    finally:
        await db.close()
