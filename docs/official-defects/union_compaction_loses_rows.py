"""The official SlateDB 0.17.0 engine loses rows when it compacts a union of two projections
that share an SST (found by `slatedb check` and the differential campaign of this project;
docs/check.md "Findings", finding 3). Runs against the official wheel alone:

    python -m venv /tmp/official && /tmp/official/bin/pip install slatedb==0.17.0
    /tmp/official/bin/python docs/official-defects/union_compaction_loses_rows.py

What happens: `src` holds k0000..k0199 in two L0 SSTs, the first of which (k0000..k0100)
straddles the cut at k0100. The projections `left` (..k0100) and `right` (k0100..) both view
that SST, under the view id it has in `src`. Their union `merged` therefore lists **two L0 views
with the same view id** (disjoint visible ranges). Reads are right (200 rows). The official
compactor then compacts `merged`: the compaction spec names L0 views by id, and the result holds
only the rows of one of the two views: 100 rows remain, k0000..k0099 are gone, and nothing
reports an error. Exit status 1 when rows are lost (the defect), 0 otherwise.
"""

import asyncio
import json
import sys
import tempfile

import slatedb.uniffi as u


def store_at(root):
    return u.ObjectStoreBuilder.from_url("file://" + root).build()


async def scan_all(db):
    it = await db.scan(u.KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False))
    out = []
    while True:
        batch = await it.next_batch(1000)
        if not batch:
            return out
        out.extend(batch)


async def reader_rows(root, name):
    r = await u.DbReaderBuilder(name, store_at(root)).build()
    try:
        return await scan_all(r)
    finally:
        await r.shutdown()


def key_range(start, end):
    return u.KeyRange(start=start, start_inclusive=start is not None, end=end, end_inclusive=False)


async def main(root):
    s = u.Settings.default()
    s.set("compactor_options", json.dumps(None))
    s.set("wal_enabled", json.dumps(False))
    b = u.DbBuilder("src", store_at(root))
    b.with_settings(s)
    db = await b.build()
    for i in range(200):
        await db.put(b"k%04d" % i, b"v%d" % i)
        if i == 100:
            await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.shutdown()
    for name, r in (("left", key_range(None, b"k0100")), ("right", key_range(b"k0100", None))):
        a = u.AdminBuilder(name, store_at(root)).build()
        await a.create_clone_builder_from_source(u.CloneSourceSpec(path="src", checkpoint=None,
                                                                   projection_range=r)).build()
    admin = u.AdminBuilder("merged", store_at(root)).build()
    cb = admin.create_clone_builder_from_source(u.CloneSourceSpec(path="left", checkpoint=None, projection_range=None))
    cb.with_source(u.CloneSourceSpec(path="right", checkpoint=None, projection_range=None))
    await cb.build()
    m = await admin.read_manifest(None)
    ids = [str(v.id) for v in m.l0]
    print(f"merged: L0 view ids {ids} (repeated: {len(ids) != len(set(ids))})")
    before = await reader_rows(root, "merged")
    print(f"merged before compaction: {len(before)} rows")

    s = u.Settings.default()
    s.set("compactor_options.poll_interval", json.dumps("100ms"))
    s.set("compactor_options.scheduler_options", json.dumps({"min_compaction_sources": "2"}))
    b = u.DbBuilder("merged", store_at(root))
    b.with_settings(s)
    db = await b.build()
    for _ in range(300):  # up to 30 s for the compaction to complete
        m = await admin.read_manifest(None)
        if not m.l0 and m.compacted:
            break
        await asyncio.sleep(0.1)
    await db.shutdown()
    after = await reader_rows(root, "merged")
    lost = sorted({bytes(kv.key) for kv in before} - {bytes(kv.key) for kv in after})
    print(f"merged after the official compactor: L0 {len(m.l0)}, sorted runs {len(m.compacted)}, {len(after)} rows; "
          f"lost {len(lost)}" + (f": {lost[0].decode()}..{lost[-1].decode()}" if lost else ""))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())))
