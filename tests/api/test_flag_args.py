"""``reverse=``, a transaction's ``commit(durable=)`` and ``mark_read`` / ``unmark_write`` refuse
a wrong argument at the call with :class:`InvalidArgumentError`, as ``put(durable=)`` and
``flush(wal=)`` already did (``slatedb.batch.validate_flag``).

Found by passing request data the way a service would: ``db.scan(reverse="false")`` scanned
backwards (any truthy value meant True) on ``Db``, ``aio.Db``, snapshots, readers and
transactions; ``txn.commit(durable="no")`` committed without waiting when the transaction had
written nothing, and otherwise raised only after it had finished the transaction, losing its
writes; ``txn.mark_read(None)`` raised a raw ``TypeError`` from inside."""

from __future__ import annotations

import pytest

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError

from ..db.helpers import memory_store

NOT_FLAGS = ["false", "no", 1, 0, None, [b"x"]]


@pytest.fixture
def db():
    with slatedb.Db.open("memory://test", store=memory_store()) as db:
        for k in (b"a", b"b"):
            db.put(k, b"v")
        db.flush()  # durable: the reader sees them
        yield db


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_reverse_must_be_a_bool_on_every_sync_surface(db, value) -> None:
    snap = db.snapshot()
    txn = db.begin()
    with slatedb.DbReader.open("memory://test", store=db._core.store) as reader:
        for what in (db, snap, txn, reader):
            with pytest.raises(InvalidArgumentError, match="reverse must be True or False"):
                what.scan(reverse=value)
            if what is not txn:
                with pytest.raises(InvalidArgumentError, match="reverse must be True or False"):
                    what.scan_prefix(b"a", reverse=value)
            assert [k for k, _ in what.scan(reverse=True)] == [b"b", b"a"]
    snap.close()
    txn.rollback()


@pytest.mark.parametrize("value", ["no", 1, None])
def test_a_bad_commit_flag_leaves_the_transaction_open(db, value) -> None:
    for writes in (False, True):
        txn = db.begin()
        if writes:
            txn.put(b"t", b"1")
        with pytest.raises(InvalidArgumentError, match="durable must be True or False"):
            txn.commit(durable=value)
        if writes:
            assert txn.commit(durable=True).durable
        else:
            txn.rollback()
    assert db.get(b"t") == b"1"


@pytest.mark.parametrize("call", ["mark_read", "unmark_write"])
@pytest.mark.parametrize("keys", [None, 5, object()])
def test_mark_read_and_unmark_write_refuse_a_non_list(db, call, keys) -> None:
    txn = db.begin()
    with pytest.raises(InvalidArgumentError, match="keys must be a list of keys"):
        getattr(txn, call)(keys)
    txn.put(b"t", b"2")
    txn.commit()
    assert db.get(b"t") == b"2"


@pytest.mark.anyloop
async def test_the_async_api_refuses_them_too() -> None:
    async with aio.Db.open("memory://test", store=memory_store()) as db:
        await db.put(b"a", b"v")
        await db.put(b"b", b"v")
        for value in NOT_FLAGS:
            with pytest.raises(InvalidArgumentError, match="reverse must be True or False"):
                db.scan(reverse=value)
            with pytest.raises(InvalidArgumentError, match="reverse must be True or False"):
                db.scan_prefix(b"a", reverse=value)
            async with db.snapshot() as snap:
                with pytest.raises(InvalidArgumentError, match="reverse must be True or False"):
                    snap.scan(reverse=value)
            txn = await db.begin()
            with pytest.raises(InvalidArgumentError, match="reverse must be True or False"):
                await txn.scan(reverse=value)
            with pytest.raises(InvalidArgumentError, match="keys must be a list of keys"):
                await txn.mark_read(5)
            await txn.put(b"t", value if isinstance(value, bytes) else b"1")
            with pytest.raises(InvalidArgumentError, match="durable must be True or False"):
                await txn.commit(durable=value)
            assert (await txn.commit()) is not None
        assert [k async for k, _ in db.scan(reverse=True)] == [b"t", b"b", b"a"]
