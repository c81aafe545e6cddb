"""The write path holds its rows plainly (slatedb.row.as_row): exact tuples with the kind as an
int, which the cyclic GC untracks, so a large memtable is not walked by every collection; what
the memtable hands to readers is a :class:`Row` with its :class:`RowKind`, as before."""

from __future__ import annotations

import gc

import slatedb
from slatedb.batch import WriteBatch
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.row import Row, RowKind, as_row
from slatedb.runtime.production import ProductionRuntime


def _open() -> slatedb.Db:
    store = MemoryStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://plain")
    return slatedb.Db.open("memory://plain", settings={"compactor_options": None, "flush_interval": "1h"},
                           store=store, merge_operator=lambda key, existing, operand: (existing or b"") + operand)


def test_rows_put_one_call_each_and_in_batches_are_untracked_after_a_young_collection() -> None:
    with _open() as db:
        for i in range(50):
            db.put(b"k%03d" % i, b"v%d" % i)
        batch = WriteBatch()
        for i in range(50, 100):
            batch.put(b"k%03d" % i, b"v%d" % i)
        db.write(batch)
        w = db._core._w
        gc.collect(0)
        held = list(w.memtable._versions.values())
        assert len(held) == 100 and len(w.wal_rows) == 100
        assert not any(gc.is_tracked(r) for r in held)
        assert not any(gc.is_tracked(r) for r in w.wal_rows)


def test_readers_get_rows_with_their_kinds() -> None:
    with _open() as db:
        db.put(b"a", b"1")
        db.put(b"a", b"2")  # two versions: a list in the memtable
        db.delete(b"d")
        db.merge(b"m", b"x")
        mem = db._core._w.memtable
        for key, kind, value in ((b"a", RowKind.VALUE, b"2"), (b"d", RowKind.TOMBSTONE, b""),
                                 (b"m", RowKind.MERGE_OPERAND, b"x")):
            row = mem.get(key)
            assert type(row) is Row and row.kind is kind and row.value == value
        assert [r.kind for r in mem.versions(b"a")] == [RowKind.VALUE, RowKind.VALUE]
        assert all(type(r) is Row for r in mem.iter_range())
        assert [type(r.kind) for r in mem.iter_range()] == [RowKind] * 4
        assert db.get(b"a") == b"2" and db.get(b"d") is None and db.get(b"m") == b"x"


def test_as_row_passes_a_row_and_converts_a_plain_row() -> None:
    row = Row(b"k", 3, RowKind.TOMBSTONE, b"", None, 7)
    assert as_row(row) is row
    plain = (b"k", 3, 1, b"", None, 7)
    assert as_row(plain) == row and as_row(plain).kind is RowKind.TOMBSTONE
