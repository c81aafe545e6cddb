"""A call from a thread that merely has the ident of the database's runtime thread, once that
thread has ended, is not a reentrant call. Found by closing an ``aio.Db`` inside its ``async
with`` block under asyncio (``await db.close()`` in a ``finally``): the block's exit closed it
again on an executor worker thread, and now and then that thread got the dead runtime thread's
ident (Linux reuses them at once) and the exit raised ``ReentrantCallError`` ("a merge operator
calling the database it merges for") from ``close()``, which is idempotent. The check compared
idents; it now compares the thread itself. Here the ident is reused on purpose."""

from __future__ import annotations

import threading

import pytest

import slatedb


def _on_a_thread_with_the_ident_of(ident: int, fn) -> dict:
    """``fn()`` on a new thread that has ``ident`` (threads are started until one has it)."""
    out: dict = {}

    def run() -> None:
        if threading.get_ident() == ident:
            try:
                out["result"] = fn()
            except Exception as e:  # handed to the test
                out["error"] = e

    for _ in range(200):
        t = threading.Thread(target=run)
        t.start()
        t.join()
        if out:
            return out
    pytest.skip("no new thread got the ended runtime thread's ident")


@pytest.mark.parametrize("what", ["db", "reader", "wal_reader"])
def test_close_and_abort_after_the_runtime_thread_ended_from_a_thread_with_its_ident(what) -> None:
    url = f"memory://reused-ident-{what}"
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v", durable=True)
    front = {"db": lambda: slatedb.Db.open(url), "reader": lambda: slatedb.DbReader.open(url),
             "wal_reader": lambda: slatedb.WalReader.open(url)}[what]()
    runtime_thread = front._portal._thread
    ident = runtime_thread.ident
    front.close()
    assert not runtime_thread.is_alive()
    out = _on_a_thread_with_the_ident_of(ident, front.close)
    assert "error" not in out, out
    if hasattr(front, "abort"):
        out = _on_a_thread_with_the_ident_of(ident, front.abort)
        assert "error" not in out, out
    read = (lambda: front.wal_ids()) if what == "wal_reader" else (lambda: front.get(b"k"))
    out = _on_a_thread_with_the_ident_of(ident, read)
    assert isinstance(out.get("error"), slatedb.ClosedError), out  # closed, not "reentrant"
