"""A DbReader (managed checkpoint, a given checkpoint), admin checkpoints, and the WAL reader."""
import asyncio, json, sys

import slatedb.uniffi as u


def v(x):
    return None if x is None else x.decode()


def kr():
    return u.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)


async def pairs(it):
    out = []
    while (kv := await it.next()) is not None:
        out.append([kv.key.decode(), kv.value.decode()])
    return out


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options", "null")
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    await db.put(b"a", b"1")
    await db.put(b"b", b"2")
    await db.flush()
    await db.delete(b"a")
    await db.put(b"c", b"3")
    await db.flush()

    admin = u.AdminBuilder("db", store).build()
    cp = await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name="first"))
    await db.put(b"d", b"4")
    await db.flush()
    listed = await admin.list_checkpoints("first")
    out["listed"] = [[c.id == cp.id, c.name, c.manifest_id == cp.manifest_id, c.expire_time_secs] for c in listed]
    out["unnamed_filter"] = len(await admin.list_checkpoints("nope"))

    rb = u.DbReaderBuilder("db", store)
    rb.with_reader_mode(u.ReaderMode.CHECKPOINT(cp.id))
    rb.with_db_cache_disabled()
    pinned = await rb.build()
    out["pinned"] = await pairs(await pinned.scan(kr()))
    out["pinned_get"] = [v(await pinned.get(k)) for k in (b"a", b"b", b"c", b"d")]
    await pinned.shutdown()

    rb = u.DbReaderBuilder("db", store)
    rb.with_options(u.ReaderOptions(manifest_poll_interval_ms=100, checkpoint_lifetime_ms=10_000,
                                    max_memtable_bytes=1 << 20, skip_wal_replay=False))
    latest = await rb.build()
    out["latest"] = await pairs(await latest.scan(kr()))
    kv = await latest.get_key_value(b"d")
    out["latest_kv"] = [kv.value.decode(), kv.seq > 0]
    st = latest.status()
    out["reader_status"] = [st.durable_seq == kv.seq, st.close_reason]
    await latest.shutdown()
    try:
        await latest.get(b"d")
        out["reader_after_shutdown"] = "ok"
    except u.Error as e:
        out["reader_after_shutdown"] = type(e).__qualname__

    await admin.refresh_checkpoint(cp.id, 60_000)
    out["refreshed_expires"] = (await admin.list_checkpoints("first"))[0].expire_time_secs is not None
    await admin.delete_checkpoint(cp.id)
    out["after_delete"] = len(await admin.list_checkpoints("first"))
    try:
        await admin.delete_checkpoint(cp.id)
        out["delete_again"] = "ok"
    except u.Error as e:
        out["delete_again"] = type(e).__qualname__

    wal = u.SlateDbWalReader("db", store)
    last = await wal.last_wal_file_id(0)
    out["last_after_first"] = await wal.last_wal_file_id(last) == last
    try:
        await asyncio.wait_for((await wal.iterator(0)).next(), 10)
        out["from_zero"] = "ok"
    except u.Error as e:
        out["from_zero"] = type(e).__qualname__
    it = await wal.iterator(1)
    rows = []
    while True:
        got = await asyncio.wait_for(it.next(), 10)
        rows += [[r.kind.name, r.key.decode(), None if r.value is None else r.value.decode(), r.seq > 0,
                  r.create_ts is not None, r.expire_ts] for r in got.rows]
        if got.last_consumed_wal_file_id >= last:
            break
    out["wal_rows"] = [r for r in rows]
    await db.put(b"e", b"5")
    await db.flush()
    got = await asyncio.wait_for(it.next(), 10)
    out["wal_tail"] = [[r.kind.name, r.key.decode()] for r in got.rows]
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
