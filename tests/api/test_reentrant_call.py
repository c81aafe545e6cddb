"""A merge operator that calls the database it merges for (``ReentrantCallError``).

Found by writing an operator that reads another key of its own database: a read whose operands
are in an SST not in the block cache fetches the blocks on the runtime thread and applies the
operator there; the operator's ``db.get`` then waited for that same thread, so the read, every
later call and ``close()`` hung for good (the same from an in-process compaction, whose worker
runs the operator on the runtime thread). Now a synchronous call from a database's own runtime
thread raises ``ReentrantCallError``: the read raises ``MergeOperatorError`` naming the key and
the database goes on (docs/db.md "Merge operators").

Each call that used to hang runs on a helper thread joined with a generous bound (a hang is the
failure; no figure is measured).
"""

from __future__ import annotations

import threading
import time

import pytest

import slatedb
from slatedb.errors import MergeOperatorError, ReentrantCallError

HANG_S = 60


def _in_thread(fn):
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_S)
    assert not t.is_alive(), "the call hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


class CallsBack:
    """``(existing or b"") + operand``, after calling ``self.db`` (once set) as ``self.call`` says."""

    def __init__(self, call: str) -> None:
        self.db = None
        self.call = call
        self.threads: list[str] = []

    def merge(self, key, existing, operand):
        if self.db is not None:
            self.threads.append(threading.current_thread().name)
            getattr(self.db, self.call)(*((b"other",) if self.call == "get" else ()))
        return (existing or b"") + operand


@pytest.mark.parametrize("call", ["get", "flush", "close"])
def test_a_read_whose_operator_calls_its_database_raises_and_the_database_goes_on(tmp_path, call) -> None:
    op = CallsBack(call)
    settings = {"compactor_options": None, "block_cache_size_bytes": 0}
    db = slatedb.Db.open(f"file://{tmp_path}", settings, merge_operator=op)
    db.put(b"other", b"o")
    for i in range(3):
        db.merge(b"k", b"%d" % i)
        db.flush(wal=False)  # operands in L0 SSTs: the read fetches blocks on the runtime thread
    op.db = db
    with pytest.raises(MergeOperatorError, match="key b'k'.*ReentrantCallError.*own runtime thread"):
        _in_thread(lambda: db.get(b"k"))
    assert "slatedb-runtime" in op.threads
    op.db = None
    assert _in_thread(lambda: db.get(b"k")) == b"012"
    db.put(b"after", b"x", durable=True)
    _in_thread(db.close)
    with slatedb.Db.open(f"file://{tmp_path}", settings, merge_operator=op) as again:
        assert again.get(b"after") == b"x" and again.get(b"k") == b"012"


def test_a_compaction_whose_operator_calls_its_database_does_not_hang_the_writer(tmp_path) -> None:
    op = CallsBack("get")
    settings = {"block_cache_size_bytes": 0, "manifest_poll_interval": "50ms",
                "compactor_options": {"poll_interval": "50ms", "scheduler_options": {"min_compaction_sources": "2"},
                                      "worker": {"compactions_poll_interval": "50ms"}}}
    db = slatedb.Db.open(f"file://{tmp_path}", settings, merge_operator=op)
    op.db = db
    db.put(b"other", b"o")
    for i in range(3):
        db.merge(b"k", b"%d" % i)
        db.merge(b"k2", b"%d" % i)
        db.flush(wal=False)
    while "slatedb-runtime" not in op.threads:  # a compaction job ran the operator on the runtime thread
        time.sleep(0.05)
    op.db = None
    assert _in_thread(lambda: db.get(b"k2")) == b"012"
    _in_thread(db.close)


def test_the_error_names_the_object_and_is_a_slatedb_error() -> None:
    e = ReentrantCallError("reader")
    assert isinstance(e, slatedb.SlateDBError) and slatedb.ReentrantCallError is ReentrantCallError
    assert "a call on this reader from its own runtime thread" in str(e)
