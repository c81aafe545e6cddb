"""An L0 flush records its table's newest write time as ``last_l0_clock_tick``, never the
commit's ``now`` (writer.md step 9, DUR-5), as upstream's flush does (``KVTable::last_tick``,
kept monotonic). Found switching engines: our writer, killed with rows in the WAL written while
an L0 flush was in flight, left a tick above those rows' times; the official writer that took
over replayed them and failed its L0 flush with ``InvalidClockTick``, closing in a state whose
next open lost thousands of acknowledged rows (4 of 7 runs; tests/interop/test_clock_tick_interop.py).

Also the compaction's expiry clock (COMPACT-12): the writer's time of its newest flushed write."""

from __future__ import annotations

import threading

import attrs

import slatedb
from slatedb.runtime.production import ProductionRuntime

from .helpers import latest_manifest, memory_store
from .test_ttl_merge_model import BASE_MS, Clock, ClockRuntime

SETTINGS = {"compactor_options": None, "garbage_collector_options": None, "flush_interval": "1h",
            "manifest_poll_interval": "1h", "l0_sst_size_bytes": 1 << 20}


def test_a_write_made_while_an_l0_flush_is_in_flight_is_not_behind_the_recorded_tick() -> None:
    store, clock = memory_store(), Clock()
    released, uploading = threading.Event(), threading.Event()
    real_put = store.put

    async def slow_sst_put(key, data, *args, **kwargs):
        if key.startswith("compacted/"):
            uploading.set()
            released.wait(10)  # the upload takes a while (the engine's thread is held here)
        return await real_put(key, data, *args, **kwargs)

    store.put = slow_sst_put
    db = slatedb.Db.open("memory://tick", SETTINGS, store=store, runtime=ClockRuntime(clock))
    db.put(b"a", b"1")  # at BASE_MS
    flusher = threading.Thread(target=lambda: db.flush(wal=False))
    flusher.start()
    assert uploading.wait(10)
    clock.ms = BASE_MS + 100
    db.put(b"b", b"2")  # into the next memtable, while the first one's SST uploads
    clock.ms = BASE_MS + 200  # the flush commits now
    released.set()
    flusher.join(10)
    db.flush()  # b's WAL object
    tick = latest_manifest(store)[1].last_l0_clock_tick
    assert tick == BASE_MS, "the flushed table's newest write, not the commit's time (BASE_MS + 200)"
    assert tick <= db.get_key_value(b"b").create_ts
    db.abort()  # b is only in the WAL above the replay point: a successor replays it


def test_the_tick_never_goes_back_and_follows_the_newest_write_of_each_flushed_table() -> None:
    store, clock = memory_store(), Clock()
    with slatedb.Db.open("memory://tick2", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db:
        db.put(b"a", b"1")
        clock.ms += 700
        db.put(b"a", b"2")
        clock.ms += 5000
        db.flush(wal=False)
        assert latest_manifest(store)[1].last_l0_clock_tick == BASE_MS + 700
    clock.ms = BASE_MS - 60_000  # a writer on a host whose clock is behind
    with slatedb.Db.open("memory://tick2", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db:
        db.put(b"c", b"3")
        db.flush(wal=False)
        assert latest_manifest(store)[1].last_l0_clock_tick == BASE_MS + 700


def _crash_with_a_write_during_a_flush(url: str, monkeypatch=None) -> None:
    """Our writer crashed with a row (b) written while an L0 flush was in flight, only in the WAL."""
    clock = Clock()
    clock.ms = ProductionRuntime().now_ms()  # the real time (the checker judges ages by it)
    released, uploading = threading.Event(), threading.Event()
    db = slatedb.Db.open(url, {**SETTINGS, "l0_max_ssts": 8}, runtime=ClockRuntime(clock))
    store = db._core.store
    real_put = store.put

    async def slow_sst_put(key, data, *args, **kwargs):
        if key.startswith("compacted/"):
            uploading.set()
            released.wait(10)
        return await real_put(key, data, *args, **kwargs)

    store.put = slow_sst_put
    db.put(b"a", b"1")
    flusher = threading.Thread(target=lambda: db.flush(wal=False))
    flusher.start()
    assert uploading.wait(10)
    clock.ms += 100
    db.put(b"b", b"2")
    clock.ms += 100
    released.set()
    flusher.join(10)
    db.flush()
    db.abort()


def test_slatedb_check_reports_a_row_to_replay_created_before_the_tick(tmp_path, monkeypatch) -> None:
    """The checker's rule (DUR-5, deep): fed the state the old flush left (the tick set to the
    commit's time), it names the WAL object; on the fixed flush's state, nothing."""
    from slatedb.manifest import edits
    from tests.checker.assertions import check_databases_under

    _crash_with_a_write_during_a_flush(f"file://{tmp_path}/fixed/db")
    assert check_databases_under(tmp_path / "fixed") == []
    real_apply = edits.AddL0.apply

    def old_apply(self, m, attempt):  # the flush before the fix: the commit's time
        change = real_apply(self, m, attempt)
        return attrs.evolve(change, manifest=attrs.evolve(change.manifest, last_l0_clock_tick=attempt.now_ms))

    monkeypatch.setattr(edits.AddL0, "apply", old_apply)
    _crash_with_a_write_during_a_flush(f"file://{tmp_path}/old/db")
    findings = check_databases_under(tmp_path / "old")
    assert len(findings) == 1 and "DUR-5" in findings[0] and "InvalidClockTick" in findings[0], findings


# -- DUR-5: create times never go back (upstream's MonotonicClock) ----------------------------


def test_a_writer_whose_clock_is_behind_stamps_rows_at_the_databases_newest_create_time() -> None:
    """A writer taking over on a host whose clock is a minute behind: its rows are stamped at the
    manifest's tick, then at its own clock once that passes it; never below (DUR-5). Before, they
    carried the host's clock, older than the tick: an official writer replaying them after a
    crash refuses the tick (tests/interop/test_clock_tick_interop.py)."""
    store, clock = memory_store(), Clock()
    with slatedb.Db.open("memory://behind", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db:
        db.put(b"a", b"1")
        db.flush(wal=False)
    tick = latest_manifest(store)[1].last_l0_clock_tick
    assert tick == BASE_MS
    clock.ms = BASE_MS - 60_000
    with slatedb.Db.open("memory://behind", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db:
        db.put(b"b", b"2")
        batch = slatedb.WriteBatch()
        batch.put(b"c", b"3")
        db.write(batch)
        assert db.get_key_value(b"b").create_ts == tick
        assert db.get_key_value(b"c").create_ts == tick
        clock.ms = BASE_MS + 10  # the host's clock passes the database's
        db.put(b"d", b"4")
        assert db.get_key_value(b"d").create_ts == BASE_MS + 10
        clock.ms = BASE_MS + 5  # and is stepped back (NTP): the newest time holds
        db.put(b"e", b"5")
        assert db.get_key_value(b"e").create_ts == BASE_MS + 10


def test_a_ttl_counts_from_the_writers_clock_even_when_the_stamp_is_held() -> None:
    """Only the create time is held at the database's newest; a TTL's expiry counts from the
    writer's clock as it reads, as a caller asked (a 30 s TTL is 30 s on this host's clock)."""
    store, clock = memory_store(), Clock()
    with slatedb.Db.open("memory://ttl-behind", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db:
        db.put(b"a", b"1")
        db.flush(wal=False)
    clock.ms = BASE_MS - 60_000
    with slatedb.Db.open("memory://ttl-behind", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db:
        db.put(b"t", b"v", ttl=30)
        kv = db.get_key_value(b"t")
        assert kv.create_ts == BASE_MS and kv.expire_ts == BASE_MS - 60_000 + 30_000


def test_replayed_rows_raise_the_floor_of_the_next_writers_stamps() -> None:
    """Rows only in the WAL (a crash) are newer than the manifest's tick: the writer that replays
    them stamps its own rows at or after the newest of them."""
    store, clock = memory_store(), Clock()
    db = slatedb.Db.open("memory://replayed", SETTINGS, store=store, runtime=ClockRuntime(clock))
    db.put(b"a", b"1")
    db.flush(wal=False)
    clock.ms = BASE_MS + 9_000
    db.put(b"w", b"only in the WAL")
    db.flush()
    db.abort()
    clock.ms = BASE_MS - 60_000
    with slatedb.Db.open("memory://replayed", SETTINGS, store=store, runtime=ClockRuntime(clock)) as db2:
        db2.put(b"n", b"new")
        assert db2.get_key_value(b"w").create_ts == BASE_MS + 9_000
        assert db2.get_key_value(b"n").create_ts == BASE_MS + 9_000


def test_the_stamp_is_taken_under_the_write_lock_so_seq_order_is_time_order() -> None:
    """Two puts whose clock readings arrive out of order (read before the lock, as on two
    threads): the later seq is never stamped earlier."""
    from slatedb.db.state import WriterState

    w = WriterState()
    with w.lock:
        s1 = w.append(b"k1", 0, b"v", None, BASE_MS + 5)
        s2 = w.append(b"k2", 0, b"v", None, BASE_MS + 3)  # read first, appended second
        assert w.stamp(BASE_MS + 1) == BASE_MS + 5 and w.stamp(BASE_MS + 8) == BASE_MS + 8
    rows = {r[1]: r for r in w.wal_rows}
    assert (s1, s2) == (1, 2) and rows[2][5] == rows[1][5] == BASE_MS + 5
