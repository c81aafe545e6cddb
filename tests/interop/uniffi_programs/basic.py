"""Open, write, read, scan, batch, flush, status, shutdown, and the errors of misuse."""
import asyncio, json, sys

import slatedb.uniffi as u


def err(e):
    return type(e).__qualname__


async def rows(it, batch=None):
    out = []
    while True:
        if batch:
            got = await it.next_batch(batch)
            out += [[kv.key.decode(), kv.value.decode()] for kv in got]
            if len(got) < batch:
                return out
        else:
            kv = await it.next()
            if kv is None:
                return out
            out.append([kv.key.decode(), kv.value.decode()])


def kr(start=None, si=True, end=None, ei=False):
    return u.KeyRange(start=start, start_inclusive=si, end=end, end_inclusive=ei)


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    b = u.DbBuilder("db", store)
    b.with_settings(u.Settings.default())
    db = await b.build()
    for i in range(10):
        h = await db.put(b"k%d" % i, b"v%d" % i)
    out["handle_seq_positive"] = h.seqnum() > 0
    await h.await_durable()
    out["get"] = (await db.get(b"k3")).decode()
    out["missing"] = await db.get(b"nope")
    await db.delete(b"k4")
    out["deleted"] = await db.get(b"k4")
    out["all"] = await rows(await db.scan(kr()))
    out["incl"] = await rows(await db.scan(kr(b"k2", True, b"k6", True)), batch=2)
    out["excl"] = await rows(await db.scan(kr(b"k2", False, b"k6", False)))
    it = await db.scan(kr(b"k1", True, b"k8", False))
    await it.seek(b"k5")
    out["seek"] = await rows(it)
    try:
        await it.seek(b"k9")
    except u.Error as e:
        out["seek_outside"] = err(e)
    out["prefix"] = await rows(await db.scan_prefix(b"k", kr()))
    out["prefix_sub_abs"] = await rows(await db.scan_prefix(b"k", kr(b"k7")))
    out["prefix_sub_rel"] = await rows(await db.scan_prefix(b"k", kr(b"7")))
    desc = u.ScanOptions(durability_filter=u.DurabilityLevel.MEMORY, dirty=False, read_ahead_bytes=1,
                         cache_blocks=True, max_fetch_tasks=1, order=u.IterationOrder.DESCENDING)
    out["desc"] = await rows(await db.scan_with_options(kr(b"k1", True, b"k4", True), desc))
    wb = u.WriteBatch()
    wb.put(b"b1", b"x")
    wb.put(b"b2", b"y")
    wb.delete(b"k0")
    h = await db.write(wb)
    kv = await db.get_key_value(b"b2")
    out["batch"] = [(await db.get(b"b1")).decode(), kv.value.decode(), kv.seq <= h.seqnum(), await db.get(b"k0")]
    out["kv_fields"] = [kv.key.decode(), kv.expire_ts, kv.create_ts > 0]
    await db.flush()
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.put(b"k2", b"new")
    meta = []
    it = await db.scan(kr(b"k1", True, b"k3", True))
    while (row := await it.next()) is not None:  # rows from L0 and from the memtable
        point = await db.get_key_value(row.key)
        meta.append([row.key.decode(), row.value.decode(), row.seq == point.seq, row.create_ts == point.create_ts,
                     row.expire_ts])
    out["scan_metadata"] = meta
    st = db.status()
    out["status"] = [st.durable_seq >= h.seqnum(), st.close_reason]
    try:
        await db.put(b"", b"x")
    except u.Error as e:
        out["empty_key"] = err(e)
    try:
        await db.scan(kr(b"z", True, b"a", False))
    except u.Error as e:
        out["inverted_range"] = err(e)
    await db.shutdown()
    out["closed_reason"] = str(db.status().close_reason)
    try:
        await db.get(b"k1")
    except u.Error as e:
        out["after_shutdown"] = [err(e), str(e.reason)]
    for again in (db.shutdown, lambda: db.shutdown_with_options(u.CloseOptions(flush_type=None))):
        try:  # a clean shutdown done: another one is Error.Closed(CLEAN)
            await again()
            out.setdefault("shutdown_again", []).append("ok")
        except u.Error as e:
            out.setdefault("shutdown_again", []).append([err(e), str(e.reason)])
    db = await u.DbBuilder("db", store).build()
    out["reopened"] = await rows(await db.scan(kr(b"b", True, b"k3", False)))
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
