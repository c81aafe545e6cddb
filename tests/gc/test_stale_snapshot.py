"""GC-2 with a pass's manifest read long ago (spec/protocols/checkpoints-gc.md step 6; gc seed
3741): a checkpoint counts as expired only if it had expired when the manifest the pass judges
from was read. Judged by the clock later on, a checkpoint a reader refreshed in time meanwhile
looks expired, and the manifest it pins goes.

The store plays the delay: the pass's ExpireCheckpoints (another checkpoint expired) lands, a
reader's refresh of the first checkpoint lands right after it, before that one's expiry, and the
create's reply reaches GC 15 s later, past that expiry."""

from __future__ import annotations

import attrs

from slatedb.gc import GarbageCollector
from slatedb.objstore.base import OVERWRITE
from slatedb.objstore.memory import MemoryStore
from slatedb.runtime import switches

from .helpers import DbBuilder, VirtualRuntime, gc_options, memory_store, run_virtual


class RefreshedDuringPass(MemoryStore):
    def __init__(self, inner: MemoryStore, db: DbBuilder, rt: VirtualRuntime, cp_id) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.db, self.rt, self.cp_id = db, rt, cp_id
        self.fired = False

    async def put(self, key: str, data: bytes, mode=OVERWRITE):
        meta = await super().put(key, data, mode)
        if key.startswith("manifest/") and not self.fired:
            self.fired = True  # the pass's ExpireCheckpoints landed (its base read at t0 + 10)
            # A reader's refresh lands right after it, before the checkpoint's expiry (t0 + 20) ...
            now_s = self.rt.now_ms() // 1000

            def refresh(m):
                cps = tuple(attrs.evolve(c, checkpoint_expire_time_s=now_s + 100) if c.id == self.cp_id else c
                            for c in m.checkpoints)
                return attrs.evolve(m, checkpoints=cps)
            await self.db.commit(refresh)
            self.rt.advance(15.0)  # ... and the create's reply reaches GC 15 s later (t0 + 25)
        return meta


def _pass(bugs: frozenset[str] = frozenset()) -> tuple[list[int], RefreshedDuringPass]:
    async def main():
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)
        cp, _ = await db.add_checkpoint(2, expire_in_s=20.0)  # pins manifest 2, manifest 4 adds it
        await db.add_checkpoint(3, expire_in_s=5.0)  # manifest 5; expired at t0 + 10
        rt.advance(10.0)  # t0 + 10: the first active, manifests 1..5 older than min_age
        rt.bugs = bugs
        store = RefreshedDuringPass(db.store, db, rt, cp.id)
        gc = GarbageCollector(store, rt, gc_options(1.0))
        await gc.run_once()
        assert store.fired
        return db.manifest_ids(), store
    return run_virtual(main)


def test_a_checkpoint_active_when_the_pass_read_the_manifest_keeps_its_manifest() -> None:
    ids, _ = _pass()
    assert 2 in ids, ids  # pinned by the (refreshed) checkpoint
    assert 1 not in ids and 3 not in ids, ids  # the pass collected the rest (3's checkpoint expired)


def test_judging_expiry_by_the_clock_after_the_read_deletes_a_pinned_manifest() -> None:
    """Catalogue switch ``gc-judges-expiry-now`` (held here: the simulator's first seed that needs
    it is gc 3741): expiry judged by the clock after the 15 s makes the checkpoint expired, and
    manifest 2 goes while the latest manifest holds the refreshed checkpoint on it (GC-2)."""
    ids, _ = _pass(frozenset({switches.GC_JUDGES_EXPIRY_NOW}))
    assert 2 not in ids, ids


class CheckpointAfterRead(MemoryStore):
    """Right after the pass reads the latest manifest (``V``), a checkpoint lands on the manifest
    that adds it (``V + 1``, RFC 000), another manifest lands after it, and 61 s pass: both are
    older than ``min_age`` when the manifest step lists the directory, from the pass's read of V."""

    def __init__(self, inner: MemoryStore, db: DbBuilder, rt: VirtualRuntime) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.db, self.rt = db, rt
        self.checkpoint = None

    async def get(self, key: str, byte_range=None):
        got = await super().get(key, byte_range)
        if key.startswith("manifest/") and self.checkpoint is None:
            self.checkpoint, _ = await self.db.add_checkpoint()
            await self.db.commit()
            self.rt.advance(61.0)
        return got


def test_a_manifest_newer_than_the_pass_read_is_kept_with_boundary_files_on() -> None:
    """checkpoints-gc.md step 6: only ids below the latest manifest the pass read are
    candidates. A checkpoint added after that read pins a newer manifest, which the read cannot
    see as pinned; the boundary (desired from the listing: every file but the newest is old
    enough) does not protect it, the ``below`` rule alone does."""
    async def main():
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)
        rt.advance(120.0)
        store = CheckpointAfterRead(db.store, db, rt)
        gc = GarbageCollector(store, rt, gc_options(60.0))
        await gc.run_once()
        assert store.checkpoint is not None and store.checkpoint.manifest_id == 4
        return db.manifest_ids(), db.boundary()
    ids, boundary = run_virtual(main)
    assert boundary == 4, boundary  # the boundary moved past the pinned manifest
    assert ids == [3, 4, 5], ids  # 1 and 2 collected; 4, pinned by the checkpoint, kept (GC-2)


class PinnedManifestGoneBeforeItsRead(MemoryStore):
    """Between the pass's read of the latest manifest (whose checkpoint pins manifest 2) and its
    read of manifest 2, the checkpoint is deleted (a reader closing) and another collector, which
    read the manifest after that, deletes manifest 2."""

    def __init__(self, inner: MemoryStore, db: DbBuilder, cp_id) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.db, self.cp_id = db, cp_id
        self.fired = False

    async def get(self, key: str, byte_range=None):
        if key == self.db.manifests.key(2) and not self.fired:
            self.fired = True
            await self.db.commit(lambda m: attrs.evolve(m, checkpoints=tuple(c for c in m.checkpoints
                                                                            if c.id != self.cp_id)))
            self.delete_now(key)
        return await super().get(key, byte_range)


def test_a_pinned_manifest_deleted_before_its_read_makes_the_pass_read_the_latest_again() -> None:
    """checkpoints-gc.md step 6 (RFC 000's set M): a pinned manifest that cannot be read means
    the manifest the pass judged from is stale -- its checkpoint is gone and so is the manifest
    it pinned. The snapshot reads the latest manifest again (``GarbageCollector.snapshot``) and
    the pass collects from it, rather than skipping the directory for this pass."""
    async def main():
        rt = VirtualRuntime()
        db = DbBuilder(memory_store(rt), rt)
        await db.commits(3)
        cp, _ = await db.add_checkpoint(2)  # manifest 4 adds it, pinning manifest 2; no expiry
        rt.advance(120.0)
        store = PinnedManifestGoneBeforeItsRead(db.store, db, cp.id)
        gc = GarbageCollector(store, rt, gc_options(60.0))
        stats = await gc.run_once()
        assert store.fired
        return db.manifest_ids(), rt.kinds("gc_skip"), stats
    ids, skips, stats = run_virtual(main)
    assert skips == [], skips
    assert ids == [5], ids  # 1, 3 and 4 collected: below the latest (5), older than min_age
    assert stats.manifests_deleted == 3, stats
