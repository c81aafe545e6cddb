"""The writer's state (issue 23 item 7, slatedb/db/state.py): one object owns memtables, WAL
buffer and cuts, counters and seqs; its paired assertions hold on every legal sequence of
operations and fire on each broken invariant."""

from __future__ import annotations

import random

import pytest

from slatedb.db.state import WriterState
from slatedb.lsm.view import EMPTY_VIEW
from slatedb.row import Row, RowKind

V = RowKind.VALUE


def _put(w: WriterState, i: int) -> int:
    return w.append(b"k%04d" % i, V, b"v%d" % i, None, 0)


def test_a_random_run_keeps_every_invariant() -> None:
    rng = random.Random(7)
    w = WriterState()
    written: list[int] = []
    for step in range(2000):
        op = rng.random()
        if op < 0.6:
            written.append(_put(w, step))
        elif op < 0.7:
            n = rng.randint(1, 5)
            rows = [Row(b"b%04d" % step, w.last_seq + 1 + j, V, b"x", None, 0) for j in range(n)]
            w.append_rows(rows)
            written.extend(r.seq for r in rows)
        elif op < 0.8 and not w.memtable.is_empty:
            w.cut()
        elif op < 0.95:
            for rows, entry in w.take_wal():
                if rows:
                    w.mark_durable(rows[-1][1])
                if entry is not None:
                    entry.last_wal_id = step
        elif w.imms and w.imms[-1].last_wal_id is not None:
            w.flushed(w.imms[-1])
            w.publish(EMPTY_VIEW)  # as the manifest follower does with the new view
        assert w.durable_seq <= w.taken_seq <= w.last_seq
    assert written == list(range(1, len(written) + 1))  # numbered without gaps
    assert w.read_state.mems[0] is w.memtable and len(w.read_state.mems) == 1 + len(w.imms)


def test_a_cut_holds_exactly_the_wal_rows_up_to_it() -> None:
    w = WriterState()
    for i in range(3):
        _put(w, i)
    entry = w.cut()
    assert w.wal_rows == [] and entry.mem.last_seq == 3
    _put(w, 3)
    cuts = w.take_wal()
    assert [(len(rows), e) for rows, e in cuts] == [(3, entry), (1, None)]
    assert w.taken_seq == w.last_seq == 4


def test_a_cut_right_after_a_hand_over_holds_no_rows() -> None:
    w = WriterState()
    _put(w, 0)
    assert len(w.take_wal()) == 1
    entry = w.cut()  # the memtable's rows were all handed over already
    assert w.take_wal() == [([], entry)]


def test_a_memtable_row_missing_from_the_wal_buffer_fails_the_cut() -> None:
    w = WriterState()
    _put(w, 0)
    w.memtable.put(Row(b"sneak", 2, V, b"x", None, 0))  # in the memtable, not in the WAL buffer
    w.last_seq = 2
    with pytest.raises(AssertionError, match="cut"):
        w.cut()


def test_a_gap_in_the_wal_rows_fails_the_hand_over() -> None:
    w = WriterState()
    _put(w, 0)
    _put(w, 1)
    w.wal_rows.pop(0)  # row 1 lost between the buffer and the flusher
    with pytest.raises(AssertionError, match="not consecutive"):
        w.take_wal()


def test_a_batch_with_a_seq_gap_is_refused() -> None:
    w = WriterState()
    with pytest.raises(AssertionError, match="seq gap"):
        w.append_rows([Row(b"a", 2, V, b"x", None, 0)])


def test_durable_never_passes_what_was_handed_over() -> None:
    w = WriterState()
    _put(w, 0)
    _put(w, 1)
    with pytest.raises(AssertionError, match="durable"):
        w.mark_durable(1)  # not handed to the flusher yet
    w.take_wal()
    w.mark_durable(2)
    with pytest.raises(AssertionError, match="durable"):
        w.mark_durable(1)  # backwards
    with pytest.raises(AssertionError, match="durable"):
        w.mark_durable(3)  # beyond last_seq


def test_l0_flushes_go_oldest_first_and_release_their_bytes() -> None:
    w = WriterState()
    _put(w, 0)
    old = w.cut()
    _put(w, 1)
    new = w.cut()
    for _rows, entry in w.take_wal():
        entry.last_wal_id = 1
    with pytest.raises(AssertionError, match="oldest first"):
        w.flushed(new)
    w.flushed(old)
    w.flushed(new)
    assert w.unflushed_bytes == 0 and w.publish(EMPTY_VIEW).mems == (w.memtable,)


def test_replayed_rows_are_frozen_and_durable() -> None:
    w = WriterState()
    rows = [Row(b"k%d" % i, i, V, b"v", None, 0) for i in (5, 6)]
    w.replayed(rows, 6, last_wal_id=9)
    assert w.last_seq == w.taken_seq == w.durable_seq == 6
    assert len(w.imms) == 1 and w.imms[0].last_wal_id == 9 and w.memtable.is_empty
    assert _put(w, 7) == 7
