"""A second writer fences the first: the first's next durable write fails with Error.Closed
(reason FENCED) and its status says so; the second writer has the data."""
import asyncio, json, sys

import slatedb.uniffi as u


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    first = await u.DbBuilder("db", store).build()
    await first.put(b"a", b"1")
    await first.flush()
    second = await u.DbBuilder("db", store).build()
    out["second_reads"] = (await second.get(b"a")).decode()
    try:
        h = await first.put(b"b", b"2")
        await h.await_durable()
        await first.flush()
        out["first_write"] = "ok"
    except u.Error as e:
        out["first_write"] = [type(e).__qualname__, str(getattr(e, "reason", None))]
    out["first_status"] = str(first.status().close_reason)
    try:
        await first.get(b"a")
        out["first_read_after"] = "ok"
    except u.Error as e:
        out["first_read_after"] = [type(e).__qualname__, str(getattr(e, "reason", None))]
    out["second_sees_b"] = await second.get(b"b")
    try:
        await first.shutdown()
    except u.Error as e:
        out["first_shutdown"] = type(e).__qualname__
    await second.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
