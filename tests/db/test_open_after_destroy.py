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
from slatedb.objstore.memory import MemoryStore
from tests.db.helpers import latest_manifest, memory_store
from tests.gc.helpers import DestroyedBeforeCreate, OtherGcAfterCreate


def _existing() -> MemoryStore:
    store = memory_store()
    with slatedb.Db.open("memory://test", store=store) as db:
        db.put(b"k", b"v")
    return store


def test_an_open_whose_bump_landed_after_the_database_was_removed_takes_it_back() -> None:
    store = DestroyedBeforeCreate(_existing(), "manifest/")
    with pytest.raises(InvalidDbStateError, match="destroyed while this writer opened it"):
        slatedb.Db.open("memory://test", store=store)
    assert store.fired
    assert store.list_now("") == [], [m.key for m in store.list_now("")]  # nothing resurrected


def test_an_open_whose_base_another_gc_deleted_behind_its_boundary_goes_on() -> None:
    store = OtherGcAfterCreate(_existing())
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
        store = DestroyedBeforeCreate(inner, "manifest/")
        with pytest.raises(LoadRefusedError, match="destroyed while the load committed"):
            await commit_load(store, rt, plan, [staged])
        assert store.fired and store.list_now("") == [], [m.key for m in store.list_now("")]

    trio.run(main)


def test_with_boundary_files_off_an_open_whose_base_went_goes_on() -> None:
    """Without boundary files (``boundary_files_enabled=False``) nothing proves a destroy while
    the bump is listed: the open goes on, as GC's own look does."""
    store = OtherGcAfterCreate(_existing(), boundary=False)
    settings = {"garbage_collector_options": {"boundary_files_enabled": False}}
    with slatedb.Db.open("memory://test", settings=settings, store=store) as db:
        assert db.get(b"k") == b"v"
    assert store.fired


def test_without_the_take_back_the_open_resurrects_the_database() -> None:
    """Catalogue switch ``writer-keeps-open-after-destroy`` (held here, not by a seed: the
    simulator keeps DESTROY-A1, so no bump of its worlds lands after a removal): the open keeps
    its bump and fence on the emptied root and opens -- a lone manifest resurrects the removed
    database (DESTROY-3/7), and the writer writes to it."""
    from slatedb.runtime import switches
    from slatedb.runtime.production import ProductionRuntime

    store = DestroyedBeforeCreate(_existing(), "manifest/")
    rt = ProductionRuntime("w")
    rt.bugs = frozenset({switches.WRITER_KEEPS_OPEN_AFTER_DESTROY})
    from slatedb.errors import ObjectNotFoundError

    try:
        with slatedb.Db.open("memory://test", store=store, runtime=rt) as db:  # no refusal
            db.put(b"k2", b"v2")
    except ObjectNotFoundError as e:  # the resurrected manifest names an L0 SST the destroy deleted
        assert "compacted/" in str(e), e
    assert store.fired
    left = [m.key for m in store.list_now("")]
    assert any(k.startswith("manifest/") for k in left), left  # a lone manifest outlives the database
