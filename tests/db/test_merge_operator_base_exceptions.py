"""A merge operator that raises ``SystemExit`` or ``KeyboardInterrupt`` itself (``sys.exit()`` in
a helper, a re-raised interrupt) fails the merge it was called for with ``MergeOperatorError``
naming the key, as any exception it raises does (docs/db.md), and the database goes on. Before:
on the runtime thread (here: the in-process compactor's full merge) the exception ended the
engine's whole trio run, and the database stopped; the next call raised a bare
``ClosedError: the database was aborted`` naming neither the operator nor the key. A Ctrl-C on
the main thread still interrupts a read (``KeyboardInterrupt`` passes there)."""

from __future__ import annotations

import threading

import pytest

import slatedb
from slatedb.merge_operator import fold

SETTINGS = {"compactor_options": {"poll_interval": "50ms", "scheduler_options": {"min_compaction_sources": "2"}}}


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt])
def test_an_operator_raising_a_base_exception_in_a_compaction_leaves_the_db_running(tmp_path, exc) -> None:
    state = {"fail": True, "calls_off_main": 0}
    compacted = threading.Event()

    def op(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
        if threading.current_thread() is not threading.main_thread():
            state["calls_off_main"] += 1
            compacted.set()
            if state["fail"]:
                raise exc("from the user's operator")
        return (existing or b"") + operand

    db = slatedb.Db.open(f"file://{tmp_path}", settings=SETTINGS, merge_operator=op)
    try:
        for i in range(3):
            db.merge(b"a", b"%d" % i)
            db.flush(wal=False)  # an L0 SST each: the compactor merges them (off the main thread)
        assert compacted.wait(60)
        db.flush(wal=False)  # the engine still runs
        db.put(b"b", b"1", durable=True)
        assert db.status().close_reason is None
        with pytest.raises(slatedb.MergeOperatorError, match="b'a'"):
            _fold_off_main(op)
        state["fail"] = False
        assert db.get(b"a") == b"012"
    finally:
        db.close()


def _fold_off_main(op) -> None:
    """``fold`` on a thread that is not the main one (where the runtime thread calls it)."""
    box: list = []

    def run() -> None:
        try:
            fold(op, b"a", None, [b"x"])
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    raise box[0]


def test_on_the_main_thread_system_exit_is_typed_and_keyboard_interrupt_passes() -> None:
    def exits(key, existing, operand):
        raise SystemExit(3)

    def interrupted(key, existing, operand):
        raise KeyboardInterrupt

    with pytest.raises(slatedb.MergeOperatorError, match="SystemExit"):
        fold(exits, b"k", None, [b"x"])
    with pytest.raises(KeyboardInterrupt):
        fold(interrupted, b"k", None, [b"x"])
