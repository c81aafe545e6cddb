"""WAL replay skips rows already in L0 (spec/protocols/wal-fencing.md DUR-4): a WAL object above the
replay point may hold rows with ``seq <= last_l0_seq`` (the official engine freezes a memtable
before the WAL object of its last writes lands, and records the replay point of the freeze); those
rows are in an L0 SST already, perhaps folded by a compaction since. Replayed again, an operand
would shadow its own fold at the same seq: the older operands and the base vanished (seen once in
tests/interop/test_merge_interop.py after the wheel's round trip: ``{k1: 'o!', k2: 'o'}`` read for
``{k1: '012o!', k2: 'base12o'}``)."""

from __future__ import annotations

import attrs

import slatedb
from slatedb.format.manifest import encode_manifest
from slatedb.wal.writer import wal_key

from .helpers import compact_all_l0, latest_manifest, memory_store

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None}


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


def _wal_ids(store) -> list[int]:
    return sorted(int(m.key[len("wal/"):-len(".sst")]) for m in store.list_now("wal/"))


def _state_with_flushed_rows_above_the_replay_point():
    """k: base, then operand 'a' (seq 2) in WAL object N and in L0; the manifest's replay point
    is put back to N - 1 (the state the official engine leaves); then a full compaction folds
    the L0 SSTs into one value 'basea' at seq 2."""
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=S, store=store, merge_operator=concat) as db:
        db.put(b"k", b"base")
        db.flush(wal=False)
        db.merge(b"k", b"a")
        db.flush()  # WAL object N holds operand 'a'
        n = _wal_ids(store)[-1]
        db.flush(wal=False)  # and an L0 SST
    mid, m = latest_manifest(store)
    assert m.replay_after_wal_id >= n and m.last_l0_seq == 2
    key = f"manifest/{mid:020d}.manifest"
    store.put_now(key, encode_manifest(attrs.evolve(m, replay_after_wal_id=n - 1)))
    assert compact_all_l0(store, concat) == 2
    return store


def test_the_writer_does_not_replay_rows_already_in_l0_DUR_4() -> None:
    store = _state_with_flushed_rows_above_the_replay_point()
    with slatedb.Db.open("memory://test", settings=S, store=store, merge_operator=concat) as db:
        assert db.get(b"k") == b"basea"
        assert dict(db.scan()) == {b"k": b"basea"}
        assert db.stats["replayed_rows"] == 0
        db.merge(b"k", b"!")
        db.flush(wal=False)
        assert db.get(b"k") == b"basea!"
    assert compact_all_l0(store, concat, l0_only=True) >= 1  # the new L0 SSTs into a run above
    with slatedb.Db.open("memory://test", settings=S, store=store, merge_operator=concat) as db:
        assert db.get(b"k") == b"basea!"


def test_a_reader_does_not_replay_rows_already_in_l0_DUR_4() -> None:
    store = _state_with_flushed_rows_above_the_replay_point()
    with slatedb.DbReader.open("memory://test", store=store, merge_operator=concat) as reader:
        assert reader.get(b"k") == b"basea"
        assert dict(reader.scan()) == {b"k": b"basea"}


def test_a_reader_drops_from_its_tables_the_rows_flushed_to_l0_since_DUR_4() -> None:
    """Our own writer, no crafted state: a reader's WAL table spans the WAL objects of an operand
    the writer then flushes to L0 and of a later one; the table outlives that flush (its last WAL
    id is above the replay point), and a compaction folds the operand with the base at its seq."""
    from tests.reader.helpers import QUIET

    store = memory_store()
    with slatedb.Db.open("memory://test", settings=S, store=store, merge_operator=concat) as db:
        db.put(b"k", b"base")
        db.flush(wal=False)
        with slatedb.DbReader.open("memory://test", options=QUIET, store=store, merge_operator=concat) as reader:
            db.merge(b"k", b"a")
            db.flush()
            reader.refresh()
            assert reader.get(b"k") == b"basea"
            db.flush(wal=False)  # operand 'a' in L0: the replay point passes its WAL object
            db.merge(b"k", b"b")
            db.flush()
            reader.refresh()
            assert reader.get(b"k") == b"baseab"
            assert compact_all_l0(store, concat) == 2  # 'basea', a value at the operand's seq
            reader.refresh()
            assert reader.get(b"k") == b"baseab"
            assert dict(reader.scan()) == {b"k": b"baseab"}
