"""Soft-destroyed databases (RFC 000 § "Deleting a Database", "Garbage Collector" step 2) and
clone detach (RFC 000 "Detach the clone if possible")."""

from __future__ import annotations

import attrs

from slatedb.format.types import ExternalDb
from slatedb.gc import GarbageCollector
from slatedb.objstore.memory import MemoryRegistry

from .helpers import DbBuilder, VirtualRuntime, gc_options, memory_store, run_virtual

GRACE_S = 120.0


async def parent_and_clone(rt: VirtualRuntime, *, clone_ssts: bool) -> tuple[DbBuilder, DbBuilder, object]:
    """``parent`` holding a final checkpoint of ``clone``, which references one parent SST
    (``clone_ssts``) or none any more."""
    registry = MemoryRegistry()
    parent = DbBuilder(memory_store(rt, registry, "parent"), rt)
    clone = DbBuilder(memory_store(rt, registry, "clone"), rt)
    shared = parent.put_sst()
    await parent.add_l0(shared)
    source, _ = await parent.add_checkpoint()
    final, _ = await parent.add_checkpoint(source.manifest_id)
    ext = ExternalDb("parent", source.id, final.id, (shared,) if clone_ssts else ())
    await clone.commit(lambda m: attrs.evolve(m, external_dbs=(ext,)))
    return parent, clone, final


def test_soft_destroyed_clone_is_removed_after_grace_and_releases_its_parent_checkpoint() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        parent, clone, final = await parent_and_clone(rt, clone_ssts=True)
        own = clone.put_sst()
        clone.put_wal(1)
        await clone.add_l0(own)
        await clone.commits(2)
        now_s = rt.now_ms() // 1000
        await clone.commit(lambda m: attrs.evolve(m, destroyed_at_s=now_s))
        gc = GarbageCollector(clone.store, rt, gc_options(), db_delete_grace_s=GRACE_S)
        rt.advance(GRACE_S / 2)
        stats = await gc.run_once()
        assert not stats.db_destroyed and clone.manifest_ids()  # within the grace period
        rt.advance(GRACE_S)
        stats = await gc.run_once()
        assert stats.db_destroyed and gc.finished
        assert clone.store.list_now("") == []
        assert stats.destroyed_objects == 5 + 1 + 1  # 5 manifests, 1 SST, 1 WAL
        left = (await parent.latest()).manifest.checkpoints
        assert final.id not in {c.id for c in left} and len(left) == 1
        # the manifest went last
        deletes = [f["path"] for f in rt.kinds("gc_delete") if f["what"] == "destroy"]
        assert deletes[-1].startswith("manifest/") and deletes[-1].endswith("5.manifest")

    run_virtual(main)


def test_soft_destroy_waits_for_active_checkpoints() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commit()
        await db.add_checkpoint(expire_in_s=3 * GRACE_S)
        now_s = rt.now_ms() // 1000
        await db.commit(lambda m: attrs.evolve(m, destroyed_at_s=now_s))
        gc = GarbageCollector(db.store, rt, gc_options(), db_delete_grace_s=GRACE_S)
        rt.advance(2 * GRACE_S)
        assert not (await gc.run_once()).db_destroyed  # a live checkpoint holds it
        rt.advance(2 * GRACE_S)
        stats = await gc.run_once()  # the checkpoint expired: the database goes
        assert stats.db_destroyed and db.store.list_now("") == []

    run_virtual(main)


def test_dry_run_never_destroys() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        now_s = rt.now_ms() // 1000
        await db.commit(lambda m: attrs.evolve(m, destroyed_at_s=now_s))
        rt.advance(GRACE_S + 1)
        gc = GarbageCollector(db.store, rt, gc_options(dry_run=True), db_delete_grace_s=GRACE_S)
        assert not (await gc.run_once()).db_destroyed and db.manifest_ids() == [1]
        assert rt.kinds("gc_would_destroy")

    run_virtual(main)


def test_nested_objects_that_are_not_slatedb_directories_survive_a_destroy() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commit(lambda m: attrs.evolve(m, destroyed_at_s=rt.now_ms() // 1000))
        db.store.put_now("nested/manifest/00000000000000000001.manifest", b"another db")
        rt.advance(GRACE_S + 1)
        stats = await GarbageCollector(db.store, rt, gc_options(), db_delete_grace_s=GRACE_S).run_once()
        assert stats.db_destroyed and [m.key for m in db.store.list_now("")] == [
            "nested/manifest/00000000000000000001.manifest"]

    run_virtual(main)


def test_clone_detaches_once_no_manifest_references_parent_ssts() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        parent, clone, final = await parent_and_clone(rt, clone_ssts=True)
        gc = GarbageCollector(clone.store, rt, gc_options())
        assert (await gc.run_once()).clones_detached == 0  # the latest manifest references a parent SST
        # the compaction drops the parent SST; a checkpoint still pins the manifest that has it
        cp, _ = await clone.add_checkpoint()
        await clone.commit(lambda m: attrs.evolve(m, external_dbs=(attrs.evolve(m.external_dbs[0], sst_ids=()),)))
        assert (await gc.run_once()).clones_detached == 0
        assert final.id in {c.id for c in (await parent.latest()).manifest.checkpoints}
        await clone.commit(lambda m: attrs.evolve(m, checkpoints=()))
        stats = await gc.run_once()
        assert stats.clones_detached == 1
        assert (await clone.latest()).manifest.external_dbs == ()
        assert final.id not in {c.id for c in (await parent.latest()).manifest.checkpoints}
        assert (await gc.run_once()).clones_detached == 0  # idempotent

    run_virtual(main)


def test_entries_are_told_apart_by_path_and_source_checkpoint() -> None:
    """An entry that references no SST is detached even when an entry of another path (sorting
    after it) names the same source checkpoint id and still references one: an entry is its
    (path, source checkpoint) pair, not either half."""
    async def main() -> None:
        rt = VirtualRuntime()
        parent, clone, final = await parent_and_clone(rt, clone_ssts=False)
        (ext,) = (await clone.latest()).manifest.external_dbs
        other = ExternalDb("zz-other", ext.source_checkpoint_id, None, (parent.put_sst(),))
        await clone.commit(lambda m: attrs.evolve(m, external_dbs=(ext, other)))
        stats = await GarbageCollector(clone.store, rt, gc_options()).run_once()
        assert stats.clones_detached == 1 and (await clone.latest()).manifest.external_dbs == (other,)
        assert final.id not in {c.id for c in (await parent.latest()).manifest.checkpoints}

    run_virtual(main)


def test_detach_tolerates_a_parent_checkpoint_already_gone() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        parent, clone, final = await parent_and_clone(rt, clone_ssts=False)
        await parent.commit(lambda m: attrs.evolve(m, checkpoints=tuple(c for c in m.checkpoints if c.id != final.id)))
        stats = await GarbageCollector(clone.store, rt, gc_options()).run_once()
        assert stats.clones_detached == 1 and (await clone.latest()).manifest.external_dbs == ()

    run_virtual(main)


def _objects(store) -> dict[str, str | None]:
    return {m.key: m.etag for m in store.list_now("")}


def test_gc_writes_nothing_to_a_destroyed_database_before_removing_it() -> None:
    """Destroyed but not yet removable (grace; or hard-destroyed under GC): a pass writes and
    deletes nothing -- no expired checkpoint removed, no boundary file created or moved, no old
    manifest deleted. A write landing after a destroyer's listing would outlive the database
    (DESTROY-4; destroy seed 3: GC created ``gc/manifest.boundary`` while a hard destroy deleted
    the clone). The same database not destroyed gets all of those."""
    async def main(destroyed: bool) -> tuple[dict, dict]:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        db.put_wal(1)
        await db.commits(4)
        await db.add_checkpoint(expire_in_s=10.0)
        now_s = rt.now_ms() // 1000
        await db.commit(lambda m: attrs.evolve(m, destroyed_at_s=now_s if destroyed else 0))
        rt.advance(300.0)  # past min_age and the checkpoint's expiry, within the grace
        before = _objects(db.store)
        gc = GarbageCollector(db.store, rt, gc_options(), db_delete_grace_s=3600.0)
        stats = await gc.run_once()
        assert not stats.db_destroyed
        return before, _objects(db.store)

    before, after = run_virtual(main, True)
    assert after == before
    before, after = run_virtual(main, False)  # the control: a live database is collected
    assert "gc/manifest.boundary" in after and set(after) != set(before)


class DestroyedBeforeBoundaryPut:
    """A store whose first boundary put (after GC read the boundary) is preceded by a hard
    destroy of the whole database: the put's ETag no longer matches anything."""

    def __init__(self, inner, rt) -> None:
        self.inner, self.rt, self.raced = inner, rt, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def put(self, key, data, mode=None):
        from slatedb.destroy import destroy
        if key.endswith(".boundary") and not self.raced and self.inner.list_now("gc/"):
            self.raced = True
            await destroy(self.inner, self.rt, soft=False)
        return await self.inner.put(key, data, mode) if mode is not None else await self.inner.put(key, data)


def test_a_boundary_deleted_by_a_destroy_under_a_pass_ends_the_pass_quietly() -> None:
    """GC had seen the boundary file; a hard destroy deletes it (and the database) before GC's
    update-if-match lands: the update fails (nothing is written back), and GC, finding the
    database gone, skips the rest of the pass instead of raising ``BoundaryVanishedError`` (which
    is for a stale process of a database that still exists)."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)
        rt.advance(300.0)
        gc = GarbageCollector(db.store, rt, gc_options())
        await gc.run_once()  # creates the boundary (GC has now seen it)
        assert db.keys("gc/")
        await db.commits(3)
        rt.advance(300.0)
        gc.store = gc.manifests.store = DestroyedBeforeBoundaryPut(db.store, rt)
        await gc.run_once()
        assert db.store.list_now("") == []
        assert any("boundary deleted by a destroy" in f["reason"] for f in rt.kinds("gc_skip"))

    run_virtual(main)


class HardDestroyStalledBeforeBoundaryPut:
    """A store whose first boundary put (after GC read the boundary) is preceded by part of a
    hard destroy: the mark, then its deletes in their order (``_removal_order``) up to and
    including ``gc/manifest.boundary``; the destroyer stalls there, before ``wal/`` and the
    manifests."""

    def __init__(self, inner, rt) -> None:
        self.inner, self.rt, self.raced = inner, rt, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def put(self, key, data, mode=None):
        from slatedb.gc.destroyed import _removal_order
        from slatedb.manifest.edits import HardDestroy
        from slatedb.manifest.store import ManifestStore
        if key == "gc/manifest.boundary" and not self.raced and self.inner.list_now("gc/"):
            self.raced = True
            await ManifestStore(self.inner, self.rt).commit(HardDestroy(label=str(self.inner.url)))
            for k in sorted((m.key for m in self.inner.list_now("")), key=_removal_order):
                self.inner.delete_now(k)
                if k == key:
                    break
        return await self.inner.put(key, data, mode) if mode is not None else await self.inner.put(key, data)


def test_a_boundary_deleted_by_a_destroy_under_a_pass_ends_the_whole_pass() -> None:
    """destroy.md S5 and "Concurrent writers of metadata": GC, finding its boundary deleted by a
    destroy, has read the manifest destroyed, so the whole pass stops there -- not only that
    directory's step: the steps after it would judge from the manifest read before the
    destroy's mark (here the WAL step deleting WAL objects under the destroyer; until S5's
    removal GC deletes nothing of a destroyed database)."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)
        rt.advance(300.0)
        gc = GarbageCollector(db.store, rt, gc_options())
        await gc.run_once()  # creates the boundary (GC has now seen it)
        assert db.keys("gc/")
        for wal_id in (1, 2, 3):
            db.put_wal(wal_id)
        await db.commit(lambda m: attrs.evolve(m, replay_after_wal_id=3))
        await db.commits(2)
        rt.advance(300.0)
        store = HardDestroyStalledBeforeBoundaryPut(db.store, rt)
        gc.store = gc.manifests.store = store
        stats = await gc.run_once()
        assert store.raced and not db.keys("gc/")
        assert db.wal_ids() == [1, 2, 3]  # the destroyer's to delete, after its stall
        assert stats.wal_deleted == 0 and stats.manifests_deleted == 0, stats
        assert [f["directory"] for f in rt.kinds("gc_skip")] == ["manifest"], rt.kinds("gc_skip")
        assert not db.keys("compacted/") and not db.keys("compactions/")

    run_virtual(main)
