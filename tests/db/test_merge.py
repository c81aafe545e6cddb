"""Read-path merge and visibility, unit tests plus a property test against a dict model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.memtable import Memtable
from slatedb.merge import merge_rows, resolve_row, visible
from slatedb.row import Row, RowKind

V, T, M = RowKind.VALUE, RowKind.TOMBSTONE, RowKind.MERGE_OPERAND
NOW = 1000


def r(key, seq, value=b"v", kind=V, expire=None):
    return Row(key, seq, kind, b"" if kind is T else value, expire)


def test_merge_rows_forward_and_reverse():
    s1 = [r(b"a", 5), r(b"c", 7), r(b"c", 2)]
    s2 = [r(b"a", 6), r(b"b", 1), r(b"c", 4)]
    assert [(x.key, x.seq) for x in merge_rows([s1, s2])] == [
        (b"a", 6), (b"a", 5), (b"b", 1), (b"c", 7), (b"c", 4), (b"c", 2)
    ]
    rs1 = [r(b"c", 7), r(b"c", 2), r(b"a", 5)]
    rs2 = [r(b"c", 4), r(b"b", 1), r(b"a", 6)]
    assert [(x.key, x.seq) for x in merge_rows([rs1, rs2], reverse=True)] == [
        (b"c", 7), (b"c", 4), (b"c", 2), (b"b", 1), (b"a", 6), (b"a", 5)
    ]
    assert list(merge_rows([])) == []
    assert list(merge_rows([s1])) == s1


def test_merge_is_stable_on_equal_key_and_seq():
    first, second = r(b"a", 1, b"first"), r(b"a", 1, b"second")
    for rev in (False, True):
        assert [x.value for x in merge_rows([[first], [second]], reverse=rev)] == [b"first", b"second"]


def test_visible_rules():
    rows = [
        r(b"a", 5, b"a5"), r(b"a", 3, b"a3"),
        r(b"b", 6, kind=T), r(b"b", 2, b"b2"),
        r(b"c", 4, b"c4", expire=NOW), r(b"c", 1, b"c1"),
        r(b"d", 9, b"d9", expire=NOW + 1),
    ]
    assert list(visible(rows, now_ms=NOW)) == [(b"a", b"a5"), (b"d", b"d9")]
    assert list(visible(rows, now_ms=NOW, snapshot_seq=3)) == [(b"a", b"a3"), (b"b", b"b2"), (b"c", b"c1")]
    assert list(visible(rows, now_ms=NOW + 1, snapshot_seq=100)) == [(b"a", b"a5")]
    assert list(visible(rows, now_ms=NOW, snapshot_seq=0)) == []


def test_visible_merge_operand_without_an_operator_is_a_typed_error_naming_the_key():
    """MERGE-8: an operand read without a merge operator raises MergeOperatorMissingError naming the key."""
    from slatedb.errors import MergeOperatorMissingError
    with pytest.raises(MergeOperatorMissingError, match="b'a'") as e:
        list(visible([r(b"a", 1, b"+1", kind=M)], now_ms=NOW))
    assert e.value.key == b"a"


def test_resolve_row_of_nothing_is_nothing():
    assert resolve_row(None, NOW) is None


# ---------------------------------------------------------------------------------------------
# Property test: several memtables (sources) + merge + visibility vs a dict-of-lists model
# ---------------------------------------------------------------------------------------------

KEYS = [b"k%d" % i for i in range(12)]

op = st.tuples(
    st.integers(0, 3),  # source index (0 = newest)
    st.sampled_from(KEYS),
    st.sampled_from(["put", "put", "delete"]),
    st.one_of(st.none(), st.integers(0, 40)),  # expire_ts_ms
)


def _build(ops):
    """Rows with increasing seqs; a row with a higher seq always goes to a newer-or-equal source,
    as in the engine (the live memtable is newest, frozen ones older)."""
    # Engine invariant: sources are ordered by seq ranges, so sort ops by source descending
    # (oldest source gets the lowest seqs).
    ops = sorted(ops, key=lambda o: -o[0])
    tables = [Memtable() for _ in range(4)]
    model: dict[bytes, list[Row]] = {}
    for seq, (src, key, what, expire) in enumerate(ops, start=1):
        row = r(key, seq, b"%s@%d" % (key, seq), T if what == "delete" else V, None if what == "delete" else expire)
        tables[src].put(row)
        model.setdefault(key, []).append(row)
    return tables, model, len(ops)


def _model_get(model, key, snap, now):
    rows = [x for x in model.get(key, []) if snap is None or x.seq <= snap]
    if not rows:
        return None
    top = max(rows, key=lambda x: x.seq)
    if top.kind is T or (top.expire_ts_ms is not None and top.expire_ts_ms <= now):
        return None
    return top.value


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(op, max_size=60),
    snap_frac=st.one_of(st.none(), st.floats(0, 1)),
    now=st.integers(0, 45),
    lo=st.sampled_from([None] + KEYS),
    hi=st.sampled_from([None] + KEYS),
    lo_inc=st.booleans(),
    hi_inc=st.booleans(),
)
def test_scans_and_lookups_agree_with_model(ops, snap_frac, now, lo, hi, lo_inc, hi_inc):
    tables, model, n = _build(ops)
    snap = None if snap_frac is None else int(snap_frac * n)
    for t in tables[1:]:
        t.freeze()

    def in_range(k):
        if lo is not None and (k < lo or (k == lo and not lo_inc)):
            return False
        if hi is not None and (k > hi or (k == hi and not hi_inc)):
            return False
        return True

    expected = [(k, v) for k in sorted(model) if in_range(k) and (v := _model_get(model, k, snap, now)) is not None]
    for reverse in (False, True):
        srcs = [
            t.iter_range(lo, hi, start_inclusive=lo_inc, end_inclusive=hi_inc, reverse=reverse, max_seq=snap)
            for t in tables
        ]
        got = list(visible(merge_rows(srcs, reverse=reverse), snapshot_seq=snap, now_ms=now))
        assert got == (expected[::-1] if reverse else expected)
    for k in KEYS:  # the read path's rule (LsmReadPath.get_fast): the first table with a version decides
        got = next((resolve_row(row, now) for t in tables if (row := t.get(k, max_seq=snap)) is not None), None)
        assert got == _model_get(model, k, snap, now), k


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(KEYS), st.integers(1, 30)), max_size=50), snap=st.integers(0, 30))
def test_single_memtable_out_of_order_seqs(ops, snap):
    """Arbitrary seq order (WAL replay): get/iter_range still return the right versions."""
    m = Memtable()
    model: dict[tuple[bytes, int], Row] = {}
    for key, seq in ops:
        row = r(key, seq, b"%d" % seq)
        m.put(row)
        model[(key, seq)] = row
    assert len(m) == len(model)
    for k in KEYS:
        cands = [row for (kk, s), row in model.items() if kk == k and s <= snap]
        want = max(cands, key=lambda x: x.seq) if cands else None
        assert m.get(k, max_seq=snap) == want
    want_order = sorted(((k, -s) for (k, s) in model if s <= snap))
    assert [(x.key, -x.seq) for x in m.iter_range(max_seq=snap)] == want_order
    if model:
        assert m.first_seq == min(s for _, s in model) and m.last_seq == max(s for _, s in model)
