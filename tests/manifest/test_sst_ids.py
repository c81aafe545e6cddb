"""L0 ids GC's ULID cutoff can rely on (slatedb/manifest/sst_ids.py; checkpoints-gc.md step 8).

Sim gc seed 86: a writer restarted with a wall clock 30 ms behind its previous incarnation's
minted an L0 id *older* than the newest L0 already in the manifest; its upload stalled, GC
deleted it as unreferenced once it was older than ``min_age``, and the manifest that then
committed it named a missing SST (GC-4). A writer now never mints an L0 id below the newest L0
it knows."""

from __future__ import annotations

import pytest

import slatedb
from slatedb.format.types import ManifestV2
from slatedb.manifest.sst_ids import newest_l0_ms, not_before
from slatedb.runtime import ulid_from_parts
from slatedb.runtime.production import ProductionRuntime
from sim.scenarios.gc import run_gc_workload
from tests.db.helpers import latest_manifest, memory_store

SETTINGS = {"compactor_options": None, "flush_interval": "10ms", "garbage_collector_options": None}


def test_not_before_keeps_a_fresh_id_and_lifts_an_old_one_keeping_its_random_bits():
    fresh = ulid_from_parts(5_000, 12345)
    assert not_before(fresh, 5_000) is fresh and not_before(fresh, 4_999) is fresh
    lifted = not_before(fresh, 7_000)
    assert lifted.milliseconds == 7_000 and int(lifted) & ((1 << 80) - 1) == 12345


def test_newest_l0_ms_falls_back_to_the_last_compacted_view_then_zero():
    assert newest_l0_ms(ManifestV2()) == 0
    assert newest_l0_ms(ManifestV2(last_compacted_l0_sst_view_id=ulid_from_parts(42, 1))) == 42


class Behind(ProductionRuntime):
    """The production runtime with a wall clock ``behind_ms`` behind: a writer on another host."""

    def __init__(self, behind_ms: int) -> None:
        super().__init__("behind")
        self.behind_ms = behind_ms

    def now_ms(self) -> int:
        return super().now_ms() - self.behind_ms

    def new_ulid(self):
        return ulid_from_parts(self.now_ms(), self.rng.getrandbits(80))


def test_a_writer_behind_the_previous_writers_clock_mints_l0_ids_at_or_after_its_newest_l0():
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=SETTINGS, store=store) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
    first = latest_manifest(store)[1].l0[0].sst_id
    with slatedb.Db.open("memory://test", settings=SETTINGS, store=store, runtime=lambda: Behind(60_000)) as db:
        db.put(b"b", b"2")
        db.flush_memtable()
    (new,) = [v.sst_id for v in latest_manifest(store)[1].l0 if v.sst_id != first]
    assert new.milliseconds >= first.milliseconds  # a minute behind, yet not older than the L0 before it


@pytest.mark.slow
def test_gc_seed_86_passes():
    result = run_gc_workload(86)
    assert result.ok, result.violations
