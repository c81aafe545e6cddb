"""reader.md READ-7, "a view outlived": a point read holds its read state while it waits for
blocks; an SST of it that a compaction replaced and GC then collected (its pin expired while the
read was stalled: db seed 11583, one GET stalled 838 s) is read again on the current state. A
missing SST that the current view still names is damage, and raised."""

from __future__ import annotations

import time

import pytest

import slatedb
from slatedb.errors import ObjectNotFoundError
from slatedb.runtime import probes
from tests.probed_runtime import ProbedRuntime

from .helpers import compact_all_l0, memory_store

SETTINGS = {"compactor_options": None, "manifest_poll_interval": "10ms", "block_cache_size_bytes": 0}


def _loaded(store) -> None:
    with slatedb.Db.open("memory://test", settings=SETTINGS, store=store) as db:
        for i in range(50):
            db.put(b"k%03d" % i, b"v%d" % i)


def test_a_point_read_whose_compacted_sst_was_collected_reads_the_current_state() -> None:
    store = memory_store()
    _loaded(store)
    rt = ProbedRuntime()
    with slatedb.Db.open("memory://test", settings=SETTINGS, store=store, runtime=rt) as db:
        core = db._core
        old = core.read_state
        (l0,) = old.view.l0  # the close's L0 SST
        compact_all_l0(store)  # a compactor replaces it by a sorted run
        deadline = time.monotonic() + 10
        while l0.sst_id in core.read_state.view.sst_ids and time.monotonic() < deadline:
            time.sleep(0.01)  # the writer adopts the compaction's manifest
        assert l0.sst_id not in core.read_state.view.sst_ids
        store.delete_now(f"compacted/{l0.sst_id}.sst")  # GC, once the pin expired
        # The read that began on the old state (before: ObjectNotFoundError naming the SST)
        assert db._portal(core.get_slow, b"k007", old, None) == b"v7"
        assert db._portal(core.get_row_slow, b"k008", old, None).value == b"v8"
    assert rt.hits.count(probes.READ_VIEW_COLLECTED) == 2


def test_a_missing_sst_the_current_view_still_names_is_raised() -> None:
    store = memory_store()
    _loaded(store)
    with slatedb.Db.open("memory://test", settings=SETTINGS, store=store) as db:
        (l0,) = db._core.read_state.view.l0
        store.delete_now(f"compacted/{l0.sst_id}.sst")  # damage: nothing replaced it
        with pytest.raises(ObjectNotFoundError, match=str(l0.sst_id)):
            db.get(b"k007")


def test_a_snapshot_whose_ssts_were_compacted_and_collected_still_reads_its_versions_READ_6() -> None:
    """The fresh state a collected view falls back on was compacted at the retention floor the
    snapshot held (``recent_snapshot_min_seq``): its overwritten and deleted versions are kept,
    so the snapshot still reads what it read before (not the newer value, not a deleted key's
    absence)."""
    store = memory_store()
    _loaded(store)
    with slatedb.Db.open("memory://test", settings=SETTINGS, store=store) as db:
        core = db._core
        with db.snapshot() as snap:
            pinned = {h.sst_id for h in core.read_state.view.l0}
            assert snap.get(b"k007") == b"v7"
            db.put(b"k007", b"newer")
            db.delete(b"k008")
            db.flush(wal=False)  # the flush records the snapshot's seq as the floor
            compact_all_l0(store)
            deadline = time.monotonic() + 10
            while pinned & core.read_state.view.sst_ids and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not pinned & core.read_state.view.sst_ids
            for sst_id in pinned:
                store.delete_now(f"compacted/{sst_id}.sst")  # GC, once the pin expired
            assert snap.get(b"k007") == b"v7" and snap.get(b"k008") == b"v8"
        assert db.get(b"k007") == b"newer" and db.get(b"k008") is None
