"""TTL and absolute expiry, the default TTL setting, durability filters, snapshots, close options."""
import asyncio, json, sys, time

import slatedb.uniffi as u

FAR_MS = 4_102_444_800_000  # 2100-01-01


def kr():
    return u.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)


async def keys(it):
    out = []
    while batch := await it.next_batch(100):
        out += [kv.key.decode() for kv in batch]
        if len(batch) < 100:
            break
    return out


def read(level):
    return u.ReadOptions(durability_filter=level, dirty=False, cache_blocks=True)


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("flush_interval", json.dumps("100s"))  # only explicit flushes make writes durable
    s.set("compactor_options", "null")
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    none = u.WriteOptions()
    await db.put(b"warmup", b"1")  # the official engine may flush the WAL once at start-up, whatever the interval
    await db.flush()
    await db.put_with_options(b"short", b"1", u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(2000)), none)
    await db.put_with_options(b"long", b"1", u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(3_600_000)), none)
    await db.put_with_options(b"at", b"1", u.PutOptions(ttl=u.Ttl.EXPIRE_AT_MILLIS(FAR_MS)), none)
    await db.put_with_options(b"never", b"1", u.PutOptions(ttl=u.Ttl.NO_EXPIRY()), none)
    h = await db.put_with_options(b"dflt", b"1", u.PutOptions(ttl=u.Ttl.DEFAULT()), none)
    kv_long = await db.get_key_value(b"long")
    kv_at = await db.get_key_value(b"at")
    out["expire_ts"] = [kv_long.expire_ts - kv_long.create_ts, kv_at.expire_ts, (await db.get_key_value(b"never")).expire_ts]
    out["create_ts_is_handle_ts"] = kv_long.create_ts <= h.create_ts() and abs(h.create_ts() - time.time() * 1000) < 60_000
    out["memory_before_flush"] = (await db.get_with_options(b"never", read(u.DurabilityLevel.MEMORY))).decode()
    out["remote_before_flush"] = await db.get_with_options(b"never", read(u.DurabilityLevel.REMOTE))
    scan_remote = u.ScanOptions(durability_filter=u.DurabilityLevel.REMOTE, dirty=False, read_ahead_bytes=1,
                                cache_blocks=True, max_fetch_tasks=1)
    out["remote_scan_before_flush"] = await keys(await db.scan_with_options(kr(), scan_remote))
    snap = await db.snapshot()
    await db.put(b"after_snapshot", b"1")
    await db.delete(b"dflt")
    out["snapshot"] = await keys(await snap.scan(kr()))
    out["snapshot_get"] = [(await snap.get(b"dflt")).decode(), await snap.get(b"after_snapshot")]
    await db.flush()
    out["remote_after_flush"] = (await db.get_with_options(b"never", read(u.DurabilityLevel.REMOTE))).decode()
    out["kv_with_options"] = (await db.get_key_value_with_options(b"at", read(u.DurabilityLevel.REMOTE))).expire_ts
    await asyncio.sleep(2.2)
    # The official engine filters expired rows when reading SSTs, not in the memtable, against the
    # clock tick of its newest write (ours: everywhere, against the clock): a write, then an L0 flush.
    await db.put(b"tick", b"1")
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    out["expired"] = [await db.get(b"short"), (await db.get(b"long")).decode()]
    out["scan_after_expiry"] = await keys(await db.scan(kr()))
    wb = u.WriteBatch()
    wb.put_with_options(b"batch_ttl", b"1", u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(1000)))
    await db.write_with_options(wb, u.WriteOptions(seqnum=0))
    kv = await db.get_key_value(b"batch_ttl")
    out["batch_ttl"] = kv.expire_ts - kv.create_ts
    await db.shutdown_with_options(u.CloseOptions(flush_type=u.FlushType.MEM_TABLE))

    s2 = u.Settings.default()
    s2.set("default_ttl_millis", "2000")
    b = u.DbBuilder("db2", store)
    b.with_settings(s2)
    db = await b.build()
    await db.put(b"d", b"1")
    await db.put_with_options(b"n", b"1", u.PutOptions(ttl=u.Ttl.NO_EXPIRY()), none)
    kv = await db.get_key_value(b"d")
    out["default_ttl"] = kv.expire_ts - kv.create_ts
    await asyncio.sleep(2.2)
    await db.put(b"tick", b"1")
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    out["default_ttl_expired"] = [await db.get(b"d"), (await db.get(b"n")).decode()]
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
