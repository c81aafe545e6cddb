"""DbReader (RFC 000 "Readers", RFC 001 "Reader Protocol"; spec/protocols/reader.md).

What a reader sees (L0, sorted runs, WAL-only rows, bounded tables), the two modes (a given
checkpoint never changes; a managed checkpoint is established, refreshed at half its lifetime,
re-established when the SST set changed or when it was lost: READ-4), following new WAL writes,
and the typed errors. Time is moved by hand (``Clock``); maintenance rounds run by ``refresh()``.
"""

from __future__ import annotations

import uuid

import pytest
import trio

import slatedb
import slatedb.aio
from slatedb.checkpoint import delete_checkpoint
from slatedb.errors import (
    CheckpointNotFoundError,
    ClosedError,
    CorruptionError,
    InvalidArgumentError,
    InvalidDbStateError,
    ReadOnlyError,
)
from slatedb.format.manifest import encode_manifest
from slatedb.manifest.store import ManifestStore, manifest_key
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.reader.core import WalObjectMissingError
from slatedb.runtime import probes
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import wal_key

from ..db.helpers import OutageStore
from .helpers import (
    QUIET,
    WRITER,
    Clock,
    ManifestV2,
    attrs,
    checkpoints,
    compact_all_l0,
    fill,
    latest_manifest,
    make_checkpoint,
    manifest_ids,
    memory_store,
    open_reader,
    write_next_manifest,
)


def our_checkpoint(store, r):
    return next(c for c in checkpoints(store) if c.id == r.checkpoint_id)


# ---------------------------------------------------------------------------------------------
# What a reader sees
# ---------------------------------------------------------------------------------------------


def test_reader_sees_l0_sorted_runs_and_wal_rows() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        expected = fill(db, b"a", 300)
        db.flush(wal=False)
    assert compact_all_l0(store) > 1  # now one sorted run
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        expected.update(fill(db, b"b", 200))  # L0 on top of the run
        db.flush(wal=False)
        db.delete(b"a0003")
        expected.pop(b"a0003")
        db.put(b"a0004", b"overwritten in the WAL")
        expected[b"a0004"] = b"overwritten in the WAL"
        db.put(b"c", b"wal only")
        expected[b"c"] = b"wal only"
        db.flush()  # durable in the WAL, not in L0
        m = latest_manifest(store)[1]
        assert m.compacted and m.l0
        with open_reader(store) as r:
            assert dict(r.scan()) == expected
            assert r.get(b"a0003") is None and r.get(b"a0004") == b"overwritten in the WAL"
            assert r.get(b"c") == b"wal only" and r.get(b"zzz") is None
            assert list(r.scan_prefix(b"b00", reverse=True)) == sorted(
                ((k, v) for k, v in expected.items() if k.startswith(b"b00")), reverse=True)
            assert list(r.scan(b"a0010", b"a0020")) == [(k, expected[k]) for k in sorted(expected)
                                                         if b"a0010" <= k < b"a0020"]
            assert r.core.tables  # the WAL rows are in a table


def test_reader_sees_only_durable_writes() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"durable", b"1")
        db.flush()
        db.put(b"buffered", b"2")  # in the writer's WAL buffer only
        with open_reader(store) as r:
            assert r.get(b"durable") == b"1"
            assert r.get(b"buffered") is None


def test_wal_rows_go_to_bounded_tables() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "l0_sst_size_bytes": 1 << 30, "max_unflushed_bytes": 2 << 30}, store=store) as db:
        expected = {}
        for round_ in range(6):
            expected.update(fill(db, b"k", 50, tag=b"%d" % round_))
            db.flush()  # one WAL object per round
        opts = attrs.evolve(QUIET, max_memtable_bytes=2000)
        with open_reader(store, options=opts) as r:
            tables = r.core.tables
            assert len(tables) > 3
            assert all(t.mem.size_bytes < 2000 + 200 for t in tables)
            # ... and a table is cut only once full (`sim mutate` seed 22: a new table for every
            # row while the last was below the limit survived)
            assert all(t.mem.size_bytes >= 2000 for t in tables[:-1])
            assert [t.first_wal for t in tables] == sorted(t.first_wal for t in tables)
            assert dict(r.scan()) == expected
            assert all(r.get(k) == v for k, v in expected.items())


def test_reads_are_the_writers_read_paths() -> None:
    from slatedb.db.core import DbCore
    from slatedb.reader import ReaderCore

    for name in ("get_fast", "get_slow", "scan_merge", "load_blocks"):
        assert getattr(ReaderCore, name) is getattr(DbCore, name)


def test_block_reads_of_a_reader_without_cache() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        expected = fill(db, b"k", 400)
    with open_reader(store, settings={"block_cache_size_bytes": 0, "block_size_bytes": 512}) as r:
        assert all(r.get(k) == v for k, v in list(expected.items())[::37])
        assert dict(r.scan()) == expected
        assert list(r.scan(reverse=True)) == sorted(expected.items(), reverse=True)


# ---------------------------------------------------------------------------------------------
# Checkpoint mode
# ---------------------------------------------------------------------------------------------


def test_a_given_checkpoint_is_read_and_never_changes() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        before = fill(db, b"k", 200)
        db.flush(wal=False)
        cp = make_checkpoint(store)
        fill(db, b"k", 200, tag=b"later")
        db.put(b"new", b"x")
        db.flush(wal=False)
        ids_before = manifest_ids(store)
        with open_reader(store, cp.id) as r:
            assert r.checkpoint_id == cp.id and r.manifest_id == cp.manifest_id
            assert dict(r.scan()) == before
            db.put(b"newer", b"y")
            db.flush(wal=False)
            r.refresh()  # nothing to do for a given checkpoint
            assert dict(r.scan()) == before and r.get(b"new") is None
            assert r.checkpoint_id == cp.id
        assert manifest_ids(store)[:len(ids_before)] == ids_before
    assert compact_all_l0(store) > 0
    with open_reader(store, str(cp.id)) as r:  # a string id too; the pinned SSTs still exist
        assert dict(r.scan()) == before
    assert any(c.id == cp.id for c in checkpoints(store)), "a reader never deletes a given checkpoint"


def test_a_checkpoint_reads_its_wal_range_only() -> None:
    """Its manifest's (replay_after_wal_id, wal_id_last_seen]: as the official reader does."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1", durable=True)
        with open_reader(store) as managed:  # raises wal_id_last_seen past "a"
            cp = make_checkpoint(store)
            assert managed.get(b"a") == b"1"
        db.put(b"b", b"2", durable=True)  # after the checkpoint
        with open_reader(store, cp.id) as r:
            assert r.get(b"a") == b"1" and r.get(b"b") is None


def test_unknown_expired_and_malformed_checkpoint_ids() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    with pytest.raises(CheckpointNotFoundError):
        open_reader(store, uuid.UUID(int=7))
    with pytest.raises(InvalidArgumentError):
        open_reader(store, "not-a-uuid")
    cp = make_checkpoint(store, lifetime_s=60)
    clock = Clock()
    with open_reader(store, cp.id, clock=clock) as r:
        assert r.get(b"a") == b"1"
    clock.advance(120)
    with pytest.raises(InvalidDbStateError, match="expired"):
        open_reader(store, cp.id, clock=clock)


@pytest.mark.parametrize("pins", ["deleted", "above-the-latest"])
def test_a_given_checkpoint_whose_manifest_does_not_exist_is_refused(pins: str) -> None:
    """A checkpoint names the manifest it pins; a reader at it reads that manifest (the latest it
    read only when the ids are equal). One that does not exist -- deleted behind the checkpoint's
    back, or above the latest one, which only a malformed manifest names -- refuses the open with
    ``InvalidDbStateError`` naming it, never reads another manifest in its place (`sim mutate`
    seed 21: the latest taken for every pinned id at or above it survived)."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
        db.flush(wal=False)
        cp = make_checkpoint(store)
        db.put(b"b", b"2")
        db.flush(wal=False)
    if pins == "deleted":
        store.delete_now(manifest_key(cp.manifest_id))
        gone = cp.manifest_id
    else:
        gone = latest_manifest(store)[0] + 2  # the manifest written next is mid + 1

        def pin_above(m):
            return attrs.evolve(m, checkpoints=tuple(attrs.evolve(c, manifest_id=gone) if c.id == cp.id else c
                                                     for c in m.checkpoints))
        write_next_manifest(store, pin_above)
    with pytest.raises(InvalidDbStateError, match=f"checkpoint {cp.id} pins manifest {gone}, which is gone"):
        open_reader(store, cp.id)


# ---------------------------------------------------------------------------------------------
# Managed mode: establish, refresh, re-establish, close
# ---------------------------------------------------------------------------------------------


def test_establishing_writes_a_checkpoint_and_raises_wal_id_last_seen() -> None:
    store = memory_store()
    clock = Clock()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        for i in range(3):
            db.put(b"k%d" % i, b"v", durable=True)
        v, before = latest_manifest(store)
        highest_wal = max(int(m.key[4:24]) for m in store.list_now("wal/"))
        assert before.wal_id_last_seen < highest_wal
        with open_reader(store, clock=clock, options=attrs.evolve(QUIET, checkpoint_lifetime_s=9000)) as r:
            mid, m = latest_manifest(store)
            assert mid == v + 1 == r.manifest_id
            assert m.wal_id_last_seen == highest_wal
            cp = our_checkpoint(store, r)
            assert cp.manifest_id == v + 1 and cp.metadata is None
            assert abs(cp.checkpoint_expire_time_s - (clock.now_ms() / 1000 + 9000)) <= 2
            (ev,) = clock.kinds("reader_checkpoint")
            assert ev["manifest_id"] == v + 1 and ev["last_seen"] == highest_wal and ev["reason"] == "open"
            assert ev["replaced"] is None  # the first checkpoint replaces none (the timeline reads this)
            assert [r.get(b"k%d" % i) for i in range(3)] == [b"v"] * 3
        assert all(c.id != cp.id for c in checkpoints(store)), "close() deletes the reader's checkpoint"


def test_wal_id_last_seen_is_never_lowered() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1", durable=True)
    write_next_manifest(store, lambda m: attrs.evolve(m, wal_id_last_seen=m.wal_id_last_seen + 50))
    high = latest_manifest(store)[1].wal_id_last_seen
    with pytest.raises(InvalidDbStateError, match="missing from the WAL range"):
        open_reader(store)  # it would replay ids that do not exist
    assert latest_manifest(store)[1].wal_id_last_seen == high


def test_reestablishes_after_a_compaction_and_deletes_the_old_checkpoint() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        expected = fill(db, b"k", 300)
        db.flush(wal=False)
        db.put(b"w", b"wal", durable=True)
        expected[b"w"] = b"wal"
        with open_reader(store) as r:
            first = r.checkpoint_id
            r.refresh()
            assert r.checkpoint_id == first, "nothing changed: same checkpoint"
            assert compact_all_l0(store) > 1
            r.refresh()
            second = r.checkpoint_id
            ids = {c.id for c in checkpoints(store)}
            assert second != first and second in ids
            assert first in ids, "the old checkpoint is kept one round for reads in flight"
            assert r.manifest_id == our_checkpoint(store, r).manifest_id
            assert dict(r.scan()) == expected
            # The SST readers follow the view: those of the compacted L0 SSTs are dropped.
            pinned = r.core._pinned.manifest
            assert not pinned.l0 and set(r.core._readers) == {v.sst_id for run in pinned.compacted for v in run.ssts}
            r.refresh()
            ids = {c.id for c in checkpoints(store)}
            assert first not in ids and second in ids
            # An L0 flush moves replay_after_wal_id past the WAL table: it is purged.
            db.put(b"x", b"1")
            db.flush(wal=False)
            expected[b"x"] = b"1"
            r.refresh()
            lo, hi = r.core.wal_range
            assert all(t.last_wal > lo for t in r.core.tables)
            assert dict(r.scan()) == expected
            assert r.stats["establishes"] == 3


def test_refreshes_the_expiry_at_half_the_lifetime() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    clock = Clock()
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=3600, checkpoint_lifetime_s=10_000)
    with open_reader(store, clock=clock, options=opts) as r:
        cid = r.checkpoint_id
        expire0 = our_checkpoint(store, r).checkpoint_expire_time_s
        clock.advance(4_000)  # 6000 s left > 5000: no refresh
        r.refresh()
        assert our_checkpoint(store, r).checkpoint_expire_time_s == expire0
        clock.advance(2_000)  # 4000 s left < 5000: refresh
        r.refresh()
        assert r.checkpoint_id == cid
        expire1 = our_checkpoint(store, r).checkpoint_expire_time_s
        assert abs(expire1 - (clock.now_ms() / 1000 + 10_000)) <= 2 and expire1 > expire0
        assert r.stats["refreshes"] == 1 and r.stats["establishes"] == 1
        assert r.get(b"a") == b"1"


def test_reestablishes_when_its_checkpoint_was_deleted_or_expired() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    clock = Clock()
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=100, checkpoint_lifetime_s=1000)
    with open_reader(store, clock=clock, options=opts) as r:
        first = r.checkpoint_id
        rt = ProductionRuntime("gc")
        trio.run(delete_checkpoint, ManifestStore(store, rt), rt, first)  # as GC would
        r.refresh()
        second = r.checkpoint_id
        assert second != first and second in {c.id for c in checkpoints(store)}
        assert r.get(b"a") == b"1"
        clock.advance(2000)  # the reader slept past its checkpoint's expiry (GC has not run)
        r.refresh()
        third = r.checkpoint_id
        assert third not in (first, second) and third in {c.id for c in checkpoints(store)}
        lost = clock.kinds("reader_checkpoint_lost")
        assert [e["expired"] for e in lost] == [False, True]
        assert [p for p in clock.probes if p.startswith("reader.checkpoint-")] == [
            probes.READER_CHECKPOINT_GONE, probes.READER_CHECKPOINT_EXPIRED]
        assert r.get(b"a") == b"1"
        r.refresh()
        assert second not in {c.id for c in checkpoints(store)}  # retired, then deleted
    assert not [c for c in checkpoints(store) if c.metadata is None]


def test_follow_latest_serves_new_durable_writes() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1", durable=True)
        with open_reader(store) as r, open_reader(store, options=attrs.evolve(QUIET, follow_latest=False)) as still:
            db.put(b"b", b"2", durable=True)
            db.delete(b"a", durable=True)
            assert r.get(b"b") is None  # until the next round
            r.refresh()
            still.refresh()
            assert r.get(b"b") == b"2" and r.get(b"a") is None
            assert dict(r.scan()) == {b"b": b"2"}
            # one per WAL object followed: the two durable writes since the reader opened
            assert r.stats["wal_followed"] == 2 and still.stats["wal_followed"] == 0
            assert still.get(b"b") is None and still.get(b"a") == b"1"
            # An L0 flush changes the SST set: the non-following reader re-establishes and catches up.
            db.flush(wal=False)
            still.refresh()
            assert dict(still.scan()) == {b"b": b"2"}
            r.refresh()
            assert dict(r.scan()) == {b"b": b"2"}


def test_background_maintenance_follows_on_its_own() -> None:
    store = memory_store()
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=0.02, checkpoint_lifetime_s=1)
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        with open_reader(store, options=opts) as r:
            db.put(b"k", b"v", durable=True)
            for _ in range(500):
                if r.get(b"k") == b"v":
                    break
                trio.run(trio.sleep, 0.01)
            assert r.get(b"k") == b"v"


def test_an_outage_past_the_retry_bound_is_not_fatal_to_a_managed_reader() -> None:
    """READ-4: a maintenance round whose store calls gave up (``ObjectStoreRetriesExhaustedError``,
    an S3 endpoint down longer than the retry bound) is tried again next round, and the reader
    follows the writer once the store answers. Before: the exhausted retry was taken as fatal and
    every later read raised it, though the server was back (seen with SeaweedFS killed for 12 s)."""
    bucket = MemoryBucket()
    writer_store = MemoryStore(bucket, ProductionRuntime().now_ms, url="memory://test")
    flaky = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://test")
    clock = Clock()
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=0.02, checkpoint_lifetime_s=60)
    with slatedb.Db.open("memory://test", settings=WRITER, store=writer_store) as db:
        db.put(b"a", b"1", durable=True)
        with open_reader(flaky, clock=clock, options=opts, settings={"object_store_max_retries": 1}) as r:
            flaky.down = True
            try:
                for _ in range(500):
                    if clock.kinds("reader_error"):
                        break
                    trio.run(trio.sleep, 0.01)
            finally:
                flaky.down = False
            first = clock.kinds("reader_error")[0]
            assert "ObjectStoreRetriesExhaustedError" in first["error"] and not first["fatal"], first
            assert r.get(b"a") == b"1"
            db.put(b"b", b"2", durable=True)
            for _ in range(500):
                if r.get(b"b") == b"2":
                    break
                trio.run(trio.sleep, 0.01)
            assert r.get(b"b") == b"2"


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_no_database_uninitialized_and_destroyed() -> None:
    store = memory_store()
    with pytest.raises(InvalidDbStateError, match="no manifest"):
        open_reader(store)
    store.put_now(manifest_key(1), encode_manifest(ManifestV2(initialized=False)))
    with pytest.raises(InvalidDbStateError, match="not initialized"):
        open_reader(store)
    store2 = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store2) as db:
        db.put(b"a", b"1")
    cp = make_checkpoint(store2)
    write_next_manifest(store2, lambda m: attrs.evolve(m, destroyed_at_s=1_700_000_000))
    with pytest.raises(InvalidDbStateError, match="destroyed"):
        open_reader(store2)
    with open_reader(store2, cp.id) as r:  # a live checkpoint still pins it: readable
        assert r.get(b"a") == b"1"


def test_destroyed_under_a_reader_fails_its_reads_and_drops_its_checkpoint() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    with open_reader(store) as r:
        write_next_manifest(store, lambda m: attrs.evolve(m, destroyed_at_s=1_700_000_000))
        r.refresh()
        with pytest.raises(InvalidDbStateError, match="destroyed"):
            r.get(b"a")
        assert not [c for c in checkpoints(store) if c.metadata is None]


@pytest.mark.parametrize("kw", [
    {"manifest_poll_interval_s": 0}, {"manifest_poll_interval_s": -1}, {"checkpoint_lifetime_s": float("nan")},
    {"manifest_poll_interval_s": 10, "checkpoint_lifetime_s": 20}, {"max_memtable_bytes": 0},
    {"max_memtable_bytes": 1.5}, {"follow_latest": 1}, {"manifest_poll_interval_s": True},
])
def test_bad_options(kw) -> None:
    with pytest.raises(InvalidArgumentError):
        slatedb.DbReaderOptions(**kw)


@pytest.mark.parametrize("lifetime", [2**32, 2**40, 1e30])
def test_a_checkpoint_lifetime_past_the_manifest_range_is_refused_by_the_options(lifetime) -> None:
    """A reader checkpoint's expiry is u32 seconds in the manifest: a longer lifetime is refused
    when the options are built, naming the option. Before: accepted, then the open failed
    with a message for ``CheckpointOptions`` ("leave the lifetime out for a checkpoint that
    never expires"), which a reader's options cannot do."""
    with pytest.raises(InvalidArgumentError, match="DbReaderOptions.checkpoint_lifetime_s"):
        slatedb.DbReaderOptions(checkpoint_lifetime_s=lifetime)


def test_defaults_are_the_official_ones() -> None:
    o = slatedb.DbReaderOptions()
    assert (o.manifest_poll_interval_s, o.checkpoint_lifetime_s, o.max_memtable_bytes) == (10, 600, 64 << 20)
    assert o.follow_latest is True


def test_options_as_a_dict_as_read_and_scan_options_take_them() -> None:
    """``options={...}`` is the same as ``DbReaderOptions(...)`` (it was refused, while
    ``settings=``, read and scan options all take a dict); a bad one is refused at the open."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    with open_reader(store, options={"manifest_poll_interval_s": 1, "follow_latest": False}) as r:  # type: ignore[arg-type]
        assert r.options == slatedb.DbReaderOptions(manifest_poll_interval_s=1, follow_latest=False)
        assert r.get(b"a") == b"1"
    for bad in ({"manifest_poll_interval": 1}, {"checkpoint_lifetime_s": 1}, {1: 2}, "fast", 3):
        with pytest.raises(InvalidArgumentError):
            open_reader(store, options=bad)  # type: ignore[arg-type]


def test_corrupt_wal_object_raises_corruption() -> None:
    store = memory_store()
    db = slatedb.Db.open("memory://test", settings=WRITER, store=store)
    db.put(b"a", b"1" * 100, durable=True)
    db.abort()  # the row stays in the WAL only
    wal_id = max(int(m.key[4:24]) for m in store.list_now("wal/"))
    key = wal_key(wal_id)
    data = bytearray(store.get_now(key).data)
    data[10] ^= 0xFF
    store.put_now(key, bytes(data))
    with pytest.raises(CorruptionError):
        open_reader(store)


def test_closed_reader_and_read_only() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    r = open_reader(store)
    with pytest.raises(ReadOnlyError):
        r.put(b"a", b"2")
    r.close()
    r.close()
    with pytest.raises(ClosedError):
        r.get(b"a")
    with pytest.raises(ClosedError):
        r.refresh()


# ---------------------------------------------------------------------------------------------
# The trio API
# ---------------------------------------------------------------------------------------------


def test_aio_reader() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        expected = fill(db, b"k", 200)
        db.flush(wal=False)
        db.put(b"w", b"1", durable=True)
        expected[b"w"] = b"1"
        cp = make_checkpoint(store)

        async def main():
            async with slatedb.aio.DbReader.open("memory://test", options=QUIET, store=store) as r:
                assert await r.get(b"w") == b"1"
                assert [kv async for kv in r.scan()] == sorted(expected.items())
                assert await r.scan_prefix(b"k01").next_batch(5) == sorted(
                    (k, v) for k, v in expected.items() if k.startswith(b"k01"))[:5]
                managed = r.checkpoint_id
                await r.refresh()
            async with slatedb.aio.DbReader.open("memory://test", cp.id, store=store) as r:
                assert r.checkpoint_id == cp.id and await r.get(b"k0001") == expected[b"k0001"]
            return managed

        managed = trio.run(main)
        assert managed not in {c.id for c in checkpoints(store)}



def published_states(r: slatedb.DbReader) -> list:
    """Record every read state the reader publishes; ``states()`` scans each as it was."""
    from slatedb.db.sync import DbIterator
    from slatedb.lsm.view import UNBOUNDED

    core = r.core
    got: list = []
    original = core._publish

    def publish(view):
        original(view)
        got.append((core._read_state, core._last_seq))

    core._publish = publish

    def states() -> list[dict]:
        return [dict(DbIterator(r._portal, core, *core.scan_merge(rs, UNBOUNDED, False, seq))) for rs, seq in got]

    return states


def test_a_replay_range_past_the_tables_is_published_only_with_its_ssts() -> None:
    """When the new replay point is past every WAL id the tables hold, the new range must not be
    shown over the old SST view (it would skip the ids in between: READ-3)."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        with open_reader(store) as r:
            states = published_states(r)
            db.put(b"a", b"1")
            db.flush()
            r.refresh()  # follows: a table from this WAL id
            db.put(b"b", b"2")
            db.flush(wal=False)  # L0 holds a and b: replay_after moves past the table
            db.put(b"c", b"3")
            db.flush()
            r.refresh()  # re-establishes: c's WAL id is replayed, then shown with the new L0
            history = [{}, {b"a": b"1"}, {b"a": b"1", b"b": b"2"}, {b"a": b"1", b"b": b"2", b"c": b"3"}]
            seen = states()
            assert all(s in history for s in seen), seen
            assert seen[-1] == history[-1]
            lo, hi = r.core.wal_range
            assert all(t.first_wal > lo for t in r.core.tables)


def test_a_replay_that_continues_the_tables_publishes_each_wal_object_as_it_is_applied() -> None:
    """READ-3 with freshness: when the new manifest's replay range continues the tables, each
    replayed WAL object's rows are shown as soon as they are applied (over the old view they are
    a prefix), so a read during a long replay sees the objects already replayed; the new SST view
    comes last."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"x", b"0")
        db.flush(wal=False)  # an L0 SST for the compaction below
        with open_reader(store, options=attrs.evolve(QUIET, follow_latest=False)) as r:
            for k in (b"a", b"b", b"c"):
                db.put(k, b"1")
                db.flush()  # one WAL object each; L0 and the replay point stay
            compact_all_l0(store)  # the SST set changes: the reader re-establishes, range continues
            states = published_states(r)
            r.refresh()
            x, a, b, c = ((b"x", b"0"),), ((b"a", b"1"),), ((b"b", b"1"),), ((b"c", b"1"),)
            assert states() == [dict(x + a), dict(x + a + b), dict(x + a + b + c), dict(x + a + b + c)]


def test_a_checkpoint_deleted_just_before_its_refresh_is_reestablished(monkeypatch) -> None:
    """READ-4 in the race: the round found its checkpoint, but it was deleted (GC, an operator)
    before the refresh's manifest read: the refresh finds it gone and the reader establishes a
    new one, as when a round finds it gone."""
    import slatedb.reader.core as reader_core

    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    clock = Clock()
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=3600, checkpoint_lifetime_s=10_000)
    refresh = reader_core.refresh_checkpoint

    async def deleted_first(manifests, runtime, checkpoint_id, lifetime_s):
        rt = ProductionRuntime("gc")
        await delete_checkpoint(ManifestStore(store, rt), rt, checkpoint_id)
        return await refresh(manifests, runtime, checkpoint_id, lifetime_s)

    monkeypatch.setattr(reader_core, "refresh_checkpoint", deleted_first)
    with open_reader(store, clock=clock, options=opts) as r:
        first = r.checkpoint_id
        clock.advance(6_000)  # 4000 s left < 5000: refresh
        r.refresh()
        assert r.checkpoint_id != first and r.checkpoint_id in {c.id for c in checkpoints(store)}
        assert [e["expired"] for e in clock.kinds("reader_checkpoint_lost")] == [False]
        assert r.get(b"a") == b"1" and r.stats["refreshes"] == 0


def test_a_replay_that_outlives_its_new_checkpoint_establishes_another() -> None:
    """READ-4 (gc seed 47): the reader commits a fresh checkpoint, then its replay of the pinned
    WAL range stalls past the checkpoint's lifetime; meanwhile the writer flushed those rows to
    L0 and GC, seeing the checkpoint expired, collected the WAL objects. The missing object is
    the expired checkpoint's doing, not a broken database: the reader retires that checkpoint and
    establishes another (``reader_checkpoint_stale``), and keeps serving reads. (It used to fail
    for good: "wal/... is missing from the WAL range ... pinned by manifest ...".)"""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"x", b"0")
        db.flush(wal=False)
        clock = Clock()
        opts = slatedb.DbReaderOptions(manifest_poll_interval_s=20, checkpoint_lifetime_s=60, follow_latest=False)
        with open_reader(store, clock=clock, options=opts) as r:
            for k in (b"a", b"b", b"c"):
                db.put(k, b"1")
                db.flush()  # one WAL object each
            compact_all_l0(store)  # the SST set changes: the next round re-establishes and replays a, b, c
            fetch = r.core._fetch_wal
            stalled: list[int] = []

            async def stalling_fetch(wal_id):
                if not stalled:
                    stalled.append(wal_id)
                    clock.advance(61)  # this read stalls past the new checkpoint's lifetime
                    await trio.to_thread.run_sync(lambda: db.flush(wal=False))  # a, b, c reach L0
                    for later in (wal_id + 1, wal_id + 2):  # GC: the checkpoint expired, the replay point moved
                        store.delete_now(wal_key(later))
                return await fetch(wal_id)

            r.core._fetch_wal = stalling_fetch
            r.refresh()
            assert stalled and [e["manifest_id"] for e in clock.kinds("reader_checkpoint_stale")]
            assert r.checkpoint_id in {c.id for c in checkpoints(store)}
            assert {k: r.get(k) for k in (b"x", b"a", b"b", b"c")} == {b"x": b"0", b"a": b"1", b"b": b"1", b"c": b"1"}


def test_a_wal_object_missing_under_a_checkpoint_with_more_than_half_its_lifetime_left_is_raised() -> None:
    """READ-4's margin from the other side (READ-1): the same missing WAL objects as above, but
    the replay stalled 24 s of the new checkpoint's 60: 36 s, more than half, are left, so GC may
    not have collected what it pins. That is not a stale checkpoint but a broken WAL range:
    ``WalObjectMissingError`` is raised, no ``reader_checkpoint_stale``, no second checkpoint."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"x", b"0")
        db.flush(wal=False)
        clock = Clock()
        opts = slatedb.DbReaderOptions(manifest_poll_interval_s=20, checkpoint_lifetime_s=60, follow_latest=False)
        with open_reader(store, clock=clock, options=opts) as r:
            for k in (b"a", b"b", b"c"):
                db.put(k, b"1")
                db.flush()  # one WAL object each
            compact_all_l0(store)  # the SST set changes: the next round re-establishes and replays a, b, c
            fetch = r.core._fetch_wal
            stalled: list[int] = []
            async def stalling_fetch(wal_id):
                if not stalled:
                    stalled.append(wal_id)
                    clock.advance(24)  # 36 of the new checkpoint's 60 s are left
                    await trio.to_thread.run_sync(lambda: db.flush(wal=False))
                    for later in (wal_id + 1, wal_id + 2):
                        store.delete_now(wal_key(later))
                return await fetch(wal_id)

            r.core._fetch_wal = stalling_fetch
            with pytest.raises(WalObjectMissingError):
                r.refresh()
            assert stalled and clock.kinds("reader_checkpoint_stale") == []
            first, again = clock.kinds("reader_checkpoint")  # the open's, and the one that met the gap
            assert first["replaced"] is None and again["replaced"] == first["id"]


def test_a_replay_range_past_the_tables_that_fails_midway_is_replayed_whole_next_time() -> None:
    """A re-establish whose range does not continue the tables replays into fresh tables; when a
    WAL fetch fails midway nothing of it was published, so the next round must replay the whole
    range again (keeping the ids applied before the failure would skip them: READ-3)."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        with open_reader(store) as r:
            db.put(b"a", b"1")
            db.flush()
            r.refresh()  # follows: a table from this WAL id
            db.put(b"b", b"2")
            db.flush(wal=False)  # L0 holds a and b: replay_after moves past the table
            for k in (b"c", b"d"):
                db.put(k, b"3")
                db.flush()  # two WAL objects past the replay point
            core = r.core
            fetch, failed = core._fetch_wal, []
            last_wal = max(int(m.key[4:-4]) for m in store.list_now("wal/"))

            class Injected(Exception):
                pass

            async def fetch_failing_once(wal_id):
                if wal_id == last_wal and not failed:  # d's WAL object, after c's was applied
                    failed.append(wal_id)
                    raise Injected(f"injected failure reading WAL {wal_id}")
                return await fetch(wal_id)

            core._fetch_wal = fetch_failing_once
            with pytest.raises(Injected):
                r.refresh()
            assert failed
            r.refresh()
            assert [(k, r.get(k)) for k in (b"a", b"b", b"c", b"d")] == [
                (b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"3")]


def test_a_checkpoint_with_less_than_half_its_lifetime_left_at_commit_is_retired() -> None:
    """READ-1's margin: a new checkpoint whose commit returned with under half its lifetime left
    (here 40%: 24 of 60 s) is not adopted; the reader retires it and establishes another."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"x", b"0")
        db.flush(wal=False)
        clock = Clock()
        opts = slatedb.DbReaderOptions(manifest_poll_interval_s=20, checkpoint_lifetime_s=60, follow_latest=False)
        with open_reader(store, clock=clock, options=opts) as r:
            db.put(b"a", b"1")
            db.flush(wal=False)
            compact_all_l0(store)  # the SST set changes: the next round re-establishes
            commit, slowed = r.core.manifests.commit, []

            async def slow_commit(*args, **kwargs):
                got = await commit(*args, **kwargs)
                if not slowed:
                    slowed.append(1)
                    clock.advance(36)  # the reply to the checkpoint's commit came 36 s late
                return got

            r.core.manifests.commit = slow_commit
            r.refresh()
            stale = clock.kinds("reader_checkpoint_stale")
            # expiry times are whole seconds: 24 to 25 s of the lifetime were left
            assert slowed and len(stale) == 1 and 24 <= stale[0]["left_s"] <= 25, stale
            assert r.checkpoint_id in {c.id for c in checkpoints(store)}
            assert r.get(b"a") == b"1"


def test_a_checkpoint_with_more_than_half_its_lifetime_left_at_commit_is_adopted() -> None:
    """READ-1's margin from the other side: a reply 24 s late leaves 36 of 60 s, more than half:
    the checkpoint is adopted as it is, no second one is made."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"x", b"0")
        db.flush(wal=False)
        clock = Clock()
        opts = slatedb.DbReaderOptions(manifest_poll_interval_s=20, checkpoint_lifetime_s=60, follow_latest=False)
        with open_reader(store, clock=clock, options=opts) as r:
            db.put(b"a", b"1")
            db.flush(wal=False)
            compact_all_l0(store)  # the SST set changes: the next round re-establishes
            commit, made = r.core.manifests.commit, []

            async def slow_commit(*args, **kwargs):
                got = await commit(*args, **kwargs)
                if not made:
                    clock.advance(24)  # the reply to the checkpoint's commit came 24 s late
                made.append(got.result)
                return got

            r.core.manifests.commit = slow_commit
            r.refresh()
            assert clock.kinds("reader_checkpoint_stale") == []
            assert len(made) == 1 and r.checkpoint_id == made[0].checkpoint.id
            assert r.get(b"a") == b"1"


def test_the_async_reader_reports_its_checkpoint_and_manifest_as_attributes() -> None:
    """``slatedb.aio.DbReader``: ``checkpoint_id`` and ``manifest_id`` are attributes, as on the
    sync reader (Spark's scan and the official-API reader read them so)."""
    import trio

    from slatedb import aio

    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
        db.flush(wal=False)

    async def main():
        async with aio.DbReader.open("memory://test", store=store) as r:
            ids = {c.id: c.manifest_id for c in checkpoints(store)}
            assert r.checkpoint_id in ids and r.manifest_id == ids[r.checkpoint_id] >= 1
            assert await r.get(b"a") == b"1"

    trio.run(main)


def test_an_open_cancelled_after_retiring_a_stale_checkpoint_still_deletes_it(monkeypatch) -> None:
    """The open's clean-up runs shielded: an open cancelled (a caller's timeout) after it retired
    a checkpoint it had committed (READ-1: too little of its lifetime left) deletes that
    checkpoint on its way out, cancelled or not, instead of leaving it pinned for its lifetime."""
    from slatedb.config import Settings
    from slatedb.manifest.store import ManifestStore
    from slatedb.reader.core import ReaderCore

    store = memory_store()
    with slatedb.Db.open("memory://test", settings={**WRITER, "flush_interval": "1h"}, store=store) as db:
        db.put(b"x", b"0")
        db.flush(wal=False)
    clock = Clock()
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=20, checkpoint_lifetime_s=60, follow_latest=False)
    commit, calls = ManifestStore.commit, []

    async def main():
        with trio.CancelScope() as scope:
            async def slow_then_cancelled(self, *args, **kwargs):
                calls.append(1)
                if len(calls) == 2:  # the second try: the caller gives up
                    scope.cancel()
                got = await commit(self, *args, **kwargs)
                if len(calls) == 1:
                    clock.advance(36)  # the first checkpoint's reply came 36 s late: retired
                return got

            monkeypatch.setattr(ManifestStore, "commit", slow_then_cancelled)
            await ReaderCore.open(store, clock, opts, Settings())
        monkeypatch.setattr(ManifestStore, "commit", commit)
        return scope.cancelled_caught

    assert trio.run(main)
    assert clock.kinds("reader_checkpoint_stale")
    assert [c for c in checkpoints(store) if c.metadata is None] == []  # the retired one is gone


def test_a_close_that_cannot_delete_its_checkpoint_stops_the_maintenance_and_raises() -> None:
    """A managed reader's close whose checkpoint delete fails (the store down past the retry
    bound) returns with the store's error, its maintenance task cancelled (the close cancels it
    before the delete; ``ReaderCore.abort`` then stops the reader), and the checkpoint is left to
    lapse after its lifetime."""
    import threading

    bucket = MemoryBucket()
    writer_store = MemoryStore(bucket, ProductionRuntime().now_ms, url="memory://test")
    flaky = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://test")
    opts = slatedb.DbReaderOptions(manifest_poll_interval_s=0.02, checkpoint_lifetime_s=60)
    with slatedb.Db.open("memory://test", settings=WRITER, store=writer_store) as db:
        db.put(b"a", b"1", durable=True)
    r = open_reader(flaky, options=opts, settings={"object_store_max_retries": 1})
    cid = r.checkpoint_id
    raised: list[BaseException] = []

    def close() -> None:
        try:
            r.close()
        except BaseException as e:  # noqa: BLE001 -- the close's error, checked below
            raised.append(e)

    flaky.down = True
    try:
        t = threading.Thread(target=close, daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "the close waits for a maintenance task nobody cancelled"
    finally:
        flaky.down = False
    assert raised and "connection refused" in str(raised[0]), raised
    assert cid in {c.id for c in checkpoints(writer_store)}  # left to lapse after its lifetime


def test_leaving_an_async_reader_block_under_trio_raises_the_close_error() -> None:
    """The same failed close at the end of a clean ``async with aio.DbReader.open(...)`` block
    under trio, where the close runs in the block's exit (``_Background.__aexit__``, not a
    front-end's ``close``): the store's error is raised there, not swallowed."""
    bucket = MemoryBucket()
    writer_store = MemoryStore(bucket, ProductionRuntime().now_ms, url="memory://test")
    flaky = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://test")
    with slatedb.Db.open("memory://test", settings=WRITER, store=writer_store) as db:
        db.put(b"a", b"1", durable=True)

    async def main() -> uuid.UUID | None:
        async with slatedb.aio.DbReader.open("memory://test", options=QUIET, store=flaky,
                                             settings={"object_store_max_retries": 1}) as r:
            assert await r.get(b"a") == b"1"
            flaky.down = True  # the close cannot delete the reader's checkpoint
            return r.checkpoint_id

    try:
        with pytest.raises(Exception, match="connection refused"):
            trio.run(main)
    finally:
        flaky.down = False
    assert len(checkpoints(writer_store)) == 1  # left to lapse after its lifetime


def test_replayed_tables_lose_exactly_their_rows_already_in_l0() -> None:
    """DUR-4 over a reader's view: of a replayed WAL table, the rows at or below the view's
    ``last_l0_seq`` go (they are in its L0, maybe folded by a compaction: an operand left above
    would be applied twice); a table wholly above stays as it is, one wholly below goes."""
    from slatedb.reader.core import WalTable, _without_l0_rows
    from slatedb.row import Row, RowKind

    def table(first_wal: int, seqs) -> WalTable:
        t = WalTable(first_wal)
        for s in seqs:
            t.mem.put(Row(b"k%d" % s, s, RowKind.MERGE_OPERAND, b"+1", None, 1))
        return t

    below, straddling, above = table(1, range(1, 4)), table(2, range(4, 8)), table(3, range(8, 10))
    out = _without_l0_rows([below, straddling, above], 5)
    assert [[r.seq for r in t.mem.iter_range()] for t in out] == [[6, 7], [8, 9]]
    assert out[-1] is above and out[0].first_wal == 2
