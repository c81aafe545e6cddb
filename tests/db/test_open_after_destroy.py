"""DESTROY-7 for the writer's open (spec/protocols/destroy.md "Concurrent writers of metadata";
destroy seed 409): a writer decides its epoch bump on the manifest it read; a destroy that
removes the database before the bump lands leaves the bump (and the WAL fence after it) on an
emptied root. The writer looks at the listing it reads after the fence anyway: its base manifest
gone with no boundary at or above it means a destroyer removed the database, and the open takes
both objects back and raises ``InvalidDbStateError``.

The destroy is played by the store: right before the writer's bump reaches it, every object of
the database goes (what GC leaves of a soft-destroyed database). The live case: another GC deletes
the base manifest behind its boundary right after the bump lands, and the open goes on."""

from __future__ import annotations

import pytest

import slatedb
from slatedb.errors import InvalidDbStateError
from slatedb.objstore.base import OVERWRITE, ObjectMeta, PutMode
from slatedb.objstore.memory import MemoryStore
from tests.db.helpers import latest_manifest, memory_store


class RemovedBeforeBump(MemoryStore):
    """Empties the database just before the first manifest create reaches the store."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.fired = False

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        if key.startswith("manifest/") and not self.fired:
            self.fired = True
            for meta in self.list_now(""):
                self.delete_now(meta.key)
        return await super().put(key, data, mode)


class GcAfterBump(MemoryStore):
    """Right after the first manifest create lands, another GC raises the boundary to the manifest
    below it and deletes that one (legal once it is not the latest)."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.fired = False

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        meta = await super().put(key, data, mode)
        if key.startswith("manifest/") and not self.fired:
            self.fired = True
            base = int(key.split("/")[1].split(".")[0]) - 1
            self.put_now("gc/manifest.boundary", str(base).encode(), OVERWRITE)
            self.delete_now(f"manifest/{base:020d}.manifest")
        return meta


def _existing() -> MemoryStore:
    store = memory_store()
    with slatedb.Db.open("memory://test", store=store) as db:
        db.put(b"k", b"v")
    return store


def test_an_open_whose_bump_landed_after_the_database_was_removed_takes_it_back() -> None:
    store = RemovedBeforeBump(_existing())
    with pytest.raises(InvalidDbStateError, match="destroyed while this writer opened it"):
        slatedb.Db.open("memory://test", store=store)
    assert store.fired
    assert store.list_now("") == [], [m.key for m in store.list_now("")]  # nothing resurrected


def test_an_open_whose_base_another_gc_deleted_behind_its_boundary_goes_on() -> None:
    store = GcAfterBump(_existing())
    with slatedb.Db.open("memory://test", store=store) as db:
        assert db.get(b"k") == b"v"
        db.put(b"k2", b"v2")
    assert store.fired
    ids = sorted(int(m.key.split("/")[1].split(".")[0]) for m in store.list_now("manifest/"))
    assert latest_manifest(store)[0] == ids[-1] and len(ids) >= 1
    with slatedb.Db.open("memory://test", store=store) as db:
        assert db.get(b"k2") == b"v2"


def test_a_bulk_load_whose_bump_landed_after_the_database_was_removed_commits_nothing() -> None:
    """The bulk load's commit fences the writer as an open does (LOAD-4): the same look after its
    fence takes the bump back and refuses the load, and nothing is left at the URL."""
    import trio

    from slatedb.format.sst import SstOptions
    from slatedb.runtime.production import ProductionRuntime
    from slatedb.spark.load import LoadRefusedError, begin_load, commit_load, stage_sorted

    inner = _existing()
    rt = ProductionRuntime("load")

    async def main() -> None:
        plan = await begin_load(inner, rt, overwrite=False)
        staged = await stage_sorted(inner, rt, plan, 0, 0, [b"a", b"b"], [b"1", b"2"],
                                    sst_options=SstOptions(block_size_bytes=512), sst_size_bytes=4096)
        store = RemovedBeforeBump(inner)
        with pytest.raises(LoadRefusedError, match="destroyed while the load committed"):
            await commit_load(store, rt, plan, [staged])
        assert store.fired and store.list_now("") == [], [m.key for m in store.list_now("")]

    trio.run(main)


class GcWithoutBoundaryAfterBump(GcAfterBump):
    """As :class:`GcAfterBump`, for a GC with boundary files off: it deletes the base manifest
    and writes no boundary."""

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        meta = await MemoryStore.put(self, key, data, mode)
        if key.startswith("manifest/") and not self.fired:
            self.fired = True
            base = int(key.split("/")[1].split(".")[0]) - 1
            self.delete_now(f"manifest/{base:020d}.manifest")
        return meta


def test_with_boundary_files_off_an_open_whose_base_went_goes_on() -> None:
    """Without boundary files (``boundary_files_enabled=False``) nothing proves a destroy while
    the bump is listed: the open goes on, as GC's own look does."""
    store = GcWithoutBoundaryAfterBump(_existing())
    settings = {"garbage_collector_options": {"boundary_files_enabled": False}}
    with slatedb.Db.open("memory://test", settings=settings, store=store) as db:
        assert db.get(b"k") == b"v"
    assert store.fired
