"""Paths of the writer that no other check of slatedb/db runs (found by ``sim mutate``: a mutant
on a line no check executes is reported survived unrun): a failing in-process GC, the sync
``flush_memtable``, a wake-up from another thread once the runtime has stopped, a forked child's
refusal, an async writer waiting out back-pressure."""

from __future__ import annotations

import threading

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError, InvalidDbStateError
from slatedb.gc.collector import GarbageCollector
from slatedb.objstore.memory import MemoryBucket
from slatedb.runtime.production import ProductionRuntime

from .helpers import OutageStore, latest_manifest, memory_store


class Recording(ProductionRuntime):
    def __init__(self, name: str = "db") -> None:
        super().__init__(name)
        self.events: list[tuple[str, dict]] = []

    def event(self, kind: str, **fields) -> None:
        self.events.append((kind, fields))
        super().event(kind, **fields)


async def test_a_failing_in_process_gc_is_reported_and_counted_and_the_writer_goes_on(monkeypatch) -> None:
    """``Services._gc_loop``: a GC run that fails with a SlateDBError is one ``gc_error`` event
    naming the error and one count in ``stats["gc_errors"]``; writes go on."""
    async def failing_run(self) -> None:
        raise InvalidDbStateError("list failed (test)")

    monkeypatch.setattr(GarbageCollector, "run", failing_run)
    rt = Recording()
    settings = {"compactor_options": None, "garbage_collector_options": {"manifest_options": {"interval": "1s"}}}
    async with aio.Db.open("memory://gc-fails", settings, store=memory_store(), runtime=rt) as db:
        for _ in range(100):
            if db._core.stats.get("gc_errors"):
                break
            await trio.sleep(0.01)
        await db.put(b"k", b"v", durable=True)
        assert await db.get(b"k") == b"v"
        assert db._core.stats["gc_errors"] == 1
    errors = [f["error"] for k, f in rt.events if k == "gc_error"]
    assert len(errors) == 1 and errors[0].startswith("InvalidDbStateError: ") \
        and "list failed (test)" in errors[0], errors


def test_flush_memtable_writes_the_memtable_to_an_l0_sst() -> None:
    """The sync ``Db.flush_memtable`` is ``flush(wal=False)``: the rows go to L0, not only to the WAL."""
    store = memory_store()
    with slatedb.Db.open("memory://fm", {"compactor_options": None}, store=store) as db:
        db.put(b"k", b"v")
        db.flush_memtable()
        assert len(latest_manifest(store)[1].l0) == 1
        assert db.get(b"k") == b"v"


def test_a_wakeup_from_another_thread_after_the_runtime_stopped_is_dropped() -> None:
    """``_set_from_any_thread`` from a thread other than the runtime's (a writer thread racing the
    close) once the runtime's trio run has finished: nothing left to wake, no error."""
    db = slatedb.Db.open("memory://late", {"compactor_options": None}, store=memory_store())
    core = db._core
    db.close()
    assert core._trio_token is not None and threading.get_ident() != core._trio_thread
    core._set_from_any_thread("_flush_wakeup")  # RunFinishedError inside: swallowed


def test_after_fork_in_child_closes_the_core_for_reads_and_writes() -> None:
    """``DbCore.after_fork_in_child`` (called in a forked child; tests/api/test_fork.py forks,
    this calls it in place): every read and write raises the error given, writes through the
    gate (the write path's slow check) included."""
    db = slatedb.Db.open("memory://forked", {"compactor_options": None}, store=memory_store())
    core = db._core
    saved = (core._w.lock, core._durable_cv, core._room_cv, core._error, core._closed, core._gate)
    try:
        db.put(b"a", b"1", durable=True)
        error = ClosedError("opened by the parent (test)")
        core.after_fork_in_child(error)
        with pytest.raises(ClosedError, match="opened by the parent"):
            core.put(b"b", b"2")
        with pytest.raises(ClosedError, match="opened by the parent"):
            core.check_open()
    finally:  # give the parent's core back its state, so that it closes as usual
        core._w.lock = core._lock = saved[0]
        core._durable_cv, core._room_cv, core._error, core._closed, core._gate = saved[1:]
        db.close()


def test_an_async_write_under_back_pressure_waits_for_room_then_goes_on() -> None:
    """``WritePath.wait_for_room`` (the async front-end's wait on ``MustWait``): writes that fill
    the unflushed budget while the store is down wait -- on the room event, not in a loop -- and
    go on once the store is back and the L0 flushes made room; all of them land."""
    from sim.world.runtime import SimRuntime, run_deterministic
    from sim.world.trace import Trace

    settings = {"l0_sst_size_bytes": 4096, "max_unflushed_bytes": 16384, "flush_interval": "10ms",
                "compactor_options": None, "l0_max_ssts": 64}  # no compactor: L0 must not fill up

    async def main() -> tuple[int, int]:
        rt = SimRuntime("writer", 3, Trace(trio.current_time))
        store = OutageStore(MemoryBucket(), rt.now_ms, url="memory://bp")
        async with aio.Db.open("memory://bp", settings, store=store, runtime=rt) as db:
            core = db._core
            waits = [0]
            real = core.wait_for_room

            async def counting() -> None:
                waits[0] += 1
                assert waits[0] < 50, "wait_for_room returns at once while writes are blocked (a spin)"
                await real()

            core.wait_for_room = counting
            store.down = True
            written = 0

            async def writer() -> None:
                nonlocal written
                for i in range(200):
                    await db.put(b"k%05d" % i, b"x" * 100)
                    written += 1

            # a hang guard on the simulated clock (deterministic): a writer that never resumes
            with trio.move_on_after(60):
                async with trio.open_nursery() as n:
                    n.start_soon(writer)
                    while not core._blocked:
                        await trio.sleep(0.01)
                    blocked_at = written
                    await trio.sleep(5)
                    assert written == blocked_at  # waiting, not writing
                    store.down = False
            assert written == 200
            assert [await db.get(b"k%05d" % i) for i in (0, 199)] == [b"x" * 100] * 2
            return blocked_at, waits[0]

    blocked_at, waits = run_deterministic(main, seed=3)
    assert 0 < blocked_at < 200 and 1 <= waits < 50
