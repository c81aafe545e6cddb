"""Iterator seeks: forward, outside the range, back to or before the last key returned, in a
descending scan, in a transaction's scan; and where the iterator is after each refusal."""
import asyncio, json, sys

import slatedb.uniffi as u


def err(e):
    return type(e).__qualname__


def kr(start=None, end=None):
    return u.KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=False)


DESCENDING = u.ScanOptions(durability_filter=u.DurabilityLevel.MEMORY, dirty=False, read_ahead_bytes=1,
                           cache_blocks=True, max_fetch_tasks=1, order=u.IterationOrder.DESCENDING)


async def main(root):
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options", "null")
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    for k in [b"a", b"b", b"c", b"d", b"e"]:
        await db.put(k, b"v")
    out = []

    async def attempt(it, n, target):
        for _ in range(n):
            await it.next()
        try:
            await it.seek(target)
            got = ["ok"]
        except Exception as e:
            got = [err(e)]
        nxt = await it.next()
        return got + [nxt and nxt.key.decode()]

    for rng, n, target in [(kr(), 0, b"c"), (kr(), 1, b"c"), (kr(), 1, b"a"), (kr(), 2, b"b"), (kr(), 2, b"a"),
                           (kr(b"c"), 2, b"a"), (kr(b"a", b"c"), 1, b"d"), (kr(b"a", b"c"), 3, b"a")]:
        out.append(await attempt(await db.scan(rng), n, target))
    for n, target in [(0, b"c"), (1, b"e"), (1, b"b")]:
        out.append(await attempt(await db.scan_with_options(kr(), DESCENDING), n, target))
    snap = await db.snapshot()
    out.append(await attempt(await snap.scan(kr()), 2, b"a"))
    t = await db.begin(u.IsolationLevel.SNAPSHOT)
    await t.put(b"bb", b"t")
    out.append(await attempt(await t.scan(kr()), 2, b"a"))
    out.append(await attempt(await t.scan(kr()), 2, b"c"))
    out.append(await attempt(await t.scan_with_options(kr(), DESCENDING), 1, b"b"))
    await t.rollback()
    await db.shutdown()
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
