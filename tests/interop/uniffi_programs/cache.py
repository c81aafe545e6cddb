"""warm_sst / evict_cached_sst: every target on an SST of the manifest, unknown and malformed
ids, bad targets; reads still right after each."""
import asyncio, json, sys

import slatedb.uniffi as u


def err(e):
    return type(e).__qualname__


async def attempt(coro):
    try:
        return repr(await coro)
    except Exception as e:  # noqa: BLE001 - the error's type is the result
        return err(e)


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options", "null")
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    for i in range(200):
        await db.put(b"k%03d" % i, b"v%03d" % i)
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    admin = u.AdminBuilder("db", store).build()
    m = await admin.read_manifest(None)
    sst = m.l0[0].sst.id
    out["sst_id_type"] = type(sst).__name__
    every = [u.CacheTarget.FILTERS(), u.CacheTarget.INDEX(), u.CacheTarget.STATS(),
             u.CacheTarget.DATA(range=u.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False))]
    out["warm_all"] = await attempt(db.warm_sst(sst, every))
    out["warm_none"] = await attempt(db.warm_sst(sst, []))
    out["warm_range"] = await attempt(db.warm_sst(sst, [u.CacheTarget.DATA(
        range=u.KeyRange(start=b"k010", start_inclusive=False, end=b"k020", end_inclusive=True))]))
    out["get_after_warm"] = (await db.get(b"k015")).decode()
    out["evict"] = await attempt(db.evict_cached_sst(sst))
    out["get_after_evict"] = (await db.get(b"k150")).decode()
    out["evict_again"] = await attempt(db.evict_cached_sst(sst))
    unknown = u.SsTableId(value="01ARZ3NDEKTSV4RRFFQ69G5FAV")
    out["warm_unknown"] = await attempt(db.warm_sst(unknown, every))
    out["evict_unknown"] = await attempt(db.evict_cached_sst(unknown))
    out["warm_junk_id"] = await attempt(db.warm_sst(u.SsTableId(value="junk"), every))
    out["evict_junk_id"] = await attempt(db.evict_cached_sst(u.SsTableId(value="junk")))
    await db.shutdown()
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
