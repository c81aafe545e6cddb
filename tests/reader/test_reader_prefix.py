"""READ-3: a reader sees exactly a prefix of the durable history, and never goes back.

Hypothesis drives a writer through puts, deletes, WAL flushes, L0 flushes and full compactions,
with two managed readers (following the WAL, and not) and checkpoint readers taken on the way
refreshed or read at random points. The durable history is the sequence of states after each
explicit flush (the writer's own flush timer is an hour, its memtables never fill, so nothing
else becomes durable). Every read must equal one of those states -- never a mix -- at an index
that never decreases; a following reader, just refreshed, equals the newest one; a checkpoint
reader always equals the state its checkpoint was taken at.
"""

from __future__ import annotations

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slatedb

from .helpers import QUIET, compact_all_l0, make_checkpoint, memory_store, open_reader
from .test_reader import published_states

WRITER = {"l0_sst_size_bytes": 1 << 20, "compactor_options": None, "l0_max_ssts": 1000, "min_filter_keys": 1,
          "flush_interval": "1h"}

KEYS = [b"k%d" % i for i in range(6)]

op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.binary(min_size=0, max_size=12)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.just(("flush",)),
    st.just(("flush_l0",)),
    st.just(("compact",)),
    st.tuples(st.just("read"), st.sampled_from(["follow", "still"])),
    st.just(("checkpoint",)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=40), st.integers(min_value=200, max_value=5000))
def test_a_reader_sees_a_prefix_of_the_durable_history(ops, table_bytes) -> None:
    store = memory_store()
    model: dict[bytes, bytes] = {}
    history: list[dict[bytes, bytes]] = [{}]
    last_index = {"follow": 0, "still": 0}
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        opts = attrs.evolve(QUIET, max_memtable_bytes=table_bytes)
        readers = {"follow": open_reader(store, options=opts),
                   "still": open_reader(store, options=attrs.evolve(opts, follow_latest=False))}
        published = {name: published_states(r) for name, r in readers.items()}
        pinned: list[tuple[slatedb.DbReader, dict]] = []
        try:
            for o in ops:
                if o[0] == "put":
                    db.put(o[1], o[2])
                    model[o[1]] = o[2]
                elif o[0] == "delete":
                    db.delete(o[1])
                    model.pop(o[1], None)
                elif o[0] in ("flush", "flush_l0"):
                    db.flush(wal=o[0] == "flush")
                    history.append(dict(model))
                elif o[0] == "compact":
                    compact_all_l0(store)
                elif o[0] == "checkpoint":
                    # A checkpoint holds its manifest's WAL range: a managed reader opened first
                    # raises wal_id_last_seen to the newest WAL object, so it holds everything.
                    open_reader(store).close()
                    cp = make_checkpoint(store)
                    r = open_reader(store, cp.id)
                    pinned.append((r, dict(r.scan())))
                    assert pinned[-1][1] == history[-1]
                else:
                    name = o[1]
                    r = readers[name]
                    r.refresh()
                    seen = dict(r.scan())
                    assert seen in history, f"{name} reader saw a state that was never durable: {seen}"
                    index = max(i for i, h in enumerate(history) if h == seen)
                    assert index >= last_index[name] or history[last_index[name]] == seen, "went back in time"
                    last_index[name] = max(index, last_index[name])
                    if name == "follow":
                        assert seen == history[-1]
                    assert {k: r.get(k) for k in KEYS} == {k: seen.get(k) for k in KEYS}
                for r, seen in pinned:
                    assert dict(r.scan()) == seen
            for name, states in published.items():  # every view a reader ever showed, as it was
                for seen in states():
                    assert seen in history, f"{name} reader published a state that was never durable: {seen}"
        finally:
            for r in readers.values():
                r.close()
            for r, _ in pinned:
                r.close()
