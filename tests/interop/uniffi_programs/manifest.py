"""Admin manifest reads: the latest manifest's L0 views after memtable flushes, checkpoints in
it, the half-open ranges of list_manifests, a manifest that does not exist."""
import asyncio, json, sys

import slatedb.uniffi as u


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options", "null")
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    for i in range(3):
        await db.put(b"k%d" % i, b"v")
        await db.put(b"z%d" % i, b"v")
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    admin = u.AdminBuilder("db", store).build()
    cp = await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name="m"))
    m = await admin.read_manifest(None)
    out["shape"] = [m.initialized, m.writer_epoch >= 1, m.compacted, m.segments, m.external_dbs,
                    m.wal_object_store_uri, m.last_compacted_l0_sst_view_id, m.last_l0_seq]
    out["l0"] = [[v.sst.info.first_entry.decode(), v.sst.info.last_entry.decode(), v.sst.info.sst_type.name,
                  v.visible_range, v.estimated_size_bytes > 0, v.estimated_size_bytes == v.sst.estimated_size_bytes,
                  isinstance(v.sst.id, u.SsTableId) and len(v.sst.id.value) == 26] for v in m.l0]
    out["checkpoints"] = [[c.id == cp.id, c.name, c.manifest_id <= m.id] for c in m.checkpoints if c.name == "m"]
    listed = await admin.list_manifests(None, None)
    ids = [x.id for x in listed]
    out["listed"] = [ids == list(range(ids[0], ids[-1] + 1)), ids[-1] == m.id, len(ids) >= 4]
    out["half_open"] = [x.id for x in await admin.list_manifests(ids[1], ids[3])] == ids[1:3]
    out["missing"] = await admin.read_manifest(m.id + 1000)
    old = await admin.read_manifest(ids[0])
    out["first"] = [old.id == ids[0], old.l0]
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
