"""A durable wait must wake an idle WAL flusher, whatever moved the write thresholds meanwhile.

Found in a loaded full-suite run (tests/robust/test_argument_boundaries.py, a durable put that
never returned: pytest-timeout after 900 s, the runtime thread idle in epoll): the WAL flusher
sleeps on ``_wal_arrival`` while nothing is buffered, and the next write that crosses the byte
threshold wakes it. An L0 flush's adoption lowers the unflushed bytes under the write lock and
recomputes the threshold in a second hold (``_signal_room``); a write in between is measured
against the old, higher threshold, so it does not wake the flusher, and its durable wait kicked
``_flush_wakeup`` -- which the sleeping flusher does not wait on. The write stayed buffered
until some later write crossed the threshold: for ever on a quiet database.

The test writes in exactly that window (from another thread, while the runtime thread is between
the two holds) and waits for the write's durability."""

from __future__ import annotations

import threading

import slatedb

SETTINGS = {"flush_interval": "5ms", "compactor_options": None, "l0_sst_size_bytes": 4096}


def _wait_until_flusher_idle(core) -> None:
    """Until the WAL flusher has gone to sleep with nothing buffered: a durable put returns when
    its WAL object landed, and the flusher's loop marks itself idle afterwards, on the runtime's
    thread (asserting at once failed on a loaded machine)."""
    import time
    for _ in range(3000):
        with core._w.lock:
            if core._flusher_idle:
                return
        time.sleep(0.01)
    raise AssertionError("the WAL flusher never went idle")


def test_a_durable_wait_for_a_write_made_while_an_l0_flush_is_adopted_returns() -> None:
    with slatedb.Db.open("memory://durable-wait-idle/db", settings=SETTINGS) as db:
        for i in range(40):
            db.put(b"k%03d" % i, b"x" * 100)
        core = db._core
        real = core._signal_room
        handles: list = []
        armed = threading.Event()

        def in_the_window() -> None:
            if armed.is_set() and not handles:
                t = threading.Thread(target=lambda: handles.append(db.put(b"window", b"w")))
                t.start()
                t.join()
            real()

        core._signal_room = in_the_window
        try:
            armed.set()
            db.flush(wal=False)  # the memtable goes to L0; its adoption runs in_the_window
        finally:
            del core._signal_room
        assert handles, "the L0 flush's adoption never signalled room"
        handles[0].wait_durable(timeout_s=10)  # before the fix: TimeoutError, the flusher asleep
        assert db.get(b"window") == b"w"


def test_a_durable_wait_wakes_a_flusher_asleep_with_rows_buffered() -> None:
    """The second half of the fix: whatever put the flusher to sleep with rows buffered (the
    window above, or any later path), a durable wait's kick wakes it from that sleep too, not only
    from its ``flush_interval`` wait. Here the state is made by hand: a write lands without waking
    the flusher, which is then marked asleep, as the window left it."""
    with slatedb.Db.open("memory://durable-wait-idle-2/db", settings={**SETTINGS, "flush_interval": "1h"}) as db:
        core = db._core
        db.put(b"a", b"1", durable=True)  # the flusher wrote it and went to sleep until a row arrives
        w = core._w
        _wait_until_flusher_idle(core)
        with w.lock:
            assert core._flusher_idle
            core._next_check_bytes = w.unflushed_bytes + 10**9  # the stale threshold: no write wakes it
        h = db.put(b"b", b"2")
        with w.lock:
            assert core._flusher_idle and w.wal_rows  # buffered, the flusher asleep
        h.wait_durable(timeout_s=10)  # before the fix: TimeoutError
        assert db.get(b"b") == b"2"


def test_without_the_idle_wake_the_durable_wait_never_returns() -> None:
    """The catalogued switch ``kick-skips-idle-flusher`` (UNIT_CAUGHT: a thread race no simulated
    writer can enter): the kick as it was before the fix, waking only the flusher's interval wait.
    The state of the test above: the durable wait times out, the row still buffered."""
    import pytest

    from slatedb.runtime import switches
    from slatedb.runtime.production import ProductionRuntime

    rt = ProductionRuntime("kick")
    rt.bugs = frozenset({switches.KICK_SKIPS_IDLE_FLUSHER})
    with slatedb.Db.open("memory://durable-wait-idle-3/db", settings={**SETTINGS, "flush_interval": "1h"},
                         runtime=rt) as db:
        core = db._core
        db.put(b"a", b"1", durable=True)
        w = core._w
        _wait_until_flusher_idle(core)
        with w.lock:
            assert core._flusher_idle
            core._next_check_bytes = w.unflushed_bytes + 10**9
        h = db.put(b"b", b"2")
        with pytest.raises(TimeoutError):
            h.wait_durable(timeout_s=1)
        with w.lock:
            assert w.wal_rows  # still buffered
