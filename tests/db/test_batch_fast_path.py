"""The batched write path (issue 23 item 5): ``Memtable.put_rows`` leaves a table exactly as
``put`` of each row would, and ``Db.write(batch)`` leaves the memtable and the WAL buffer as the
same operations written one call each; a bad operation still raises at the batch's call."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slatedb
from slatedb.batch import WriteBatch
from slatedb.errors import InvalidArgumentError
from slatedb.memtable import Memtable
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.row import Row, RowKind, as_row
from slatedb.runtime.production import ProductionRuntime

_KEYS = st.sampled_from([b"a", b"b", b"c", b"dd"])


def _versions(m: Memtable) -> dict:
    """Each key's rows, newest first, and whether the table holds them as a list (a key with one
    version is held as its row alone)."""
    return {k: (type(v) is list, m.versions(k)) for k, v in m._versions.items()}


def _state(m: Memtable) -> tuple:
    m.freeze()  # merges the pending keys, so the key order is compared too
    return (_versions(m), list(m._keys), m._num_rows, m.size_bytes,
            m.first_seq, m.last_seq, m._first_ts_ms)


@st.composite
def _batches(draw):
    """Rows already in the table, then batches: mostly consecutive seqs above them (the engine's),
    sometimes seqs out of order, repeated or below the table's (the row-by-row fallback)."""
    seq = draw(st.integers(0, 5))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 6))
        if draw(st.booleans()):
            seqs = list(range(seq + 1, seq + 1 + n))
        else:
            seqs = draw(st.lists(st.integers(1, seq + n + 2), min_size=n, max_size=n))
        seq = max(seq, *seqs)
        out.append([Row(draw(_KEYS), s, RowKind(draw(st.integers(0, 2))), draw(st.binary(max_size=3)), None, s * 10)
                    for s in seqs])
    return out


@settings(max_examples=150, deadline=None)
@given(_batches())
def test_put_rows_equals_put_of_each_row(batches):
    one, many = Memtable(), Memtable()
    for rows in batches:
        before = many.size_bytes
        added = many.put_rows(rows)
        assert added == many.size_bytes - before
        for row in rows:
            one.put(row)
        assert _state_live(one) == _state_live(many)
    assert _state(one) == _state(many)


def _state_live(m: Memtable) -> tuple:
    return (_versions(m), list(m._pending), m._num_rows, m.size_bytes,
            m.first_seq, m.last_seq)


def _open(settings: dict | None = None, merge_operator=None) -> slatedb.Db:
    store = MemoryStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://test")
    # No WAL flush and no memtable cut during the test: every row stays in the WAL buffer.
    return slatedb.Db.open("memory://test", settings={"compactor_options": None, "flush_interval": "1h",
                                                      **(settings or {})},
                           store=store, merge_operator=merge_operator)


def _rows(db: slatedb.Db) -> tuple[list, list]:
    """The live memtable's rows and the WAL buffer, times made relative to each row's write."""
    w = db._core._w

    def norm(r: Row) -> tuple:
        return (r.key, r.seq, r.kind, r.value, None if r.expire_ts_ms is None else r.expire_ts_ms - r.create_ts_ms)

    mem = [norm(r) for key in w.memtable._versions for r in reversed(w.memtable.versions(key))]
    return sorted(mem, key=lambda t: (t[0], t[1])), [norm(as_row(r)) for r in w.wal_rows]


_OPS = st.lists(st.tuples(st.sampled_from(["put", "put_ttl", "delete", "merge"]), _KEYS, st.binary(max_size=4)),
                min_size=1, max_size=12)


@pytest.mark.parametrize("default_ttl", [None, 60_000])
@settings(max_examples=25, deadline=None)
@given(batches=st.lists(_OPS, min_size=1, max_size=4))
def test_a_batch_writes_what_its_operations_one_call_each_write(default_ttl, batches):
    extra = {} if default_ttl is None else {"default_ttl_millis": default_ttl}
    concat = lambda key, existing, operand: (existing or b"") + operand  # noqa: E731
    with _open(extra, concat) as batched, _open(extra, concat) as single:
        for ops in batches:
            b = WriteBatch()
            for op, key, value in ops:
                if op == "put":
                    b.put(key, value)
                    single.put(key, value)
                elif op == "put_ttl":
                    b.put(key, value, ttl_s=5)
                    single.put(key, value, 5)
                elif op == "delete":
                    b.delete(key)
                    single.delete(key)
                else:
                    b.merge(key, value)
                    single.merge(key, value)
            assert batched.write(b).seq == single._core.last_seq
        assert _rows(batched) == _rows(single)
        w = batched._core._w
        assert (w.wal_bytes, w.unflushed_bytes, w.memtable.size_bytes) == (
            single._core._w.wal_bytes, single._core._w.unflushed_bytes, single._core._w.memtable.size_bytes)


@pytest.mark.parametrize("call, message", [
    (lambda b: b.put("k", b"v"), "key must be bytes"),
    (lambda b: b.put(b"", b"v"), "key cannot be empty"),
    (lambda b: b.put(b"k", 3), "value must be bytes"),
    (lambda b: b.put(b"k", b"v", ttl_s=-1), "ttl must be positive"),
    (lambda b: b.delete(None), "key must be bytes"),
    (lambda b: b.merge(b"k", "v"), "value must be bytes"),
])
def test_a_bad_operation_raises_at_its_call_and_leaves_the_batch_plain(call, message):
    b = WriteBatch()
    b.put(b"a", b"1")
    with pytest.raises(InvalidArgumentError, match=message):
        call(b)
    assert len(b) == 1 and b._plain  # unchanged: still the fast path's all-puts batch
    with _open() as db:
        db.write(b)
        assert db.get(b"a") == b"1"
