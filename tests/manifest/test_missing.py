"""``require_latest`` (slatedb/manifest/missing.py): what admin tools and the CLI open through.
They never create: an empty path is "no database", data without a manifest is lost manifests,
and a database is its latest manifest."""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import ManifestsMissingError, NotFoundError
from slatedb.format.types import ManifestV2
from slatedb.manifest.missing import require_latest
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def test_require_latest() -> None:
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())
    with pytest.raises(NotFoundError, match="no database"):
        trio.run(require_latest, ms)
    store.put_now("wal/00000000000000000001.sst", b"")
    with pytest.raises(ManifestsMissingError):
        trio.run(require_latest, ms)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True))
    trio.run(ms.try_write, 2, ManifestV2(initialized=True, writer_epoch=4))
    got = trio.run(require_latest, ms)
    assert got.id == 2 and got.manifest.writer_epoch == 4


def test_latest_or_refuse_by_create_mode() -> None:
    """What ``Db.open``'s ``create`` means at the manifest: on an empty path ``"if_missing"``
    (the default) and ``"force"`` may create (None), ``"never"`` is "no database"; over
    leftovers only ``"force"`` may; a database is its latest manifest in every mode."""
    from slatedb.manifest.missing import CREATE_MODES, latest_or_refuse

    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())

    def call(create: str):
        return trio.run(lambda: latest_or_refuse(ms, create=create))

    assert trio.run(latest_or_refuse, ms) is None
    assert call("if_missing") is None and call("force") is None
    with pytest.raises(NotFoundError, match='no database at .* create="never"'):
        call("never")
    store.put_now("wal/00000000000000000001.sst", b"")
    assert call("force") is None
    for create in ("if_missing", "never"):
        with pytest.raises(ManifestsMissingError):
            call(create)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True))
    assert {call(create).id for create in CREATE_MODES} == {1}


def test_staged_load_ssts_named_by_intents_are_not_leftovers() -> None:
    """A first bulk load into a new URL stages SSTs and their intents before any manifest
    (LOAD-11): the path is still a new database. An SST that no intent names is a leftover."""
    from slatedb.manifest.missing import intent_sst_id, latest_or_refuse
    from slatedb.spark.load import intent_key, marker_key

    sst = "01JABCDEFGHJKMNPQRSTVWXYZ0"
    assert intent_sst_id(intent_key("load1", 3, 0, sst)) == sst
    assert intent_sst_id(marker_key("load1")) is None
    assert intent_sst_id("bulk-load/load1/000003-0") is None
    assert intent_sst_id(intent_key("load1", 3, 0, sst[:25])) is None  # a ULID is 26 characters
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())
    store.put_now(marker_key("load1"), b"")
    store.put_now(intent_key("load1", 3, 0, sst), b"")
    store.put_now(f"compacted/{sst}.sst", b"staged")
    assert trio.run(latest_or_refuse, ms) is None  # a new database: the staged SST is the load's
    store.put_now("compacted/01JABCDEFGHJKMNPQRSTVWXYZ1.sst", b"orphan")
    with pytest.raises(ManifestsMissingError):
        trio.run(latest_or_refuse, ms)


def test_an_sst_its_load_deleted_after_the_first_listing_is_not_a_leftover() -> None:
    """A load deletes a staged SST first, then its intent (its clean-up): an SST listed before,
    whose intent is gone by the time the intents are listed, is listed again -- gone now, it is
    nobody's leftover, and the path is still a new database."""
    from slatedb.manifest.missing import latest_or_refuse
    from slatedb.objstore.memory import MemoryStore

    sst = "compacted/01JABCDEFGHJKMNPQRSTVWXYZ2.sst"

    class CleanUpBetweenListings(MemoryStore):
        lists = 0

        async def list(self, prefix=""):
            got = await super().list(prefix)
            if prefix == "compacted/":
                self.lists += 1
                if self.lists == 1:
                    self.delete_now(sst)  # the load's clean-up, between the SST and intent listings
            return got

    base = memory_store()
    store = CleanUpBetweenListings(base._bucket, base._clock_ms, url=base.url)
    store.put_now(sst, b"staged, intent already gone")
    assert trio.run(latest_or_refuse, ManifestStore(store, ProductionRuntime())) is None
    assert store.lists == 2


@pytest.mark.parametrize("wal_ids, replay_after", [((), 0), ((3, 9), 9)])
def test_a_forced_create_over_leftovers_starts_above_the_boundary_and_the_stray_wal(wal_ids, replay_after) -> None:
    """``create="force"`` (``initial_over_leftovers``): the first manifest id is the boundary + 1;
    the WAL is replayed after the highest stray WAL object, 0 when there is none (WAL 1 is then
    the new database's first)."""
    from slatedb.manifest.missing import initial_over_leftovers
    from slatedb.wal.writer import wal_key

    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())
    store.put_now(ms.boundary_key, b"4")
    for i in wal_ids:
        store.put_now(wal_key(i), b"stray")
    assert trio.run(initial_over_leftovers, ms) == (5, replay_after)


def test_lost_manifests_are_reported_by_directory_with_the_first_key_of_at_most_three() -> None:
    """``ManifestsMissingError`` counts the objects of every data directory that holds some and
    names the first key of each, three at most (the first three directories, in
    ``DATA_DIRECTORIES`` order): the message stays short however much is left (`sim mutate` seed
    21: the examples cut to two survived, no check had left more than two directories)."""
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())
    keys = {"wal/": ["wal/00000000000000000002.sst", "wal/00000000000000000001.sst"],
            "compacted/": ["compacted/01JABCDEFGHJKMNPQRSTVWXYZ1.sst"],
            "compactions/": ["compactions/00000000000000000003.compactions"],
            "gc/": ["gc/manifest.boundary", "gc/compactions.boundary"]}
    for ks in keys.values():
        for k in ks:
            store.put_now(k, b"left")
    with pytest.raises(ManifestsMissingError) as err:
        trio.run(require_latest, ms)
    assert err.value.found == {"wal/": 2, "compacted/": 1, "compactions/": 1, "gc/": 2}
    assert err.value.examples == ["wal/00000000000000000001.sst", "compacted/01JABCDEFGHJKMNPQRSTVWXYZ1.sst",
                                  "compactions/00000000000000000003.compactions"]
    assert "e.g. wal/00000000000000000001.sst, compacted/01JABCDEFGHJKMNPQRSTVWXYZ1.sst, compactions/" in str(err.value)
