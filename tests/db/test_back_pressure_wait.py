"""A sync write under back-pressure sleeps on the write path's condition until there is room (or
the database closes); it does not spin on ``MustWait``."""

from __future__ import annotations

import threading
import time

import slatedb

from .helpers import memory_store

SETTINGS = {"l0_sst_size_bytes": 4096, "flush_interval": "10ms", "compactor_options": None, "l0_max_ssts": 1,
            "max_unflushed_bytes": 20_000}


def test_a_blocked_sync_write_sleeps_instead_of_spinning() -> None:
    store = memory_store()
    db = slatedb.Db.open("memory://test", SETTINGS, store=store)
    core = db._core
    waits = [0]
    original = core.wait_for_room_sync

    def counting() -> None:
        waits[0] += 1
        original()

    core.wait_for_room_sync = counting
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(5000):
                db.put(b"k%05d" % i, b"x" * 60)
        except slatedb.SlateDBError:
            pass  # closed under it
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    deadline = time.monotonic() + 20
    while not core._blocked and time.monotonic() < deadline:
        time.sleep(0.005)
    assert core._blocked, "writes never blocked (L0 full, no compactor)"
    time.sleep(1.5)
    blocked_waits = waits[0]
    db.close()
    assert done.wait(20)
    # Waits of at most 1 s each on the condition: a handful in 1.5 s, not a busy loop.
    assert 1 <= blocked_waits <= 10, blocked_waits
