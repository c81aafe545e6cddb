"""A transaction call refused for a bad argument (a TTL that is not positive, say) leaves the
transaction as it was: an earlier write of the same key stays, and no trace of the refused
operand is left (it showed as a ``(key, None)`` row in the transaction's scans and made the
commit fail with "write() of an empty WriteBatch"). Sync and async (trio and asyncio)."""

from __future__ import annotations

import pytest

import slatedb
import slatedb.aio as aio
from slatedb import InvalidArgumentError

S = {"flush_interval": "1h", "manifest_poll_interval": "1h", "compactor_options": None,
     "garbage_collector_options": None}


def concat(key, existing, operand):
    return (existing or b"") + operand


@pytest.mark.parametrize("bad_ttl", [0, -5, float("nan"), "10"])
def test_a_refused_put_or_merge_changes_nothing(tmp_path, bad_ttl) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S, merge_operator=concat) as db:
        db.put(b"a", b"1")
        t = db.begin()
        t.put(b"k", b"kept", ttl=100)
        with pytest.raises(InvalidArgumentError):
            t.put(b"k", b"other", ttl=bad_ttl)
        with pytest.raises(InvalidArgumentError):
            t.merge(b"new", b"x", ttl=bad_ttl)
        with pytest.raises(InvalidArgumentError):
            t.merge(b"a", b"x", ttl=bad_ttl)
        assert t.get(b"k") == b"kept" and t.get(b"a") == b"1" and t.get(b"new") is None
        assert list(t.scan()) == [(b"a", b"1"), (b"k", b"kept")]
        assert t.commit() is not None
        assert list(db.scan()) == [(b"a", b"1"), (b"k", b"kept")]
        assert db.get_key_value(b"k").expire_ts is not None  # the kept write's TTL too


def test_a_transaction_whose_only_call_was_refused_wrote_nothing(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S, merge_operator=concat) as db:
        t = db.begin()
        with pytest.raises(InvalidArgumentError):
            t.merge(b"new", b"x", ttl=0)
        assert list(t.scan()) == []
        assert t.commit() is None


@pytest.mark.anyloop
async def test_a_refused_call_changes_nothing_in_an_async_transaction(tmp_path) -> None:
    async with aio.Db.open(f"file://{tmp_path}", S, merge_operator=concat) as db:
        t = await db.begin()
        await t.put(b"k", b"kept")
        with pytest.raises(InvalidArgumentError):
            await t.put(b"k", b"other", ttl=0)
        with pytest.raises(InvalidArgumentError):
            await t.merge(b"new", b"x", ttl=-1)
        assert await t.scan() == [(b"k", b"kept")]
        assert await t.commit() is not None
        assert await db.get(b"k") == b"kept" and await db.get(b"new") is None


def test_a_refused_unmark_write_unmarks_nothing(tmp_path) -> None:
    """``unmark_write([good, bad])`` refused: ``good`` stays checked, so a concurrent write of it
    still refuses the commit (it was taken out before the bad key was met, and the commit then
    overwrote the concurrent write)."""
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        t = db.begin()
        t.put(b"a", b"txn")
        with pytest.raises(InvalidArgumentError):
            t.unmark_write([b"a", b""])
        db.put(b"a", b"plain")
        with pytest.raises(slatedb.TransactionConflictError):
            t.commit()
        assert db.get(b"a") == b"plain"


def test_a_refused_mark_read_marks_nothing(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        t = db.begin()
        with pytest.raises(InvalidArgumentError):
            t.mark_read([b"r", 5])
        db.put(b"r", b"plain")
        t.put(b"w", b"txn")
        assert t.commit() is not None
