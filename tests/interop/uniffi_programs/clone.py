"""CloneBuilder: a clone of a path, a clone made elsewhere (with_clone_path), a projection of a
source, a union of two projected sources (with_source), and a projection of the whole result
(with_projection_range); each read back whole."""
import asyncio, json, os, sys
import slatedb.uniffi as u
def kr(a,b): return u.KeyRange(start=a, start_inclusive=True, end=b, end_inclusive=False)
async def rows(store, path):
    b = u.DbReaderBuilder(path, store)
    r = await b.build()
    it = await r.scan(kr(None,None))
    out=[]
    while (kv := await it.next()) is not None: out.append([kv.key.decode(), kv.value.decode()])
    await r.shutdown()
    return out
async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://"+root).build()
    for name, keys in (("p1", "abc"), ("p2", "xyz")):
        db = await u.DbBuilder(name, store).build()
        for k in keys: await db.put(k.encode(), name.encode())
        await db.flush(); await db.shutdown()
    admin = u.AdminBuilder("c1", store).build()
    b = admin.create_clone_builder_from_source(u.CloneSourceSpec(path="p1", checkpoint=None, projection_range=None))
    await b.build()
    out["c1"] = await rows(store, "c1")
    admin = u.AdminBuilder("ignored", store).build()
    b = admin.create_clone_builder_from_source(u.CloneSourceSpec(path="p1", checkpoint=None, projection_range=None))
    b.with_clone_path("c2")
    try:
        await b.build()
        out["c2"] = await rows(store, "c2")
    except Exception as e: out["c2"] = type(e).__name__
    out["admin_path_untouched"] = not os.path.exists(os.path.join(root, "ignored"))
    b = u.AdminBuilder("c3", store).build().create_clone_builder_from_source(u.CloneSourceSpec(path="p1", checkpoint=None, projection_range=kr(b"a", b"c")))
    try:
        await b.build(); out["c3"] = await rows(store, "c3")
    except Exception as e: out["c3"] = type(e).__name__
    b = u.AdminBuilder("c4", store).build().create_clone_builder_from_source(u.CloneSourceSpec(path="p1", checkpoint=None, projection_range=kr(None, b"m")))
    try:
        b.with_source(u.CloneSourceSpec(path="p2", checkpoint=None, projection_range=kr(b"m", None)))
        await b.build(); out["c4"] = await rows(store, "c4")
    except Exception as e: out["c4"] = type(e).__name__
    b = u.AdminBuilder("c5", store).build().create_clone_builder_from_source(u.CloneSourceSpec(path="p1", checkpoint=None, projection_range=None))
    try:
        b.with_projection_range(kr(b"b", None)); await b.build(); out["c5"] = await rows(store, "c5")
    except Exception as e: out["c5"] = type(e).__name__
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
