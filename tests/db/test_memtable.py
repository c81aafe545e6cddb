"""Memtable: ordering, versions, bounds, freezing, iteration under concurrent puts."""

from __future__ import annotations

import pytest

from slatedb.memtable import ROW_OVERHEAD_BYTES, FrozenMemtableError, Memtable
from slatedb.row import Row, RowKind

V, T = RowKind.VALUE, RowKind.TOMBSTONE


def r(key: bytes, seq: int, value: bytes = b"v", kind: RowKind = V, expire: int | None = None) -> Row:
    return Row(key, seq, kind, b"" if kind is T else value, expire)


def test_empty():
    m = Memtable()
    assert m.is_empty and len(m) == 0 and m.num_keys == 0
    assert m.first_seq is None and m.last_seq is None
    assert m.first_key is None and m.last_key is None
    assert m.get(b"a") is None
    assert list(m.iter_range()) == []
    assert m.size_bytes == 0


def test_put_get_versions_and_bounds():
    m = Memtable()
    m.put(r(b"b", 1, b"b1"))
    m.put(r(b"a", 2, b"a2"))
    m.put(r(b"b", 3, b"b3"))
    m.put(r(b"b", 4, kind=T))
    assert len(m) == 4 and m.num_keys == 2 and not m.is_empty
    assert (m.first_seq, m.last_seq) == (1, 4)
    assert (m.first_key, m.last_key) == (b"a", b"b")
    assert m.get(b"b").kind is T
    assert m.get(b"b", max_seq=3).value == b"b3"
    assert m.get(b"b", max_seq=2).value == b"b1"
    assert m.get(b"b", max_seq=0) is None
    assert m.get(b"a", max_seq=1) is None
    assert m.get(b"c") is None
    assert [x.seq for x in m.versions(b"b")] == [4, 3, 1]
    assert m.size_bytes == (1 + 2) * 3 + 1 + 4 * ROW_OVERHEAD_BYTES


def test_out_of_order_seqs_and_same_seq_replaces():
    m = Memtable()
    m.put(r(b"k", 5, b"5"))
    m.put(r(b"k", 2, b"2"))  # replayed older version
    m.put(r(b"k", 3, b"3"))
    assert [x.seq for x in m.versions(b"k")] == [5, 3, 2]
    assert (m.first_seq, m.last_seq) == (2, 5)
    m.put(r(b"k", 3, b"three"))
    assert len(m) == 3
    assert m.get(b"k", max_seq=4).value == b"three"
    assert m.size_bytes == 3 * (1 + ROW_OVERHEAD_BYTES) + 1 + 1 + 5


def test_freeze():
    m = Memtable()
    m.put(r(b"a", 1))
    m.freeze()
    m.freeze()
    assert m.is_frozen
    with pytest.raises(FrozenMemtableError, match="frozen"):
        m.put(r(b"b", 2))
    with pytest.raises(AssertionError):
        m.put(r(b"b", 2))
    assert m.get(b"a").seq == 1 and len(m) == 1


def _keys(rows):
    return [(x.key, x.seq) for x in rows]


@pytest.fixture
def table():
    m = Memtable()
    seq = 0
    for k in [b"a", b"b", b"c", b"d", b"e"]:
        for _ in range(2):
            seq += 1
            m.put(r(k, seq, k + b"%d" % seq))
    return m


def test_iter_range_forward_and_bounds(table):
    assert _keys(table.iter_range()) == [
        (b"a", 2), (b"a", 1), (b"b", 4), (b"b", 3), (b"c", 6), (b"c", 5), (b"d", 8), (b"d", 7), (b"e", 10), (b"e", 9)
    ]
    ks = lambda it: [x.key for x in it if True]  # noqa: E731
    assert sorted(set(ks(table.iter_range(b"b", b"d")))) == [b"b", b"c"]
    assert sorted(set(ks(table.iter_range(b"b", b"d", end_inclusive=True)))) == [b"b", b"c", b"d"]
    assert sorted(set(ks(table.iter_range(b"b", b"d", start_inclusive=False)))) == [b"c"]
    assert sorted(set(ks(table.iter_range(b"bb", None)))) == [b"c", b"d", b"e"]
    assert sorted(set(ks(table.iter_range(None, b"c")))) == [b"a", b"b"]
    assert list(table.iter_range(b"x", None)) == []


def test_iter_range_reverse(table):
    assert _keys(table.iter_range(b"b", b"d", end_inclusive=True, reverse=True)) == [
        (b"d", 8), (b"d", 7), (b"c", 6), (b"c", 5), (b"b", 4), (b"b", 3)
    ]
    assert [x.key for x in table.iter_range(reverse=True)][::2] == [b"e", b"d", b"c", b"b", b"a"]


def test_iter_range_max_seq(table):
    assert _keys(table.iter_range(max_seq=5)) == [(b"a", 2), (b"a", 1), (b"b", 4), (b"b", 3), (b"c", 5)]
    assert _keys(table.iter_range(max_seq=0)) == []


@pytest.mark.parametrize("reverse", [False, True])
def test_iteration_with_interleaved_puts_is_a_consistent_view(reverse):
    m = Memtable()
    keys = [b"k%03d" % i for i in range(0, 200, 2)]
    seq = 0
    for k in keys:
        seq += 1
        m.put(r(k, seq))
    it = m.iter_range(reverse=reverse)
    seen = []
    for i, row in enumerate(it):
        seen.append(row.key)
        # New keys both sides of the cursor, and new versions of seen/unseen keys.
        seq += 1
        m.put(r(b"k%03d" % (2 * i + 1), seq))
        seq += 1
        m.put(r(b"k%03d" % ((2 * i + 37) % 200), seq))
        seq += 1
        m.put(r(b"a%05d" % i, seq))
        seq += 1
        m.put(r(b"z%05d" % i, seq))
    assert seen == (keys[::-1] if reverse else keys)
    assert m.num_keys > len(keys)


def test_iterator_created_before_puts_sees_new_keys_only_within_snapshot():
    m = Memtable()
    m.put(r(b"b", 1))
    it = m.iter_range()  # max_seq fixed at 1
    m.put(r(b"c", 2))
    m.put(r(b"a", 3))
    assert _keys(it) == [(b"b", 1)]
    assert _keys(m.iter_range()) == [(b"a", 3), (b"b", 1), (b"c", 2)]


# -- the table against a model, for any order of puts ------------------------------------------
# A key with one version is held as its row, a key with several as a list (slatedb/memtable.py):
# every read must see the same as a plain "key -> {seq: row}" model, whichever form a key is in,
# across out-of-order seqs (WAL replay) and a put of a seq already held (it replaces the row).

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]), st.integers(1, 12), st.binary(max_size=3)),
                min_size=1, max_size=30),
       st.integers(0, 13))
def test_any_order_of_puts_reads_as_the_model(puts, max_seq) -> None:
    m = Memtable()
    model: dict[bytes, dict[int, bytes]] = {}
    for key, seq, value in puts:
        m.put(r(key, seq, value))
        model.setdefault(key, {})[seq] = value
        assert m.get(key).value == model[key][max(model[key])]  # readable at once, either form
    newest_first = {k: sorted(v.items(), reverse=True) for k, v in model.items()}
    for key in (b"a", b"b", b"c", b"d", b"e"):
        assert [(x.seq, x.value) for x in m.versions(key)] == newest_first.get(key, [])
        seen = [(s, v) for s, v in newest_first.get(key, []) if s <= max_seq]
        got = m.get(key, max_seq=max_seq)
        assert (got.seq, got.value) == seen[0] if seen else got is None
    expect = [(k, s, v) for k in sorted(newest_first) for s, v in newest_first[k]]
    assert [(x.key, x.seq, x.value) for x in m.iter_range(max_seq=12)] == expect
    assert [(x.key, x.seq, x.value) for x in m.iter_range(max_seq=max_seq)] == [e for e in expect if e[1] <= max_seq]
    assert len(m) == len(expect) and m.num_keys == len(model)
    assert m.size_bytes == sum(len(k) + len(v) + ROW_OVERHEAD_BYTES for k, _, v in expect)
    assert (m.first_seq, m.last_seq) == (min(e[1] for e in expect), max(e[1] for e in expect))
    m.freeze()
    assert [(x.key, x.seq, x.value) for x in m.sorted_rows()] == expect


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.integers(0, 40), st.integers(1, 3)), st.just("sync")), min_size=1, max_size=40),
       st.booleans())
def test_sorted_rows_whatever_order_keys_arrived_in(steps, ascending) -> None:
    """``sorted_rows`` reads the dict in its own order (the order keys first arrived) only when
    that is key order: any key arriving below one already there, before or after a merge of the
    pending keys (a read between puts merges them), must send it back to the sorted key list."""
    m = Memtable()
    model: dict[bytes, dict[int, bytes]] = {}
    seq = 0
    if ascending:  # the same puts in key order, the merges where they were
        puts = iter(sorted(s for s in steps if s != "sync"))
        steps = [s if s == "sync" else next(puts) for s in steps]
    for step in steps:
        if step == "sync":
            m.last_key  # merges the pending keys
            continue
        k, versions = step
        for _ in range(versions):
            seq += 1
            key = b"k%03d" % k
            m.put(r(key, seq, b"v%d" % seq))
            model.setdefault(key, {})[seq] = b"v%d" % seq
    m.freeze()
    expect = [(k, s, model[k][s]) for k in sorted(model) for s in sorted(model[k], reverse=True)]
    assert [(x.key, x.seq, x.value) for x in m.sorted_rows()] == expect
    assert [(x.key, x.seq, x.value) for x in m.sorted_rows()] == [(x.key, x.seq, x.value) for x in m.iter_range()]
