"""Admin.submit_compaction: a compaction of every L0 view into a new sorted run, run by the
database's compactor; the manifest then holds the run and no L0; the data is unchanged."""
import asyncio, json, sys

import slatedb.uniffi as u


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options.poll_interval", json.dumps("100ms"))
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    admin = u.AdminBuilder("db", store).build()
    for i in range(3):  # fewer L0 SSTs than the scheduler compacts on its own
        for j in range(10):
            await db.put(b"k%03d" % (i * 10 + j), b"v%d" % i)
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    m = await admin.read_manifest(None)
    spec = u.CompactionSpec.TIERED(segment=b"", sources=[u.SourceId.SST_VIEW(v.id) for v in m.l0], destination=7)
    submitted = await admin.submit_compaction(spec)
    out["submitted"] = [submitted.status.name, submitted.active, submitted.spec == spec, len(submitted.id)]
    done = None
    for _ in range(600):
        done = await admin.read_compaction(submitted.id, None)
        if done is not None and done.status in (u.CompactionStatus.COMPLETED, u.CompactionStatus.FAILED):
            break
        await asyncio.sleep(0.1)
    out["finished"] = [done.status.name, done.active, len(done.output_ssts) >= 1]
    m = await admin.read_manifest(None)
    out["manifest"] = [len(m.l0), [r.id for r in m.compacted]]
    it = await db.scan(u.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False))
    rows = await it.next_batch(100)
    out["data"] = [len(rows), rows[0].value.decode(), rows[-1].value.decode()]
    try:
        await admin.submit_compaction(u.CompactionSpec.TIERED(segment=b"", sources=[u.SourceId.SORTED_RUN(99)], destination=99))
        out["bad_spec_submitted"] = "ok"
    except u.Error as e:
        out["bad_spec_submitted"] = type(e).__qualname__
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
