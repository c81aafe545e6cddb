"""Transactions: the probed conflict rules (also for a transaction that wrote nothing), reads of own writes, scans, rollback, use after commit."""
import asyncio, json, sys

import slatedb.uniffi as u


def kr(start=None, end=None):
    return u.KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=False)


async def outcome(txn):
    try:
        h = await txn.commit()
        return "committed" if h is not None else "nothing"
    except u.Error as e:
        return type(e).__qualname__


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    db = await u.DbBuilder("db", store).build()
    await db.put(b"x", b"0")
    await db.put(b"y", b"0")

    for level in (u.IsolationLevel.SERIALIZABLE_SNAPSHOT, u.IsolationLevel.SNAPSHOT):
        t1 = await db.begin(level)
        await t1.get(b"x")
        t2 = await db.begin(level)
        await t2.put(b"x", b"t2")
        out[f"{level.name}_t2"] = await outcome(t2)
        await t1.put(b"y", b"t1")
        out[f"{level.name}_read_write"] = await outcome(t1)

        t3 = await db.begin(level)
        await t3.mark_read([b"y"])
        await db.put(b"y", b"plain")
        await t3.put(b"z", b"t3")
        out[f"{level.name}_mark_read"] = await outcome(t3)

        t4 = await db.begin(level)
        await t4.put(b"w", b"t4")
        await db.put(b"w", b"plain")
        out[f"{level.name}_write_write"] = await outcome(t4)

        t5 = await db.begin(level)
        await t5.get(b"x")
        out[f"{level.name}_read_only"] = await outcome(t5)

        # wrote nothing, but what it read (SSI) or marked was written after its snapshot
        t6 = await db.begin(level)
        await t6.get(b"~r")
        await db.put(b"~r", level.name.encode())
        out[f"{level.name}_read_only_overwritten"] = await outcome(t6)
        t7 = await db.begin(level)
        await t7.mark_read([b"~m"])
        await db.put(b"~m", level.name.encode())
        out[f"{level.name}_mark_read_only"] = await outcome(t7)

        # phantoms: a key inserted into a range the transaction scanned (the whole range asked
        # for, though one row was consumed), a key just past it, and one that reached an L0 SST
        # (a memtable flush) before the commit of a read-only transaction
        p = level.name[:3].encode()
        await db.put(b"~p" + p + b"a", b"0")
        t8 = await db.begin(level)
        it = await t8.scan(kr(b"~p" + p, b"~p" + p + b"~"))
        await it.next()
        await db.put(b"~p" + p + b"k", b"plain")
        await t8.put(b"~w" + p, b"t8")
        out[f"{level.name}_phantom"] = await outcome(t8)
        t9 = await db.begin(level)
        await t9.scan(kr(b"~q" + p, b"~q" + p + b"~"))
        await db.put(b"~q" + p + b"~", b"just past the range")
        await t9.put(b"~w" + p, b"t9")
        out[f"{level.name}_past_the_range"] = await outcome(t9)
        t10 = await db.begin(level)
        await t10.scan(kr(b"~s" + p, b"~s" + p + b"~"))
        await db.put(b"~s" + p + b"k", b"plain")
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
        out[f"{level.name}_phantom_flushed_read_only"] = await outcome(t10)

    t = await db.begin(u.IsolationLevel.SNAPSHOT)
    await t.put(b"a1", b"1")
    await t.put(b"a2", b"2")
    await t.delete(b"x")
    out["own_read"] = [(await t.get(b"a1")).decode(), await t.get(b"x"), (await t.get(b"y")).decode()]
    it = await t.scan(kr(b"a", b"z"))
    rows = []
    while (kv := await it.next()) is not None:
        rows.append([kv.key.decode(), kv.value.decode()])
    out["txn_scan"] = rows
    own, committed = await t.get_key_value(b"a1"), await t.get_key_value(b"y")
    out["txn_row_metadata"] = [own.seq, own.create_ts, own.expire_ts, committed.seq < own.seq, committed.create_ts > 0]
    it = await t.scan(kr(b"a1", b"a2"))
    kv = await it.next()
    out["txn_scan_metadata"] = [kv.seq, kv.create_ts]
    it = await t.scan(kr(b"a", b"z"))
    await it.seek(b"a2")
    out["txn_seek"] = [kv.key.decode() for kv in await it.next_batch(10)]
    try:
        await it.seek(b"zz")
        out["txn_seek_outside"] = "ok"
    except u.Error as e:
        out["txn_seek_outside"] = type(e).__qualname__
    out["outside_before_commit"] = await db.get(b"a1")
    h = await t.commit()
    await h.await_durable()
    out["after_commit"] = [(await db.get(b"a1")).decode(), await db.get(b"x")]
    try:
        await t.put(b"late", b"1")
    except u.Error as e:
        out["use_after_commit"] = type(e).__qualname__
    r = await db.begin(u.IsolationLevel.SERIALIZABLE_SNAPSHOT)
    await r.put(b"rb", b"1")
    await r.rollback()
    out["rolled_back"] = await db.get(b"rb")
    out["id_is_uuid"] = len(r.id()) == 36
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
