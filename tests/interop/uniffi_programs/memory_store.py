"""The in-memory object store: one ObjectStore value is one store (a reopened database and a
reader see its data; another memory:/// store is empty); builders are consumed by build()."""
import asyncio, json, sys

import slatedb.uniffi as u


async def main(root):
    out = {}
    store = u.ObjectStore.resolve("memory:///")
    db = await u.DbBuilder("a/db", store).build()
    await db.put(b"k", b"v")
    await db.flush()
    await db.shutdown()
    db = await u.DbBuilder("a/db", store).build()
    out["reopened"] = (await db.get(b"k")).decode()
    rb = u.DbReaderBuilder("a/db", store)
    reader = await rb.build()
    out["reader"] = (await reader.get(b"k")).decode()
    await reader.shutdown()
    try:
        await rb.build()
        out["reader_builder_reused"] = "ok"
    except u.Error as e:
        out["reader_builder_reused"] = type(e).__qualname__
    await db.shutdown()
    other = u.ObjectStoreBuilder(u.ObjectStoreType.IN_MEMORY).build()
    db = await u.DbBuilder("a/db", other).build()
    out["other_store"] = await db.get(b"k")
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
