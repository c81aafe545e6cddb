"""Issue 22 item 4: get_key_value, read/scan options, seek, next_batch, descending scans,
expire_at, status() -- on the sync API, snapshots and readers; the async API in the anyloop
tests below (trio and asyncio)."""

from __future__ import annotations

import pytest

import slatedb
import slatedb.aio as aio
from slatedb import (
    CloseReason,
    DurabilityLevel,
    InvalidArgumentError,
    IterationOrder,
    ReadOptions,
    ScanOptions,
    SeekKeyOutOfRangeError,
)

S = {"flush_interval": "1h", "manifest_poll_interval": "1h", "compactor_options": None,
     "garbage_collector_options": None, "l0_sst_size_bytes": 2048, "min_filter_keys": 10}


def _fill(db, n=300) -> None:
    for i in range(n):
        db.put(b"k%03d" % i, b"v%03d" % i)


def test_get_key_value_carries_the_row_metadata(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        now = db._core.runtime.now_ms()
        h = db.put(b"a", b"1", ttl=3600)
        kv = db.get_key_value(b"a")
        assert (kv.key, kv.value, kv.seq) == (b"a", b"1", h.seq)
        assert now <= kv.create_ts <= now + 10_000 and kv.expire_ts == kv.create_ts + 3_600_000
        db.put(b"b", b"2", expire_at_ms=now + 7_000_000)
        assert db.get_key_value(b"b").expire_ts == now + 7_000_000
        assert db.get_key_value(b"b").create_ts is not None
        db.put(b"gone", b"x", expire_at_ms=1)  # an absolute expiry in the past: expired at once
        assert db.get(b"gone") is None and db.get_key_value(b"gone") is None
        db.delete(b"a")
        assert db.get_key_value(b"a") is None and db.get_key_value(b"none") is None
        db.flush(wal=False)  # from an L0 SST now
        assert db.get_key_value(b"b").expire_ts == now + 7_000_000
        with db.snapshot() as snap:
            db.put(b"b", b"3")
            assert snap.get_key_value(b"b").value == b"2"
            assert db.get_key_value(b"b").value == b"3"
    with slatedb.DbReader.open(f"file://{tmp_path}") as r:
        assert r.get_key_value(b"b").value == b"3"


def test_expire_at_is_checked_at_the_call(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        with pytest.raises(InvalidArgumentError, match="not both"):
            db.put(b"k", b"v", ttl=5, expire_at_ms=10**13)
        with pytest.raises(InvalidArgumentError, match="expire_at_ms must be an int"):
            db.put(b"k", b"v", expire_at_ms=1.5)
        assert db.get(b"k") is None and db.status().durable_seq == 0  # nothing written


def test_durability_filter_remote_reads_only_durable_writes(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        db.put(b"a", b"durable")
        db.flush()
        db.put(b"a", b"buffered")
        db.put(b"b", b"buffered")
        remote = ReadOptions(durability_filter=DurabilityLevel.REMOTE)
        assert db.get(b"a") == b"buffered"
        assert db.get(b"a", remote) == b"durable"
        assert db.get(b"b", {"durability_filter": "remote"}) is None
        assert db.get_key_value(b"a", remote).value == b"durable"
        assert list(db.scan(options=ScanOptions(durability_filter="remote"))) == [(b"a", b"durable")]
        assert db.status().durable_seq == 1
        db.flush()
        assert db.get(b"b", remote) == b"buffered" and db.status().durable_seq == 3


def test_unknown_and_unsupported_options_are_refused_at_the_call(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        db.put(b"a", b"1")
        with pytest.raises(InvalidArgumentError, match="unknown read options: durabilty"):
            db.get(b"a", {"durabilty": "remote"})
        with pytest.raises(InvalidArgumentError, match="durability_filter must be one of"):
            ReadOptions(durability_filter="disk")
        with pytest.raises(InvalidArgumentError, match="dirty=True is not supported"):
            ScanOptions(dirty=True)
        with pytest.raises(InvalidArgumentError, match="max_fetch_tasks=4"):
            db.scan(options={"max_fetch_tasks": 4})
        with pytest.raises(InvalidArgumentError, match="contradicts"):
            db.scan(reverse=True, options=ScanOptions(order=IterationOrder.ASCENDING))
        assert db.get(b"a") == b"1"


@pytest.mark.parametrize("flush", [False, True])
def test_descending_scans_seek_and_next_batch(tmp_path, flush: bool) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        _fill(db)
        if flush:
            db.flush(wal=False)
            assert db.stats["l0_ssts"] >= 2
        desc = ScanOptions(order="descending")
        it = db.scan(b"k100", b"k200", options=desc)
        assert next(it) == (b"k199", b"v199")
        it.seek(b"k150")
        assert next(it)[0] == b"k150" and next(it)[0] == b"k149"
        assert [k for k, _ in it.next_batch(3)] == [b"k148", b"k147", b"k146"]
        with pytest.raises(SeekKeyOutOfRangeError, match="outside the scan range"):
            it.seek(b"k200")  # the end is exclusive
        assert next(it)[0] == b"k145"  # left where it was
        it = db.scan(b"k100", b"k200")
        it.seek(b"k190")
        assert [k for k, _ in it.next_batch(100)] == [b"k%03d" % i for i in range(190, 200)]
        assert it.next_batch(5) == []
        with pytest.raises(SeekKeyOutOfRangeError):
            it.seek(b"k099")
        it = db.scan_prefix(b"k2")
        it.seek(b"k250")
        assert next(it)[0] == b"k250"
        with db.snapshot() as snap:
            db.put(b"k251", b"new")
            it = snap.scan()
            it.seek(b"k251")
            assert next(it) == (b"k251", b"v251")  # a seek keeps the scan's snapshot


def test_status_reports_the_close_reason(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, S)
    assert db.status().close_reason is None
    db.put(b"k", b"v")
    db.close()
    assert db.status().close_reason is CloseReason.CLEAN and db.status().durable_seq == 1
    old = slatedb.Db.open(url, S)
    new = slatedb.Db.open(url, S)
    old.put(b"k2", b"v")
    with pytest.raises(slatedb.FencedError):
        old.flush()
    assert old.status().close_reason is CloseReason.FENCED
    old.close()
    new.close()


def test_an_aborted_database_says_so_and_keeps_an_earlier_reason(tmp_path) -> None:
    """``Db.abort()`` (a crash, as the store sees it): the status is not a clean close and calls
    say the database was aborted; aborting a fenced database keeps FENCED (`sim mutate` seed 15:
    the abort's `is None` made `is not None` reported CLEAN and "closed", unnoticed)."""
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, S)
    db.put(b"k", b"v")
    db.abort()
    assert db.status().close_reason is CloseReason.UNKNOWN
    with pytest.raises(slatedb.ClosedError, match="the database was aborted"):
        db.put(b"k2", b"v")
    old = slatedb.Db.open(url, S)
    new = slatedb.Db.open(url, S)
    old.put(b"k2", b"v")
    with pytest.raises(slatedb.FencedError):
        old.flush()
    old.abort()
    assert old.status().close_reason is CloseReason.FENCED
    new.close()


@pytest.mark.anyloop
async def test_the_async_api_has_the_same_calls(tmp_path) -> None:
    async with aio.Db.open(f"file://{tmp_path}", S) as db:
        for i in range(300):
            await db.put(b"k%03d" % i, b"v%03d" % i)
        await db.flush(wal=False)
        kv = await db.get_key_value(b"k007")
        assert kv.value == b"v007" and kv.seq == 8
        await db.put(b"k007", b"new", expire_at_ms=db._core.runtime.now_ms() + 60_000)
        assert await db.get(b"k007", {"durability_filter": "remote"}) == b"v007"
        it = db.scan(options={"order": "descending"})
        await it.seek(b"k010")
        assert [k for k, _ in await it.next_batch(3)] == [b"k010", b"k009", b"k008"]
        with pytest.raises(SeekKeyOutOfRangeError):
            await db.scan(b"k1", b"k2").seek(b"k3")
        assert db.status().close_reason is None
    assert db.status().close_reason is CloseReason.CLEAN
    async with aio.DbReader.open(f"file://{tmp_path}") as r:
        assert (await r.get_key_value(b"k007")).value == b"new"
        it = r.scan(b"k100", options=ScanOptions(order=IterationOrder.DESCENDING))
        await it.seek(b"k299")
        assert (await it.next_batch(1))[0][0] == b"k299"


def test_an_unknown_keyword_of_an_options_class_is_a_typed_error():
    """Found by a typo in a service: ``ReadOptions(durabilty_filter="remote")``,
    ``ScanOptions(ordr=...)`` and ``DbReaderOptions(manifest_poll_interval=...)`` raised attrs'
    bare TypeError, where the same typo in a dict (``get(k, options={...})``) already raised
    InvalidArgumentError naming it."""
    for make, name in ((lambda: slatedb.ReadOptions(durabilty_filter="remote"), "durabilty_filter"),
                       (lambda: slatedb.ScanOptions(ordr="descending"), "ordr"),
                       (lambda: slatedb.DbReaderOptions(manifest_poll_interval=1.0), "manifest_poll_interval")):
        with pytest.raises(InvalidArgumentError, match=f"unknown .*option: {name} "):
            make()
    assert slatedb.ScanOptions(order="descending").order is IterationOrder.DESCENDING
    assert slatedb.DbReaderOptions(manifest_poll_interval_s=1.0).manifest_poll_interval_s == 1.0
