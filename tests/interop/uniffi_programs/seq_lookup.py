"""Admin sequence <-> timestamp lookups on the manifest's sequence tracker."""
import asyncio, json, sys, time

import slatedb.uniffi as u


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    admin = u.AdminBuilder("db", store).build()
    out["no_db"] = [await admin.get_sequence_for_timestamp(0, True), await admin.get_timestamp_for_sequence(1, False)]
    before = int(time.time())
    b = u.DbBuilder("db", store)
    db = await b.build()
    for i in range(5):
        await db.put(b"k%d" % i, b"v")
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.shutdown()
    after = int(time.time())
    ts = await admin.get_timestamp_for_sequence(1, False)
    out["ts_in_window"] = before <= ts <= after
    out["ts_round"] = [await admin.get_timestamp_for_sequence(q, up) == ts for q in (0, 1, 3) for up in (False, True)]
    out["seq"] = [await admin.get_sequence_for_timestamp(t, up) for t in (0, ts, 2**40) for up in (False, True)]
    try:
        await admin.get_timestamp_for_sequence(-1, True)
        out["negative_seq"] = "ok"
    except Exception as e:  # noqa: BLE001
        out["negative_seq"] = type(e).__name__ if not isinstance(e, u.Error) else type(e).__qualname__
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
