"""Each retention rule of RFC 000 § "Garbage Collector", RFC 002 § "Garbage Collection
Integration" and RFC 004, on a database built object by object, with a virtual clock."""

from __future__ import annotations

import attrs
import pytest

from slatedb.compactor import lifecycle as lc
from slatedb.format.types import CompactedSsTable, CompactionStatus, SsTableInfo, Subcompaction, TieredCompactionContext
from slatedb.gc import GarbageCollector, GcStats
from slatedb.runtime import probes, ulid_from_parts

from .helpers import DbBuilder, VirtualRuntime, gc_options, memory_store, run_virtual

MIN_AGE_S = 60.0


def setup(seed: int = 0) -> tuple[VirtualRuntime, DbBuilder]:
    rt = VirtualRuntime(seed=seed)
    return rt, DbBuilder(memory_store(rt), rt)


def collector(db: DbBuilder, **overrides) -> GarbageCollector:
    return GarbageCollector(db.store, db.rt, gc_options(MIN_AGE_S, **overrides))


def test_no_manifest_means_nothing_to_do() -> None:
    async def main() -> None:
        rt, db = setup()
        db.put_wal(1)
        gc = collector(db)
        stats = await gc.run_once()
        assert stats == GcStats()
        assert set(attrs.asdict(stats).values()) <= {0, False}  # a pass that did nothing counts nothing
        assert gc.finished and db.wal_ids() == [1]

    run_virtual(main)


def test_expired_checkpoints_are_removed_and_others_kept() -> None:
    async def main() -> None:
        rt, db = setup()
        await db.commit()
        short, _ = await db.add_checkpoint(expire_in_s=30)
        forever, _ = await db.add_checkpoint()
        later, _ = await db.add_checkpoint(expire_in_s=3600)
        rt.advance(31)
        stats = await collector(db).run_once()
        assert stats.checkpoints_expired == 1
        left = {c.id for c in (await db.latest()).manifest.checkpoints}
        assert left == {forever.id, later.id}
        assert rt.kinds("checkpoint_expired")[0]["id"] == str(short.id)

    run_virtual(main)


def test_manifests_kept_while_checkpointed_and_latest_never_deleted() -> None:
    async def main() -> None:
        rt, db = setup()
        await db.commits(2)
        cp, _ = await db.add_checkpoint(2)  # pins manifest 2 (written by manifest 3)
        await db.commits(3)  # 4, 5, 6
        rt.advance(MIN_AGE_S + 1)
        stats = await collector(db).run_once()
        assert db.manifest_ids() == [2, 6]
        assert stats.manifests_deleted == 4 and stats.boundary_advances == 1
        assert db.boundary() == 5  # the highest old id but the latest (RFC 004)
        deletes = [f["id"] for f in rt.kinds("gc_delete") if f["what"] == "manifest"]
        assert deletes == [1, 3, 4, 5]

    run_virtual(main)


def test_min_age_keeps_young_metadata_wal_and_ssts() -> None:
    async def main() -> None:
        rt, db = setup()
        old_sst = db.put_sst()
        await db.commits(3)
        for i in range(1, 5):
            db.put_wal(i)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=3, wal_id_last_seen=4))
        await db.write_compactions(db.compaction(CompactionStatus.COMPLETED))
        await db.add_l0(db.put_sst())  # a newer L0: the orphan is below the L0 ULID barrier
        rt.advance(MIN_AGE_S / 2)
        assert (await collector(db).run_once()).deleted == 0
        assert db.boundary() is None  # nothing old enough: the boundary is not even created
        rt.advance(MIN_AGE_S)
        stats = await collector(db).run_once()
        assert stats.manifests_deleted == 4 and stats.wal_deleted == 3 and stats.ssts_deleted == 1
        assert old_sst not in db.sst_ids() and db.wal_ids() == [4]

    run_virtual(main)


def test_wal_ranges_of_checkpointed_manifests_are_kept() -> None:
    async def main() -> None:
        rt, db = setup()
        for i in range(1, 11):
            db.put_wal(i)
        db.put_wal(11, fence=True)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=2, wal_id_last_seen=4))
        await db.add_checkpoint()  # pins manifest 2: WAL (2, 4]
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=8, wal_id_last_seen=10))
        rt.advance(MIN_AGE_S + 1)
        stats = await collector(db, wal_fence_options=None).run_once()
        # kept: (2, 4] of the checkpointed manifest, every id above the latest replay_after (8)
        assert db.wal_ids() == [3, 4, 9, 10, 11]
        assert stats.wal_deleted == 6

    run_virtual(main)


def test_wal_fences_have_their_own_options_and_the_newest_wal_object_stays() -> None:
    async def main() -> None:
        rt, db = setup()
        db.put_wal(1, fence=True)
        db.put_wal(2)
        db.put_wal(3, fence=True)
        db.put_wal(4)
        db.put_wal(5, fence=True)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=5, wal_id_last_seen=5))
        rt.advance(MIN_AGE_S + 1)
        dry = GarbageCollector(db.store, rt)  # official defaults, except the clock: fences dry-run
        rt.advance(300)
        stats = await dry.run_once()
        assert stats.wal_deleted == 2 and stats.dry_run_candidates == 2  # fences 1 and 3
        assert db.wal_ids() == [1, 3, 5]
        stats = await collector(db).run_once()
        assert stats.wal_fences_deleted == 2 and db.wal_ids() == [5]  # 5: the newest, never deleted
        # Each delete's event says what it deletes: the data objects first, then the fences.
        deleted = {e["path"]: e["what"] for e in rt.kinds("gc_delete") if e["path"].startswith("wal/")}
        assert deleted == {"wal/00000000000000000002.sst": "wal", "wal/00000000000000000004.sst": "wal",
                           "wal/00000000000000000001.sst": "wal_fence", "wal/00000000000000000003.sst": "wal_fence"}

    run_virtual(main)


def test_ssts_kept_for_the_latest_manifest_and_checkpoints() -> None:
    async def main() -> None:
        rt, db = setup()
        a, b, c = db.put_sst(), db.put_sst(), db.put_sst()
        await db.add_l0(a, b)
        await db.add_checkpoint()  # pins {a, b}
        await db.replace_all(c)  # the compaction's commit: latest = {c}
        orphan = db.put_sst()  # written and never committed (a failed upload)
        await db.write_compactions(db.compaction(CompactionStatus.COMPLETED))
        await db.add_l0(db.put_sst())
        rt.advance(MIN_AGE_S + 1)
        stats = await collector(db).run_once()
        assert stats.ssts_deleted == 1 and orphan not in db.sst_ids() and {a, b, c} <= db.sst_ids()
        # the checkpoint goes: a and b are garbage
        cur = await db.latest()
        await db.commit(lambda m: attrs.evolve(m, checkpoints=()))
        stats = await collector(db).run_once()
        assert stats.ssts_deleted == 2 and not ({a, b} & db.sst_ids()) and c in db.sst_ids(), cur

    run_virtual(main)


def test_ssts_minted_after_the_newest_l0_or_compaction_are_kept() -> None:
    """An upload not committed yet (an L0 before its manifest write, a compaction output before
    its ``.compactions`` record) is newer than the newest L0 and than the compactions file's
    oldest compaction: kept, however old (the official engine's ULID cutoffs)."""
    async def main() -> None:
        rt, db = setup()
        await db.add_l0(db.put_sst())
        await db.write_compactions(db.compaction(CompactionStatus.COMPLETED))
        rt.advance(1)
        pending = db.put_sst()
        rt.advance(MIN_AGE_S * 10)
        assert (await collector(db).run_once()).ssts_deleted == 0 and pending in db.sst_ids()
        # without any compactions file nothing is known of compactions: no SST may go
        rt2, db2 = setup(1)
        orphan = db2.put_sst()
        rt2.advance(1)
        await db2.add_l0(db2.put_sst())
        rt2.advance(MIN_AGE_S * 10)
        assert (await collector(db2).run_once()).ssts_deleted == 0 and orphan in db2.sst_ids()

    run_virtual(main)


def test_an_sst_minted_in_the_millisecond_of_the_ulid_cutoff_is_kept() -> None:
    """The ULID cutoff is inclusive: a compaction's first output can be minted in the very
    millisecond of the compaction's id, before the ``.compactions`` file records it; with the
    job the oldest in the file and an L0 newer than it, that millisecond is the cutoff, and the
    output is kept however old."""
    async def main() -> None:
        rt, db = setup()
        await db.add_l0(db.put_sst())
        rt.advance(1)
        job = db.compaction(CompactionStatus.RUNNING)
        output = ulid_from_parts(job.id.milliseconds, (1 << 80) - 1)  # its millisecond, after its id; recorded nowhere yet
        db.store.put_now(f"compacted/{output}.sst", b"sst-bytes")
        await db.write_compactions(job)
        rt.advance(1)
        await db.add_l0(db.put_sst())
        rt.advance(MIN_AGE_S * 10)
        assert (await collector(db).run_once()).ssts_deleted == 0 and output in db.sst_ids()

    run_virtual(main)


def test_the_ulid_cutoff_probe_names_only_ssts_the_cutoff_keeps() -> None:
    """``gc.sst-kept-ulid-cutoff`` reports an SST kept because its ULID is at or after the cutoff
    (an upload perhaps not committed yet), not one kept because it is younger than min_age."""
    async def main() -> None:
        rt, db = setup()
        hits: list[str] = []
        rt.probe = hits.append  # type: ignore[method-assign]
        orphan = db.put_sst()  # below the cutoff: only its age keeps it
        rt.advance(1)
        await db.write_compactions(db.compaction(CompactionStatus.COMPLETED))
        await db.add_l0(db.put_sst())
        assert (await collector(db).run_once()).ssts_deleted == 0 and orphan in db.sst_ids()
        assert probes.GC_SST_KEPT_ULID_CUTOFF not in hits
        rt.advance(1)
        pending = db.put_sst()  # above the cutoff: kept however old
        rt.advance(MIN_AGE_S * 10)
        assert (await collector(db).run_once()).ssts_deleted == 1
        assert orphan not in db.sst_ids() and pending in db.sst_ids()
        assert hits.count(probes.GC_SST_KEPT_ULID_CUTOFF) == 1

    run_virtual(main)


@pytest.mark.parametrize("finished_first", [False, True])
def test_in_flight_compaction_outputs_and_inputs_kept_past_min_age(finished_first: bool) -> None:
    """RFC 002 (issue #604): every in-flight compaction of the file keeps its outputs and inputs,
    wherever it is listed -- also after a finished one (``finished_first``: the file lists the
    failed job, submitted earlier, before the in-flight ones)."""
    async def main() -> None:
        rt, db = setup()
        out_running = db.put_sst()  # outputs recorded by a running compaction
        out_submitted = db.put_sst()  # a resumable compaction's outputs (Submitted again)
        out_failed = db.put_sst()
        l0 = db.put_sst()
        await db.add_l0(l0)
        latest = await db.latest()
        failed = db.compaction(CompactionStatus.FAILED, (out_failed,))
        running = db.compaction(CompactionStatus.RUNNING, (out_running,), l0_view_ids=(latest.manifest.l0[0].id,))
        submitted = db.compaction(CompactionStatus.SUBMITTED, (out_submitted,))
        await db.write_compactions(*((failed, running, submitted) if finished_first else (running, submitted, failed)))
        rt.advance(1)
        await db.add_l0(db.put_sst())
        rt.advance(MIN_AGE_S * 100)
        # the watermark of these compactions is after the outputs' ULIDs: only the explicit rule keeps them
        stats = await collector(db).run_once()
        assert {out_running, out_submitted, l0} <= db.sst_ids()
        assert out_failed not in db.sst_ids() and stats.ssts_deleted == 1

    run_virtual(main)


def test_compactions_namespace_boundary_then_delete_keeping_the_latest() -> None:
    async def main() -> None:
        rt, db = setup()
        await db.commit()
        for _ in range(5):
            await db.write_compactions()
        rt.advance(MIN_AGE_S + 1)
        await db.write_compactions()  # 6: young
        stats = await collector(db).run_once()
        assert db.compactions_ids() == [6] and stats.compactions_deleted == 5
        assert db.boundary("compactions") == 5
        db.store.put_now("compactions/failed/01ARZ3NDEKTSV4RRFFQ69G5FAV.json", b"{}")  # not ours to list
        rt.advance(MIN_AGE_S + 1)
        await collector(db).run_once()
        assert db.keys("compactions/failed/")

    run_virtual(main)


def test_dry_run_deletes_nothing_and_moves_no_boundary() -> None:
    async def main() -> None:
        rt, db = setup()
        orphan = db.put_sst()
        for i in range(1, 4):
            db.put_wal(i)
        await db.commits(4)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=3, wal_id_last_seen=3))
        await db.write_compactions(db.compaction(CompactionStatus.COMPLETED))
        await db.write_compactions(db.compaction(CompactionStatus.COMPLETED))
        rt.advance(1)
        await db.add_l0(db.put_sst())
        rt.advance(MIN_AGE_S + 1)
        before = sorted(m.key for m in db.store.list_now(""))
        stats = await collector(db, dry_run=True).run_once()
        assert stats.deleted == 0 and stats.boundary_advances == 0
        # manifests 1-5, compactions 1, WAL 1-2, the orphan SST
        assert stats.dry_run_candidates == 5 + 1 + 2 + 1
        assert sorted(m.key for m in db.store.list_now("")) == before and db.boundary() is None
        would = {f["path"] for f in rt.kinds("gc_would_delete")}
        assert f"compacted/{orphan}.sst" in would and not rt.kinds("gc_delete")

    run_virtual(main)


def test_directories_turned_off_are_left_alone() -> None:
    async def main() -> None:
        rt, db = setup()
        db.put_wal(1)
        db.put_wal(2)
        await db.commits(3)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=2))
        rt.advance(MIN_AGE_S + 1)
        stats = await collector(db, manifest_options=None).run_once()
        assert db.manifest_ids() == [1, 2, 3, 4] and stats.wal_deleted == 1

    run_virtual(main)


def test_outputs_of_scheduled_and_compacted_jobs_are_kept_and_a_dropped_attempts_are_collected() -> None:
    """Issue 24 item 5: the official lifecycle's in-flight states (Scheduled with recorded range
    progress, a reclaimed job; Compacted, not yet committed) keep their outputs whatever their
    age; the output of an attempt that was never recorded (a zombie worker's, a failed Spark
    task's) is garbage once older than min_age."""
    async def main() -> None:
        rt, db = setup()
        dropped = db.put_sst()  # written by an attempt whose result was dropped: recorded nowhere
        out_scheduled = db.put_sst()
        out_compacted = db.put_sst()
        l0 = db.put_sst()
        await db.add_l0(l0)
        scheduled = db.compaction(CompactionStatus.SCHEDULED)
        out = CompactedSsTable(out_scheduled, SsTableInfo(first_entry=b"a", last_entry=b"b"))
        scheduled = attrs.evolve(scheduled, ctx=TieredCompactionContext(
            (Subcompaction(lc.make_range(None, b"m"), (out,)), Subcompaction(lc.make_range(b"m", None), ())), 0))
        compacted = db.compaction(CompactionStatus.COMPACTED, (out_compacted,))
        await db.write_compactions(scheduled, compacted)
        rt.advance(1)
        await db.add_l0(db.put_sst())
        rt.advance(MIN_AGE_S * 100)
        stats = await collector(db).run_once()
        assert {out_scheduled, out_compacted, l0} <= db.sst_ids()
        assert dropped not in db.sst_ids() and stats.ssts_deleted == 1

    run_virtual(main)


def test_stats_add_field_by_field_and_read_as_a_dict_in_field_order() -> None:
    a = GcStats(manifests_deleted=1, ssts_deleted=2, db_destroyed=False, destroyed_objects=3)
    b = GcStats(manifests_deleted=4, wal_deleted=5, db_destroyed=True)
    total = a + b
    assert total == GcStats(manifests_deleted=5, ssts_deleted=2, wal_deleted=5, db_destroyed=True, destroyed_objects=3)
    assert (b + a).db_destroyed and not (a + a).db_destroyed
    assert list(total.as_dict().items()) == list(attrs.asdict(total).items())
    # every deleted object counts once in the total, whatever its kind; expiries and advances do not
    each = GcStats(manifests_deleted=1, compactions_deleted=2, wal_deleted=4, wal_fences_deleted=8, ssts_deleted=16,
                   checkpoints_expired=32, boundary_advances=64, clones_detached=128, dry_run_candidates=256,
                   destroyed_objects=512)
    assert each.deleted == 1 + 2 + 4 + 8 + 16 + 512


def test_a_young_manifest_keeps_only_itself_not_the_older_ones_after_it() -> None:
    """min_age is judged file by file: a manifest whose object is young (rewritten by a copy
    tool, or a store clock that stepped back) is kept, and the old ones with higher ids are
    still collected."""
    from slatedb.manifest.store import manifest_key

    async def main() -> None:
        rt, db = setup()
        await db.commits(4)
        latest = db.manifest_ids()[-1]
        assert db.manifest_ids() == list(range(1, latest + 1)) and latest >= 4
        rt.advance(MIN_AGE_S + 1)
        key = manifest_key(2)
        db.store.put_now(key, db.store.get_now(key).data)  # manifest 2's object is young again
        await collector(db).run_once()
        assert db.manifest_ids() == [2, latest]

    run_virtual(main)
