"""A ``Db``, ``DbReader``, ``WalReader`` or ``aio.Db`` dropped without ``close()`` is closed for
the caller, as a file object or an sqlite3 connection is: once no user object that reaches the
engine is left (the front-end, its snapshots, iterators, transactions), the engine closes on its
own loop -- it flushes, a reader deletes its checkpoint -- and its runtime thread ends.

Found by using it as a service does (a request handler, a test suite, a notebook cell opening a
database and letting it go): each dropped ``Db`` kept its runtime thread and a live writer until
the process exited, and the next open of the same path fenced it, so the rows it held unflushed
were lost. Nothing here times anything: a thread's end is waited for with a generous bound."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import weakref

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.api.dropped import DROPPED
from slatedb.wal_reader import WalReader

from ..anyloop import sleep
from ..reader.helpers import checkpoints
from ..db.helpers import memory_store

#: How long a test waits for a dropped engine's thread to end before calling it leaked.
GENEROUS_S = 60.0


def _engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("slatedb-")}


def _wait_for_threads_to_end(before: set[threading.Thread]) -> set[threading.Thread]:
    """The engine threads started since ``before`` that are still alive after the bound."""
    deadline = time.monotonic() + GENEROUS_S
    while (left := _engine_threads() - before) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def _drop(obj_name: str, scope: dict) -> None:
    """``del`` the caller's variable and collect (a cycle would keep it otherwise)."""
    ref = weakref.ref(scope.pop(obj_name))
    gc.collect()
    assert ref() is None, f"something still holds the {obj_name}: {gc.get_referrers(ref())}"


def test_a_db_dropped_without_close_flushes_and_its_thread_ends(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    before = _engine_threads()
    scope = {"db": slatedb.Db.open(url)}
    for i in range(100):
        scope["db"].put(b"k%03d" % i, b"v%d" % i)  # not durable: only a flush can save them
    _drop("db", scope)
    assert not _wait_for_threads_to_end(before), "the dropped Db's runtime thread is still running"
    with slatedb.Db.open(url) as db:
        assert db.get(b"k000") == b"v0" and db.get(b"k099") == b"v99"
        assert len(list(db.scan())) == 100


def test_a_second_open_right_after_a_drop_waits_for_its_close_and_is_not_fenced() -> None:
    """The reopen comes while the dropped writer is still closing: it waits for that close
    (else it would fence the writer mid-flush and the rows not yet in a WAL object would be
    lost: without the wait, 58 of 200 were, and about a third of these rounds')."""
    url = f"memory://drop-reopen-{uuid.uuid4()}"
    for round_ in range(30):
        db = slatedb.Db.open(url)
        db.put(b"round%02d" % round_, b"x")
        del db  # no gc.collect(), no wait: the next open follows at once
    with slatedb.Db.open(url) as db:
        assert [k for k, _ in db.scan()] == [b"round%02d" % r for r in range(30)]
        assert db.status().close_reason is None


def test_an_iterator_snapshot_or_transaction_keeps_the_engine_open(tmp_path) -> None:
    """The last session's reason not to close on drop: a scan taken from a temporary ``Db``
    must go on. The engine closes only when the iterator goes too."""
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, settings={"l0_sst_size_bytes": 4096}) as db:
        for i in range(2000):
            db.put(b"k%04d" % i, b"." * 50)
        db.flush(wal=False)  # the rows are in L0 SSTs: the scan crosses to the runtime thread
    before = _engine_threads()
    it = slatedb.Db.open(url).scan()
    snap_holder = slatedb.Db.open(f"file://{tmp_path}/other").snapshot()
    txn = slatedb.Db.open(f"file://{tmp_path}/third").begin()
    gc.collect()
    assert len(_engine_threads() - before) == 3
    assert sum(1 for _ in it) == 2000
    assert snap_holder.get(b"nothing") is None
    txn.put(b"t", b"1")
    txn.commit()
    del it, snap_holder, txn
    gc.collect()
    assert not _wait_for_threads_to_end(before)
    with slatedb.Db.open(f"file://{tmp_path}/third") as db:
        assert db.get(b"t") == b"1"


def test_a_dropped_reader_deletes_its_checkpoint_and_its_thread_ends() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", store=store) as db:
        db.put(b"a", b"1")
    before = _engine_threads()
    scope = {"r": slatedb.DbReader.open("memory://test", store=store)}
    assert scope["r"].get(b"a") == b"1"
    assert len(checkpoints(store)) == 1
    _drop("r", scope)
    assert not _wait_for_threads_to_end(before)
    assert list(checkpoints(store)) == []


def test_a_dropped_wal_reader_ends_its_thread(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1")
    before = _engine_threads()
    scope = {"w": WalReader.open(url)}
    rows = scope["w"].changes()  # the generator holds the WAL reader's thread until it is done
    assert [r.key for r in rows] == [b"a"]
    del rows
    _drop("w", scope)
    assert not _wait_for_threads_to_end(before)


def test_two_hundred_open_and_drop_cycles_leave_no_thread_and_lose_no_row() -> None:
    url = f"memory://drop-cycles-{uuid.uuid4()}"
    before = _engine_threads()
    for i in range(200):
        db = slatedb.Db.open(url)
        db.put(b"k%03d" % i, b"v")
        del db
    assert not _wait_for_threads_to_end(before)
    with slatedb.Db.open(url) as db:
        assert len(list(db.scan())) == 200


@pytest.mark.anyloop
async def test_an_aio_db_dropped_without_close_is_closed(tmp_path, async_lib) -> None:
    """Under asyncio the engine runs on a runtime thread; under trio (an awaited open) in a
    system task of the caller's loop. Either way a dropped ``aio.Db`` is closed; the reopen in
    the same step as the drop waits for that close."""
    url = f"file://{tmp_path}/db"
    before = _engine_threads()
    db = await aio.Db.open(url)
    core, host = db.core, weakref.ref(db._host)
    await db.put(b"a", b"1")
    del db
    gc.collect()
    # In the step that opened it: under asyncio the future that woke this task held the host.
    assert host() is None, "the host outlived the aio.Db dropped in the step that opened it"
    with trio.move_on_after(GENEROUS_S) if async_lib == "trio" else _nothing():
        while not core.closed:
            await sleep(0.02)
    assert core.closed and core.error is None, "the dropped aio.Db was not closed cleanly"
    del core
    db = await aio.Db.open(url)
    await db.put(b"b", b"2")
    del db  # and reopened in the same step
    db = await aio.Db.open(url)
    assert await db.get(b"a") == b"1" and await db.get(b"b") == b"2"
    assert db.status().close_reason is None
    await db.close()
    if async_lib == "asyncio":
        assert not await asyncio.to_thread(_wait_for_threads_to_end, before)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _in_child(call) -> str:
    """``call()`` in a child made by ``os.fork``: what it returned, or raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's cleanup
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's handler: end the child
        signal.alarm(60)  # an open that waits for good kills the child: the test fails
        os.close(r)
        try:
            out = f"ok {call()!r}"
        except Exception as e:  # noqa: BLE001 - reported to the parent
            out = f"{type(e).__name__}: {e}"
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child did not finish (an open waited for good?)"
    return json.loads(data)


def _read_in_child(url: str) -> bytes | None:
    with slatedb.DbReader.open(url) as reader:
        return reader.get(b"a")


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")


@needs_fork
def test_a_db_dropped_in_a_forked_child_is_left_to_the_parent(tmp_path) -> None:
    """In a child made by ``os.fork`` the engine is the parent's: dropping the child's copy of the
    ``Db`` closes nothing and leaves no close pending there (one that would hold up every later
    open of the path in the child for good)."""
    url = f"file://{tmp_path}/db"
    holder = {"db": slatedb.Db.open(url)}
    holder["db"].put(b"a", b"1", durable=True)

    def drop_then_read() -> bytes | None:
        holder.clear()
        gc.collect()
        return _read_in_child(url)

    assert _in_child(drop_then_read) == "ok b'1'"
    db = holder["db"]
    db.put(b"b", b"2")  # the parent's database goes on
    db.close()
    with slatedb.Db.open(url) as db:
        assert db.get(b"b") == b"2"


@needs_fork
def test_a_close_pending_in_the_parent_at_a_fork_is_not_waited_for_in_the_child(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1")
    pending = DROPPED.add(url, 0)  # a dropped engine of the parent closing as it forks
    try:
        assert _in_child(lambda: _read_in_child(url)) == "ok b'1'"
    finally:
        DROPPED.finished(url, pending)


def test_a_db_dropped_just_before_the_interpreter_exits_is_flushed(tmp_path) -> None:
    """``del db`` as a script's last line: the close it asks for runs on a daemon thread, which
    the exit would cut short (the rows were lost); the exit waits for it (a bounded wait)."""
    url = f"file://{tmp_path}/db"
    script = (
        "import slatedb\n"
        f"db = slatedb.Db.open({url!r})\n"
        "for i in range(20000):\n"
        "    db.put(b'k%05d' % i, b'.' * 100)\n"
        "del db\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=600)
    with slatedb.Db.open(url) as db:
        assert sum(1 for _ in db.scan()) == 20000


def test_a_dropped_db_or_reader_gives_a_resource_warning_and_a_closed_one_none(tmp_path) -> None:
    """As Python's files, sockets and sqlite3 connections do (shown under ``python -X dev``): a
    ``Db`` or ``DbReader`` dropped open warns, naming what and where, after its close was asked
    for; one closed, or used in ``with``, does not. Even with the warning turned into an error
    the close still happens (nothing is raised into the collector)."""
    import warnings

    url = f"file://{tmp_path}/db"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with slatedb.Db.open(url) as db:
            db.put(b"k", b"v")
        closed = slatedb.Db.open(url)
        closed.close()
        del db, closed
        gc.collect()
        assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]
        scope = {"db": slatedb.Db.open(url)}
        _drop("db", scope)
        scope = {"reader": slatedb.DbReader.open(url)}
        _drop("reader", scope)
    messages = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(messages) == 2 and "unclosed slatedb database at " in messages[0], messages
    assert "unclosed slatedb reader at " in messages[1] and url.rstrip("/") in messages[1], messages
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        before = _engine_threads()
        scope = {"db": slatedb.Db.open(url)}
        scope["db"].put(b"k2", b"v2")
        _drop("db", scope)
        assert not _wait_for_threads_to_end(before)
    with slatedb.Db.open(url) as db:
        assert db.get(b"k2") == b"v2"
