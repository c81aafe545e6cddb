"""Issue 22 item 4: the WAL reader for change data capture: every write as a row with kind,
seq and timestamps, in seq order, following the live tail; a gap left by GC is an error."""

from __future__ import annotations

import threading

import pytest

import slatedb
from slatedb import WalGapError, WalReader

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None}


def test_changes_are_every_write_in_seq_order(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        db.put(b"a", b"1")
        db.put(b"b", b"2", expire_at_ms=4_102_444_800_000)
        db.flush()
        db.delete(b"a")
        batch = slatedb.WriteBatch()
        batch.put(b"c", b"3")
        batch.put(b"a", b"4")
        db.write(batch)
        db.flush()
    with WalReader.open(url) as w:
        rows = list(w.changes())
        assert [(r.kind, r.key, r.value, r.seq) for r in rows] == [
            ("VALUE", b"a", b"1", 1), ("VALUE", b"b", b"2", 2), ("TOMBSTONE", b"a", None, 3),
            ("VALUE", b"c", b"3", 4), ("VALUE", b"a", b"4", 5)]
        assert rows[1].expire_ts == 4_102_444_800_000 and all(r.create_ts for r in rows)
        ids = w.wal_ids()
        assert rows[0].wal_id < rows[2].wal_id and rows[-1].wal_id == w.last_wal_id() == ids[-1]
        assert [r.seq for r in w.changes(start_id=rows[2].wal_id)] == [3, 4, 5]
        assert w.read(ids[-1] + 1) is None


def test_follow_waits_for_the_next_wal_object(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = slatedb.Db.open(url, S)
    db.put(b"k0", b"v")
    db.flush()
    got = []
    with WalReader.open(url) as w:
        it = w.changes(follow=True, poll_interval_s=0.02)

        def consume() -> None:
            for row in it:
                got.append(row.key)
                if len(got) == 3:
                    return

        t = threading.Thread(target=consume)
        t.start()
        db.put(b"k1", b"v")
        db.put(b"k2", b"v")
        db.flush()
        t.join(timeout=30)
        assert not t.is_alive() and got == [b"k0", b"k1", b"k2"]
    db.close()


def test_a_wal_object_removed_before_it_was_read_is_a_gap(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        for i in range(3):
            db.put(b"k%d" % i, b"v")
            db.flush()
    with WalReader.open(url) as w:
        ids = w.wal_ids()
        (tmp_path / "wal" / ("%020d.sst" % ids[1])).unlink()
        it = w.changes(start_id=ids[1])
        with pytest.raises(WalGapError, match="is gone"):
            next(it)


def test_follow_from_an_empty_path_starts_at_the_first_wal_object(tmp_path) -> None:
    """With no WAL object yet, a following reader waits for WAL 1 (the first a writer makes),
    not for an id before it: a later object must not look like a gap."""
    url = f"file://{tmp_path}"
    got = []
    with WalReader.open(url) as w:
        it = w.changes(follow=True, poll_interval_s=0.02)
        errors = []

        def consume() -> None:
            try:
                for row in it:
                    got.append(row.key)
                    if len(got) == 2:
                        return
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        t = threading.Thread(target=consume)
        t.start()
        with slatedb.Db.open(url, S) as db:
            db.put(b"k1", b"v")
            db.put(b"k2", b"v")
            db.flush()
            t.join(timeout=30)
        assert not errors and not t.is_alive() and got == [b"k1", b"k2"]


def test_an_object_that_lands_between_the_read_and_the_listing_is_not_a_gap(tmp_path) -> None:
    """next_rows reads WAL object N, finds nothing, then lists: an N that landed in between (the
    writer was just creating it) is the object it waits for, not a gap; only a *later* object
    means N is gone."""
    import trio

    from slatedb.errors import ObjectNotFoundError
    from slatedb.objstore import resolve_store
    from slatedb.runtime.production import ProductionRuntime
    from slatedb.wal.reader import WalReaderCore

    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        db.put(b"k", b"v")
        db.flush()
    store = resolve_store(url)
    last = max(trio.run(WalReaderCore(store, ProductionRuntime()).wal_ids))

    class LateStore:
        """The store, where the first GET of the last WAL object comes just before it lands."""

        def __init__(self) -> None:
            self.missed = False

        def __getattr__(self, name):
            return getattr(store, name)

        async def get(self, key, *args, **kwargs):
            if key.endswith("%020d.sst" % last) and not self.missed:
                self.missed = True
                raise ObjectNotFoundError(key, "not there yet")
            return await store.get(key, *args, **kwargs)

    core = WalReaderCore(LateStore(), ProductionRuntime())
    assert trio.run(core.next_rows, last, False, 0.01) is None  # not there yet: no gap
    assert [r.key for r in trio.run(core.next_rows, last, False, 0.01)] == [b"k"]


@pytest.mark.parametrize("bad", [0, -1, 2**64, 1.5, "1", True, None])
def test_a_bad_wal_id_is_refused_at_the_call_naming_it(tmp_path, bad) -> None:
    """Design rule 5: a WAL id argument that no WAL object can have (ids start at 1 and are u64)
    raises InvalidArgumentError naming it, at ``changes()`` itself rather than at the first row,
    and never as an AssertionError, a TypeError or a gap GC did not make (``changes(0)`` used to
    claim GC had removed ``wal/...0.sst``)."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        db.put(b"a", b"1")
        db.flush()
    with WalReader.open(url) as w:
        if bad is not None:
            with pytest.raises(slatedb.InvalidArgumentError, match="start_id"):
                w.changes(bad)
        with pytest.raises(slatedb.InvalidArgumentError, match="wal_id"):
            w.read(bad)
        assert [r.key for r in w.changes(1)] == [b"a"]  # the reader is still usable


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1", True])
def test_a_bad_poll_interval_or_follow_flag_is_refused_at_the_call(tmp_path, bad) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        db.put(b"a", b"1")
        db.flush()
    with WalReader.open(url) as w:
        with pytest.raises(slatedb.InvalidArgumentError, match="poll_interval_s"):
            w.changes(follow=True, poll_interval_s=bad)
        with pytest.raises(slatedb.InvalidArgumentError, match="follow"):
            w.changes(follow="yes")


def test_closing_the_reader_ends_a_following_iterator_with_closed_error(tmp_path) -> None:
    """Found by trying it: a thread following the tail (``follow=True``) got a bare
    ``trio.Cancelled`` (a ``BaseException`` past any ``except Exception``) when another thread
    closed the reader; now ``ClosedError``, at once."""
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1", durable=True)
    reader = WalReader.open(url)
    seen: list = []
    waiting = threading.Event()

    def follow() -> None:
        try:
            for row in reader.changes(follow=True, poll_interval_s=0.05):
                seen.append(row.key)
                waiting.set()
            seen.append("ended")
        except BaseException as e:  # noqa: BLE001 - what the thread saw is the finding
            seen.append(type(e).__name__)

    t = threading.Thread(target=follow)
    t.start()
    assert waiting.wait(30)
    reader.close()
    t.join(30)
    assert not t.is_alive() and seen == [b"a", "ClosedError"], seen


def test_changes_without_a_start_begin_past_the_gap_gc_leaves_below_a_kept_fence(tmp_path) -> None:
    """A CDC consumer ran ``WalReader.changes()`` (the docs' call, no start id) on a database GC
    had collected: found WalGapError at once, every time ("wal/2 is gone; the oldest left is
    wal/1"): GC keeps the 0-byte fence ``wal/1`` a writer's open leaves (``wal_fence_options`` is a
    dry run by default) and removes the WAL objects after it, so "the oldest left" was never
    readable. Now the default start is the oldest id from which the WAL is whole up to the
    newest; an explicit start inside the gap still raises, naming where the WAL is whole from."""
    import asyncio

    import trio

    from slatedb import admin, aio
    from slatedb.objstore import resolve_store

    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        for i in range(4):
            db.put(b"k%d" % i, b"v", durable=True)
        db.flush(wal=False)  # the rows are in L0: GC may take their WAL objects
        db.put(b"late", b"v", durable=True)
    quick = {"garbage_collector_options": {"wal_options": {"min_age": "1ms", "interval": "1s"}}}
    store = resolve_store(url)
    trio.run(lambda: admin.run_gc(store, quick, once=True))
    trio.run(store.aclose)
    with WalReader.open(url) as w:
        ids = w.wal_ids()
        assert ids[0] == 1 and ids[1] > 2, ids  # the fence kept, a gap after it
        assert w.read(1) == []
        assert [r.key for r in w.changes()] == [b"late"]
        with pytest.raises(WalGapError, match=f"the WAL is whole from wal/{ids[1]:020d}.sst on"):
            next(w.changes(start_id=2))

    async def from_aio() -> list[bytes]:
        async with aio.WalReader.open(url) as w:
            return [r.key async for r in w.changes()]

    assert asyncio.run(from_aio()) == [b"late"]
