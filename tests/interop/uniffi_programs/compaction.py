"""Admin compaction reads on a database the compactor is working on: the .compactions files, one
compaction by id, the compactor state view; the data stays readable."""
import asyncio, json, sys

import slatedb.uniffi as u


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("l0_sst_size_bytes", "65536")
    s.set("compactor_options.poll_interval", json.dumps("100ms"))
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    admin = u.AdminBuilder("db", store).build()
    for i in range(6):
        for j in range(20):
            await db.put(b"k%03d" % j, b"%d" % i * 100)
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    done = None
    for _ in range(600):
        vc = await admin.read_compactions(None)
        done = vc and next((c for c in vc.recent_compactions if c.status == u.CompactionStatus.COMPLETED), None)
        if done:
            break
        await asyncio.sleep(0.1)
    out["completed"] = [done.spec.is_tiered(), all(x.is_sst_view() for x in done.spec.sources), len(done.spec.sources) >= 2,
                        done.active, done.bytes_processed, len(done.output_ssts) >= 1,
                        all(o.info.sst_type == u.SstType.COMPACTED for o in done.output_ssts)]
    again = await admin.read_compaction(done.id, None)
    out["read_compaction"] = [again.id == done.id, again.status == done.status, again.spec == done.spec]
    out["unknown_compaction"] = await admin.read_compaction("01ARZ3NDEKTSV4RRFFQ69G5FAV", None)
    listed = await admin.list_compactions(None, None)
    out["listed"] = [len(listed) >= 1, [x.id for x in listed] == sorted(x.id for x in listed), listed[-1].id >= vc.id]
    view = await admin.read_compactor_state_view()
    out["state_view"] = [view.compactions is not None, view.manifest.id >= 1]
    out["data"] = [(await db.get(b"k%03d" % j)).decode()[:1] for j in (0, 10, 19)]
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
