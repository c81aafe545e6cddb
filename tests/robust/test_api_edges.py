"""Issue 16 item 6 (API edges): ``async with db.snapshot()``, ``WriteBatch.merge`` refused at the
write by a database without a merge operator (MERGE-8), ``scan_prefix(b"")`` scans everything."""

from __future__ import annotations

import pytest

import slatedb
import slatedb.aio
from slatedb import ClosedError, InvalidArgumentError, WriteBatch

SETTINGS = {"compactor_options": None, "garbage_collector_options": None}


@pytest.mark.anyloop
async def test_async_snapshot_is_an_async_context_manager(tmp_path) -> None:
    async with slatedb.aio.Db.open(f"file://{tmp_path}", SETTINGS) as db:
        await db.put(b"k", b"old")
        async with db.snapshot() as snap:
            await db.put(b"k", b"new")
            assert await snap.get(b"k") == b"old"
        with pytest.raises(ClosedError, match="released"):
            await snap.get(b"k")
        with db.snapshot() as snap2:  # the plain `with` keeps working
            assert await snap2.get(b"k") == b"new"


def test_write_batch_merge_is_refused_at_the_write_without_a_merge_operator(tmp_path) -> None:
    """MERGE-8: a batch holding a merge operand, written to a database opened without a merge
    operator, raises at ``write`` and writes nothing of the batch."""
    b = WriteBatch()
    b.put(b"a", b"1")
    b.merge(b"k", b"+1")
    assert len(b) == 2
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS) as db:
        seq = db.status().durable_seq
        with pytest.raises(slatedb.MergeOperatorMissingError, match="merge operator"):
            db.write(b)
        assert db.get(b"a") is None and db.get(b"k") is None
        db.flush()
        assert db.status().durable_seq == seq


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_prefix_of_empty_bytes_scans_everything(tmp_path, reverse: bool) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS) as db:
        for k in (b"a", b"b\xff", b"\xff\xff", b"m"):
            db.put(k, k)
        want = sorted([b"a", b"b\xff", b"\xff\xff", b"m"], reverse=reverse)
        assert [k for k, _ in db.scan_prefix(b"", reverse=reverse)] == want
        with db.snapshot() as snap:
            assert [k for k, _ in snap.scan_prefix(b"", reverse=reverse)] == want
        with pytest.raises(InvalidArgumentError, match="prefix must be bytes"):
            db.scan_prefix("a")


@pytest.mark.anyloop
async def test_async_scan_prefix_of_empty_bytes(tmp_path) -> None:
    async with slatedb.aio.Db.open(f"file://{tmp_path}", SETTINGS) as db:
        await db.put(b"x", b"1")
        await db.put(b"y", b"2")
        assert [k async for k, _ in db.scan_prefix(b"")] == [b"x", b"y"]
