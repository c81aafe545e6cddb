"""``for kv in it`` over a scan of SST rows delegates to the pulled rows' iterator; ``next()``,
``next_batch`` and ``seek`` between its steps take from and move that same position. A model
(the sorted rows and a cursor) says what each call must return, for any mix of them."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

import slatedb

N = 700  # more than ITER_BATCH_ROWS: the for loop pulls several times
KEYS = [b"k%04d" % i for i in range(0, 2 * N, 2)]


def _db(path: str) -> slatedb.Db:
    db = slatedb.Db.open("file://" + path, {"compactor_options": None})
    if db.get(KEYS[0]) is None:
        for k in KEYS:
            db.put(k, b"v" + k)
        db.flush(wal=False)  # rows in an SST: the scan merges, no memtable generator
    return db


_OPS = st.lists(st.one_of(
    st.tuples(st.just("step"), st.integers(1, 300)),
    st.tuples(st.just("next"), st.integers(1, 3)),
    st.tuples(st.just("batch"), st.integers(1, 400)),
    st.tuples(st.just("seek"), st.integers(0, 2 * N + 1)),
), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(_OPS)
@example([("step", 1), ("seek", 0), ("next", 1), ("step", 1)])  # a refill between two for steps
@example([("step", 300), ("batch", 200), ("step", 300), ("seek", 1001), ("step", 10)])
def test_for_steps_next_next_batch_and_seek_share_one_position(tmp_path_factory, ops) -> None:
    path = str(tmp_path_factory.mktemp("it"))
    with _db(path) as db:
        it = db.scan(b"k0000", b"k9999")
        steps = iter(it)
        rows = [(k, b"v" + k) for k in KEYS]
        pos = 0
        for op, arg in ops:
            if op == "step":
                for _ in range(arg):
                    want = rows[pos] if pos < len(rows) else None
                    got = next(steps, None)
                    assert got == want
                    if got is None:
                        return  # the for loop ended: the generator is done
                    pos += 1
            elif op == "next":
                for _ in range(arg):
                    if pos < len(rows):
                        assert next(it) == rows[pos]
                        pos += 1
            elif op == "batch":
                assert it.next_batch(arg) == rows[pos : pos + arg]
                pos = min(len(rows), pos + arg)
            else:
                key = b"k%04d" % arg
                it.seek(key)
                pos = next((i for i, (k, _) in enumerate(rows) if k >= key), len(rows))
