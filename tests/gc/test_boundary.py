"""RFC 004 boundary files with the real GarbageCollector and ManifestStore: monotonic advance,
concurrent collectors, BOUNDARY-1 at every delete, the stalled-writer sequence of RFC 004
§ "Motivation", and a boundary file deleted behind GC's back."""

from __future__ import annotations

from typing import ClassVar

import attrs
import pytest
import trio

from slatedb.errors import BoundaryVanishedError, InvalidDbStateError, ObjectVersionBehindBoundaryError
from slatedb.format.types import ManifestV2
from slatedb.gc import GarbageCollector, run_gc
from slatedb.manifest.edit import Attempt, Change, Edit
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.memory import MemoryStore

from .helpers import DbBuilder, VirtualRuntime, gc_options, memory_store, run_virtual

MIN_AGE_S = 60.0


@attrs.frozen
class AddToCounter(Edit[None]):
    """A test edit: ``last_l0_seq + amount`` (no already-applied detection)."""

    kind: ClassVar[str] = "add_to_counter"
    amount: int

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        return Change(attrs.evolve(m, last_l0_seq=m.last_l0_seq + self.amount), None)


class BoundaryCheckingStore(MemoryStore):
    """Asserts BOUNDARY-1 at the store: a delete of ``<ns>/i`` finds the durable boundary >= i."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.checked = 0

    async def delete(self, key: str) -> None:
        for ns in ("manifest", "compactions"):
            if key.startswith(f"{ns}/") and key.endswith(f".{ns}"):
                file_id = int(key.split("/")[1].split(".")[0])
                boundary = int(bytes(self.get_now(f"gc/{ns}.boundary").data))
                assert file_id <= boundary, (key, boundary)
                self.checked += 1
        await super().delete(key)


def test_with_boundary_files_off_gc_collects_by_the_old_rules_and_writes_no_boundary() -> None:
    """``boundary_files_enabled=False`` (the pre-RFC 004 rules, the official option): no boundary
    file is read or written, and nothing limits the ids GC may delete but its own rules (keep
    the latest and what checkpoints pin, min_age). The latest ``.compactions`` file too is kept
    by the "not the latest" rule alone (no boundary, and no manifest read bounds its ids: `sim
    mutate` seed 21, the rule made ``file_id > newest``, survived while this test had no
    ``.compactions`` files)."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(5)
        for _ in range(3):
            await db.write_compactions()
        rt.advance(MIN_AGE_S + 1)
        stats = await GarbageCollector(db.store, rt, attrs.evolve(gc_options(MIN_AGE_S), boundary_files_enabled=False)).run_once()
        assert db.manifest_ids() == [5] and stats.boundary_advances == 0
        assert db.compactions_ids() == [3] and stats.compactions_deleted == 2
        assert db.keys("gc/") == [] and not rt.kinds("boundary_advance")

    run_virtual(main)


def test_boundary_only_moves_forward() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(5)
        rt.advance(MIN_AGE_S + 1)
        await GarbageCollector(db.store, rt, gc_options(MIN_AGE_S)).run_once()
        assert db.boundary() == 4
        await db.commits(3)  # 6, 7, 8: young
        # a collector with a larger min_age wants less: the boundary stays
        stats = await GarbageCollector(db.store, rt, gc_options(10 * MIN_AGE_S)).run_once()
        assert db.boundary() == 4 and stats.boundary_advances == 0
        rt.advance(MIN_AGE_S + 1)
        await GarbageCollector(db.store, rt, gc_options(MIN_AGE_S)).run_once()
        assert db.boundary() == 7 and db.manifest_ids() == [8]
        writes = [f["boundary"] for f in rt.kinds("boundary_advance")]
        assert writes == sorted(writes) == [4, 7]  # BOUNDARY-2

    run_virtual(main)


def test_concurrent_collectors_agree_on_the_boundary_and_check_it_before_deleting() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        store = BoundaryCheckingStore(memory_store(rt))
        db = DbBuilder(store, rt)
        await db.commits(6)
        for _ in range(4):
            await db.write_compactions()
        rt.advance(MIN_AGE_S + 1)
        await db.commits(2)
        gcs = [GarbageCollector(store, VirtualRuntime(f"gc{i}", seed=i, events=rt.events), gc_options(MIN_AGE_S))
               for i in range(3)]
        for gc in gcs:
            gc.runtime.offset_ms = rt.offset_ms  # one wall clock
        async with trio.open_nursery() as nursery:
            for gc in gcs:
                nursery.start_soon(gc.run_once)
        assert db.boundary() == 6 and db.boundary("compactions") == 3
        assert db.manifest_ids() == [7, 8] and db.compactions_ids() == [4]
        assert store.checked >= 6 + 3  # every delete checked (some twice: deletes are idempotent)
        assert sum(gc.totals.boundary_advances for gc in gcs) >= 2

    run_virtual(main)


def test_rfc004_stalled_writer_create_succeeds_but_does_not_commit() -> None:
    """RFC 004 § "Motivation", step by step: writer A prepares N+1 and stalls past min_age;
    others advance the namespace; GC deletes N+1; A's create of N+1 succeeds (the slot is free)
    but its boundary check rejects it; ``commit`` retries from a fresh read and commits later."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)  # N = 3
        rt_a = VirtualRuntime("writer-a", seed=7, events=rt.events)
        writer_a = ManifestStore(db.store, rt_a)
        prepared = trio.Event()
        resume = trio.Event()
        outcome: list[StoredManifest] = []
        attempts: list[int] = []

        async def stall(cur: StoredManifest, _new: ManifestV2) -> None:
            attempts.append(cur.id + 1)
            if len(attempts) == 1:
                prepared.set()
                await resume.wait()  # the stall: A holds its N+1 for manifest 4

        async def run_a() -> None:
            outcome.append((await writer_a.commit(AddToCounter(100), prepared=stall)).stored)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_a)
            await prepared.wait()
            await db.commits(3)  # B: 4, 5, 6
            rt.advance(MIN_AGE_S + 1)
            stats = await GarbageCollector(db.store, rt, gc_options(MIN_AGE_S)).run_once()
            assert db.boundary() == 5 and 4 not in db.manifest_ids() and stats.manifests_deleted == 5
            resume.set()
        creates = [f for f in rt.kinds("create") if f["path"].endswith("00004.manifest")]
        assert [c["outcome"] for c in creates] == ["ok", "ok"]  # B's, then A's stale one on the freed slot
        assert attempts == [4, 7] and outcome[0].id == 7
        commits = [f["id"] for f in rt.kinds("commit") if f["ns"] == "manifest"]
        assert commits.count(4) == 1 and len(commits) == len(set(commits))  # SEQMETA-1
        assert (await db.latest()).manifest.last_l0_seq == 100  # applied once, on top of B's work

    run_virtual(main)


def test_stale_try_write_raises_behind_boundary() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)
        stale = (await db.latest()).manifest
        await db.commits(3)
        rt.advance(MIN_AGE_S + 1)
        await GarbageCollector(db.store, rt, gc_options(MIN_AGE_S)).run_once()
        with pytest.raises(ObjectVersionBehindBoundaryError) as info:
            await ManifestStore(db.store, VirtualRuntime("stale")).try_write(4, stale)
        assert info.value.boundary == 5 and info.value.object_id == 4

    run_virtual(main)


def test_boundary_deleted_behind_gc_makes_the_next_sequenced_write_fail() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(4)
        rt.advance(MIN_AGE_S + 1)
        gc = GarbageCollector(db.store, rt, gc_options(MIN_AGE_S))
        await gc.run_once()
        await db.commit()  # the writer reads the boundary after its create: it has seen it
        db.store.delete_now("gc/manifest.boundary")
        with pytest.raises(BoundaryVanishedError):
            await db.commit()
        assert rt.kinds("boundary_vanished")
        # GC too refuses to go on (RFC 004: a process that saw the boundary and finds it gone stops)
        rt.advance(MIN_AGE_S + 1)
        with pytest.raises(BoundaryVanishedError):
            await gc.run_once()

    run_virtual(main)


def test_a_commit_meeting_a_boundary_a_destroy_deleted_reports_the_database_destroyed() -> None:
    """A destroyer deletes the boundary file with everything else (destroy.md): a commit of a
    process that saw it (a reader's close releasing its checkpoint, destroy seed 435) then finds
    the database destroyed or removed, ``InvalidDbStateError``, not the tampered-store
    ``BoundaryVanishedError`` (which a live database still gets, above)."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(4)
        rt.advance(MIN_AGE_S + 1)
        await GarbageCollector(db.store, rt, gc_options(MIN_AGE_S)).run_once()
        reader = ManifestStore(db.store, VirtualRuntime("reader"))
        await reader.commit(AddToCounter(1))  # it has seen the boundary
        now_s = rt.now_ms() // 1000
        await db.commit(lambda m: attrs.evolve(m, destroyed_at_s=now_s))  # the mark
        db.store.delete_now("gc/manifest.boundary")  # the destroyer's first deletes
        with pytest.raises(InvalidDbStateError, match="destroyed"):
            await reader.commit(AddToCounter(1))

    run_virtual(main)


def test_a_commit_meeting_a_deleted_boundary_on_a_live_database_keeps_its_manifest_and_stops() -> None:
    """The other side of the test above, through ``ManifestStore.commit`` (the path a writer's,
    a reader's or a compactor's update takes): the boundary file gone while the database is live
    and not marked (a tampered store) is ``BoundaryVanishedError``, and the manifest the commit
    created stays, although it is the latest: only a lone create on an emptied root (DESTROY-7)
    is deleted again (`sim mutate` seed 20: the test of that case made an ``or`` that also took
    every live database for a removed one, deleting the commit's manifest, survived)."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(4)
        rt.advance(MIN_AGE_S + 1)
        await GarbageCollector(db.store, rt, gc_options(MIN_AGE_S)).run_once()
        reader_rt = VirtualRuntime("reader")
        reader = ManifestStore(db.store, reader_rt)
        await reader.commit(AddToCounter(1))  # it has seen the boundary
        db.store.delete_now("gc/manifest.boundary")
        before = db.manifest_ids()
        with pytest.raises(BoundaryVanishedError):
            await reader.commit(AddToCounter(1))
        assert db.manifest_ids() == before + [before[-1] + 1]  # its create landed and stays
        assert not reader_rt.kinds("manifest_create_outlived_destroy")

    run_virtual(main)


def test_scheduled_gc_stops_with_the_bare_typed_error_not_a_group() -> None:
    """``run()`` (every directory on its own schedule, one task each): a pass that finds its
    boundary gone stops the collector with that ``BoundaryVanishedError`` itself, as
    ``run_once`` does, not wrapped in the task group's ``ExceptionGroup``."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(4)
        rt.advance(MIN_AGE_S + 1)
        gc = GarbageCollector(db.store, rt, gc_options(MIN_AGE_S, interval_s=10.0))
        await gc.run_once()
        await db.commit()
        db.store.delete_now("gc/manifest.boundary")
        rt.advance(MIN_AGE_S + 1)
        with trio.fail_after(3600), pytest.raises(BoundaryVanishedError) as info:
            await gc.run()
        assert type(info.value) is BoundaryVanishedError

    run_virtual(main)


def test_run_waits_one_interval_then_collects_each_directory_on_its_own_schedule() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(4)
        for i in range(1, 4):
            db.put_wal(i)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=3))
        rt.advance(MIN_AGE_S + 1)
        opts = gc_options(MIN_AGE_S, interval_s=100.0)
        opts = attrs.evolve(opts, wal_options=attrs.evolve(opts.wal_options, interval=30.0))
        gc = GarbageCollector(db.store, rt, opts)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gc.run)
            await trio.sleep(29)
            assert db.manifest_ids() == [1, 2, 3, 4, 5] and db.wal_ids() == [1, 2, 3]  # not yet
            await trio.sleep(2)
            assert db.wal_ids() == [3] and len(db.manifest_ids()) == 5  # WAL at 30 s
            await trio.sleep(70)
            assert db.manifest_ids() == [5]  # manifests at 100 s
            nursery.cancel_scope.cancel()
        assert gc.totals.wal_deleted == 2 and gc.totals.manifests_deleted == 4

    run_virtual(main)


def test_a_scheduled_pass_that_fails_is_counted_reported_and_retried_at_the_next_interval() -> None:
    """``run()``: a pass that fails with a ``SlateDBError`` other than the two that stop the
    collector (here the store refusing the WAL listing once) does not stop it: ``errors``
    counts it, a ``gc_error`` event names its directory and the error, and the next interval's
    pass collects what the failed one did not (`sim mutate` seed 21: ``errors`` left unchanged
    survived, no check failed a scheduled pass)."""
    from slatedb.errors import AccessDeniedError

    class RefusesOneWalListing(MemoryStore):
        refused = 0

        async def list(self, prefix: str = ""):
            if prefix == "wal/" and not self.refused:
                self.refused += 1
                raise AccessDeniedError(prefix, "refused once")
            return await super().list(prefix)

    async def main() -> None:
        rt = VirtualRuntime()
        base = memory_store(rt)
        store = RefusesOneWalListing(base._bucket, base._clock_ms, url=base.url)
        db = DbBuilder(store, rt)
        await db.commits(2)
        for i in range(1, 4):
            db.put_wal(i)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=3))
        rt.advance(MIN_AGE_S + 1)
        opts = gc_options(MIN_AGE_S, interval_s=None)
        opts = attrs.evolve(opts, wal_options=attrs.evolve(opts.wal_options, interval=30.0))
        gc = GarbageCollector(store, rt, opts)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gc.run)
            await trio.sleep(31)
            assert store.refused == 1 and db.wal_ids() == [1, 2, 3]  # the first pass failed
            assert gc.errors == 1
            assert [(e["directory"], e["error"]) for e in rt.kinds("gc_error")] == [
                ("wal", "AccessDeniedError: wal/: refused once")]
            await trio.sleep(30)
            assert db.wal_ids() == [3] and gc.errors == 1  # the next one collected
            nursery.cancel_scope.cancel()
        assert gc.totals.wal_deleted == 2

    run_virtual(main)


def test_run_gc_stops_once_the_database_is_destroyed() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commit(lambda m: attrs.evolve(m, destroyed_at_s=rt.now_ms() // 1000))
        with trio.fail_after(10_000):
            # once left at its default: run pass after pass until the database is gone
            totals = await run_gc(db.store, rt, gc_options(MIN_AGE_S, interval_s=50.0), db_delete_grace_s=120)
        assert totals.db_destroyed and db.store.list_now("") == []
        assert (await run_gc(db.store, rt, gc_options(), True)).deleted == 0  # nothing left: no-op

    run_virtual(main)


@pytest.mark.parametrize("boundary, base_present, outlived", [
    (5, False, True),   # base 6 gone, the boundary below it: a destroyer removed it
    (6, False, False),  # base 6 gone with the boundary at it: a GC after our create collected it
    (5, True, False),   # base present: alive
])
def test_a_manifest_create_outlived_the_database_only_when_its_base_went_below_the_boundary(
        boundary: int, base_present: bool, outlived: bool) -> None:
    """``manifest_create_outlived(manifests, 7)``: manifest 6 (the base of our create) gone and
    the GC boundary below it (< 6) means no GC deleted it: the database was destroyed."""
    from slatedb.gc.destroyed import manifest_create_outlived

    async def main() -> bool:
        rt = VirtualRuntime()
        store = memory_store(rt)
        ms = ManifestStore(store, rt)
        store.put_now(ms.boundary_key, b"%d" % boundary)
        if base_present:
            store.put_now(ms.key(6), b"")
        return await manifest_create_outlived(ms, 7)

    assert run_virtual(main) is outlived


def test_settling_the_boundary_says_create_only_when_it_made_the_file() -> None:
    """``settle_boundary``'s third answer (DESTROY-7: the caller checks a create against a
    destroy and takes the file back) is True only for the move that made the boundary file;
    moving an existing one is not a create."""
    from slatedb.gc.sequenced import list_namespace, settle_boundary

    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        ms = ManifestStore(db.store, rt)
        opts = gc_options(MIN_AGE_S).manifest_options
        await db.commits(5)
        rt.advance(MIN_AGE_S + 1)
        assert await settle_boundary(ms, await list_namespace(ms), rt.now_ms(), opts, enabled=True) == (4, True, True)
        await db.commits(3)
        rt.advance(MIN_AGE_S + 1)
        assert await settle_boundary(ms, await list_namespace(ms), rt.now_ms(), opts, enabled=True) == (7, True, False)
        assert await settle_boundary(ms, await list_namespace(ms), rt.now_ms(), opts, enabled=True) == (7, False, False)
        # A dry run reports how far a real run would move the boundary, and neither moves nor creates it.
        await db.commits(2)
        rt.advance(MIN_AGE_S + 1)
        dry = attrs.evolve(opts, dry_run=True)
        assert await settle_boundary(ms, await list_namespace(ms), rt.now_ms(), dry, enabled=True) == (9, False, False)
        assert db.boundary() == 7

    run_virtual(main)
