"""A sync write under back-pressure sleeps on the write path's condition until there is room (or
the database closes); it does not spin on ``MustWait``."""

from __future__ import annotations

import threading
import time

import pytest

import slatedb
import slatedb.aio
from slatedb.errors import InvalidArgumentError

from .helpers import memory_store

SETTINGS = {"l0_sst_size_bytes": 4096, "flush_interval": "10ms", "compactor_options": None, "l0_max_ssts": 1,
            "max_unflushed_bytes": 20_000}


def _block_a_writer(db) -> threading.Event:
    """Start a thread writing until it blocks (L0 full, no compactor) and wait until it has; the
    event is set once the thread ends (the database closed under it)."""
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
    while not db._core._blocked and time.monotonic() < deadline:
        time.sleep(0.005)
    assert db._core._blocked, "writes never blocked (L0 full, no compactor)"
    return done


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
    done = _block_a_writer(db)
    time.sleep(1.5)
    blocked_waits = waits[0]
    db.close()
    assert done.wait(20)
    # Waits of at most 1 s each on the condition: a handful in 1.5 s, not a busy loop.
    assert 1 <= blocked_waits <= 10, blocked_waits


def test_a_full_l0_without_a_compactor_says_so_once(caplog) -> None:
    """A writer whose L0 is full and that runs no compactor would flush nothing more and then
    wait forever without a word: the L0 flusher held back logs a warning naming the limit and
    the missing compactor, once (at most once a minute, however often it looks again)."""
    db = slatedb.Db.open("memory://test", SETTINGS, store=memory_store())
    with caplog.at_level("WARNING", logger="slatedb"):
        done = _block_a_writer(db)
        time.sleep(0.3)
        db.close()
        assert done.wait(20)
    full = [r.getMessage() for r in caplog.records if r.getMessage().startswith("L0 holds")]
    assert len(full) == 1, full
    assert "l0_max_ssts 1" in full[0] and "runs no compactor" in full[0] and "(20000)" in full[0], full[0]


def test_a_full_l0_after_a_compactor_elsewhere_names_its_threshold(caplog) -> None:
    """Found: a compactor run elsewhere (``slatedb run-compactor``) whose
    ``min_compaction_sources`` is above the writer's ``l0_max_ssts`` never compacts the full L0,
    and the writer waits for good; its warning spoke only of a missing compactor. When a
    compactor has claimed the database (its epoch in the manifest), it names the two settings."""
    import trio

    from slatedb import admin

    store = memory_store()
    with slatedb.Db.open("memory://test", SETTINGS, store=store) as db:
        db.put(b"a", b"1")
    trio.run(lambda: admin.run_compactor(store, {"compactor_options": {"scheduler_options": {
        "min_compaction_sources": "8", "max_compaction_sources": "8"}}}, once=True))
    db = slatedb.Db.open("memory://test", SETTINGS, store=store)
    with caplog.at_level("WARNING", logger="slatedb"):
        done = _block_a_writer(db)
        deadline = time.monotonic() + 20  # a liveness bound: the held-back flusher warns
        while not [r for r in caplog.records if r.getMessage().startswith("L0 holds")] and time.monotonic() < deadline:
            time.sleep(0.01)
        db.close()
        assert done.wait(20)
    (full,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("L0 holds")]
    assert "compactor epoch 1" in full and "min_compaction_sources" in full and "<= 1" in full, full


def test_a_full_l0_after_its_own_compactor_was_fenced_says_so(caplog) -> None:
    """Found: ``slatedb run-compactor`` run beside a writer fences the writer's in-process
    compactor, which stops for good; once the other one stopped too, L0 filled and the writer's
    writes waited for good without a word (the warning was only for ``compactor_options``
    None). It now warns, naming the fence and what to do."""
    import trio

    from slatedb import admin

    store = memory_store()
    settings = dict(SETTINGS, compactor_options={"poll_interval": "50ms",
                                                 "scheduler_options": {"min_compaction_sources": "1"}})
    db = slatedb.Db.open("memory://test", settings, store=store)
    deadline = time.monotonic() + 20  # liveness bounds, not timings
    while trio.run(admin.read_manifest, store).manifest.compactor_epoch == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # the writer's compactor has claimed its epoch
    with caplog.at_level("WARNING", logger="slatedb"):
        trio.run(lambda: admin.run_compactor(store, settings, once=True))  # fences the writer's compactor
        while db._core.compactor_stopped is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert db._core.compactor_stopped is not None, "the in-process compactor never saw the fence"
        done = _block_a_writer(db)
        while not [r for r in caplog.records if r.getMessage().startswith("L0 holds")] and time.monotonic() < deadline:
            time.sleep(0.01)
        db.close()
        assert done.wait(20)
    (full,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("L0 holds")]
    assert "own compactor fenced by a compactor elsewhere" in full and "reopen the database" in full, full


def test_a_full_l0_with_a_compactor_is_ordinary_back_pressure(caplog) -> None:
    """With the in-process compactor a full L0 is drained by it (here from one L0 SST on): no
    warning, and every write lands."""
    settings = dict(SETTINGS, compactor_options={"poll_interval": "50ms",
                                                 "scheduler_options": {"min_compaction_sources": "1"}})
    with caplog.at_level("WARNING", logger="slatedb"):
        with slatedb.Db.open("memory://test", settings, store=memory_store()) as db:
            for i in range(600):  # ~55 KB: L0 fills and writes wait for the compactor several times
                db.put(b"k%05d" % i, b"x" * 60)
            assert db.get(b"k00599") == b"x" * 60
    assert not [r for r in caplog.records if r.getMessage().startswith("L0 holds")]


@pytest.mark.parametrize("front", ["sync", "aio"])
def test_an_l0_limit_below_the_compactors_minimum_is_refused_at_open(front: str) -> None:
    """``l0_max_ssts`` below the in-process compactor's ``min_compaction_sources`` (4 by default):
    the L0 flush would stop at 1 L0 SST, the compactor would wait for 4, and writes would wait for
    good once ``max_unflushed_bytes`` are buffered (the official engine hangs so: upstream #854).
    Refused at the open, naming both settings; equal is fine, and so is no in-process compactor."""
    settings = dict(SETTINGS, compactor_options={"poll_interval": "50ms"})
    with pytest.raises(InvalidArgumentError, match=r"l0_max_ssts \(1\) must be at least "
                       r"compactor_options.scheduler_options.min_compaction_sources \(4\)"):
        if front == "sync":
            slatedb.Db.open("memory://test", settings, store=memory_store())
        else:
            slatedb.aio.Db.open("memory://test", settings, store=memory_store())
    ok = dict(settings, l0_max_ssts=4)
    slatedb.Db.open("memory://test", ok, store=memory_store()).close()
    slatedb.Db.open("memory://test", dict(settings, compactor_options=None), store=memory_store()).close()
