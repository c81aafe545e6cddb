"""A write calls the write path's threshold step (``WritePath._on_threshold``: wake the flusher,
cut a full memtable, kick a flush, recompute back-pressure) only when the unflushed bytes reach
the next check (``_next_check_bytes``), not on every write."""

from __future__ import annotations

import slatedb
from slatedb.db import write_path
from slatedb.memtable import ROW_OVERHEAD_BYTES

from .helpers import memory_store

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None,
     "l0_sst_size_bytes": 1 << 20}


def test_small_writes_below_the_next_check_do_not_run_the_threshold_step(monkeypatch) -> None:
    calls: list[int] = []
    original = write_path.WritePath._on_threshold

    def counted(self) -> None:
        calls.append(self._w.unflushed_bytes)
        original(self)

    monkeypatch.setattr(write_path.WritePath, "_on_threshold", counted)
    with slatedb.Db.open("memory://test", settings=S, store=memory_store()) as db:
        for i in range(20):  # single puts and batches: each path checks on its own
            db.put(b"k%02d" % i, b"v")
            batch = slatedb.WriteBatch()
            batch.put(b"b%02d" % i, b"v")
            db.write(batch)
        assert calls == []  # 40 small rows: far below the first check
        batch = slatedb.WriteBatch()
        batch.put(b"big", b"x" * (1 << 20))  # past l0_sst_size_bytes
        db.write(batch)
        assert len(calls) == 1


def test_writes_wait_only_above_max_unflushed_bytes_not_at_it(monkeypatch) -> None:
    """writer.md step 10: writes wait while the unflushed bytes *exceed* ``max_unflushed_bytes``.
    A write that brings them to exactly the limit leaves writes open; one byte more blocks them.
    Each threshold step is recorded under the write path's lock, so a flusher that drains the
    memtables right after cannot hide what the step decided."""
    seen: list[tuple[int, bool]] = []
    original = write_path.WritePath._on_threshold

    def recorded(self) -> None:
        original(self)
        seen.append((self._w.unflushed_bytes, self._blocked))

    monkeypatch.setattr(write_path.WritePath, "_on_threshold", recorded)
    settings = {**S, "l0_sst_size_bytes": 4096, "max_unflushed_bytes": 8192}
    for extra, blocked in ((0, False), (1, True)):
        seen.clear()
        with slatedb.Db.open("memory://test", settings=settings, store=memory_store()) as db:
            key = b"k"
            value = b"x" * (8192 + extra - len(key) - ROW_OVERHEAD_BYTES)
            db.put(key, value)
            assert seen[0] == (8192 + extra, blocked)


def test_a_write_that_fills_the_memtable_cuts_it_and_wakes_the_wal_flusher(monkeypatch) -> None:
    """A write past ``l0_sst_size_bytes`` cuts the memtable and kicks the WAL flusher in the same
    threshold step (under the write path's lock): with ``flush_interval`` 1 h nothing else would
    write the cut's rows to the WAL and hand its memtable to the L0 flush (`sim mutate` seed 22:
    the step marking the flusher kicked before kicking it, so that the kick did nothing, survived)."""
    steps: list[list[str]] = []
    original_step = write_path.WritePath._on_threshold
    original_set = write_path.WritePath._set_from_any_thread

    def recorded_step(self) -> None:
        steps.append([])
        imms = len(self._w.imms)
        original_step(self)
        steps[-1].append(f"cut {len(self._w.imms) - imms}")

    def recorded_set(self, name: str) -> None:
        if steps:
            steps[-1].append(name)
        original_set(self, name)

    monkeypatch.setattr(write_path.WritePath, "_on_threshold", recorded_step)
    monkeypatch.setattr(write_path.WritePath, "_set_from_any_thread", recorded_set)
    with slatedb.Db.open("memory://test", settings=S, store=memory_store()) as db:
        db.put(b"small", b"v")
        batch = slatedb.WriteBatch()
        batch.put(b"big", b"x" * (1 << 20))  # past l0_sst_size_bytes
        db.write(batch)
        # (an idle flusher is also woken for the WAL rows, "_wal_arrival": that depends on timing)
        cuts = [step for step in steps if "cut 0" not in step]
        assert len(cuts) == 1 and cuts[0][-2:] == ["_flush_wakeup", "cut 1"], steps
