"""Compaction judges TTL expiry by the database's clock (the manifest's ``last_l0_clock_tick``,
the writer's clock at its last L0 flush), not by the compactor's own (COMPACT-12)."""

from __future__ import annotations

import time

import trio

import slatedb
from slatedb.runtime import probes

from .helpers import RecordingRuntime, WRITER, compactor_settings, latest_manifest, memory_store
from .test_compactor import compact
from .test_executor import rows_of

HOUR_MS = 3_600_000


class SkewedRuntime(RecordingRuntime):
    """A compactor on a host whose clock is ``skew_ms`` off the writer's."""

    def __init__(self, skew_ms: int) -> None:
        super().__init__()
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return super().now_ms() + self.skew_ms


def _run_keys(store) -> set[bytes]:
    m = latest_manifest(store)[1]
    outputs = [v for r in m.compacted for v in r.ssts]
    return {r.key for r in trio.run(rows_of, store, outputs)}


def test_a_compactor_whose_clock_runs_ahead_does_not_expire_rows_the_writer_still_reads() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        for r in range(3):
            for i in range(300):
                db.put(b"k%04d" % i, b"v%d" % r + b"." * 20, ttl=3600)
            db.flush()
    assert len(latest_manifest(store)[1].l0) >= 2
    rt = SkewedRuntime(2 * HOUR_MS)
    c = compact(store, compactor_settings(), rt)
    assert c.stats["completed"] >= 1 and not latest_manifest(store)[1].l0, c.stats
    # The branch: rows kept live that the compactor's own clock calls expired (once per merge).
    assert probes.COMPACTOR_TTL_KEPT_BY_DB_CLOCK in rt.probes, rt.probes
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        assert db.get(b"k0000") == b"v2" + b"." * 20
        assert len(dict(db.scan(None, None))) == 300


def test_rows_expired_by_the_writers_clock_at_its_last_flush_are_purged_whatever_the_compactors_clock() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        for i in range(100):
            db.put(b"short%03d" % i, b"s", ttl=0.05)
        db.flush()
        time.sleep(0.1)
        for i in range(100):
            db.put(b"long%03d" % i, b"l", ttl=3600)
        db.flush()  # last_l0_clock_tick: past every short row's expiry
    rt = SkewedRuntime(-2 * HOUR_MS)
    c = compact(store, compactor_settings(), rt)
    assert c.stats["completed"] >= 1 and not latest_manifest(store)[1].l0, c.stats
    assert probes.COMPACTOR_TTL_KEPT_BY_DB_CLOCK not in rt.probes  # a clock behind: nothing it calls expired is kept
    assert _run_keys(store) == {b"long%03d" % i for i in range(100)}  # the bottom run dropped them


def test_a_snapshot_fixes_the_sequence_not_the_time_an_expired_row_reads_absent_before_and_after_compaction() -> None:
    """Expiry is judged at each read, through a snapshot too (reader.md READ-6): a row whose TTL
    passed after the snapshot reads as absent, and hides the older value it overwrote, whether its
    SST is the pinned one or the compacted run the snapshot falls back on once that is collected."""
    store = memory_store()
    settings = {**WRITER, "block_cache_size_bytes": 0}
    with slatedb.Db.open("memory://test", settings=settings, store=store) as db:
        db.put(b"k", b"old")
        db.put(b"k", b"short", ttl=0.05)
        db.flush(wal=False)
        with db.snapshot() as snap:
            assert snap.get(b"k") == b"short"
            time.sleep(0.1)
            assert snap.get(b"k") is None and db.get(b"k") is None
            pinned = {h.sst_id for h in db._core.read_state.view.l0}
            db.put(b"other", b"x")
            db.flush(wal=False)  # last_l0_clock_tick past the expiry; the floor is the snapshot's seq
            assert compact(store, compactor_settings(), RecordingRuntime()).stats["completed"] >= 1
            deadline = time.monotonic() + 10
            while pinned & db._core.read_state.view.sst_ids and time.monotonic() < deadline:
                time.sleep(0.01)
            for sst_id in pinned:
                store.delete_now(f"compacted/{sst_id}.sst")  # GC: the snapshot reads the run now
            assert snap.get(b"k") is None and db.get(b"k") is None
        assert b"k" not in _run_keys(store)  # the expired value and what it hid: dropped at the bottom
