"""Merge operators through the whole engine (spec/protocols/merge.md): the same fold from every
layer (MERGE-2): memtable, L0, sorted runs, WAL replay, snapshots, readers, both scan orders;
tombstones and TTL (MERGE-3, MERGE-4); compaction with and without an operator (MERGE-5,
MERGE-6); failing and missing operators (MERGE-7, MERGE-8); transactions (MERGE-10)."""

from __future__ import annotations

import time

import pytest
import trio

import slatedb
import slatedb.aio
from slatedb import WriteBatch
from slatedb.compactor import Compactor
from slatedb.errors import MergeOperatorError, MergeOperatorMissingError, TransactionConflictError
from slatedb.format.sst_reader import SstReader
from slatedb.lsm.view import sst_key
from slatedb.row import RowKind
from slatedb.runtime.production import ProductionRuntime

from .helpers import compact_all_l0, latest_manifest, memory_store

WRITER = {"compactor_options": None, "l0_sst_size_bytes": 4096, "flush_interval": "10ms",
          "manifest_poll_interval": "50ms", "min_filter_keys": 1, "l0_max_ssts": 1000}


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


class Concat:
    """The official binding's shape: an object with ``merge``."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        return (existing_value or b"") + operand


def open_db(store, op=concat, settings=None):
    return slatedb.Db.open("memory://test", settings={**WRITER, **(settings or {})}, store=store, merge_operator=op)


def everything(db) -> tuple:
    keys = [b"a", b"b", b"c", b"d"]
    return ({k: db.get(k) for k in keys}, list(db.scan()), list(db.scan(reverse=True)),
            {k: (kv.value if kv else None) for k in keys for kv in [db.get_key_value(k)]})


def expected(values: dict) -> tuple:
    present = sorted((k, v) for k, v in values.items() if v is not None)
    return (values, present, present[::-1], values)


def run_rows(store) -> list:
    """Every row of every sorted run of the latest manifest (key order, newest first)."""
    _, m = latest_manifest(store)

    async def read():
        out = []
        for run in m.compacted:
            for view in run.ssts:
                reader = await SstReader.open(store, sst_key(view.sst_id))
                async for row in reader.scan():
                    out.append(row)
        return out

    return trio.run(read)


def _write_layers(db) -> dict:
    """a: value + operands; b: operands only; c: value, delete, operands; d: value only."""
    db.put(b"a", b"A")
    db.put(b"d", b"D")
    db.merge(b"a", b"1")
    db.merge(b"b", b"x")
    db.put(b"c", b"C")
    db.flush(wal=False)  # an L0 SST
    db.merge(b"a", b"2")
    db.delete(b"c")
    db.merge(b"c", b"y")
    db.merge(b"b", b"z")
    return {b"a": b"A12", b"b": b"xz", b"c": b"y", b"d": b"D"}


def test_the_memtable_folds_for_get_scan_both_ways_and_get_key_value_MERGE_2() -> None:
    with open_db(memory_store(), Concat()) as db:
        db.put(b"a", b"A")
        for op in (b"1", b"2", b"3"):
            db.merge(b"a", op)
        db.merge(b"b", b"x")
        assert everything(db) == expected({b"a": b"A123", b"b": b"x", b"c": None, b"d": None})
        kv = db.get_key_value(b"a")
        assert kv is not None and kv.seq == 4 and kv.value == b"A123"


def test_operands_in_l0_and_memtable_fold_with_an_older_base_MERGE_2_MERGE_3() -> None:
    store = memory_store()
    with open_db(store) as db:
        want = expected(_write_layers(db))
        assert len(db._core.read_state.view.l0) == 1
        assert everything(db) == want
        db.flush(wal=False)
        assert len(db._core.read_state.view.l0) == 2
        assert everything(db) == want


def test_after_compaction_into_a_sorted_run_the_rows_are_folded_MERGE_2_MERGE_5() -> None:
    store = memory_store()
    with open_db(store) as db:
        want = expected(_write_layers(db))
        db.flush(wal=False)
    compact_all_l0(store, concat)
    rows = run_rows(store)
    assert [(r.key, r.kind, r.value) for r in rows] == [
        (b"a", RowKind.VALUE, b"A12"), (b"b", RowKind.VALUE, b"xz"), (b"c", RowKind.VALUE, b"y"),
        (b"d", RowKind.VALUE, b"D")]  # full merges: bases (or the bottom run) in the compaction
    with open_db(store) as db:
        assert not db._core.read_state.view.l0
        assert everything(db) == want
        db.merge(b"a", b"3")  # an operand over a compacted base
        assert db.get(b"a") == b"A123"


def test_a_compactor_without_an_operator_keeps_the_operands_MERGE_6() -> None:
    store = memory_store()
    with open_db(store) as db:
        want = expected(_write_layers(db))
        db.flush(wal=False)
    compact_all_l0(store, None)
    rows = run_rows(store)
    assert [(r.key, r.kind) for r in rows if r.key == b"a"] == [
        (b"a", RowKind.MERGE_OPERAND), (b"a", RowKind.MERGE_OPERAND), (b"a", RowKind.VALUE)]
    with open_db(store) as db:
        assert everything(db) == want
    compact_all_l0(store, concat)  # nothing new in L0: nothing happens, still readable
    with open_db(store) as db:
        assert everything(db) == want


def test_reopening_replays_operands_from_the_wal_MERGE_2() -> None:
    store = memory_store()
    with open_db(store) as db:
        db.put(b"a", b"A")
        db.flush(wal=False)
        db.merge(b"a", b"1")
        db.merge(b"b", b"x", durable=True)
        db.abort()  # nothing flushed to L0 since: the operands live in the WAL only
    with open_db(store) as db:
        assert db.stats["replayed_rows"] == 2
        assert everything(db) == expected({b"a": b"A1", b"b": b"x", b"c": None, b"d": None})


def test_a_snapshot_folds_at_its_seq_MERGE_2() -> None:
    with open_db(memory_store()) as db:
        db.put(b"a", b"A")
        db.merge(b"a", b"1")
        with db.snapshot() as snap:
            db.merge(b"a", b"2")
            db.flush(wal=False)
            db.merge(b"a", b"3")
            assert snap.get(b"a") == b"A1" and list(snap.scan(reverse=True)) == [(b"a", b"A1")]
            assert snap.get_key_value(b"a").seq == 2  # type: ignore[union-attr]
        assert db.get(b"a") == b"A123"


def test_a_reader_folds_with_its_operator_and_names_the_key_without_one_MERGE_2_MERGE_8() -> None:
    store = memory_store()
    with open_db(store) as db:
        want = expected(_write_layers(db))
        db.flush()
        with slatedb.DbReader.open("memory://test", store=store, merge_operator=concat) as reader:
            assert everything(reader) == want
        with slatedb.DbReader.open("memory://test", store=store) as reader:
            assert reader.get(b"d") == b"D"
            with pytest.raises(MergeOperatorMissingError, match="b'a'"):
                reader.get(b"a")
            with pytest.raises(MergeOperatorMissingError):
                list(reader.scan())


def test_ttl_an_expired_operand_is_skipped_an_expired_base_is_absent_MERGE_4() -> None:
    with open_db(memory_store()) as db:
        db.put(b"a", b"A")
        db.merge(b"a", b"1", ttl=0.05)
        db.merge(b"a", b"2")
        db.put(b"b", b"B", ttl=0.05)
        db.merge(b"b", b"x")
        assert db.get(b"a") == b"A12" and db.get(b"b") == b"Bx"
        assert db.get_key_value(b"a").expire_ts is not None  # type: ignore[union-attr]
        time.sleep(0.08)
        assert db.get(b"a") == b"A2" and db.get(b"b") == b"x"
        db.flush(wal=False)
        assert list(db.scan()) == [(b"a", b"A2"), (b"b", b"x")]


def test_merge_without_an_operator_is_refused_at_the_call_and_writes_nothing_MERGE_8() -> None:
    store = memory_store()
    with open_db(store, None) as db:
        db.put(b"a", b"A", durable=True)
        seq = db.status().durable_seq
        with pytest.raises(MergeOperatorMissingError, match="merge operator"):
            db.merge(b"a", b"1")
        batch = WriteBatch()
        batch.put(b"z", b"Z")
        batch.merge(b"a", b"1")
        with pytest.raises(MergeOperatorMissingError):
            db.write(batch)
        txn = db.begin()
        with pytest.raises(MergeOperatorMissingError):
            txn.merge(b"a", b"1")
        txn.rollback()
        db.flush()
        assert db.get(b"a") == b"A" and db.get(b"z") is None and db.status().durable_seq == seq


def test_an_operator_that_fails_gives_a_typed_error_at_the_read_and_the_db_stays_usable_MERGE_7() -> None:
    def picky(key, existing, operand):
        if operand == b"bad":
            raise ValueError("bad operand")
        if operand == b"str":
            return "not bytes"
        return (existing or b"") + operand

    with open_db(memory_store(), picky) as db:
        db.merge(b"a", b"bad")
        db.merge(b"b", b"str")
        db.merge(b"c", b"ok")
        with pytest.raises(MergeOperatorError, match="b'a'.*bad operand"):
            db.get(b"a")
        with pytest.raises(MergeOperatorError, match="b'b'.*not bytes"):
            db.get_key_value(b"b")
        with pytest.raises(MergeOperatorError):
            list(db.scan())
        assert db.get(b"c") == b"ok"
        db.put(b"a", b"fixed")
        assert db.get(b"a") == b"fixed" and db.get(b"c") == b"ok"


def test_a_failing_operator_fails_the_compaction_and_the_db_stays_usable_MERGE_7(caplog) -> None:
    def boom(key, existing, operand):
        raise RuntimeError("operator down")

    store = memory_store()
    with open_db(store, concat) as db:
        for i in range(3):
            db.merge(b"a", b"%d" % i)
            db.flush(wal=False)
        want = db.get(b"a")
    rt = ProductionRuntime("compactor")
    settings = slatedb.Settings.from_dict({"min_filter_keys": 1, "compactor_options": {
        "poll_interval": "20ms", "commit_compacted_interval": "20ms",
        "scheduler_options": {"min_compaction_sources": "2"},
        "worker": {"compactions_poll_interval": "20ms"}}})
    compactor = Compactor(store, rt, settings, merge_operator=boom)

    async def main():
        with trio.move_on_after(1.5):
            await compactor.run()

    with caplog.at_level("ERROR", logger="slatedb.compactor"):
        trio.run(main)
    assert compactor.stats["failed_runs"] >= 1 and compactor.stats["completed"] == 0, compactor.stats
    assert any("compaction_worker_failed" in r.getMessage() and "operator down" in r.getMessage()
               for r in caplog.records if r.name == "slatedb.compactor"), "the failure is logged"
    _, m = latest_manifest(store)
    assert len(m.l0) == 3 and not m.compacted  # nothing half-written was committed
    with open_db(store, concat) as db:
        assert db.get(b"a") == want == b"012"
        db.merge(b"a", b"3")
        assert db.get(b"a") == b"0123"


def test_transaction_merges_read_their_own_writes_and_commit_in_order_MERGE_10() -> None:
    with open_db(memory_store()) as db:
        db.put(b"a", b"A")
        txn = db.begin()
        txn.merge(b"a", b"1")
        txn.merge(b"b", b"x")
        assert txn.get(b"a") == b"A1" and txn.get(b"b") == b"x"
        txn.put(b"c", b"C")
        txn.merge(b"c", b"2")
        assert txn.get(b"c") == b"C2" and txn.get_key_value(b"c").value == b"C2"  # type: ignore[union-attr]
        assert txn.scan() == [(b"a", b"A1"), (b"b", b"x"), (b"c", b"C2")]
        assert db.get(b"a") == b"A"  # not yet committed
        txn.commit()
        assert everything(db) == expected({b"a": b"A1", b"b": b"x", b"c": b"C2", b"d": None})
        t1 = db.begin()
        t1.merge(b"a", b"t1")
        db.merge(b"a", b"plain")  # a write of the key after t1's snapshot
        with pytest.raises(TransactionConflictError):
            t1.commit()
        assert db.get(b"a") == b"A1plain"


@pytest.mark.anyloop
async def test_the_async_api_merges_MERGE_2_MERGE_8(tmp_path) -> None:
    url = f"file://{tmp_path}"
    async with slatedb.aio.Db.open(url, WRITER, merge_operator=Concat()) as db:
        await db.put(b"a", b"A")
        await db.merge(b"a", b"1")
        await db.merge(b"a", b"2", ttl=3600)
        await db.flush(wal=False)
        await db.merge(b"a", b"3")
        assert await db.get(b"a") == b"A123"
        assert [kv async for kv in db.scan(reverse=True)] == [(b"a", b"A123")]
        txn = await db.begin()
        await txn.merge(b"a", b"4")
        assert await txn.get(b"a") == b"A1234"
        await txn.commit()
        assert (await db.get_key_value(b"a")).value == b"A1234"  # type: ignore[union-attr]
    async with slatedb.aio.Db.open(url, WRITER) as db:
        with pytest.raises(MergeOperatorMissingError):
            await db.merge(b"a", b"x")
        with pytest.raises(MergeOperatorMissingError, match="b'a'"):
            await db.get(b"a")


def test_an_l0_compaction_above_the_base_makes_a_partial_merge_MERGE_5() -> None:
    store = memory_store()
    with open_db(store) as db:
        db.put(b"a", b"A")
        db.flush(wal=False)
    compact_all_l0(store, concat)  # run 0 holds the base
    with open_db(store) as db:
        for op in (b"1", b"2"):
            db.merge(b"a", op)
            db.flush(wal=False)
    compact_all_l0(store, concat, l0_only=True)  # run 1, above run 0: the base is not in it
    _, m = latest_manifest(store)
    assert [r.id for r in m.compacted] == [1, 0]
    rows = run_rows(store)
    assert [(r.kind, r.value) for r in rows] == [(RowKind.MERGE_OPERAND, b"12"), (RowKind.VALUE, b"A")]
    with open_db(store) as db:
        assert db.get(b"a") == b"A12" and list(db.scan(reverse=True)) == [(b"a", b"A12")]


def test_the_standalone_compactor_cli_loads_the_operator_by_name_MERGE_5(tmp_path) -> None:
    """``slatedb run-compactor --merge-operator module:name`` folds; a name that does not load is
    a one-line error and compacts nothing."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "mergeops.py").write_text(
        "class Concat:\n    def merge(self, key, existing, operand):\n        return (existing or b'') + operand\n")
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, settings=WRITER, merge_operator=concat) as db:
        db.put(b"a", b"A")
        for op in (b"1", b"2"):
            db.merge(b"a", op)
            db.flush(wal=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "ops"), os.environ.get("PYTHONPATH", "")])}
    cli = os.path.join(os.path.dirname(sys.executable), "slatedb")
    bad = subprocess.run([cli, "--path", url, "run-compactor", "--once", "--merge-operator", "mergeops:Nope"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode != 0 and "mergeops:Nope" in bad.stderr and "Traceback" not in bad.stderr
    subprocess.run([cli, "--path", url, "submit-compaction", "--request", "Full"], check=True, capture_output=True,
                   env=env, timeout=300)
    ran = subprocess.run([cli, "--path", url, "run-compactor", "--once", "--merge-operator", "mergeops:Concat"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["completed"] >= 1

    async def rows():
        from slatedb.objstore import resolve_store
        store = resolve_store(url)
        try:
            from slatedb.manifest.store import ManifestStore
            m = (await ManifestStore(store, ProductionRuntime("t")).read_latest()).manifest
            out = []
            for run in m.compacted:
                for view in run.ssts:
                    reader = await SstReader.open(store, sst_key(view.sst_id))
                    out += [(r.kind, r.value) async for r in reader.scan()]
            return out
        finally:
            await store.aclose()

    assert trio.run(rows) == [(RowKind.VALUE, b"A12")]


def test_the_wal_reader_shows_raw_operands_MERGE_2() -> None:
    """Change data capture is raw, as upstream's: operands appear as MERGE rows, unfolded."""
    store = memory_store()
    with open_db(store) as db:
        db.put(b"a", b"A")
        db.merge(b"a", b"1", durable=True)
        with slatedb.WalReader.open("memory://test", store=store) as w:
            rows = [(r.kind, r.key, r.value) for r in w.changes()]
    assert rows == [("VALUE", b"a", b"A"), ("MERGE", b"a", b"1")]
