"""The compactor and the writer together: back-pressure never stalls for good (RFC 003)."""

from __future__ import annotations

import threading
import time

import trio

import slatedb
from slatedb.compactor import Compactor
from slatedb.runtime.production import ProductionRuntime

from .helpers import compactor_settings, latest_manifest, memory_store

BASE = {"l0_sst_size_bytes": 16384, "flush_interval": "10ms", "manifest_poll_interval": "50ms",
        "min_filter_keys": 10, "l0_max_ssts": 4, "max_unflushed_bytes": 40_000}
COMPACTOR = {"poll_interval": "50ms", "scheduler_options": {"min_compaction_sources": "2"},
             "worker": {"max_sst_size": 64 * 1024}}


def _write_in_thread(db, n: int) -> threading.Event:
    done = threading.Event()

    def writer() -> None:
        for i in range(n):
            db.put(b"k%05d" % (i % 5000), b"%d" % i + b"x" * 60)
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    return done


def test_a_sustained_write_load_with_the_in_process_compactor_never_stalls() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", {**BASE, "compactor_options": COMPACTOR}, store=store) as db:
        done = _write_in_thread(db, 12_000)
        max_l0 = 0
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            max_l0 = max(max_l0, len(db._core.read_state.view.l0))
            time.sleep(0.01)
        assert done.is_set(), "writes stalled with the compactor running"
        assert max_l0 <= 4
        compactor = db._core.compactor
        assert compactor is not None and compactor.stats["completed"] >= 3, compactor.stats
        for i in (0, 1234, 4999):
            last = max(j for j in range(12_000) if j % 5000 == i)
            assert db.get(b"k%05d" % i) == b"%d" % last + b"x" * 60
    _, m = latest_manifest(store)
    assert m.compacted and m.compactor_epoch >= 1


def test_without_a_compactor_writes_block_at_l0_max_ssts_and_resume_once_one_runs() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", {**BASE, "compactor_options": None}, store=store) as db:
        done = _write_in_thread(db, 6_000)
        core = db._core
        deadline = time.monotonic() + 20
        while not (core._blocked and len(core.read_state.view.l0) == 4) and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.3)
        assert core._blocked and not done.is_set(), "writes did not block on a full L0"
        assert len(core.read_state.view.l0) == 4

        stop = threading.Event()

        def standalone() -> None:  # `slatedb run-compactor`, in a thread of this process
            async def main() -> None:
                c = Compactor(store, ProductionRuntime("compactor"), compactor_settings(min_sources=2))
                async with trio.open_nursery() as n:
                    n.start_soon(c.run)
                    while not stop.is_set():
                        await trio.sleep(0.02)
                    n.cancel_scope.cancel()

            trio.run(main)

        t = threading.Thread(target=standalone, daemon=True)
        t.start()
        try:
            assert done.wait(120), "writes never resumed after the compactor started"
        finally:
            stop.set()
            t.join(30)
        assert db.get(b"k00999") is not None
