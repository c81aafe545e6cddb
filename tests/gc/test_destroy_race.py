"""DESTROY-7 (spec/protocols/destroy.md "Concurrent writers of metadata"): a GC pass decides on
a manifest read at its start; a hard destroy that runs to its end before GC's create lands
leaves the create on an emptied root. GC looks after the create and takes it back.

The destroy is played by the store: right before GC's create reaches it, every object of the
database goes (what ``destroy(soft=False)`` leaves). Destroy seeds 77 (a manifest commit),
129 and 256 (a boundary create) are the simulated runs of the same races."""

from __future__ import annotations

import attrs

from slatedb.gc import GarbageCollector
from slatedb.runtime import switches

from .helpers import DbBuilder, DestroyedBeforeCreate, OtherGcAfterCreate, VirtualRuntime, gc_options, memory_store, run_virtual

MIN_AGE_S = 60.0


async def _gc_over_destroy(rt: VirtualRuntime, db: DbBuilder, prefix: str, *, bugs: frozenset[str] = frozenset()
                           ) -> tuple[GarbageCollector, DestroyedBeforeCreate]:
    store = DestroyedBeforeCreate(db.store, prefix)
    rt.bugs = bugs
    gc = GarbageCollector(store, rt, gc_options(MIN_AGE_S))
    await gc.run_once()
    assert store.fired
    return gc, store


def test_a_boundary_file_created_after_a_hard_destroy_is_taken_back() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(5)  # old manifests: GC creates gc/manifest.boundary before deleting them
        rt.advance(MIN_AGE_S + 1)
        gc, store = await _gc_over_destroy(rt, db, "gc/manifest.boundary")
        assert store.list_now("") == []  # nothing outlives the database
        assert gc.finished  # the database is gone: GC stops for good
        undone = [f["path"] for f in rt.kinds("gc_delete") if f["what"] == "undo"]
        assert undone == ["gc/manifest.boundary"]

    run_virtual(main)


def test_a_manifest_committed_after_a_hard_destroy_is_taken_back() -> None:
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(2)
        await db.add_checkpoint(expire_in_s=10.0)
        sst = db.put_sst()
        await db.add_l0(sst)
        rt.advance(30.0)  # the checkpoint expired: the pass commits ExpireCheckpoints as manifest 5
        gc, store = await _gc_over_destroy(rt, db, "manifest/")
        assert store.list_now("") == [], [m.key for m in store.list_now("")]
        assert gc.finished
        undone = [f["path"] for f in rt.kinds("gc_delete") if f["what"] == "undo"]
        assert len(undone) == 1 and undone[0].startswith("manifest/")

    run_virtual(main)


def test_without_the_take_back_the_objects_outlive_the_database() -> None:
    """The catalogue switch ``gc-keeps-create-after-destroy`` skips the take-back: the same races
    leave a boundary file, and a manifest that names a deleted SST."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(5)
        rt.advance(MIN_AGE_S + 1)
        _gc, store = await _gc_over_destroy(rt, db, "gc/manifest.boundary",
                                            bugs=frozenset({switches.GC_KEEPS_CREATE_AFTER_DESTROY}))
        assert [m.key for m in store.list_now("")] == ["gc/manifest.boundary"]

        rt2 = VirtualRuntime()
        db2 = DbBuilder(memory_store(rt2), rt2)
        await db2.commits(2)
        await db2.add_checkpoint(expire_in_s=10.0)
        await db2.add_l0(db2.put_sst())
        rt2.advance(30.0)
        _gc, store2 = await _gc_over_destroy(rt2, db2, "manifest/",
                                             bugs=frozenset({switches.GC_KEEPS_CREATE_AFTER_DESTROY}))
        assert [m.key for m in store2.list_now("")] == ["manifest/00000000000000000005.manifest"]

    run_virtual(main)


def test_a_live_database_keeps_what_gc_created() -> None:
    """The look after the create finds the database alive: nothing is taken back, neither when
    the base manifest is still there nor when another GC deleted it behind its boundary."""
    async def main() -> None:
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(5)
        await db.add_checkpoint(expire_in_s=10.0)
        rt.advance(MIN_AGE_S + 1)
        gc = GarbageCollector(db.store, rt, gc_options(MIN_AGE_S))
        stats = await gc.run_once()
        assert stats.checkpoints_expired == 1 and stats.boundary_advances == 1
        assert not [f for f in rt.kinds("gc_delete") if f["what"] == "undo"] and not gc.finished
        assert db.keys("gc/") == ["gc/manifest.boundary"]

        rt2 = VirtualRuntime()
        db2 = DbBuilder(memory_store(rt2), rt2)
        await db2.commits(2)
        await db2.add_checkpoint(expire_in_s=10.0)
        rt2.advance(30.0)
        store = OtherGcAfterCreate(db2.store)
        gc2 = GarbageCollector(store, rt2, gc_options(MIN_AGE_S))
        stats = await gc2.run_once()
        assert store.fired and stats.checkpoints_expired == 1
        assert not [f for f in rt2.kinds("gc_delete") if f["what"] == "undo"] and not gc2.finished
        assert db2.manifest_ids()[-1] == 4

    run_virtual(main)


def _gc_with_boundary_then_destroyed(bugs: frozenset[str] = frozenset()):
    """Destroy seed 1880: a GC that has seen the boundary file commits ``ExpireCheckpoints`` on a
    manifest read before a hard destroy; the create lands on the emptied root, and the post-create
    boundary read finds the file it saw gone (``BoundaryVanishedError``), with the latest manifest
    now its own create."""
    async def main():
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(5)
        rt.advance(MIN_AGE_S + 1)
        store = DestroyedBeforeCreate(db.store, "manifest/")
        store.fired = True  # not yet: the first pass only makes the boundary durable
        gc = GarbageCollector(store, rt, gc_options(MIN_AGE_S))
        first = await gc.run_once()
        assert first.boundary_advances == 1 and db.keys("gc/") == ["gc/manifest.boundary"]
        await db.add_checkpoint(expire_in_s=10.0)
        rt.advance(30.0)
        rt.bugs = bugs
        store.fired = False  # the destroy runs right before the pass's ExpireCheckpoints lands
        error = None
        try:
            await gc.run_once()
        except Exception as e:  # noqa: BLE001 (the test reports what escaped)
            error = e
        assert store.fired
        return rt, store, gc, error
    return run_virtual(main)


def test_a_manifest_committed_after_a_hard_destroy_that_deleted_the_seen_boundary_is_taken_back() -> None:
    rt, store, gc, error = _gc_with_boundary_then_destroyed()
    assert error is None, repr(error)  # no BoundaryVanishedError escapes GC (ESCAPE-1 in seed 1880)
    assert store.list_now("") == [], [m.key for m in store.list_now("")]  # nothing outlives it
    assert [f["manifest"] for f in rt.kinds("manifest_create_outlived_destroy")] == [7]


def test_without_the_commit_take_back_the_lone_manifest_outlives_the_database() -> None:
    """Catalogue switch ``manifest-kept-after-destroy``: the commit keeps its lone manifest."""
    _rt, store, _gc, error = _gc_with_boundary_then_destroyed(frozenset({switches.MANIFEST_KEPT_AFTER_DESTROY}))
    assert [m.key for m in store.list_now("")] == ["manifest/00000000000000000007.manifest"], (error,)
