"""Merge operators against a dict model (spec/protocols/merge.md MERGE-2, MERGE-5, MERGE-6): random
puts, deletes and merges mixed with memtable flushes, full compactions (with the operator, or
without one: operands kept), reopens (WAL replay) and a snapshot; every read (get, both scan
orders) must match the model, and the snapshot the model as of its creation. An L0-only
compaction into a run above older runs makes partial merges (operands without their base)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slatedb

from .helpers import compact_all_l0, memory_store

WRITER = {"compactor_options": None, "l0_sst_size_bytes": 4096, "flush_interval": "10ms",
          "manifest_poll_interval": "50ms", "min_filter_keys": 1, "l0_max_ssts": 1000}
KEYS = [b"k0", b"k1", b"k2", b"k3"]


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


ops = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.binary(min_size=0, max_size=3)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.just(b"")),
    st.tuples(st.just("merge"), st.sampled_from(KEYS), st.binary(min_size=1, max_size=2)),
    st.tuples(st.just("merge"), st.sampled_from(KEYS), st.binary(min_size=1, max_size=2)),
    st.tuples(st.just("flush"), st.just(b""), st.just(b"")),
    st.tuples(st.just("compact"), st.just(b""), st.just(b"")),
    st.tuples(st.just("compact_without_operator"), st.just(b""), st.just(b"")),
    st.tuples(st.just("compact_l0_only"), st.just(b""), st.just(b"")),
    st.tuples(st.just("reopen"), st.just(b""), st.just(b"")),
    st.tuples(st.just("snapshot"), st.just(b""), st.just(b"")),
)


def _check(view, model: dict[bytes, bytes]) -> None:
    want = sorted(model.items())
    assert {k: view.get(k) for k in KEYS} == {k: model.get(k) for k in KEYS}
    assert list(view.scan()) == want
    assert list(view.scan(reverse=True)) == want[::-1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=25))
def test_merges_mixed_with_flush_compaction_and_reopen_match_a_dict_model_MERGE_2_MERGE_5_MERGE_6(history) -> None:
    store = memory_store()
    model: dict[bytes, bytes] = {}
    snap = snap_model = None
    db = slatedb.Db.open("memory://test", settings=WRITER, store=store, merge_operator=concat)
    try:
        for kind, key, value in history:
            if kind == "put":
                db.put(key, value)
                model[key] = value
            elif kind == "delete":
                db.delete(key)
                model.pop(key, None)
            elif kind == "merge":
                db.merge(key, value)
                model[key] = model.get(key, b"") + value
            elif kind == "flush":
                db.flush(wal=False)
                _check(db, model)
            elif kind == "snapshot" and snap is None:
                snap, snap_model = db.snapshot(), dict(model)
            elif kind in ("compact", "compact_without_operator", "compact_l0_only", "reopen"):
                if snap is not None:
                    _check(snap, snap_model)  # type: ignore[arg-type]
                    snap.close()
                    snap = None
                db.flush(wal=False)
                db.close()
                if kind != "reopen":  # l0_only: partial merges (no base below, not the bottom run)
                    compact_all_l0(store, None if kind == "compact_without_operator" else concat,
                                   l0_only=kind == "compact_l0_only")
                db = slatedb.Db.open("memory://test", settings=WRITER, store=store, merge_operator=concat)
                _check(db, model)
        _check(db, model)
        if snap is not None:
            _check(snap, snap_model)  # type: ignore[arg-type]
            snap.close()
    finally:
        db.close()
