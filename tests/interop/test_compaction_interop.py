"""Compaction across engines: the official wheel reads what our compactor wrote, our compactor
compacts what the official wheel wrote, and the official admin API reads our ``.compactions``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.config import Settings
from slatedb.objstore import resolve_store

from tests.checker.known import ORPHAN_WRITER_CHECKPOINT

from .test_db_interop import all_keys, assert_official_sees, latest_manifest, model, official_apply, url_of

pytestmark = pytest.mark.interop

NO_COMPACTOR = {"l0_sst_size_bytes": 4096, "l0_max_ssts": 64, "flush_interval": "10ms", "compactor_options": None}
OUR_COMPACTOR = Settings.from_dict({"min_filter_keys": 10, "compactor_options": {
    "scheduler_options": {"min_compaction_sources": "2"}, "worker": {"max_sst_size": 16384}}})


def run_our_compactor(root: Path) -> dict:
    async def main():
        store = resolve_store(url_of(root))
        try:
            c = await admin.run_compactor(store, OUR_COMPACTOR, once=True)
            return c.stats
        finally:
            await store.aclose()

    return trio.run(main)


def ops(prefix: bytes, n: int, rounds: int = 2) -> list[dict]:
    out = []
    for r in range(rounds):
        out += [{"op": "put", "key": prefix + b"%04d" % i, "value": b"r%d-%d-" % (r, i) + b"v" * 40} for i in range(n)]
    out += [{"op": "delete", "key": prefix + b"%04d" % i} for i in range(0, n, 11)]
    return out


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_the_official_wheel_reads_a_database_our_compactor_compacted(official, tmp_path: Path) -> None:
    writes = ops(b"ours", 600)
    with slatedb.Db.open(url_of(tmp_path), settings=NO_COMPACTOR) as db:
        for o in writes:
            db.put(o["key"], o["value"]) if o["op"] == "put" else db.delete(o["key"])
    assert len(latest_manifest(tmp_path).l0) >= 6
    stats = run_our_compactor(tmp_path)
    assert stats["completed"] >= 2, stats
    m = latest_manifest(tmp_path)
    assert m.compacted and any(len(r.ssts) > 1 for r in m.compacted), "expected multi-SST sorted runs"
    expected = model(writes)
    # A few more rows stay in L0 and the WAL on top of the sorted runs.
    more = [{"op": "put", "key": b"ours0001", "value": b"newest"}, {"op": "delete", "key": b"ours0002"}]
    with slatedb.Db.open(url_of(tmp_path), settings=NO_COMPACTOR) as db:
        db.put(b"ours0001", b"newest")
        db.delete(b"ours0002")
    expected = model(more, expected)
    assert_official_sees(official, tmp_path, all_keys(writes), expected, "both")


OFFICIAL_COMPACTIONS = """
async def main(root):
    store = store_at(root)
    a = u.AdminBuilder("db", store).build()
    got = await a.read_compactions(None)
    emit({"epoch": got.compactor_epoch,
          "compactions": [{"id": c.id, "status": str(c.status), "outputs": len(c.output_ssts)}
                          for c in got.recent_compactions]})
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_our_compactor_compacts_a_database_the_official_wheel_wrote(official, tmp_path: Path) -> None:
    writes = ops(b"theirs", 500)
    chunks = [writes[i:i + 200] + [{"op": "flush_l0"}] for i in range(0, len(writes), 200)]
    theirs = [o for chunk in chunks for o in chunk]
    official_apply(official, tmp_path, theirs, {"compactor_options": None, "l0_sst_size_bytes": 4096, "l0_max_ssts": 64},
                   "shutdown", "o")  # without a compactor, a full L0 would block its flushes
    before = latest_manifest(tmp_path)
    assert len(before.l0) >= 4 and not before.compacted
    stats = run_our_compactor(tmp_path)
    assert stats["completed"] >= 1 and stats["failed"] == 0, stats
    after = latest_manifest(tmp_path)
    assert len(after.l0) < 2 and after.compacted
    assert after.sequence_tracker == before.sequence_tracker  # preserved, not ours to rewrite
    expected = model(writes)
    with slatedb.Db.open(url_of(tmp_path), settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == expected
    assert_official_sees(official, tmp_path, all_keys(writes), expected, "both")
    # The official admin API decodes the .compactions our compactor wrote.
    got = official.run_json(OFFICIAL_COMPACTIONS, str(tmp_path))
    assert got["compactions"] and all("COMPLETED" in c["status"] for c in got["compactions"]), json.dumps(got)
