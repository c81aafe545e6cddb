"""``DbIterator.next_batch(n)`` refuses an ``n`` that is not a non-negative int, at the call
(design rule 5), in the sync and async APIs alike. Before: ``next_batch(-1)`` sliced the
iterator's buffered rows from the end and returned some of them (one row of nine, here), and
``next_batch("3")`` failed with a TypeError deep in the buffer arithmetic. The iterator stays
usable: no row is skipped or repeated by a refused call."""

from __future__ import annotations

import pytest
import trio

import slatedb

BAD = [-1, -100, "3", 2.0, True, None]


def _fill(url: str) -> None:
    with slatedb.Db.open(url) as db:
        for i in range(10):
            db.put(b"k%d" % i, b"v")


@pytest.mark.parametrize("bad", BAD)
def test_sync_next_batch_refuses_a_bad_size_and_loses_no_row(tmp_path, bad) -> None:
    url = f"file://{tmp_path}"
    _fill(url)
    with slatedb.Db.open(url) as db:
        it = db.scan()
        assert next(it) == (b"k0", b"v")  # nine rows buffered
        with pytest.raises(slatedb.InvalidArgumentError, match="next_batch"):
            it.next_batch(bad)
        assert [k for k, _ in it.next_batch(100)] == [b"k%d" % i for i in range(1, 10)]
        assert it.next_batch(0) == []


@pytest.mark.parametrize("bad", BAD)
def test_async_next_batch_refuses_a_bad_size_and_loses_no_row(tmp_path, bad) -> None:
    url = f"file://{tmp_path}"
    _fill(url)

    async def main() -> None:
        async with slatedb.aio.Db.open(url) as db:
            it = db.scan()
            assert await it.__anext__() == (b"k0", b"v")
            with pytest.raises(slatedb.InvalidArgumentError, match="next_batch"):
                await it.next_batch(bad)
            assert [k for k, _ in await it.next_batch(100)] == [b"k%d" % i for i in range(1, 10)]

    trio.run(main)


def test_next_batch_zero_takes_no_row_from_a_memtable_scan() -> None:
    """``next_batch(0)`` is an empty list and the iterator loses nothing, also on a scan
    answered from the memtable alone (its own generator). Before: that path appended a row
    before comparing the count, so ``next_batch(0)`` returned -- and consumed -- one row."""
    with slatedb.Db.open("memory://next-batch-zero-sync") as db:
        for i in range(3):
            db.put(b"k%d" % i, b"v")
        for it in (db.scan(), db.scan(reverse=True), db.scan_prefix(b"k")):
            assert it.next_batch(0) == []
            assert len(it.next_batch(10)) == 3

    async def main() -> None:
        async with slatedb.aio.Db.open("memory://next-batch-zero-async") as db:
            for i in range(3):
                await db.put(b"k%d" % i, b"v")
            for it in (db.scan(), db.scan(reverse=True), db.scan_prefix(b"k")):
                assert await it.next_batch(0) == []
                assert len(await it.next_batch(10)) == 3

    trio.run(main)


def test_a_size_above_sys_maxsize_takes_every_row_left(tmp_path) -> None:
    """``next_batch(2**64)`` ("up to n rows") returns every row left, on the memtable generator
    and on the merge path, sync and async. Before: "ValueError: Stop argument for islice() must
    be None or an integer: 0 <= x <= sys.maxsize", untyped, from inside the iterator."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, settings={"l0_sst_size_bytes": 1024}) as db:
        for i in range(10):
            db.put(b"k%d" % i, b"v" * 100)
        assert len(db.scan().next_batch(2**64)) == 10
        db.flush(wal=False)
        db.put(b"k0", b"w")  # a memtable and L0 SSTs: the merge path
        it = db.scan()
        assert next(it) == (b"k0", b"w")
        assert len(it.next_batch(2**64)) == 9

    async def main() -> int:
        async with slatedb.aio.Db.open(url) as db:
            return len(await db.scan().next_batch(2**64))

    assert trio.run(main) == 10
