"""Merge rows between engines (spec/protocols/merge.md MERGE-9): operands written here (in L0
SSTs, in the WAL, over a value, over a tombstone, with a TTL) are read by the official 0.17 wheel
with the same operator (byte concatenation), and the wheel's operand rows are read here."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import slatedb
from slatedb.errors import MergeOperatorMissingError
from tests.checker.known import ORPHAN_WRITER_CHECKPOINT

pytestmark = pytest.mark.interop

S = {"compactor_options": None, "flush_interval": "10ms"}


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


OFFICIAL = """
class Concat(u.MergeOperator):
    def merge(self, key, existing_value, operand):
        return (existing_value or b"") + operand

async def open_merge(root):
    b = u.DbBuilder("db", store_at(root))
    b.with_settings(settings({"compactor_options": None}))
    b.with_merge_operator(Concat())
    return await b.build()

async def main(root, mode):
    db = await open_merge(root)
    if mode == "write":
        await db.put(b"official:a", b"A")
        await db.merge(b"official:a", b"1")
        await db.merge(b"official:b", b"x")
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
        await db.merge(b"official:a", b"2")
        await db.delete(b"official:c")
        await db.merge(b"official:c", b"y")
        await db.merge_with_options(b"official:b", b"z", u.MergeOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(3600000)),
                                    u.WriteOptions())
        await db.flush()
        await db.shutdown()
        emit({})
    else:
        rows = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(db)]
        gets = {k: b64(await db.get(k.encode())) for k in ["ours:a", "ours:b", "ours:c", "ours:d"]}
        kv = await db.get_key_value(b"ours:a")
        await db.shutdown()
        emit({"rows": rows, "gets": gets, "seq": kv.seq})
asyncio.run(main(*sys.argv[1:]))
"""


def _dec(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)  # the wheel opened as a writer after ours
def test_our_merge_rows_are_read_by_the_official_wheel_MERGE_9(official, tmp_path: Path) -> None:
    root = tmp_path
    (root / "db").mkdir()
    with slatedb.Db.open(f"file://{root}/db", S, merge_operator=concat) as db:
        db.put(b"ours:a", b"A")
        db.merge(b"ours:a", b"1")
        db.merge(b"ours:b", b"x")
        db.put(b"ours:c", b"old")
        db.flush(wal=False)  # an L0 SST with operands
        db.merge(b"ours:a", b"2")
        db.delete(b"ours:c")
        db.merge(b"ours:c", b"y")
        batch = slatedb.WriteBatch()
        batch.merge(b"ours:b", b"z", ttl_s=3600)
        batch.merge(b"ours:d", b"only")
        h = db.write(batch, durable=True)  # these stay in the WAL
        mine = dict(db.scan())
        seq_a = db.get_key_value(b"ours:a").seq  # type: ignore[union-attr]
    out = official.run_json(OFFICIAL, str(root), "read")
    want = {b"ours:a": b"A12", b"ours:b": b"xz", b"ours:c": b"y", b"ours:d": b"only"}
    assert mine == want
    assert {_dec(k): _dec(v) for k, v in out["rows"]} == want
    assert {k.encode(): _dec(v) for k, v in out["gets"].items()} == want
    assert out["seq"] == seq_a < h.seq


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)  # we opened as a writer after the wheel
def test_the_official_wheels_merge_rows_are_read_by_us_MERGE_9(official, tmp_path: Path) -> None:
    root = tmp_path
    (root / "db").mkdir()
    official.run_json(OFFICIAL, str(root), "write")
    want = {b"official:a": b"A12", b"official:b": b"xz", b"official:c": b"y"}
    with slatedb.DbReader.open(f"file://{root}/db", merge_operator=concat) as reader:
        assert dict(reader.scan()) == want
    with slatedb.Db.open(f"file://{root}/db", S) as db:  # no operator: a typed error naming the key
        with pytest.raises(MergeOperatorMissingError, match="official:a"):
            db.get(b"official:a")
    with slatedb.Db.open(f"file://{root}/db", S, merge_operator=concat) as db:
        assert {k: db.get(k) for k in want} == want
        assert list(db.scan(reverse=True)) == sorted(want.items(), reverse=True)
        db.merge(b"official:a", b"3")
        db.flush(wal=False)
        assert db.get(b"official:a") == b"A123"


ROUND_TRIP = """
class Concat(u.MergeOperator):
    def merge(self, key, existing_value, operand):
        return (existing_value or b"") + operand

async def main(root):
    b = u.DbBuilder("db", store_at(root))
    b.with_merge_operator(Concat())  # default settings: its compactor runs, folding with its operator
    db = await b.build()
    await db.merge(b"k1", b"o")
    await db.merge(b"k2", b"o")
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    rows = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(db)]
    await db.shutdown()
    emit({"rows": rows})
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)  # the wheel opened as a writer after ours
def test_merge_rows_survive_ours_official_ours_with_compactors_gc_and_checkpoints(official, tmp_path: Path) -> None:
    """Engines switched back and forth on a database of merge rows, each engine's compactor folding
    with its operator: rows exact at each step, our GC then leaves every row readable, and no
    checkpoint of ours outlives its writer (the interop fixture's `slatedb check --deep` follows)."""
    import trio

    from slatedb import admin
    from slatedb.objstore.url import resolve_store

    url = f"file://{tmp_path}/db"
    (tmp_path / "db").mkdir()
    with slatedb.Db.open(url, {"flush_interval": "10ms"}, merge_operator=concat) as db:
        for i in range(3):
            db.merge(b"k1", b"%d" % i)
            db.put(b"k2", b"base") if i == 0 else db.merge(b"k2", b"%d" % i)
            db.flush(wal=False)  # L0 SSTs of operands for the compactor
    out = official.run_json(ROUND_TRIP, str(tmp_path))
    want = {b"k1": b"012o", b"k2": b"base12o"}
    assert {_dec(k): _dec(v) for k, v in out["rows"]} == want
    with slatedb.Db.open(url, {"flush_interval": "10ms"}, merge_operator=concat) as db:
        assert dict(db.scan()) == want
        db.merge(b"k1", b"!")
        db.flush(wal=False)
        want[b"k1"] += b"!"
        assert dict(db.scan()) == want

    async def gc_and_checkpoints() -> list:
        store = resolve_store(url)
        try:
            await admin.run_gc(store, None, True)
            return await admin.list_checkpoints(store)
        finally:
            await store.aclose()

    left = trio.run(gc_and_checkpoints)
    assert all(c.checkpoint_expire_time_s for c in left), left  # nothing pinned for ever
    with slatedb.DbReader.open(url, merge_operator=concat) as reader:
        assert dict(reader.scan()) == want
