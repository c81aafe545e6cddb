"""A database, reader or WAL reader used in a child made by ``os.fork`` (``multiprocessing``'s
default start method on Linux, a pre-forking server that opened the database before forking).

Found by trying it: in the child a put returned a handle and the row was readable there, but the
runtime thread that flushes is the parent's and does not exist in the child, so the write was
never flushed (lost without a word), and a durable put or a flush waited for good. Now every
call in the child raises ``ClosedError`` saying the object belongs to the parent, closing there
does nothing, and the parent goes on as if nothing happened."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

import pytest

import slatedb
from slatedb.errors import ClosedError
from slatedb.wal_reader import WalReader

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")


def _in_child(calls) -> dict[str, str]:
    """Run ``calls`` (name -> function) in a forked child; what each returned or raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's cleanup
        signal.alarm(60)  # a call that waits for good (it used to) kills the child: the test fails
        os.close(r)
        out = {}
        for name, call in calls.items():
            try:
                out[name] = f"ok {call()!r}"
            except Exception as e:  # noqa: BLE001 - reported to the parent
                out[name] = f"{type(e).__name__}: {e}"
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


def test_every_call_in_a_forked_child_raises_and_the_parent_goes_on(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    db = slatedb.Db.open(url)
    db.put(b"a", b"1", durable=True)
    reader = slatedb.DbReader.open(url)
    wal = WalReader.open(url)
    snap = db.snapshot()
    try:
        got = _in_child({
            "get": lambda: db.get(b"a"),
            "put": lambda: db.put(b"b", b"2"),
            "durable put": lambda: db.put(b"c", b"3", durable=True),
            "delete": lambda: db.delete(b"a"),
            "scan": lambda: list(db.scan()),
            "snapshot": lambda: db.snapshot(),
            "old snapshot get": lambda: snap.get(b"a"),
            "flush": lambda: db.flush(),
            "reader get": lambda: reader.get(b"a"),
            "wal ids": lambda: wal.wal_ids(),
            "close": lambda: db.close(),
            "reader close": lambda: reader.close(),
            "wal close": lambda: wal.close(),
        })
        pid = os.getpid()
        for name, outcome in got.items():
            if name.endswith("close"):
                assert outcome == "ok None", (name, outcome)
                continue
            assert outcome.startswith("ClosedError: this "), (name, outcome)
            assert f"was opened by process {pid} and cannot be used in the forked process" in outcome, (name, outcome)
        assert "this WAL reader" in got["wal ids"] and "this database" in got["put"]
        # The parent: untouched, its engine still running (the child's close did nothing).
        assert db.get(b"a") == b"1" and db.get(b"b") is None and db.get(b"c") is None
        db.put(b"p", b"parent", durable=True)
        assert reader.get(b"a") == b"1" and wal.wal_ids()
    finally:
        snap.close()
        wal.close()
        reader.close()
        db.close()
    with slatedb.Db.open(url) as again:
        assert again.get(b"p") == b"parent" and again.get(b"b") is None


def _pool_put(key: bytes) -> str:
    try:
        _POOL_DB.put(key, b"from a worker")
        return "written"
    except ClosedError as e:
        return str(e)


_POOL_DB = None


def test_a_multiprocessing_fork_worker_gets_a_closed_error_not_a_lost_write(tmp_path) -> None:
    """The shape a service takes: a database opened at module level, a ``fork`` pool after."""
    global _POOL_DB
    url = f"file://{tmp_path}/db"
    _POOL_DB = slatedb.Db.open(url)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            answers = pool.map(_pool_put, [b"w1", b"w2", b"w3"])
        assert all("cannot be used in the forked process" in a for a in answers), answers
        assert _POOL_DB.get(b"w1") is None
        _POOL_DB.put(b"after", b"pool", durable=True)
    finally:
        _POOL_DB.close()
        _POOL_DB = None
