"""The official 0.17 compactor cuts an output SST after any row, so with a snapshot holding old
versions a key's versions span two SSTs of a sorted run: our reads and checker handle that
(reader.md READ-7, compaction.md COMPACT-4)."""

from __future__ import annotations

from pathlib import Path

import slatedb

from slatedb.format.manifest import decode_manifest_v2

from .official import Official

#: The official writer holds a snapshot (its seq becomes the retention floor), overwrites every
#: key many times over several flushes, and lets its compactor (tiny output SSTs) merge them.
OFFICIAL_OVERWRITES = """
async def main(root):
    db = await open_db(root, overrides={
        "compactor_options.poll_interval": "100ms",
        "compactor_options.worker.compactions_poll_interval": "100ms",
        "compactor_options.worker.max_sst_size": 2048,
        "compactor_options.scheduler_options": {"min_compaction_sources": "4", "max_compaction_sources": "8"}})
    for i in range(40):
        await db.put(b"k%03d" % i, b"base-%d" % i)
    await db.flush()
    snap = await db.snapshot()
    for r in range(6):
        for i in range(40):
            await db.put(b"k%03d" % i, (b"r%d-%d-" % (r, i)) + b"." * 60)
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    a = u.AdminBuilder("db", store_at(root)).build()
    for _ in range(150):
        await asyncio.sleep(0.2)
        got = await a.read_compactions(None)
        if got.recent_compactions and all("COMPLETED" in str(c.status) for c in got.recent_compactions):
            break
    gets = {}
    for i in range(40):
        k = b"k%03d" % i
        gets[k.decode()] = (await db.get(k)).decode()
    await db.shutdown()
    emit(gets)
asyncio.run(main(*sys.argv[1:]))
"""


def _latest(root: Path):
    keys = sorted((root / "db" / "manifest").glob("*.manifest"))
    return decode_manifest_v2(keys[-1].read_bytes(), str(keys[-1]))


def test_a_run_of_the_official_compactor_with_keys_spanning_ssts_reads_as_the_official_reads(official: Official,
                                                                                              tmp_path: Path) -> None:
    gets = official.run_json(OFFICIAL_OVERWRITES, str(tmp_path), timeout_s=240)
    m = _latest(tmp_path)
    infos = {s.id: s.info for s in m.ssts}
    spanning = [(a.sst_id, b.sst_id) for r in m.compacted for a, b in zip(r.ssts, r.ssts[1:])
                if infos[a.sst_id].last_entry == infos[b.sst_id].first_entry]
    assert spanning, "the official compactor split no key across two SSTs of a run"
    with slatedb.Db.open(f"file://{tmp_path}/db", settings={"compactor_options": None}) as db:
        for k, v in gets.items():
            assert db.get(k.encode()) == v.encode(), k
